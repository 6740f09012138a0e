//! The user budget's guarantees: memory within `max_bytes` whatever the churn, the head exact,
//! atomic calls (evictions undone), the tail read by evicted users, forgetting.

use super::*;
use crate::data::Rows;
use crate::learner::{decision, learn, learn_grown, Build, OnlineLearner};
use crate::state::CheckState;

const WIDTH: usize = 1 << 12;

/// A CSR stream: row offsets, indices, values, tasks, labels.
type Stream = (Vec<i64>, Vec<u32>, Vec<f64>, Vec<i64>, Vec<f64>);

/// `n` sparse rows of 8 features over `WIDTH` columns, users drawn with a heavy head
/// (`user = floor(n_users * u^3)`), labels from a per-user sign of the first feature.
fn churn(n: usize, n_users: usize, seed: u64) -> Stream {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let (mut indptr, mut indices, mut values, mut tasks, mut y) =
        (vec![0i64], Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let user = ((n_users as f64) * unif().powi(3)) as i64;
        let mut cols: Vec<u32> = (0..8).map(|_| (unif() * WIDTH as f64) as u32).collect();
        cols.sort_unstable();
        cols.dedup();
        let first = cols[0];
        indices.extend_from_slice(&cols);
        values.extend(cols.iter().map(|_| 1.0));
        indptr.push(indices.len() as i64);
        tasks.push(user);
        y.push(if (first as i64 + user) % 3 == 0 { -1.0 } else { 1.0 });
    }
    (indptr, indices, values, tasks, y)
}

fn budgeted(n_tasks: usize, max_bytes: Option<u64>, tail_bits: Option<u32>, complete: bool) -> MTLinear {
    let params = MTLinearParams {
        max_bytes,
        tail_bits,
        ..MTLinearParams::default()
    };
    let tasks = if complete {
        TaskKernel::complete_open(n_tasks).unwrap()
    } else {
        TaskKernel::disconnected(n_tasks).unwrap()
    };
    MTLinear::build(&params, &crate::learner::GraphSetting::new(&tasks, WIDTH)).unwrap()
}

#[test]
fn memory_stays_within_the_budget_as_users_churn() {
    let (indptr, indices, values, tasks, y) = churn(6000, 3000, 1);
    let n_tasks = 3000;
    for (tail, complete) in [(None, true), (Some(12), true), (Some(10), false)] {
        let max = 400_000u64;
        let mut m = budgeted(n_tasks, Some(max), tail, complete);
        for start in (0..6000).step_by(500) {
            let rebased: Vec<i64> = indptr[start..=start + 500].iter().map(|&p| p - indptr[start]).collect();
            let rows = Rows::Csr {
                indptr: &rebased,
                indices: &indices[indptr[start] as usize..],
                data: &values[indptr[start] as usize..],
                n_cols: WIDTH,
            };
            learn(&mut m, &rows, &tasks[start..start + 500], &y[start..start + 500]).unwrap();
            assert!(m.memory_bytes() as u64 <= max, "{} > {max}", m.memory_bytes());
            m.check_state().unwrap();
        }
        assert!(m.n_evicted_users() > 100, "{tail:?}: {} evictions", m.n_evicted_users());
        // The state round-trips, and the restored model goes on exactly as the live one.
        let mut restored: MTLinear = bincode::deserialize(&crate::state::encode(&m).unwrap()).unwrap();
        restored.check_state().unwrap();
        assert!(restored == m);
        let all = Rows::Csr {
            indptr: &indptr,
            indices: &indices,
            data: &values,
            n_cols: WIDTH,
        };
        let a = learn(&mut m, &all, &tasks, &y).unwrap();
        let b = learn(&mut restored, &all, &tasks, &y).unwrap();
        assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
        assert!(restored == m);
    }
}

#[test]
fn an_ample_budget_is_the_exact_model() {
    let (indptr, indices, values, tasks, y) = churn(3000, 200, 2);
    let rows = Rows::Csr {
        indptr: &indptr,
        indices: &indices,
        data: &values,
        n_cols: WIDTH,
    };
    let mut exact = budgeted(200, None, None, true);
    let mut roomy = budgeted(200, Some(1 << 30), Some(8), true);
    let a = learn(&mut exact, &rows, &tasks, &y).unwrap();
    let b = learn(&mut roomy, &rows, &tasks, &y).unwrap();
    assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
    assert_eq!(roomy.n_evicted_users(), 0);
    assert_eq!(
        decision(&exact, &rows, &tasks).unwrap(),
        decision(&roomy, &rows, &tasks).unwrap()
    );
}

#[test]
fn a_failing_call_undoes_its_evictions() {
    let (indptr, indices, values, tasks, y) = churn(2000, 1000, 3);
    let mut m = budgeted(1000, Some(300_000), Some(10), true);
    let first = Rows::Csr {
        indptr: &indptr[..1001],
        indices: &indices,
        data: &values,
        n_cols: WIDTH,
    };
    learn(&mut m, &first, &tasks[..1000], &y[..1000]).unwrap();
    let before = m.clone();
    let bytes = crate::state::encode(&m).unwrap();
    // The second half (new users: evictions) with its last row's value beyond single precision.
    let mut values = values.clone();
    let last = values.len() - 1;
    values[last] = 1e25;
    let rebased: Vec<i64> = indptr[1000..].iter().map(|&p| p - indptr[1000]).collect();
    let second = Rows::Csr {
        indptr: &rebased,
        indices: &indices[indptr[1000] as usize..],
        data: &values[indptr[1000] as usize..],
        n_cols: WIDTH,
    };
    let mut y2 = y[1000..].to_vec();
    let f = decision(&m, &second, &tasks[1000..]).unwrap();
    *y2.last_mut().unwrap() = if f[f.len() - 1] >= 0.0 { -1.0 } else { 1.0 };
    assert!(learn(&mut m, &second, &tasks[1000..], &y2).is_err());
    assert!(m == before);
    assert_eq!(crate::state::encode(&m).unwrap(), bytes);
    m.check_state().unwrap();
    // Also when the call adds users.
    let mut g = budgeted(1000, Some(300_000), Some(10), true);
    learn(&mut g, &first, &tasks[..1000], &y[..1000]).unwrap();
    assert!(learn_grown(&mut g, 10, &second, &tasks[1000..], &y2).is_err());
    assert!(g == before);
}

#[test]
fn evicted_users_read_the_tail_and_forgotten_ones_nothing() {
    let (indptr, indices, values, tasks, y) = churn(4000, 2000, 4);
    let rows = Rows::Csr {
        indptr: &indptr,
        indices: &indices,
        data: &values,
        n_cols: WIDTH,
    };
    let mut m = budgeted(2000, Some(150_000), Some(12), false);
    learn(&mut m, &rows, &tasks, &y).unwrap();
    let b = m.budget.as_ref().unwrap();
    let residents = b.residents();
    let evicted = (0..2000)
        .find(|&t| b.folded[t] && !residents.contains(&(t as u32)))
        .unwrap();
    let resident = residents[residents.len() - 1] as usize;
    let r = tasks.iter().position(|&t| t as usize == evicted).unwrap();
    let one = Rows::Csr {
        indptr: &[0, indptr[r + 1] - indptr[r]],
        indices: &indices[indptr[r] as usize..indptr[r + 1] as usize],
        data: &values[indptr[r] as usize..indptr[r + 1] as usize],
        n_cols: WIDTH,
    };
    // On the disconnected graph an evicted user's score is its tail's.
    assert_ne!(decision(&m, &one, &[evicted as i64]).unwrap()[0], 0.0);
    m.forget_tasks(&[evicted, resident]).unwrap();
    m.check_state().unwrap();
    assert_eq!(decision(&m, &one, &[evicted as i64]).unwrap()[0], 0.0);
    assert_eq!(decision(&m, &one, &[resident as i64]).unwrap()[0], 0.0);
    let Store::Sparse(cells) = &m.store else { unreachable!() };
    assert!(cells.keys().iter().all(|&(r, _)| r as usize != resident));
    learn(&mut m, &rows, &tasks, &y).unwrap();
    m.check_state().unwrap();
}
