//! The log's record payloads: every kind reads back as written, a forget record decodes beside
//! the kinds logged without it, and a cut or damaged forget record is refused as the others are.

use super::*;
use crate::model::Estimator;
use crate::serve::{state, wal};

fn learn(tasks: &[&str]) -> Op {
    Op::Learn {
        events: Events {
            features: Features::Named {
                indptr: (0..=tasks.len() as i64).collect(),
                indices: (0..tasks.len() as u32).collect(),
                values: vec![1.0; tasks.len()],
            },
            tasks: Some(tasks.iter().map(|&t| TaskId::Str(t.into())).collect()),
        },
        labels: OwnedLabels::Ints((0..tasks.len() as i64).map(|i| 2 * (i % 2) - 1).collect()),
    }
}

fn forget(tasks: &[&str]) -> Op {
    Op::Forget {
        tasks: tasks.iter().map(|&t| TaskId::Str(t.into())).collect(),
    }
}

fn payload(op: &Op) -> Vec<u8> {
    let mut out = Vec::new();
    op.write(&mut out);
    out
}

#[test]
fn every_kind_reads_back_as_written() {
    let ops = [
        learn(&["alice", "bob"]),
        Op::Remember {
            events: Events {
                features: Features::Dense {
                    data: vec![0.5, -1.0, 2.0, 0.0],
                    n_cols: 2,
                },
                tasks: None,
            },
            ids: vec![Some("m-1".into()), None],
            now: 17.5,
        },
        Op::Label {
            ids: vec!["m-1".into()],
            labels: OwnedLabels::Strs(vec!["spam".into()]),
            now: 18.0,
        },
        forget(&["alice"]),
        Op::Forget {
            tasks: vec![TaskId::Int(3), TaskId::Str("carol".into()), TaskId::Int(-1)],
        },
        Op::Forget { tasks: vec![] },
    ];
    for op in &ops {
        assert_eq!(Op::read(op.kind(), &payload(op)).unwrap(), *op);
    }
    assert_eq!(forget(&["a"]).kind(), kind::FORGET);
    assert_eq!(forget(&["a"]).n_events(), 0);
}

/// The kinds logged before forgets existed keep their bytes: a learn record's payload, spelled
/// out, decodes to the same learn.
#[test]
fn a_learn_record_keeps_its_bytes() {
    let mut bytes = vec![1u8]; // named features
    bytes.extend(2u64.to_le_bytes()); // indptr: 2 entries
    bytes.extend(0i64.to_le_bytes());
    bytes.extend(1i64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes()); // 1 index
    bytes.extend(0u32.to_le_bytes());
    bytes.extend(1.0f64.to_le_bytes());
    bytes.extend([1u8]); // tasks given
    bytes.extend(1u64.to_le_bytes());
    bytes.extend([2u8]); // a string task
    bytes.extend(5u32.to_le_bytes());
    bytes.extend(b"alice");
    bytes.extend([0u8]); // integer labels
    bytes.extend(1u64.to_le_bytes());
    bytes.extend((-1i64).to_le_bytes());
    assert_eq!(payload(&learn(&["alice"])), bytes);
    assert_eq!(Op::read(kind::LEARN, &bytes).unwrap(), learn(&["alice"]));
}

#[test]
fn a_cut_or_damaged_forget_payload_is_refused() {
    let whole = payload(&Op::Forget {
        tasks: vec![TaskId::Str("alice".into()), TaskId::Int(7)],
    });
    for cut in 0..whole.len() {
        assert!(Op::read(kind::FORGET, &whole[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = whole.clone();
    longer.push(0);
    assert!(Op::read(kind::FORGET, &longer).is_err());
    // A task tag that is not one, a missing task, an absurd count (refused before allocating).
    let mut bad = whole.clone();
    bad[8] = 9;
    assert!(Op::read(kind::FORGET, &bad).is_err());
    bad[8] = 0;
    assert!(Op::read(kind::FORGET, &bad).is_err());
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(&whole[8..]);
    assert!(Op::read(kind::FORGET, &huge).is_err());
    assert!(Op::read(5, &whole).is_err());
}

fn segment(records: &[(u64, &Op)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (lsn, op) in records {
        wal::encode(&mut out, *lsn, op.kind(), &payload(op));
    }
    out
}

/// A fresh directory under the system's temporary one, removed on drop.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("omtl-ops-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_torn_forget_record_is_dropped_at_the_tail_and_corruption_elsewhere() {
    let dir = Dir::new("torn");
    let bytes = segment(&[(1, &learn(&["alice", "bob"])), (2, &forget(&["alice"]))]);
    let first_len = segment(&[(1, &learn(&["alice", "bob"]))]).len();
    let path = dir.0.join(wal::segment_name(1));
    for cut in first_len + 1..bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let read = wal::read(&path, true).unwrap();
        assert_eq!(
            (read.records.len(), read.valid_len, read.torn),
            (1, first_len as u64, true)
        );
        assert!(wal::read(&path, false).is_err(), "cut at {cut}: not the last segment");
    }
    // A flipped byte in the forget's body: a checksum mismatch, corruption unless only zeros follow.
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 0x20;
    std::fs::write(&path, &flipped).unwrap();
    assert!(wal::read(&path, false).unwrap_err().contains("checksum mismatch"));
    flipped.extend(segment(&[(3, &learn(&["bob"]))]));
    std::fs::write(&path, &flipped).unwrap();
    assert!(wal::read(&path, true)
        .unwrap_err()
        .contains(&format!("offset {first_len}")));
}

fn model() -> Model {
    Model::new(Estimator::from_text("MTLinear", &[("n_features", "8")]).unwrap())
}

/// A log of learns only replays as it was written; one with a forget replays to a model without
/// the task; a forget record that does not decode stops recovery, naming the record.
#[test]
fn recovery_replays_forgets_among_older_kinds() {
    let learns = Dir::new("learns");
    std::fs::write(
        learns.0.join(wal::segment_name(1)),
        segment(&[(1, &learn(&["alice", "bob"])), (2, &learn(&["bob", "alice"]))]),
    )
    .unwrap();
    let recovered = state::recover(&learns.0, Some(model())).unwrap();
    assert_eq!((recovered.lsn, recovered.replayed), (2, 2));
    let book = recovered.model.book().unwrap();
    assert_eq!(book.n_seen(), 4);
    assert_eq!(book.task_ids().len(), 2);

    let forgets = Dir::new("forgets");
    let log = segment(&[
        (1, &learn(&["alice", "bob"])),
        (2, &forget(&["alice"])),
        (3, &forget(&["nobody"])),
    ]);
    std::fs::write(forgets.0.join(wal::segment_name(1)), &log).unwrap();
    let recovered = state::recover(&forgets.0, Some(model())).unwrap();
    assert_eq!((recovered.lsn, recovered.replayed), (3, 3));
    let book = recovered.model.book().unwrap();
    assert_eq!(book.task_ids(), vec![TaskId::Str("bob".into())]);
    assert_eq!(book.n_seen(), 2);

    let damaged = Dir::new("damaged");
    let mut payload = payload(&forget(&["alice"]));
    payload.push(0);
    let mut log = segment(&[(1, &learn(&["alice", "bob"]))]);
    wal::encode(&mut log, 2, kind::FORGET, &payload);
    std::fs::write(damaged.0.join(wal::segment_name(1)), &log).unwrap();
    let err = state::recover(&damaged.0, Some(model())).err().unwrap().to_string();
    assert!(err.contains("record 2"), "{err}");
}
