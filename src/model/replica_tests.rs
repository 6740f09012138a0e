//! Replicas of coupled models kept in step: a sync after every row is the one model, bit for
//! bit (exact cells); a sync is the identity for one replica; merged replicas serve as the one
//! model; layouts and merges that cannot be are refused.

use super::*;
use crate::data::Rows;
use crate::learner::shared::{combine, SharedUpdate, WeightMix};
use crate::model::{Estimator, Labels, Tasks};
use crate::rng::SplitMix64;

struct Stream {
    x: Vec<f64>,
    users: Vec<String>,
    y: Vec<i64>,
    d: usize,
}

fn stream(n: usize, d: usize, n_users: usize, seed: u64) -> Stream {
    let mut rng = SplitMix64::new(seed);
    let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let x: Vec<f64> = (0..n * d).map(|_| if unif() > 0.2 { unif() } else { 0.0 }).collect();
    let users: Vec<String> = (0..n).map(|t| format!("u{}", (t * 7 + t / 3) % n_users)).collect();
    let y = (0..n)
        .map(|t| {
            let s = x[t * d] - 0.5 * x[t * d + 1] + if users[t].ends_with('3') { 0.8 } else { -0.1 };
            if s + 0.2 * unif() > 0.0 {
                1
            } else {
                -1
            }
        })
        .collect();
    Stream { x, users, y, d }
}

impl Stream {
    fn row(&self, t: usize) -> (Rows<'_>, [TaskRef<'_>; 1], [i64; 1]) {
        (
            Rows::dense(&self.x[t * self.d..(t + 1) * self.d], 1, self.d),
            [TaskRef::Str(&self.users[t])],
            [self.y[t]],
        )
    }
}

/// One model on the stream, and `n_shards` replicas synced after every `sync_every` rows of
/// any shard (rows routed by label); returns both with the pre-update scores of each.
fn run(
    estimator: &Estimator,
    s: &Stream,
    n_shards: usize,
    sync_every: usize,
) -> (Model, Vec<Model>, Vec<f64>, Vec<f64>) {
    let mut one = Model::new(estimator.clone());
    let mut shards: Vec<Model> = (0..n_shards)
        .map(|_| {
            let mut m = Model::empty_replica(estimator, s.d, true).unwrap();
            m.track_shared().unwrap();
            m
        })
        .collect();
    let (mut single, mut sharded) = (Vec::new(), Vec::new());
    let mut since = vec![0; n_shards];
    for t in 0..s.y.len() {
        let (rows, task, y) = s.row(t);
        single.extend(one.learn(&rows, Tasks::Ids(&task), Labels::Ints(&y)).unwrap());
        let k = shard_of(task[0], n_shards);
        sharded.extend(shards[k].learn(&rows, Tasks::Ids(&task), Labels::Ints(&y)).unwrap());
        since[k] += 1;
        if since[k] == sync_every {
            sync(&mut shards);
            since.fill(0);
        }
    }
    sync(&mut shards);
    (one, shards, single, sharded)
}

fn sync(shards: &mut [Model]) {
    let reports: Vec<_> = shards.iter().map(|m| m.shared_changes().unwrap()).collect();
    let update = SharedUpdate::from_bytes(&combine(&reports, WeightMix::Sum).unwrap().to_bytes().unwrap()).unwrap();
    for m in shards.iter_mut() {
        m.apply_shared(&update).unwrap();
    }
}

fn estimators() -> Vec<Estimator> {
    vec![
        Estimator::from_text("MTLinear", &[]).unwrap(),
        Estimator::from_text("MTLinear", &[("update", "adagrad"), ("loss", "hinge")]).unwrap(),
        Estimator::from_text("PAGlobal", &[("n_tasks", "None")]).unwrap(),
        Estimator::from_text("CWCOL", &[("n_tasks", "None")]).unwrap(),
    ]
}

#[test]
fn a_sync_after_every_row_is_the_one_model_bit_for_bit() {
    let s = stream(300, 5, 12, 1);
    for est in estimators() {
        let (one, shards, single, sharded) = run(&est, &s, 3, 1);
        assert_eq!(single, sharded, "{}", est.class().name);
        // every shard scores every user as the one model does (its own users exactly, the others
        // as new users through the shared state alone)
        let merged = Model::merge_replicas(&shards, None).unwrap();
        let rows = Rows::dense(&s.x, s.y.len(), s.d);
        let tasks: Vec<TaskRef> = s.users.iter().map(|u| TaskRef::Str(u)).collect();
        assert_eq!(
            merged.decision(&rows, Tasks::Ids(&tasks)).unwrap(),
            one.decision(&rows, Tasks::Ids(&tasks)).unwrap(),
            "{}",
            est.class().name
        );
        assert_eq!(merged.book().unwrap().n_seen(), 300);
        assert_eq!(merged.book().unwrap().n_mistakes(), one.book().unwrap().n_mistakes());
    }
}

#[test]
fn one_replica_is_the_one_model_whatever_the_interval() {
    let s = stream(200, 4, 9, 2);
    for est in [
        Estimator::from_text("MTLinear", &[("hash_bits", "10")]).unwrap(),
        Estimator::from_text("MTLinear", &[]).unwrap(),
    ] {
        let (_, _, single, sharded) = run(&est, &s, 1, 7);
        assert_eq!(single, sharded);
    }
}

#[test]
fn longer_intervals_stay_close_and_hashed_replicas_sync() {
    let s = stream(600, 5, 20, 3);
    for est in [
        Estimator::from_text("MTLinear", &[]).unwrap(),
        Estimator::from_text("MTLinear", &[("hash_bits", "12")]).unwrap(),
    ] {
        let (_, shards, single, sharded) = run(&est, &s, 4, 10);
        let agree = single
            .iter()
            .zip(&sharded)
            .filter(|(a, b)| (**a >= 0.0) == (**b >= 0.0))
            .count();
        assert!(agree as f64 > 0.9 * 600.0, "{agree}");
        // after the last sync every replica reports nothing new
        for m in &shards {
            assert!(m.shared_changes().unwrap().positions.is_empty());
        }
    }
}

#[test]
fn hashed_replicas_do_not_merge_and_replicas_out_of_step_are_refused() {
    let s = stream(100, 4, 6, 4);
    let est = Estimator::from_text("MTLinear", &[("hash_bits", "10")]).unwrap();
    let (_, shards, _, _) = run(&est, &s, 2, 5);
    let err = Model::merge_replicas(&shards, None).unwrap_err().to_string();
    assert!(err.contains("hash_bits=None"), "{err}");
    let est = Estimator::from_text("MTLinear", &[]).unwrap();
    let (_, mut shards, _, _) = run(&est, &s, 2, 5);
    let (rows, task, y) = s.row(0);
    shards[shard_of(task[0], 2)]
        .learn(&rows, Tasks::Ids(&task), Labels::Ints(&y))
        .unwrap();
    assert!(Model::merge_replicas(&shards, None)
        .unwrap_err()
        .to_string()
        .contains("in step"));
    // not a replica: refused
    let perceptron = Estimator::from_text("MTPerceptron", &[("n_tasks", "None")]).unwrap();
    assert!(Model::empty_replica(&perceptron, 3, true).is_err());
    // a report of another model is refused, the model unchanged
    let other = Estimator::from_text("MTLinear", &[("update", "sgd")]).unwrap();
    let mut m = Model::empty_replica(&other, 4, true).unwrap();
    m.track_shared().unwrap();
    let update = combine(&[shards[1].shared_changes().unwrap()], WeightMix::Sum).unwrap();
    assert!(m.apply_shared(&update).is_err());
}

#[test]
fn shards_of_labels_are_stable_and_spread() {
    // MurmurHash3 x86-32 of "u1", seed 0, reduced by multiply-shift: fixed for every process
    let mut counts = [0usize; 4];
    for i in 0..4000 {
        counts[shard_of(TaskRef::Str(&format!("user{i}")), 4)] += 1;
    }
    assert!(counts.iter().all(|&c| (850..1150).contains(&c)), "{counts:?}");
    assert_eq!(shard_of(TaskRef::Int(42), 7), shard_of(TaskRef::Str("42"), 7));
    let h = crate::hashing::murmur3_32(b"u1", 0);
    assert_eq!(shard_of(TaskRef::Str("u1"), 3), ((u64::from(h) * 3) >> 32) as usize);
}
