//! MTLinear with its default parameters on a synthetic stream of 4 related tasks.
use omtl::data::Rows;
use omtl::kernel::TaskKernel;
use omtl::learner::{decision, learn, predict_sign as sign, Build, GraphSetting, MTLinear, MTLinearParams};

fn main() -> omtl::Result<()> {
    let (n, d, k, mut rng) = (4000, 5, 4, omtl::rng::SplitMix64::new(7));
    let x: Vec<f64> = (0..n * d).map(|_| rng.below(2001) as f64 / 1000.0 - 1.0).collect();
    let tasks: Vec<i64> = (0..n as i64).map(|t| t % k).collect();
    // ±1 labels: the tasks share x0 + x1 and differ in their weight on x2.
    let label = |r: &[f64], t: i64| sign(r[0] + r[1] + (t as f64 - 1.5) * r[2]);
    let y: Vec<f64> = x.chunks(d).zip(&tasks).map(|(r, &t)| label(r, t)).collect();
    let mut model = MTLinear::build(
        &MTLinearParams::default(),
        &GraphSetting::new(&TaskKernel::complete(k as usize)?, d),
    )?;
    // Learn online (predict, then update) on 3000 rows, then predict the labels of the other 1000.
    let (train, test) = x.split_at(3000 * d);
    let (train, test) = (Rows::dense(train, 3000, d), Rows::dense(test, 1000, d));
    let scores = learn(&mut model, &train, &tasks[..3000], &y[..3000])?;
    let labels: Vec<f64> = decision(&model, &test, &tasks[3000..])?.into_iter().map(sign).collect();
    let mistakes = scores.iter().zip(&y).filter(|&(&f, &y)| sign(f) != y).count();
    let errors = labels.iter().zip(&y[3000..]).filter(|(p, y)| p != y).count();
    println!("online mistakes: {mistakes} / 3000, held-out errors: {errors} / 1000");
    assert!(errors < 150, "the model has learned the tasks");
    Ok(())
}
