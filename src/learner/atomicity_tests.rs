//! Every growing learner: a call that fails at any row, after adding tasks or not, leaves the
//! model's serialised state byte for byte as before, whether the learner undoes it by its journal
//! or runs the batch on a copy; and a call that succeeds learns what a copy of the model learns.

use serde::Serialize;

use super::*;
use crate::kernel::{Scratch, TaskKernel};
use crate::learner::test_support::stream;

/// A learner that fails (before changing anything) at its `fail_at`-th row from now.
#[derive(Debug, Clone)]
struct FailAt<L> {
    inner: L,
    rows_left: Option<usize>,
}

impl<L> FailAt<L> {
    fn tick(&mut self) -> Result<()> {
        match &mut self.rows_left {
            Some(0) => Err(Error::Numerical("injected failure".into())),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl<L: OnlineLearner> OnlineLearner for FailAt<L> {
    fn n_tasks(&self) -> usize {
        self.inner.n_tasks()
    }
    fn n_features(&self) -> usize {
        self.inner.n_features()
    }
    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        self.inner.score(x, task, scratch)
    }
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()> {
        self.tick()?;
        self.inner.update(x, task, y, score, scratch)
    }
    fn learn_one(&mut self, x: Row, task: usize, y: f64, scratch: &mut Scratch) -> Result<f64> {
        self.tick()?;
        self.inner.learn_one(x, task, y, scratch)
    }
    fn learn_round(&mut self, round: Round, scores: &mut [f64], scratch: &mut Scratch) -> Result<()> {
        for _ in round.rows {
            self.tick()?;
        }
        self.inner.learn_round(round, scores, scratch)
    }
    fn joint_rounds(&self) -> bool {
        self.inner.joint_rounds()
    }
    fn base_kernel(&self) -> Option<&BaseKernel> {
        self.inner.base_kernel()
    }
    fn n_updates(&self) -> u64 {
        self.inner.n_updates()
    }
    fn n_active(&self) -> usize {
        self.inner.n_active()
    }
    fn add_tasks(&mut self, n: usize) -> Result<()> {
        self.inner.add_tasks(n)
    }
    fn journal_begin(&mut self) -> bool {
        self.inner.journal_begin()
    }
    fn journal_commit(&mut self) {
        self.inner.journal_commit()
    }
    fn journal_rollback(&mut self) {
        self.inner.journal_rollback()
    }
}

/// Learns 30 rows, then for each failing row r of a 12-row call (with 2 new tasks, and without)
/// checks the state is unchanged; then a clean grown call equals the same call on a copy.
fn check<L: OnlineLearner + Clone + Serialize>(name: &str, model: L, journaled: bool) {
    let (d, k) = (5, 3);
    let (x, tasks, y) = stream(60, d, k + 2, 11, |x, task, noise| {
        x[0] - 0.3 * task as f64 + 0.2 * noise > 0.0
    });
    let rows = |a: usize, b: usize| Rows::dense(&x[a * d..b * d], b - a, d);
    let rounds: Vec<i64> = (0..60).map(|t| t as i64 / 5 * 2 + i64::from(t % 5 >= 3)).collect();
    let old_tasks: Vec<i64> = tasks.iter().map(|&t| t % k as i64).collect();
    let mut m = FailAt {
        inner: model,
        rows_left: None,
    };
    learn(&mut m, &rows(0, 30), &old_tasks[..30], &y[..30]).unwrap();
    assert_eq!(m.inner.clone().journal_begin(), journaled, "{name}");
    let bytes = crate::state::encode(&m.inner).unwrap();
    for r in [0usize, 4, 11] {
        for (n_new, t) in [(0, &old_tasks[30..42]), (2, &tasks[30..42])] {
            m.rows_left = Some(r);
            let out = learn_grown(&mut m, n_new, &rows(30, 42), t, &y[30..42]);
            assert!(matches!(out, Err(Error::Numerical(_))), "{name} row {r}: {out:?}");
            assert_eq!(
                crate::state::encode(&m.inner).unwrap(),
                bytes,
                "{name}: row {r}, {n_new} new tasks"
            );
            m.rows_left = Some(r);
            let out = learn_rounds_grown(&mut m, n_new, &rows(30, 42), t, &y[30..42], &rounds[30..42]);
            assert!(out.is_err(), "{name} rounds row {r}");
            assert_eq!(
                crate::state::encode(&m.inner).unwrap(),
                bytes,
                "{name}: rounds, row {r}, {n_new} new tasks"
            );
        }
    }
    m.rows_left = None;
    let mut copy = m.clone();
    let a = learn_grown(&mut m, 2, &rows(30, 60), &tasks[30..60], &y[30..60]).unwrap();
    let b = grown(&copy, 2).unwrap().map(|mut c| {
        let s = learn(&mut c, &rows(30, 60), &tasks[30..60], &y[30..60]).unwrap();
        copy = c;
        s
    });
    assert_eq!(Some(a), b, "{name}");
    assert_eq!(
        crate::state::encode(&m.inner).unwrap(),
        crate::state::encode(&copy.inner).unwrap(),
        "{name}"
    );
}

#[test]
fn a_failing_call_leaves_every_growing_learner_as_before() {
    let d = 5;
    let open = TaskKernel::complete_open(3).unwrap();
    let disc = TaskKernel::disconnected(3).unwrap();
    let mt = |h: Option<u32>, tasks: &TaskKernel| {
        let p = MTLinearParams {
            loss: Loss::Logistic,
            rule: UpdateRule::Normalized,
            learning_rate: 0.5,
            fit_intercept: true,
            hash_bits: h,
            shared_rate: 1.0,
        }
        .check()
        .map(Checked::into_inner)
        .unwrap();
        MTLinear::build(&p, &GraphSetting::new(tasks, d)).unwrap()
    };
    check("MTLinear complete", mt(None, &open), true);
    check("MTLinear disconnected", mt(None, &disc), true);
    check("MTLinear hashed", mt(Some(4), &open), true);
    check(
        "PA-Unique",
        PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1.0,
                variant: PaVariant::Pa1,
            },
            &LinearSetting::new(3, d),
        )
        .unwrap(),
        true,
    );
    check(
        "PA-Global",
        PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: true,
                c: 1.0,
                variant: PaVariant::Pa1,
            },
            &LinearSetting::new(3, d),
        )
        .unwrap(),
        true,
    );
    check(
        "CW-COL",
        CwCol::build(
            &CwColParams {
                confidence: 0.85,
                a: 1.0,
                omega: 0.5,
            },
            &LinearSetting::new(3, d),
        )
        .unwrap(),
        true,
    );
    check(
        "OMTL",
        Omtl::build(
            &OmtlParams {
                c: 1.0,
                global_norm: GlobalNorm::L2,
                explicit: false,
            },
            &LinearSetting::new(3, d),
        )
        .unwrap(),
        true,
    );
    let lin = BaseKernel::linear();
    check(
        "MTPerceptron primal",
        MTPerceptron::build(&NoParams, &KernelSetting::new(&open.clone(), lin, d)).unwrap(),
        true,
    );
    check(
        "MTPerceptron dual (copy)",
        MTPerceptron::dual(&KernelSetting::new(&open, lin, d)).unwrap(),
        false,
    );
}
