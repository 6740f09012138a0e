//! Test streams shared by the learners' unit tests.

use crate::rng::SplitMix64;

/// `n` rows of `d` features uniform in [-1, 1), tasks `0, 1, ..., k-1` in turn, labelled ±1 by
/// `positive(row, task, noise)` with `noise` uniform in [-1, 1) (drawn after every row, in
/// order): `(x, tasks, y)`.
pub(crate) fn stream(
    n: usize,
    d: usize,
    k: usize,
    seed: u64,
    positive: impl Fn(&[f64], usize, f64) -> bool,
) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
    let mut rng = SplitMix64::new(seed);
    let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let x: Vec<f64> = (0..n * d).map(|_| unif()).collect();
    let noise: Vec<f64> = (0..n).map(|_| unif()).collect();
    let tasks: Vec<i64> = (0..n).map(|t| (t % k) as i64).collect();
    let y = (0..n)
        .map(|t| {
            if positive(&x[t * d..(t + 1) * d], t % k, noise[t]) {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    (x, tasks, y)
}
