//! The first byte picks a learner; the rest is decoded as its state (`omtl::state::decode`).
//! A decoded state must then predict and learn without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use omtl::data::Rows;
use omtl::learner::{
    decision, learn, BatchMtl, CwCol, MTPerceptron, Omtl, Omtrl, OnlineLearner, PassiveAggressive, Romco, MTBPRJ,
    MTBPRJ2, MTFORG, MTRBP,
};
use omtl::state::{decode, CheckState};
use serde::de::DeserializeOwned;

fn run<L: OnlineLearner + DeserializeOwned + CheckState>(bytes: &[u8]) {
    let Ok(mut model) = decode::<L>(bytes) else { return };
    let d = model.n_features().min(1 << 12);
    let k = model.n_tasks().min(4) as i64;
    let x: Vec<f64> = (0..8 * d).map(|i| ((i * 37 % 11) as f64 - 5.0) / 5.0).collect();
    let rows = Rows::dense(&x, 8, d);
    let tasks: Vec<i64> = (0..8).map(|t| t % k).collect();
    let y = [1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0];
    let _ = decision(&model, &rows, &tasks);
    let _ = learn(&mut model, &rows, &tasks, &y);
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 11 {
        0 => run::<MTPerceptron>(bytes),
        1 => run::<MTRBP>(bytes),
        2 => run::<MTFORG>(bytes),
        3 => run::<MTBPRJ>(bytes),
        4 => run::<MTBPRJ2>(bytes),
        5 => run::<CwCol>(bytes),
        6 => run::<Omtl>(bytes),
        7 => run::<Omtrl>(bytes),
        8 => run::<BatchMtl>(bytes),
        9 => run::<Romco>(bytes),
        _ => run::<PassiveAggressive>(bytes),
    }
});
