//! What forgetting guarantees: no stored row of a forgotten task in the saved file, exactness
//! where tasks share nothing, labels freed and reused, atomicity.

use super::*;
use crate::data::Rows;
use crate::model::estimator::classes;
use crate::model::{Estimator, EventRow, Labels, TaskId, Tasks};

const K: usize = 12;
const D: usize = 5;

/// `n` rows of distinct random values (no value repeats: each one is searchable in a file),
/// tasks cycling through `0..K`, labels from a linear rule per task.
fn stream(n: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<i64>) {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let x: Vec<f64> = (0..n * D)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let tasks: Vec<i64> = (0..n).map(|t| ((t * 7) % K) as i64).collect();
    let y = (0..n)
        .map(|t| {
            let s = x[t * D] + 0.5 * x[t * D + 1] * if tasks[t] % 2 == 0 { 1.0 } else { -1.0 };
            if s > 0.0 {
                1
            } else {
                -1
            }
        })
        .collect();
    (x, tasks, y)
}

/// Parameters that make `class` store its examples where it can (a non-linear kernel) on the
/// disconnected graph (where it has one), with a budget that does not fill.
fn settings(class: &str) -> Vec<(&'static str, String)> {
    let names: Vec<&str> = crate::model::estimator::find(class, false)
        .unwrap()
        .params
        .iter()
        .map(|p| p.0)
        .collect();
    let mut out = vec![("n_tasks", K.to_string())];
    if names.contains(&"graph") {
        out.push(("graph", "disconnected".into()));
    }
    if names.contains(&"kernel") {
        // A fixed gamma ("scale" depends on the first batch's data).
        out.push(("kernel", "rbf".into()));
        out.push(("gamma", "0.5".into()));
    }
    if names.contains(&"retrain_every") {
        out.push(("retrain_every", "50".into()));
    }
    out
}

fn model_of(class: &str, extra: &[(&str, &str)]) -> Model {
    let owned = settings(class);
    let mut pairs: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for &(k, v) in extra {
        pairs.retain(|(name, _)| *name != k);
        pairs.push((k, v));
    }
    Model::new(Estimator::from_text(class, &pairs).unwrap())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn every_class_forgets_and_its_file_holds_none_of_the_tasks_rows() {
    let n = 240;
    let (x, tasks, y) = stream(n, 3);
    let rows = Rows::dense(&x, n, D);
    let forgotten = [3i64, 8];
    for class in classes() {
        let mut model = model_of(class.name, &[]);
        model.learn(&rows, Tasks::Ints(&tasks), Labels::Ints(&y)).unwrap();
        let before = model.book().unwrap().clone();
        let stored_before = model.learner().unwrap().n_active();
        let ids: Vec<TaskRef> = forgotten.iter().map(|&t| TaskRef::Int(t)).collect();
        let report = model.forget(&ids).unwrap_or_else(|e| panic!("{}: {e}", class.name));
        let book = model.book().unwrap();
        let had: u64 = forgotten.iter().map(|&t| before.seen_per_task()[t as usize]).sum();
        assert_eq!(report.n_examples, had, "{}", class.name);
        assert!(forgotten.iter().all(|&t| book.seen_per_task()[t as usize] == 0));
        assert_eq!((book.n_seen(), book.n_forgotten()), (before.n_seen(), had));
        if report.n_stored > 0 {
            assert_eq!(model.learner().unwrap().n_active(), stored_before - report.n_stored);
        }
        let saved = model.to_bytes().unwrap();
        for (r, &t) in tasks.iter().enumerate() {
            if !forgotten.contains(&t) {
                continue;
            }
            for &v in &x[r * D..(r + 1) * D] {
                assert!(
                    !contains(&saved, &v.to_le_bytes()),
                    "{}: row {r} in the file",
                    class.name
                );
                assert!(
                    !contains(&saved, &(v as f32).to_le_bytes()),
                    "{}: row {r} (single precision) in the file",
                    class.name
                );
            }
        }
        // The model keeps learning (the forgotten ids too) and saving.
        let restored = Model::from_bytes(&saved).unwrap();
        assert_eq!(restored.book(), model.book(), "{}", class.name);
        model.learn(&rows, Tasks::Ints(&tasks), Labels::Ints(&y)).unwrap();
        Model::from_bytes(&model.to_bytes().unwrap()).unwrap();
    }
}

/// The learners whose tasks share nothing on the disconnected graph (each task's own state is
/// learned from its own examples only, and sums run over its own elements in their order).
const EXACT: &[(&str, &[(&str, &str)])] = &[
    ("KernelPerceptron", &[]),
    ("KernelPerceptron", &[("kernel", "linear")]),
    ("MTPerceptron", &[]),
    ("MTPerceptron", &[("kernel", "linear")]),
    ("MTRBP", &[]),
    ("PAUnique", &[]),
    ("MTLinear", &[]),
    ("OMTL", &[]),
];

#[test]
fn forgetting_equals_never_learning_where_tasks_share_nothing() {
    let n = 300;
    let (x, tasks, y) = stream(n, 5);
    let rows = Rows::dense(&x, n, D);
    let t = 4i64;
    let keep: Vec<usize> = (0..n).filter(|&r| tasks[r] != t).collect();
    let x_kept: Vec<f64> = keep.iter().flat_map(|&r| x[r * D..(r + 1) * D].to_vec()).collect();
    let tasks_kept: Vec<i64> = keep.iter().map(|&r| tasks[r]).collect();
    let y_kept: Vec<i64> = keep.iter().map(|&r| y[r]).collect();
    for &(class, extra) in EXACT {
        let mut full = model_of(class, extra);
        full.learn(&rows, Tasks::Ints(&tasks), Labels::Ints(&y)).unwrap();
        full.forget(&[TaskRef::Int(t)]).unwrap();
        let mut without = model_of(class, extra);
        without
            .learn(
                &Rows::dense(&x_kept, keep.len(), D),
                Tasks::Ints(&tasks_kept),
                Labels::Ints(&y_kept),
            )
            .unwrap();
        let a = full.decision(&rows, Tasks::Ints(&tasks)).unwrap();
        let b = without.decision(&rows, Tasks::Ints(&tasks)).unwrap();
        let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same, "{class} {extra:?}: forgetting differs from never learning");
        // And they keep learning alike.
        full.learn(&rows, Tasks::Ints(&tasks), Labels::Ints(&y)).unwrap();
        without.learn(&rows, Tasks::Ints(&tasks), Labels::Ints(&y)).unwrap();
        let (a, b) = (
            full.decision(&rows, Tasks::Ints(&tasks)).unwrap(),
            without.decision(&rows, Tasks::Ints(&tasks)).unwrap(),
        );
        assert!(
            a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()),
            "{class} {extra:?}"
        );
    }
}

#[test]
fn a_forgotten_label_frees_its_task_for_the_next_new_label() {
    let (x, _, y) = stream(6, 7);
    let rows = Rows::dense(&x, 6, D);
    let users = ["ann", "bo", "cy", "ann", "bo", "cy"].map(TaskRef::Str);
    let mut model = Model::new(Estimator::from_text("MTLinear", &[("graph", "disconnected")]).unwrap());
    model.learn(&rows, Tasks::Ids(&users), Labels::Ints(&y)).unwrap();
    let before = model.clone();
    // Atomic: an unknown label (or one named twice) changes nothing.
    for bad in [
        &[TaskRef::Str("bo"), TaskRef::Str("zed")][..],
        &[TaskRef::Str("bo"), TaskRef::Str("bo")],
    ] {
        assert!(model.forget(bad).is_err());
        assert_eq!(model.to_bytes().unwrap(), before.to_bytes().unwrap());
    }
    // A pending event of "bo" (a delayed label) and one of "ann".
    let secret = [0.123456789, -0.987654321, 0.5, 0.25, 0.125];
    model
        .remember("e1", EventRow::Dense(&secret), Some(TaskRef::Str("bo")), 1.0)
        .unwrap();
    model
        .remember("e2", EventRow::Dense(&x[..D]), Some(TaskRef::Str("ann")), 2.0)
        .unwrap();
    let report = model.forget(&[TaskRef::Str("bo")]).unwrap();
    assert_eq!((report.tasks.as_slice(), report.n_examples), (&[1usize][..], 2));
    assert_eq!((report.n_pending, model.pending().count), (1, 1));
    let saved = model.to_bytes().unwrap();
    assert!(!contains(&saved, &secret[0].to_le_bytes()) && !contains(&saved, b"\"bo\""));
    let book = model.book().unwrap();
    assert_eq!(book.task_ids(), [TaskId::from("ann"), TaskId::from("cy")]);
    assert_eq!(book.seen_per_id(), [2, 2]);
    assert_eq!(book.free_tasks(), [1]);
    assert_eq!(model.task_index(TaskRef::Str("bo")), None);
    // The file keeps the free task; a reader sees the same book.
    let restored = Model::from_bytes(&model.to_bytes().unwrap()).unwrap();
    assert_eq!(restored.book(), model.book());
    // "bo" scores as a new task, and a new label takes the free task 1.
    let fresh = model.decision(&rows, Tasks::All(TaskRef::Str("bo"))).unwrap();
    assert!(fresh.iter().all(|&s| s == 0.0));
    let one = Rows::dense(&x[..D], 1, D);
    model
        .learn(&one, Tasks::All(TaskRef::Str("dee")), Labels::Ints(&y[..1]))
        .unwrap();
    assert_eq!(model.task_index(TaskRef::Str("dee")), Some(1));
    model
        .learn(&one, Tasks::All(TaskRef::Str("bo")), Labels::Ints(&y[..1]))
        .unwrap();
    assert_eq!(model.task_index(TaskRef::Str("bo")), Some(3));
    let book = model.book().unwrap();
    assert_eq!(book.task_ids().len(), 4);
    assert_eq!((book.n_seen(), book.n_forgotten()), (8, 2));
    Model::from_bytes(&model.to_bytes().unwrap()).unwrap();
}
