//! Test streams shared by the crate's unit tests.

use crate::data::Rows;
use crate::kernel::Scratch;
use crate::learner::OnlineLearner;
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

/// The non-zero entries of a dense row-major matrix, in CSR (to run one stream both ways).
pub(crate) struct Csr {
    indptr: Vec<i64>,
    indices: Vec<u32>,
    data: Vec<f64>,
    n_cols: usize,
}

impl Csr {
    /// The non-zero entries of `dense` (row-major, `n_cols` columns).
    pub(crate) fn of_dense(dense: &[f64], n_cols: usize) -> Self {
        let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
        for row in dense.chunks_exact(n_cols) {
            for (c, &v) in row.iter().enumerate().filter(|(_, &v)| v != 0.0) {
                indices.push(c as u32);
                data.push(v);
            }
            indptr.push(indices.len() as i64);
        }
        Self {
            indptr,
            indices,
            data,
            n_cols,
        }
    }

    /// The batch view.
    pub(crate) fn rows(&self) -> Rows<'_> {
        Rows::Csr {
            indptr: &self.indptr,
            indices: &self.indices,
            data: &self.data,
            n_cols: self.n_cols,
        }
    }
}

/// The scores of `learn_one` on each row in turn (no lookahead: every score a fresh pass).
pub(crate) fn learn_row_by_row(model: &mut dyn OnlineLearner, rows: &Rows, tasks: &[i64], y: &[f64]) -> Vec<f64> {
    let mut scratch = Scratch::default();
    (0..rows.len())
        .map(|t| {
            model
                .learn_one(rows.row(t), tasks[t] as usize, y[t], &mut scratch)
                .unwrap()
        })
        .collect()
}

/// Interrupts the call `f` on the hook's `polls`-th poll (the rows learned by then depend on
/// the poller's stride, not on the test).
pub(crate) fn interrupted_at_poll<T>(polls: usize, f: impl FnOnce() -> T) -> T {
    let mut left = polls;
    let hook = Box::new(move || {
        left = left.saturating_sub(1);
        left == 0
    });
    crate::interrupt::with_hook_every(std::time::Duration::ZERO, hook, f)
}
