//! The book's rules: task modes, labels, counters, atomicity, events equal to one-row batches.

use serde_json::{Map, Value};

use super::*;
use crate::hashing::RowBuilder;

pub(super) fn stream(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<i64>) {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let x: Vec<f64> = (0..n * d)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let y = (0..n)
        .map(|t| if x[t * d] + 0.3 * x[t * d + 1] > 0.0 { 1 } else { -1 })
        .collect();
    (x, y)
}

fn estimator(class: &str, pairs: &[(&str, &str)]) -> Estimator {
    Estimator::from_text(class, pairs).unwrap()
}

#[test]
fn label_mode_interns_labels_in_first_seen_order_and_counts() {
    let (x, y) = stream(30, 3, 1);
    let users: Vec<TaskRef> = (0..30).map(|t| TaskRef::Str(["ann", "bo", "cy"][t % 3])).collect();
    let mut model = Model::new(estimator("MTLinear", &[]));
    let rows = Rows::dense(&x, 30, 3);
    let scores = model.learn(&rows, Tasks::Ids(&users), Labels::Ints(&y)).unwrap();
    let book = model.book().unwrap();
    assert_eq!(book.n_seen(), 30);
    assert_eq!(&book.seen_per_task()[..3], [10, 10, 10]);
    let mistakes = scores
        .iter()
        .zip(&y)
        .filter(|(&s, &l)| learner::predict_sign(s) != l as f64)
        .count();
    assert_eq!(book.n_mistakes(), mistakes as u64);
    assert_eq!(
        book.task_ids(),
        [TaskId::from("ann"), TaskId::from("bo"), TaskId::from("cy")]
    );
    assert_eq!(model.task_index(TaskRef::Str("cy")), Some(2));
    // A label never seen scores as a new task; the model is not changed.
    let before = model.to_bytes().unwrap();
    let s = model
        .decision(&Rows::dense(&x[..3], 1, 3), Tasks::All(TaskRef::Str("dee")))
        .unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(model.to_bytes().unwrap(), before);
}

#[test]
fn index_mode_checks_ids_and_fixed_label_sets_refuse_extra_labels() {
    let (x, y) = stream(4, 2, 2);
    let rows = Rows::dense(&x, 4, 2);
    let mut model = Model::new(estimator("PAUnique", &[("n_tasks", "2")]));
    model
        .learn(&rows, Tasks::Ints(&[0, 1, 0, 1]), Labels::Ints(&y))
        .unwrap();
    assert!(model.book().unwrap().labels().is_none());
    let err = model
        .learn(&rows, Tasks::Ints(&[0, 1, 2, 1]), Labels::Ints(&y))
        .unwrap_err();
    assert!(err.to_string().contains("unknown task id 2 at row 2"), "{err}");
    assert!(matches!(
        model.learn(&rows, Tasks::All(TaskRef::Str("a")), Labels::Ints(&y)),
        Err(Error::WrongType { .. })
    ));
    // A fixed n_tasks with string labels: up to n_tasks labels.
    let mut fixed = Model::new(estimator("PAUnique", &[("n_tasks", "2")]));
    let ids = [
        TaskRef::Str("a"),
        TaskRef::Str("b"),
        TaskRef::Str("a"),
        TaskRef::Str("c"),
    ];
    let err = fixed.learn(&rows, Tasks::Ids(&ids), Labels::Ints(&y)).unwrap_err();
    assert!(err.to_string().contains("fixed set of n_tasks=2"), "{err}");
    assert!(!fixed.is_fitted(), "a failed first batch leaves the model unfitted");
}

#[test]
fn a_failed_batch_changes_nothing_and_an_event_equals_a_one_row_batch() {
    let (x, y) = stream(40, 3, 3);
    let users: Vec<TaskRef> = (0..40).map(|t| TaskRef::Int(100 + (t % 4) as i64)).collect();
    let mut a = Model::new(estimator("MTLinear", &[]));
    let mut b = Model::new(estimator("MTLinear", &[]));
    for t in 0..40 {
        let row = &x[t * 3..t * 3 + 3];
        let batch = a
            .learn(
                &Rows::dense(row, 1, 3),
                Tasks::All(users[t]),
                Labels::Ints(&y[t..t + 1]),
            )
            .unwrap()[0];
        let event = b
            .learn_one(EventRow::Dense(row), Some(users[t]), Label::Int(y[t]))
            .unwrap();
        assert_eq!(batch.to_bits(), event.to_bits());
    }
    assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap());
    let before = a.to_bytes().unwrap();
    let mut bad = x[..6].to_vec();
    bad[4] = f64::NAN;
    let new_users = [TaskRef::Str("x"), TaskRef::Str("y")];
    assert!(a
        .learn(&Rows::dense(&bad, 2, 3), Tasks::Ids(&new_users), Labels::Ints(&[1, -1]))
        .is_err());
    assert!(a
        .learn(
            &Rows::dense(&x[..6], 2, 3),
            Tasks::Ids(&new_users),
            Labels::Ints(&[1, 5])
        )
        .is_err());
    assert_eq!(a.to_bytes().unwrap(), before);
}

#[test]
fn named_features_hash_as_the_builder_does_and_widths_are_checked() {
    let mut model = Model::new(estimator("MTLinear", &[("n_features", "64")]));
    let mut builder = RowBuilder::default();
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    for (t, words) in [["cheap", "pills"], ["hello", "friend"], ["cheap", "pills"]]
        .iter()
        .enumerate()
    {
        builder.clear();
        for w in words {
            builder.named(w.as_bytes(), 1.0, 64).unwrap();
        }
        builder.finish(&mut idx, &mut val);
        let y = if t == 1 { Label::Int(-1) } else { Label::Int(1) };
        model
            .learn_one(
                EventRow::Named {
                    indices: &idx,
                    values: &val,
                },
                Some(TaskRef::Str("u")),
                y,
            )
            .unwrap();
    }
    assert_eq!(model.book().unwrap().n_features_in(), 64);
    let err = model
        .learn_one(EventRow::Dense(&[1.0, 2.0]), Some(TaskRef::Str("u")), Label::Int(1))
        .unwrap_err();
    assert!(matches!(err, Error::FeatureMismatch { expected: 64, got: 2 }));
}

#[test]
fn a_model_file_round_trip_keeps_labels_form_and_continues_identically() {
    let (x, y) = stream(50, 3, 4);
    let users: Vec<TaskRef> = (0..50)
        .map(|t| TaskRef::Str(["a", "b", "c", "d", "e"][t % 5]))
        .collect();
    let classes: Vec<&str> = y.iter().map(|&l| if l > 0 { "spam" } else { "ham" }).collect();
    for class in ["MTLinear", "MTRBP", "MTFORG", "PAUnique", "CWCOL"] {
        let mut model = Model::new(estimator(class, &[]));
        let rows = Rows::dense(&x[..75], 25, 3);
        model
            .learn(&rows, Tasks::Ids(&users[..25]), Labels::Strs(&classes[..25]))
            .unwrap();
        let mut restored = Model::from_bytes(&model.to_bytes().unwrap()).unwrap();
        assert_eq!(restored.label_form(), model.label_form());
        let rest = Rows::dense(&x[75..], 25, 3);
        let a = model
            .learn(&rest, Tasks::Ids(&users[25..]), Labels::Strs(&classes[25..]))
            .unwrap();
        let b = restored
            .learn(&rest, Tasks::Ids(&users[25..]), Labels::Strs(&classes[25..]))
            .unwrap();
        assert_eq!(a, b, "{class}");
        assert_eq!(model.to_bytes().unwrap(), restored.to_bytes().unwrap(), "{class}");
        let predicted = restored.predict(&rest, Tasks::Ids(&users[25..])).unwrap();
        assert!(predicted
            .iter()
            .all(|p| matches!(p, Predicted::Class(ClassLabel::Str(_)))));
    }
}

#[test]
fn add_tasks_grows_open_models_and_refuses_fixed_graphs() {
    let (x, y) = stream(4, 2, 5);
    let rows = Rows::dense(&x, 4, 2);
    let mut open = Model::new(estimator("MTLinear", &[]));
    open.learn(&rows, Tasks::All(TaskRef::Str("a")), Labels::Ints(&y))
        .unwrap();
    open.add_tasks(&[TaskRef::Str("b"), TaskRef::Str("c")]).unwrap();
    assert_eq!(open.task_index(TaskRef::Str("c")), Some(2));
    assert!(open.add_tasks(&[TaskRef::Str("a")]).is_err());
    let mut fixed = Model::new(estimator("MTLinear", &[("n_tasks", "2")]));
    fixed
        .learn(&rows, Tasks::Ints(&[0, 1, 0, 1]), Labels::Ints(&y))
        .unwrap();
    assert!(fixed.add_tasks(&[TaskRef::Int(2)]).is_err());
    let mut disconnected = Model::new(estimator("PAUnique", &[("n_tasks", "2")]));
    disconnected
        .learn(&rows, Tasks::Ints(&[0, 1, 0, 1]), Labels::Ints(&y))
        .unwrap();
    disconnected.add_tasks(&[TaskRef::Int(2)]).unwrap();
    assert_eq!(disconnected.estimator().n_tasks(), Some(3));
    assert_eq!(disconnected.book().unwrap().seen_per_task(), [2, 2, 0]);
}

#[test]
fn an_estimator_round_trips_through_its_parameters() {
    let mut params = Map::new();
    params.insert("hash_bits".into(), Value::from(12));
    let est = Estimator::new("MTLinear", params).unwrap();
    let again = Estimator::new(est.class().name, est.params().clone()).unwrap();
    assert_eq!(est, again);
    let mut model = Model::new(est);
    let (x, y) = stream(3, 2, 6);
    model
        .learn(&Rows::dense(&x, 3, 2), Tasks::All(TaskRef::Int(7)), Labels::Ints(&y))
        .unwrap();
    let file = Model::from_bytes(&model.to_bytes().unwrap()).unwrap();
    assert_eq!(file.estimator().params()["hash_bits"], 12);
}
