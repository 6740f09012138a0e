//! The pending store's rules: delayed labels learn as `learn_one` in label order, bounds and
//! eviction, ages, atomicity, and the model file round trip.

use super::*;
use crate::hashing::RowBuilder;
use crate::model::{Estimator, Label, LabelForm};
use crate::rng::SplitMix64;

fn stream(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<i64>) {
    let mut rng = SplitMix64::new(seed);
    let x: Vec<f64> = (0..n * d)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let y = (0..n)
        .map(|t| if x[t * d] + 0.3 * x[t * d + 1] > 0.0 { 1 } else { -1 })
        .collect();
    (x, y)
}

fn model(class: &str, pairs: &[(&str, &str)]) -> Model {
    Model::new(Estimator::from_text(class, pairs).unwrap())
}

fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    order
}

const USERS: [&str; 3] = ["ann", "bo", "cy"];

/// Remembers `n` events, learns their labels in a shuffled order, and checks the model equals,
/// bit for bit, one that learned them with `learn_one` in that order; the mistakes counted are
/// those of the served scores.
fn delayed_equals_learn_one_in_label_order(class: &str, pairs: &[(&str, &str)]) {
    let (n, d) = (40, 4);
    let (x, y) = stream(n, d, 7);
    let mut delayed = model(class, pairs);
    let mut direct = model(class, pairs);
    // A few events learned first, so that remembered events meet a fitted model.
    for t in 0..5 {
        let (row, task) = (
            EventRow::Dense(&x[t * d..(t + 1) * d]),
            Some(TaskRef::Str(USERS[t % 3])),
        );
        delayed.learn_one(row, task, Label::Int(y[t])).unwrap();
        direct.learn_one(row, task, Label::Int(y[t])).unwrap();
    }
    let mut served = vec![0.0; n];
    let order = shuffled(n - 5, 3);
    // Labels arrive interleaved with remembering: event 5 + order[k] is labelled once remembered.
    let mut remembered = 5;
    let mut mistakes = direct.book().unwrap().n_mistakes();
    for (step, &k) in order.iter().enumerate() {
        let t = 5 + k;
        while remembered <= t || (remembered < n && step % 3 == 0) {
            let row = EventRow::Dense(&x[remembered * d..(remembered + 1) * d]);
            let task = Some(TaskRef::Str(USERS[remembered % 3]));
            served[remembered] = delayed
                .remember(&format!("m{remembered}"), row, task, remembered as f64)
                .unwrap();
            assert_eq!(served[remembered], delayed.decision_one(row, task).unwrap());
            remembered += 1;
        }
        let (row, task) = (
            EventRow::Dense(&x[t * d..(t + 1) * d]),
            Some(TaskRef::Str(USERS[t % 3])),
        );
        let score = delayed
            .learn_label(&format!("m{t}"), Label::Int(y[t]), n as f64)
            .unwrap();
        assert_eq!(
            score.to_bits(),
            direct.learn_one(row, task, Label::Int(y[t])).unwrap().to_bits()
        );
        mistakes += u64::from(crate::learner::predict_sign(served[t]) != y[t] as f64);
    }
    assert_eq!(delayed.pending().count, 0);
    let (a, b) = (delayed.book().unwrap(), direct.book().unwrap());
    assert_eq!(a.n_seen(), b.n_seen());
    assert_eq!(a.seen_per_task(), b.seen_per_task());
    assert_eq!(a.task_ids(), b.task_ids());
    assert_eq!(a.n_mistakes(), mistakes, "{class}: the served predictions are counted");
    assert_eq!(
        delayed.learner().unwrap().to_bytes().unwrap(),
        direct.learner().unwrap().to_bytes().unwrap(),
        "{class}: the learner is bit-identical"
    );
}

#[test]
fn delayed_labels_learn_as_learn_one_in_label_order_for_every_kind() {
    for (class, pairs) in [
        ("MTLinear", &[][..]),
        ("KernelPerceptron", &[("kernel", "rbf")][..]),
        ("MTRBP", &[("budget", "8")][..]),
        ("MTFORG", &[("budget", "8")][..]),
        ("PAUnique", &[][..]),
        ("CWCOL", &[][..]),
        ("OMTL", &[][..]),
    ] {
        delayed_equals_learn_one_in_label_order(class, pairs);
    }
}

#[test]
fn named_features_and_an_unfitted_model_remember_and_learn() {
    let mut delayed = model("MTLinear", &[("n_features", "64")]);
    let mut direct = model("MTLinear", &[("n_features", "64")]);
    let mut builder = RowBuilder::default();
    let mut rows = Vec::new();
    for words in [["cheap", "pills"], ["hello", "friend"], ["cheap", "watch"]] {
        builder.clear();
        for w in words {
            builder.named(w.as_bytes(), 1.0, 64).unwrap();
        }
        let (mut idx, mut val) = (Vec::new(), Vec::new());
        builder.finish(&mut idx, &mut val);
        rows.push((idx, val));
    }
    let event = |i: usize| EventRow::Named {
        indices: &rows[i].0,
        values: &rows[i].1,
    };
    for i in 0..3 {
        assert_eq!(
            delayed
                .remember(&i.to_string(), event(i), Some(TaskRef::Int(9)), 0.0)
                .unwrap(),
            0.0
        );
    }
    assert!(!delayed.is_fitted(), "remembering does not fit the model");
    for (i, label) in [(2, true), (0, true), (1, false)] {
        delayed.learn_label(&i.to_string(), Label::Bool(label), 1.0).unwrap();
        direct
            .learn_one(event(i), Some(TaskRef::Int(9)), Label::Bool(label))
            .unwrap();
    }
    assert_eq!(delayed.to_bytes().unwrap(), direct.to_bytes().unwrap());
    assert_eq!(delayed.label_form(), &LabelForm::Bool);
}

#[test]
fn unknown_and_expired_ids_are_refused_and_failures_change_nothing() {
    let mut m = model("MTLinear", &[]);
    m.set_pending_limits(PendingLimits {
        max_age: 10.0,
        ..PendingLimits::default()
    })
    .unwrap();
    let x = [1.0, -0.5];
    m.remember("a", EventRow::Dense(&x), Some(TaskRef::Str("u")), 100.0)
        .unwrap();
    assert_eq!(
        m.learn_label("zz", Label::Int(1), 100.0),
        Err(Error::UnknownId("zz".into()))
    );
    let before = m.pending_store().clone();
    let err = m.learn_label("a", Label::Int(1), 110.5).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidParameter { name: "id", reason } if reason.contains("expired")),
        "{err}"
    );
    assert_eq!(m.pending_store(), &before);
    assert!(!m.is_fitted());
    // A label of a kind the model refuses: nothing changes, the event stays pending.
    assert!(m.learn_label("a", Label::Float(0.5), 101.0).is_err());
    assert_eq!(m.pending_store(), &before);
    // A width the fitted model refuses: the event stays pending.
    m.learn_one(
        EventRow::Dense(&[1.0, 2.0, 3.0]),
        Some(TaskRef::Str("u")),
        Label::Int(1),
    )
    .unwrap();
    let fitted = m.to_bytes().unwrap();
    assert!(matches!(
        m.learn_label("a", Label::Int(1), 101.0),
        Err(Error::FeatureMismatch { .. })
    ));
    assert_eq!(m.to_bytes().unwrap(), fitted);
    // Learned once: the id is gone.
    m.remember("b", EventRow::Dense(&[1.0, 0.0, 1.0]), Some(TaskRef::Str("u")), 101.0)
        .unwrap();
    m.learn_label("b", Label::Int(-1), 102.0).unwrap();
    assert_eq!(
        m.learn_label("b", Label::Int(-1), 102.0),
        Err(Error::UnknownId("b".into()))
    );
    // Bad arguments.
    assert!(m.remember("", EventRow::Dense(&[1.0, 0.0, 1.0]), None, 0.0).is_err());
    assert!(m
        .remember("c", EventRow::Dense(&[1.0, 0.0, 1.0]), None, f64::NAN)
        .is_err());
    assert!(m
        .remember(
            "c",
            EventRow::Dense(&[f64::NAN, 0.0, 1.0]),
            Some(TaskRef::Str("u")),
            0.0
        )
        .is_err());
    assert!(m.pending_store().get("c").is_none());
}

#[test]
fn full_stores_evict_the_oldest_and_expired_events_drop_at_the_old_end() {
    let mut m = model("MTLinear", &[]);
    let x = [1.0, 2.0];
    let row = EventRow::Dense(&x);
    let per_event = EVENT_OVERHEAD + 2 + 16; // a two-byte id, two values
    m.set_pending_limits(PendingLimits {
        max_events: 3,
        max_bytes: 1 << 20,
        max_age: 50.0,
    })
    .unwrap();
    for (i, id) in ["e0", "e1", "e2", "e3"].iter().enumerate() {
        m.remember(id, row, Some(TaskRef::Int(0)), i as f64).unwrap();
    }
    let ids: Vec<&str> = m.pending_store().iter().map(|e| &*e.id).collect();
    assert_eq!(ids, ["e1", "e2", "e3"]);
    assert_eq!(m.pending().evicted, 1);
    assert_eq!(m.pending().bytes, 3 * per_event);
    // Remembering a pending id replaces its event, now the newest.
    m.remember("e1", row, Some(TaskRef::Int(0)), 4.0).unwrap();
    let ids: Vec<&str> = m.pending_store().iter().map(|e| &*e.id).collect();
    assert_eq!(ids, ["e2", "e3", "e1"]);
    // The byte bound: room for two events.
    m.set_pending_limits(PendingLimits {
        max_events: 10,
        max_bytes: 2 * per_event,
        max_age: 50.0,
    })
    .unwrap();
    let ids: Vec<&str> = m.pending_store().iter().map(|e| &*e.id).collect();
    assert_eq!(ids, ["e3", "e1"]);
    assert_eq!(m.pending().evicted, 2);
    // Expired events at the old end go first, counted apart: at t=53.5, e3 (t=3) is expired.
    m.remember("e5", row, Some(TaskRef::Int(0)), 53.5).unwrap();
    let info = m.pending();
    assert_eq!((info.count, info.expired, info.evicted), (2, 1, 2));
    // An event larger than the store is refused.
    let big = vec![1.0; 1000];
    assert!(m.remember("big", EventRow::Dense(&big), None, 54.0).is_err());
    assert!(m
        .set_pending_limits(PendingLimits {
            max_events: 0,
            ..info.limits
        })
        .is_err());
    assert!(m
        .set_pending_limits(PendingLimits {
            max_age: f64::NAN,
            ..info.limits
        })
        .is_err());
    assert_eq!(m.pending.remove_tasks(&[TaskRef::Int(0)]), 2);
    assert!(m.pending_store().is_empty());
}

#[test]
fn pending_events_survive_the_model_file_and_old_files_stay_version_one() {
    let (x, y) = stream(12, 3, 5);
    let mut m = model("MTRBP", &[("budget", "6")]);
    for t in 0..6 {
        m.learn_one(
            EventRow::Dense(&x[t * 3..t * 3 + 3]),
            Some(TaskRef::Int(t as i64 % 2)),
            Label::Int(y[t]),
        )
        .unwrap();
    }
    let plain = m.to_bytes().unwrap();
    assert_eq!(&plain[9..13], &crate::model_file::FORMAT_VERSION.to_le_bytes());
    m.remember("dense", EventRow::Dense(&x[18..21]), Some(TaskRef::Int(1)), 1.5)
        .unwrap();
    m.remember(
        "sparse",
        EventRow::Columns {
            indices: &[0, 2],
            values: &[0.5, -1.0],
        },
        Some(TaskRef::Int(0)),
        2.5,
    )
    .unwrap();
    m.set_pending_limits(PendingLimits {
        max_events: 7,
        max_bytes: 10_000,
        max_age: 99.0,
    })
    .unwrap();
    let saved = m.to_bytes().unwrap();
    assert_eq!(&saved[9..13], &crate::model_file::FORMAT_VERSION_PENDING.to_le_bytes());
    let mut restored = Model::from_bytes(&saved).unwrap();
    assert_eq!(restored.pending_store(), m.pending_store());
    assert_eq!(restored.to_bytes().unwrap(), saved);
    // The restored model learns the labels as the original does.
    for id in ["sparse", "dense"] {
        let a = m.learn_label(id, Label::Int(1), 3.0).unwrap();
        let b = restored.learn_label(id, Label::Int(1), 3.0).unwrap();
        assert_eq!(a.to_bits(), b.to_bits());
    }
    assert_eq!(restored.to_bytes().unwrap(), m.to_bytes().unwrap());
    // Every truncation or flipped byte of the pending section is refused (the checksum
    // fixed up, so the section's own checks are what refuse it).
    let sections = crate::model_file::split_sections(&saved, &Default::default()).unwrap();
    let section = sections.pending.unwrap();
    for cut in 0..section.len() {
        assert!(
            crate::model_file::pending::decode(&section[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let mut twice = section.to_vec();
    let n_at = 4 + 5 * 8;
    twice[n_at..n_at + 8].copy_from_slice(&3u64.to_le_bytes());
    assert!(crate::model_file::pending::decode(&twice).is_err());
    // Framing: a pending length or state length that disagrees with the file is refused.
    let body = &saved[..saved.len() - 32];
    let pending_at = body.len() - section.len() - 8;
    let state_at = pending_at - sections.state.len() - 8;
    for (at, len) in [(pending_at, section.len() as u64 + 1), (state_at, u64::MAX - 4)] {
        let mut forged = body.to_vec();
        forged[at..at + 8].copy_from_slice(&len.to_le_bytes());
        use sha2::Digest;
        let checksum = sha2::Sha256::digest(&forged);
        forged.extend_from_slice(&checksum);
        assert!(matches!(Model::from_bytes(&forged), Err(Error::ModelFile(_))));
    }
    let mut bad_version = section.to_vec();
    bad_version[0] = 9;
    assert!(crate::model_file::pending::decode(&bad_version).is_err());
}

#[test]
fn a_batch_of_labels_equals_the_labels_one_by_one_and_is_atomic() {
    let (n, d) = (12, 3);
    let (x, y) = stream(n, d, 11);
    let mut batched = model("MTLinear", &[]);
    for t in 0..n {
        let row = EventRow::Dense(&x[t * d..(t + 1) * d]);
        batched
            .remember(&format!("m{t}"), row, Some(TaskRef::Str(USERS[t % 3])), 0.0)
            .unwrap();
    }
    let mut single = batched.clone();
    let order = shuffled(n, 2);
    let ids: Vec<String> = order.iter().map(|t| format!("m{t}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let labels: Vec<i64> = order.iter().map(|&t| y[t]).collect();
    // An unknown id, an id twice, a mixed batch: nothing changes.
    let before = batched.to_bytes().unwrap();
    assert_eq!(
        batched.learn_labels(&["m0", "nope"], Labels::Ints(&[1, 1]), 1.0),
        Err(Error::UnknownId("nope".into()))
    );
    assert!(batched.learn_labels(&["m0", "m0"], Labels::Ints(&[1, 1]), 1.0).is_err());
    assert!(batched
        .learn_labels(&["m0", "m1"], Labels::Floats(&[1.0, 0.5]), 1.0)
        .is_err());
    assert_eq!(batched.to_bytes().unwrap(), before);
    batched
        .remember(
            "sparse",
            EventRow::Columns {
                indices: &[1],
                values: &[1.0],
            },
            Some(TaskRef::Str("ann")),
            0.0,
        )
        .unwrap();
    let with_sparse = batched.to_bytes().unwrap();
    assert!(batched
        .learn_labels(&["m0", "sparse"], Labels::Ints(&[1, 1]), 1.0)
        .is_err());
    assert_eq!(batched.to_bytes().unwrap(), with_sparse);
    batched.pending.remove_tasks(&[TaskRef::Str("ann")]);
    single.pending.remove_tasks(&[TaskRef::Str("ann")]);
    let keep: Vec<usize> = (0..n).filter(|&k| !order[k].is_multiple_of(3)).collect();
    let ids: Vec<&str> = keep.iter().map(|&k| ids[k]).collect();
    let labels: Vec<i64> = keep.iter().map(|&k| labels[k]).collect();
    let scores = batched.learn_labels(&ids, Labels::Ints(&labels), 1.0).unwrap();
    for (k, (&id, &label)) in ids.iter().zip(&labels).enumerate() {
        let score = single.learn_label(id, Label::Int(label), 1.0).unwrap();
        assert_eq!(score.to_bits(), scores[k].to_bits());
    }
    assert_eq!(batched.to_bytes().unwrap(), single.to_bytes().unwrap());
    assert!(batched.pending().count == 0 && single.pending().count == 0);
}
