//! Tasks added for a batch and removed again: `remove_added_tasks` undoes `add_tasks` byte for
//! byte, and a batch interrupted by Ctrl-C keeps only the tasks its learned rows name.

use super::tests::stream;
use super::*;
use crate::learner::test_support::interrupted_at_poll;

/// Every class that grows, open-ended, on each graph it grows on (MTBPRJ2: "disconnected"); a
/// fixed RBF `gamma`, as `gamma="scale"` is taken from the whole first batch, interrupted or not.
const GROWING: &[(&str, &[(&str, &str)])] = &[
    ("MTPerceptron", &[]),
    ("MTPerceptron", &[("graph", "disconnected")]),
    ("KernelPerceptron", &[]),
    ("MTRBP", &[("budget", "15"), ("gamma", "0.5")]),
    ("MTFORG", &[("budget", "15"), ("gamma", "0.5")]),
    ("MTBPRJ", &[("gamma", "0.5")]),
    ("MTBPRJ2", &[("graph", "disconnected"), ("gamma", "0.5")]),
    ("MTLinear", &[]),
    ("MTLinear", &[("graph", "disconnected")]),
    ("MTLinear", &[("graph", "disconnected"), ("max_bytes", "4000000")]),
    ("MTLinear", &[("hash_bits", "12")]),
    ("PAUnique", &[]),
    ("PAGlobal", &[]),
    ("CWCOL", &[]),
    ("OMTL", &[]),
];

fn model(class: &str, params: &[(&str, &str)]) -> Model {
    Model::new(Estimator::from_text(class, params).unwrap())
}

fn learner(model: &mut Model) -> &mut AnyLearner {
    &mut model.fitted.as_mut().expect("fitted").learner
}

/// A first batch on the labels a, b, c, d.
fn fitted(class: &str, params: &[(&str, &str)], d: usize) -> Model {
    let (x, y) = stream(40, d, 11);
    let users: Vec<TaskRef> = (0..40).map(|t| TaskRef::Str(["a", "b", "c", "d"][t % 4])).collect();
    let mut m = model(class, params);
    m.learn(&Rows::dense(&x, 40, d), Tasks::Ids(&users), Labels::Ints(&y))
        .unwrap();
    m
}

#[test]
fn removing_added_tasks_restores_the_learner_byte_for_byte() {
    for &(class, params) in GROWING {
        let mut m = fitted(class, params, 3);
        let learner = learner(&mut m);
        let (k, before) = (learner.n_tasks(), learner.to_bytes().unwrap());
        for n in [1, 7, 300] {
            learner.add_tasks(n).unwrap();
            assert_eq!(learner.n_tasks(), k + n, "{class} {params:?}");
            learner.remove_added_tasks(n);
            assert!(learner.to_bytes().unwrap() == before, "{class} {params:?}, {n} tasks");
        }
    }
}

/// A batch of 600 rows: every third names a known label (a, b, c, d), the others 300 new labels
/// u0, u1, ..., two rows each.
fn new_label_batch() -> (Vec<f64>, Vec<i64>, Vec<String>) {
    let (x, y) = stream(600, 3, 12);
    let names = (0..600)
        .map(|t| match t % 3 {
            0 => ["a", "b", "c", "d"][t % 4].to_owned(),
            _ => format!("u{}", t / 3),
        })
        .collect();
    (x, y, names)
}

#[test]
fn an_interrupted_batch_keeps_the_tasks_of_the_rows_it_learned() {
    let (x, y, names) = new_label_batch();
    let ids: Vec<TaskRef> = names.iter().map(|s| TaskRef::Str(s)).collect();
    let rows = |n: usize| Rows::dense(&x[..3 * n], n, 3);
    for &(class, params) in GROWING {
        for first_batch in [false, true] {
            let start = || {
                if first_batch {
                    model(class, params)
                } else {
                    fitted(class, params, 3)
                }
            };
            let mut cut = start();
            let outcome = interrupted_at_poll(5, || cut.learn(&rows(600), Tasks::Ids(&ids), Labels::Ints(&y)));
            let Err(Error::Interrupted { scores }) = outcome else {
                panic!("{class}: not interrupted: {outcome:?}");
            };
            let n = scores.len();
            assert!(n > 0 && n < 600, "{class}: {n} rows");
            let mut prefix = start();
            let whole = prefix
                .learn(&rows(n), Tasks::Ids(&ids[..n]), Labels::Ints(&y[..n]))
                .unwrap();
            assert_eq!(scores, whole, "{class} {params:?}");
            let (a, b) = (learner(&mut cut).n_tasks(), learner(&mut prefix).n_tasks());
            assert_eq!(a, b, "{class} {params:?}: engine tasks after {n} rows");
            assert_eq!(cut.book(), prefix.book(), "{class} {params:?}");
            assert!(
                cut.to_bytes().unwrap() == prefix.to_bytes().unwrap(),
                "{class} {params:?}"
            );
        }
    }
}

#[test]
fn an_interrupted_batch_of_rounds_keeps_the_tasks_of_the_rounds_it_learned() {
    // Round k: a known label and the new label u{k}.
    let (x, y) = stream(600, 3, 13);
    let names: Vec<String> = (0..600)
        .map(|t| match t % 2 {
            0 => ["a", "b", "c", "d"][t % 4].to_owned(),
            _ => format!("u{}", t / 2),
        })
        .collect();
    let ids: Vec<TaskRef> = names.iter().map(|s| TaskRef::Str(s)).collect();
    let rounds: Vec<i64> = (0..600).map(|t| t / 2).collect();
    let rows = |n: usize| Rows::dense(&x[..3 * n], n, 3);
    for &(class, params) in GROWING {
        let mut cut = fitted(class, params, 3);
        let outcome = interrupted_at_poll(5, || {
            cut.learn_rounds(&rows(600), Tasks::Ids(&ids), Labels::Ints(&y), &rounds)
        });
        let Err(Error::Interrupted { scores }) = outcome else {
            panic!("{class}: not interrupted: {outcome:?}");
        };
        let n = scores.len();
        assert!(n > 0 && n < 600, "{class}: {n} rows");
        let mut prefix = fitted(class, params, 3);
        let whole = prefix
            .learn_rounds(&rows(n), Tasks::Ids(&ids[..n]), Labels::Ints(&y[..n]), &rounds[..n])
            .unwrap();
        assert_eq!(scores, whole, "{class} {params:?}");
        assert_eq!(cut.book(), prefix.book(), "{class} {params:?}");
        assert!(
            cut.to_bytes().unwrap() == prefix.to_bytes().unwrap(),
            "{class} {params:?}"
        );
    }
}
