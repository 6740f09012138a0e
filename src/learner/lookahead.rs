//! Scores made ahead: the learn loop scores the next few rows in one pass over a
//! learner's active set ([`super::OnlineLearner::score_ahead`]), so each stored row is loaded
//! once for all of them instead of once per row. Until a row is reached the model may change
//! (an update-mistake); the learner then brings the pending scores up to date
//! ([`super::OnlineLearner::update_ahead`]) in O(d) per pending row and changed element, with
//! the [`Ahead`] methods below, instead of another pass.

use crate::data::Row;
use crate::kernel::{BaseKernel, TaskKernel};

/// One example as a learner updates on it: the row, its task, its label ±1 and the score the
/// model gave the row before the update.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// The row.
    pub x: Row<'a>,
    /// Its task.
    pub task: usize,
    /// Its label, ±1.
    pub y: f64,
    /// The model's score of `x` in `task`, before the update.
    pub score: f64,
}

/// The rows after the current one in the learn loop's window, their tasks, and their scores by
/// the model before the current update (to be brought to the model after it).
pub struct Ahead<'w, 'a> {
    rows: &'w [Row<'a>],
    tasks: &'w [usize],
    scores: &'w mut [f64],
}

impl<'w, 'a> Ahead<'w, 'a> {
    /// `scores[j]` is the score of `rows[j]` in task `tasks[j]`.
    pub fn new(rows: &'w [Row<'a>], tasks: &'w [usize], scores: &'w mut [f64]) -> Self {
        debug_assert!(rows.len() == tasks.len() && scores.len() == rows.len());
        Self { rows, tasks, scores }
    }

    /// No pending row (a plain update).
    pub fn none() -> Self {
        Self {
            rows: &[],
            tasks: &[],
            scores: &mut [],
        }
    }

    /// Whether no row is pending.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The pending rows' scores, as brought up to date so far.
    pub fn scores(&self) -> &[f64] {
        self.scores
    }

    /// An element `([x, task], coef)` entered the kernel sum (a negative `coef` with the
    /// element's own coefficient takes one out): every pending score gains
    /// `coef T[task, task_j] K'(x, x_j)`.
    pub fn add_term(&mut self, kernel: &BaseKernel, tasks: &TaskKernel, x: Row, task: usize, coef: f64) {
        if self.rows.is_empty() || coef == 0.0 {
            return;
        }
        let sq = x.sq_norm();
        let raw = kernel.raw_self(sq);
        for ((row, &t), s) in self.rows.iter().zip(self.tasks).zip(self.scores.iter_mut()) {
            let relation = tasks.get(task, t);
            if relation != 0.0 {
                let sq_j = row.sq_norm();
                let kv = kernel.from_dot(x.dot_row(row), sq, sq_j, raw, kernel.raw_self(sq_j));
                *s += coef * relation * kv;
            }
        }
    }

    /// Every coefficient of the sum was multiplied by `factor`.
    pub fn scale(&mut self, factor: f64) {
        self.scores.iter_mut().for_each(|s| *s *= factor);
    }
}

#[cfg(test)]
mod tests {
    use crate::data::{Row, Rows};
    use crate::kernel::{BaseKernel, Scratch, TaskKernel};
    use crate::learner::test_support::{learn_row_by_row, stream};
    use crate::learner::{
        decision, learn, Build, Checked, KernelSetting, MTFORGParams, MTPerceptron, MTRBPParams, OnlineLearner,
        ParamGuard, ProjectronParams, Threshold, MTBPRJ, MTFORG, MTRBP,
    };

    /// Learns the stream row by row (no lookahead: every score a fresh pass) and in one batch
    /// (windows of scores made ahead and corrected after each update-mistake): the decisions and
    /// the final models are identical, the scores equal up to rounding (no score of this stream
    /// is near 0); and on the learned model, windows of scores equal single scores bit for bit.
    fn check<L: OnlineLearner + Clone + PartialEq + std::fmt::Debug>(fresh: L, d: usize, n: usize) {
        let (x, tasks, y) = stream(n, d, 3, 17, |x, t, noise| {
            x[0] + 0.5 * x[1] * (t as f64 - 1.0) + 0.3 * noise > 0.0
        });
        let rows = Rows::dense(&x, n, d);
        let mut one = fresh.clone();
        let single = learn_row_by_row(&mut one, &rows, &tasks, &y);
        let mut scratch = Scratch::default();
        let mut batch = fresh;
        let windowed = learn(&mut batch, &rows, &tasks, &y).unwrap();
        assert!(batch.lookahead() > 1, "the stream must reach the windowed path");
        let mut corrected = 0;
        for (t, (a, b)) in single.iter().zip(&windowed).enumerate() {
            // (0 exactly: the empty model's score.)
            assert!(
                *a == 0.0 || a.abs() > 1e-9,
                "a near-tie at row {t}: choose another stream"
            );
            assert!((a - b).abs() <= 1e-12 * a.abs().max(1.0), "row {t}: {a} vs {b}");
            corrected += usize::from(a != b);
        }
        assert_eq!(one, batch);
        // Some scores were corrected (else this test would not exercise the corrections).
        assert!(corrected > 0);
        let scores = decision(&batch, &rows, &tasks).unwrap();
        for t in 0..n {
            let f = batch.score(rows.row(t), tasks[t] as usize, &mut scratch);
            assert_eq!(f.to_bits(), scores[t].to_bits(), "row {t}");
        }
        // Windows of every width, mixed dense queries.
        let window: Vec<Row> = (0..8).map(|t| rows.row(t)).collect();
        let wtasks: Vec<usize> = tasks[..8].iter().map(|&t| t as usize).collect();
        for w in 1..=8 {
            let mut out = vec![0.0; w];
            batch.score_ahead(&window[..w], &wtasks[..w], &mut out, &mut scratch);
            for j in 0..w {
                assert_eq!(out[j].to_bits(), scores[j].to_bits(), "width {w}, row {j}");
            }
        }
    }

    #[test]
    fn windowed_learning_equals_row_by_row_learning() {
        let (d, k) = (7, 3);
        let kernel = BaseKernel::rbf(0.4).unwrap();
        let tk = TaskKernel::complete(k).unwrap();
        check(
            MTRBP::build(
                &MTRBPParams { budget: 150, seed: 1 },
                &KernelSetting::new(&tk, kernel, d),
            )
            .unwrap(),
            d,
            1500,
        );
        check(
            MTFORG::build(
                &MTFORGParams {
                    budget: 120,
                    radius: 1.0,
                },
                &KernelSetting::new(&tk, kernel, d),
            )
            .unwrap(),
            d,
            1500,
        );
        check(
            MTPerceptron::dual(&KernelSetting::new(&tk, kernel, d)).unwrap(),
            d,
            1000,
        );
    }

    /// A learner without its own `update_ahead` (MTBPRJ) restarts the window after every update:
    /// its scores equal row-by-row learning's bit for bit.
    #[test]
    fn restarted_windows_equal_row_by_row_learning_exactly() {
        let (n, d) = (1200, 5);
        let (x, tasks, y) = stream(n, d, 3, 5, |x, _, noise| x[0] - 0.4 * x[2] + 0.2 * noise > 0.0);
        let rows = Rows::dense(&x, n, d);
        let tk = TaskKernel::complete(3).unwrap();
        let params = ProjectronParams {
            budget: 150,
            eta: 0.01,
            threshold: Threshold::Norm,
        }
        .check()
        .map(Checked::into_inner)
        .unwrap();
        let fresh = MTBPRJ::build(&params, &KernelSetting::new(&tk, BaseKernel::rbf(0.5).unwrap(), d)).unwrap();
        let mut one = fresh.clone();
        let single: Vec<u64> = learn_row_by_row(&mut one, &rows, &tasks, &y)
            .iter()
            .map(|f| f.to_bits())
            .collect();
        let mut batch = fresh;
        let windowed: Vec<u64> = learn(&mut batch, &rows, &tasks, &y)
            .unwrap()
            .iter()
            .map(|f| f.to_bits())
            .collect();
        assert!(batch.lookahead() > 1);
        assert_eq!(single, windowed);
        assert_eq!(one, batch);
    }
}
