//! MTRBP, the randomized budget Perceptron: learned on half a stream, its state saved to bytes
//! and restored, then both copies continue on the other half and agree bit for bit (the
//! eviction generator is part of the state).
//!
//! `omtl::state::encode` writes the learner's state; `omtl::state::decode` reads it back as the
//! untrusted input it is: bounded by the payload's length, then every invariant checked
//! (`CheckState`), so a corrupt or forged state is refused rather than run.

use omtl::data::Rows;
use omtl::kernel::{BaseKernel, TaskKernel};
use omtl::learner::{learn, Build, KernelSetting, MTRBPParams, OnlineLearner, MTRBP};

fn main() -> omtl::Result<()> {
    let (n, d, k) = (2000, 8, 3);
    let mut rng = omtl::rng::SplitMix64::new(11);
    let mut uniform = move || (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
    let x: Vec<f64> = (0..n * d).map(|_| uniform()).collect();
    let tasks: Vec<i64> = (0..n as i64).map(|t| t % k as i64).collect();
    // A non-linear concept (a ball), shifted per task; a few labels flipped so the budget fills.
    let y: Vec<f64> = (0..n)
        .map(|t| {
            let row = &x[t * d..(t + 1) * d];
            let r2: f64 = row.iter().map(|v| v * v).sum();
            let flip = uniform() < -0.9;
            if (r2 < 2.5 + 0.2 * tasks[t] as f64) != flip {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let half = n / 2;
    let (first, second) = (
        Rows::dense(&x[..half * d], half, d),
        Rows::dense(&x[half * d..], n - half, d),
    );

    let params = MTRBPParams {
        budget: 100,
        ..MTRBPParams::default()
    };
    let mut model = MTRBP::build(
        &params,
        &KernelSetting::new(&TaskKernel::complete(k)?, BaseKernel::rbf(0.5)?, d),
    )?;
    learn(&mut model, &first, &tasks[..half], &y[..half])?;
    let evictions = |m: &MTRBP| {
        let diagnostics = m.diagnostics();
        diagnostics
            .iter()
            .find(|(name, _)| *name == "n_evictions")
            .map_or(0, |&(_, v)| v as u64)
    };
    println!(
        "after {half} rows: {} stored (budget {}), {} evictions",
        model.n_active(),
        params.budget,
        evictions(&model)
    );

    let bytes = omtl::state::encode(&model)?;
    let mut restored: MTRBP = omtl::state::decode(&bytes)?;
    println!("state: {} bytes", bytes.len());

    let original_scores = learn(&mut model, &second, &tasks[half..], &y[half..])?;
    let restored_scores = learn(&mut restored, &second, &tasks[half..], &y[half..])?;
    assert!(original_scores
        .iter()
        .zip(&restored_scores)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    assert_eq!(omtl::state::encode(&model)?, omtl::state::encode(&restored)?);
    println!(
        "the restored model continued identically over {} rows ({} stored, {} evictions)",
        n - half,
        restored.n_active(),
        evictions(&restored)
    );

    // A damaged state is refused, never run.
    let mut damaged = bytes.clone();
    damaged.truncate(bytes.len() - 1);
    assert!(omtl::state::decode::<MTRBP>(&damaged).is_err());
    Ok(())
}
