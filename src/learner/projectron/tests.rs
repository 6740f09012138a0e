//! Tests of the budget Projectrons.

use super::*;

/// MTBPRJ-2 as the paper's corrected Algorithm 2 (no A-C7 ablation).
fn mtbprj2(tasks: &TaskKernel, kernel: BaseKernel, d: usize, sparse: bool, params: ProjectronParams) -> MTBPRJ2 {
    MTBPRJ2::build(
        &MTBPRJ2Params::from_shared(params, false),
        &KernelSetting {
            task_kernel: tasks,
            kernel,
            n_features: d,
            sparse,
        },
    )
    .unwrap()
}
use crate::data::Rows;
use crate::learner::test_support::learn_row_by_row;
use crate::learner::{learn, MTPerceptron, NoParams, ParamGuard};
use crate::rng::SplitMix64;
use nalgebra::{DMatrix, DVector};

fn unif(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// An RBF kernel of width `gamma` and the complete graph on `k` tasks.
fn rbf_on_complete(gamma: f64, k: usize) -> (BaseKernel, TaskKernel) {
    (BaseKernel::rbf(gamma).unwrap(), TaskKernel::complete(k).unwrap())
}

/// A seeded stream on [0,1]^d with labels from a per-task linear rule.
fn stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
    let mut rng = SplitMix64::new(seed);
    let x: Vec<f64> = (0..n * d).map(|_| unif(&mut rng)).collect();
    let tasks: Vec<i64> = (0..n).map(|_| rng.below(k as u64) as i64).collect();
    let y = (0..n)
        .map(|t| {
            let s = x[t * d] - x[t * d + 1] + 0.2 * (tasks[t] as f64 - 1.0) * x[t * d + 2];
            if s > 0.05 * (unif(&mut rng) - 0.5) {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    (x, tasks, y)
}

fn params(budget: usize, eta: f64) -> ProjectronParams {
    ProjectronParams {
        budget,
        eta,
        threshold: Threshold::Norm,
    }
    .check()
    .map(Checked::into_inner)
    .unwrap()
}

/// Elements (x, task, time, slot) in insertion order.
fn elements(set: &ActiveSet) -> Vec<(Vec<f64>, usize, u64, usize)> {
    set.slots_in_order()
        .map(|s| {
            let mut v = vec![0.0; set.rows().n_features()];
            set.rows().row(s).for_each(|j, x| v[j] = x);
            (v, set.task(s), set.time(s), s)
        })
        .collect()
}

#[test]
fn rejects_bad_parameters() {
    assert!(ProjectronParams {
        budget: 0,
        eta: 0.1,
        threshold: Threshold::Norm
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    assert!(ProjectronParams {
        budget: 3,
        eta: -0.1,
        threshold: Threshold::Norm
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    assert!(ProjectronParams {
        budget: 3,
        eta: f64::NAN,
        threshold: Threshold::Norm
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    assert!(Threshold::parse("cube").is_err());
    assert_eq!(Threshold::parse("squared").unwrap(), Threshold::Squared);
}

#[test]
fn budget_holds_and_order_is_insertion_order() {
    let (n, d, k) = (500, 4, 3);
    let (x, tasks, y) = stream(n, d, k, 1);
    let kernel = BaseKernel::rbf(3.0).unwrap();
    let mut a = MTBPRJ::build(
        &params(12, 0.3),
        &KernelSetting::new(&TaskKernel::complete(k).unwrap(), kernel, d),
    )
    .unwrap();
    let mut b = mtbprj2(&TaskKernel::complete(k).unwrap(), kernel, d, true, params(12, 0.3));
    let mut scratch = Scratch::default();
    for t in 0..n {
        let row = Row::Dense(&x[t * d..(t + 1) * d]);
        a.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
        b.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
        for set in [&a.set, &b.dict] {
            assert!(set.len() <= 12);
            let times: Vec<u64> = elements(set).iter().map(|e| e.2).collect();
            assert!(
                times.windows(2).all(|w| w[0] < w[1]),
                "insertion order broken: {times:?}"
            );
        }
    }
    assert!(a.n_evictions() > 0 && a.n_projections() > 0);
    assert!(b.counters.n_evictions > 0 && b.counters.n_projections > 0);
    assert!(a.gram.residual() < 1e-8 && b.gram.residual() < 1e-8);
}

/// Feeds the stream row by row and calls `check(before, after, t)` after every row that
/// evicted an element (`evictions` reads the count); returns how many rows did.
fn each_eviction<L: OnlineLearner + Clone>(
    m: &mut L,
    (x, tasks, y): (&[f64], &[i64], &[f64]),
    d: usize,
    evictions: impl Fn(&L) -> u64,
    mut check: impl FnMut(&L, &L, usize),
) -> usize {
    let mut scratch = Scratch::default();
    let mut checked = 0;
    for t in 0..y.len() {
        let before = m.clone();
        let row = Row::Dense(&x[t * d..(t + 1) * d]);
        m.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
        if evictions(m) != evictions(&before) {
            check(&before, m, t);
            checked += 1;
        }
    }
    checked
}

/// INV-P3: the H-norm of the change made by a budget step equals score_r.
#[test]
fn removal_damage_equals_the_score() {
    let (n, d, k) = (400, 3, 3);
    let (x, tasks, y) = stream(n, d, k, 4);
    let kernel = BaseKernel::rbf(4.0).unwrap();
    let tk = TaskKernel::from_edges(k, &[(0, 1, 1.0)]).unwrap();
    let mut m = MTBPRJ::build(&params(10, 0.05), &KernelSetting::new(&tk, kernel, d)).unwrap();
    let checked = each_eviction(
        &mut m,
        (&x, &tasks, &y),
        d,
        |m: &MTBPRJ| m.n_evictions(),
        |before, m, t| {
            let i = tasks[t] as usize;
            // S ∪ {z} in insertion order, with β_pre, and β_post matched by insertion time.
            let mut elems = elements(&before.set);
            let mut pre: Vec<f64> = elems.iter().map(|e| before.set.beta(e.3)).collect();
            elems.push((x[t * d..(t + 1) * d].to_vec(), i, m.counters.n_seen, usize::MAX));
            pre.push(y[t]);
            let post_map: Vec<(u64, f64)> = elements(&m.set).iter().map(|e| (e.2, m.set.beta(e.3))).collect();
            let post: Vec<f64> = elems
                .iter()
                .map(|e| post_map.iter().find(|p| p.0 == e.2).map_or(0.0, |p| p.1))
                .collect();
            let nn = elems.len();
            let h = DMatrix::from_fn(nn, nn, |a, b| {
                tk.get(elems[a].1, elems[b].1) * kernel.eval(&Row::Dense(&elems[a].0), &Row::Dense(&elems[b].0))
            });
            let diff = DVector::from_fn(nn, |a, _| pre[a] - post[a]);
            let damage = (diff.transpose() * &h * &diff)[(0, 0)].sqrt();
            let qinv = h.clone().try_inverse().unwrap();
            let scores: Vec<f64> = (0..nn - 1).map(|j| pre[j].abs() / qinv[(j, j)].sqrt()).collect();
            let r = post
                .iter()
                .take(nn - 1)
                .position(|&b| b == 0.0)
                .expect("one element removed");
            let best = scores.iter().cloned().fold(f64::INFINITY, f64::min);
            assert!(
                (scores[r] - best).abs() <= 1e-9 * best.max(1e-12),
                "removed a non-minimal element"
            );
            assert!(
                (damage - scores[r]).abs() <= 1e-6 * scores[r].max(1e-9),
                "damage {damage} vs score {}",
                scores[r]
            );
        },
    );
    assert!(checked > 20, "too few budget steps: {checked}");
}

/// INV-P4: the same for MTBPRJ-2, the H'-norm summed over tasks equals ‖d_r‖.
#[test]
fn removal_damage_equals_the_score_mtbprj2() {
    let (n, d, k) = (400, 3, 4);
    let (x, tasks, y) = stream(n, d, k, 8);
    let kernel = BaseKernel::rbf(4.0).unwrap();
    let tk = TaskKernel::from_edges(k, &[(0, 1, 1.0), (1, 2, 0.5)]).unwrap();
    let mut m = mtbprj2(&tk, kernel, d, false, params(9, 0.05));
    let checked = each_eviction(
        &mut m,
        (&x, &tasks, &y),
        d,
        |m: &MTBPRJ2| m.counters.n_evictions,
        |before, m, t| {
            let i = tasks[t] as usize;
            let mut elems = elements(&before.dict);
            let mut pre: Vec<Vec<f64>> = (0..k)
                .map(|l| elems.iter().map(|e| before.weight(l, e.3)).collect())
                .collect();
            elems.push((x[t * d..(t + 1) * d].to_vec(), i, m.counters.n_seen, usize::MAX));
            for (l, p) in pre.iter_mut().enumerate() {
                p.push(y[t] * before.tasks.get(l, i));
            }
            let post_elems = elements(&m.dict);
            let nn = elems.len();
            let h = DMatrix::from_fn(nn, nn, |a, b| {
                kernel.eval(&Row::Dense(&elems[a].0), &Row::Dense(&elems[b].0))
            });
            let qinv = h.clone().try_inverse().unwrap();
            let mut damage2 = 0.0;
            for (l, pre_l) in pre.iter().enumerate() {
                let post: Vec<f64> = elems
                    .iter()
                    .map(|e| post_elems.iter().find(|p| p.2 == e.2).map_or(0.0, |p| m.weight(l, p.3)))
                    .collect();
                let diff = DVector::from_fn(nn, |a, _| pre_l[a] - post[a]);
                damage2 += (diff.transpose() * &h * &diff)[(0, 0)];
            }
            let r = elems
                .iter()
                .position(|e| !post_elems.iter().any(|p| p.2 == e.2))
                .unwrap();
            let norm: f64 = (0..k).map(|l| pre[l][r] * pre[l][r]).sum::<f64>().sqrt();
            let dr = norm / qinv[(r, r)].sqrt();
            assert!(
                (damage2.sqrt() - dr).abs() <= 1e-6 * dr.max(1e-9),
                "{} vs {dr}",
                damage2.sqrt()
            );
        },
    );
    assert!(checked > 20, "too few budget steps: {checked}");
}

/// INV-P5: a mistake on an exact duplicate is absorbed by projection with α = e_j, and the
/// function equals the one obtained by inserting the duplicate.
#[test]
fn duplicates_are_absorbed_by_projection() {
    let d = 3;
    let kernel = BaseKernel::rbf(2.0).unwrap();
    let tk = TaskKernel::complete(2).unwrap();
    let pts = [[0.1, 0.5, 0.9], [0.8, 0.2, 0.4], [0.3, 0.3, 0.7]];
    let mut m = MTBPRJ::build(&params(10, 0.0), &KernelSetting::new(&tk, kernel, d)).unwrap();
    let mut m2 = mtbprj2(&tk, kernel, d, false, params(10, 0.0));
    let mut scratch = Scratch::default();
    let labels = [1.0, -1.0, 1.0];
    for (p, &yl) in pts.iter().zip(&labels) {
        m.update(Row::Dense(p), 0, yl, 0.0, &mut scratch).unwrap();
        m2.update(Row::Dense(p), 0, yl, 0.0, &mut scratch).unwrap();
    }
    assert_eq!(m.n_active(), 3);
    let probes: Vec<[f64; 3]> = (0..20).map(|a| [a as f64 / 20.0, 0.5, 1.0 - a as f64 / 25.0]).collect();
    for model in [&mut m as &mut dyn OnlineLearner, &mut m2] {
        let before: Vec<(f64, f64)> = probes
            .iter()
            .map(|p| {
                (
                    model.score(Row::Dense(p), 0, &mut scratch),
                    model.score(Row::Dense(p), 1, &mut scratch),
                )
            })
            .collect();
        // Force an update-mistake on the duplicate of element 1 (task 0) with label -1.
        model.update(Row::Dense(&pts[1]), 0, -1.0, 0.0, &mut scratch).unwrap();
        assert_eq!(model.n_active(), 3, "a duplicate must not be inserted");
        for (p, (f0, f1)) in probes.iter().zip(before) {
            let kv = kernel.eval(&Row::Dense(p), &Row::Dense(&pts[1]));
            let tk = TaskKernel::complete(2).unwrap();
            let g0 = model.score(Row::Dense(p), 0, &mut scratch);
            let g1 = model.score(Row::Dense(p), 1, &mut scratch);
            assert!((g0 - (f0 - tk.get(0, 0) * kv)).abs() < 1e-9);
            assert!((g1 - (f1 - tk.get(0, 1) * kv)).abs() < 1e-9);
        }
    }
    assert_eq!(m.n_projections(), 1);
    assert_eq!(m2.counters.n_projections, 1);
}

fn run(model: &mut dyn OnlineLearner, x: &[f64], tasks: &[i64], y: &[f64], d: usize) -> Vec<f64> {
    learn_row_by_row(model, &Rows::dense(x, y.len(), d), tasks, y)
}

/// INV-B4: with one task MTBPRJ equals MTBPRJ-2.
#[test]
fn one_task_mtbprj_equals_mtbprj2() {
    let (n, d) = (600, 4);
    let (x, _, y) = stream(n, d, 1, 12);
    let tasks = vec![0i64; n];
    let kernel = BaseKernel::rbf(2.0).unwrap();
    for graph in [TaskKernel::complete(1).unwrap(), TaskKernel::disconnected(1).unwrap()] {
        let mut a = MTBPRJ::build(&params(15, 0.1), &KernelSetting::new(&graph, kernel, d)).unwrap();
        let mut b = mtbprj2(&graph, kernel, d, false, params(15, 0.1));
        let fa = run(&mut a, &x, &tasks, &y, d);
        let fb = run(&mut b, &x, &tasks, &y, d);
        for (p, q) in fa.iter().zip(&fb) {
            assert!((p - q).abs() <= 1e-9 * q.abs().max(1.0), "{p} vs {q}");
        }
        assert!(a.n_evictions() > 10);
        assert_eq!(a.n_evictions(), b.counters.n_evictions);
    }
}

/// INV-B1 / INV-B5: with B >= n and η = 0 on well-conditioned rbf data, MTBPRJ equals the
/// multitask Perceptron and MTBPRJ-2 with G = D equals the battery.
#[test]
fn unbounded_eta_zero_equals_the_perceptron() {
    let (n, d, k) = (300, 3, 3);
    let (x, tasks, y) = stream(n, d, k, 5);
    let kernel = BaseKernel::rbf(8.0).unwrap();
    for (graph, two) in [
        (TaskKernel::complete(k).unwrap(), false),
        (TaskKernel::from_edges(k, &[(0, 2, 1.0)]).unwrap(), false),
        (TaskKernel::disconnected(k).unwrap(), true),
    ] {
        let mut p = MTPerceptron::build(&NoParams, &KernelSetting::new(&graph.clone(), kernel, d)).unwrap();
        let fp = run(&mut p, &x, &tasks, &y, d);
        let fq = if two {
            let mut m = mtbprj2(&graph, kernel, d, false, params(n, 0.0));
            run(&mut m, &x, &tasks, &y, d)
        } else {
            let mut m = MTBPRJ::build(&params(n, 0.0), &KernelSetting::new(&graph, kernel, d)).unwrap();
            run(&mut m, &x, &tasks, &y, d)
        };
        for (a, b) in fp.iter().zip(&fq) {
            assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0));
        }
    }
}

/// INV-Q2 and persistence: a forced recompute, or a serde round trip, mid-stream changes
/// nothing beyond rounding.
#[test]
fn rebuild_and_serde_round_trip_mid_stream() {
    let (n, d, k) = (500, 4, 3);
    let (x, tasks, y) = stream(n, d, k, 6);
    let (kernel, tk) = rbf_on_complete(3.0, k);
    let half = 250 * d;
    let mut a = MTBPRJ::build(&params(20, 0.05), &KernelSetting::new(&tk, kernel, d)).unwrap();
    let mut b = mtbprj2(&tk, kernel, d, false, params(20, 0.05));
    run(&mut a, &x[..half], &tasks[..250], &y[..250], d);
    run(&mut b, &x[..half], &tasks[..250], &y[..250], d);
    let (mut a_reb, mut b_reb) = (a.clone(), b.clone());
    a_reb.rebuild_caches();
    b_reb.rebuild_caches();
    let mut a_ser: MTBPRJ = bincode::deserialize(&bincode::serialize(&a).unwrap()).unwrap();
    let mut b_ser: MTBPRJ2 = bincode::deserialize(&bincode::serialize(&b).unwrap()).unwrap();
    assert_eq!(a_ser, a);
    assert_eq!(b_ser, b);
    let rest = (&x[half..], &tasks[250..], &y[250..]);
    let fa = run(&mut a, rest.0, rest.1, rest.2, d);
    let fb = run(&mut b, rest.0, rest.1, rest.2, d);
    let fa_ser = run(&mut a_ser, rest.0, rest.1, rest.2, d);
    let fb_ser = run(&mut b_ser, rest.0, rest.1, rest.2, d);
    assert_eq!(fa, fa_ser);
    assert_eq!(fb, fb_ser);
    let fa_reb = run(&mut a_reb, rest.0, rest.1, rest.2, d);
    let fb_reb = run(&mut b_reb, rest.0, rest.1, rest.2, d);
    for (p, q) in fa.iter().zip(&fa_reb).chain(fb.iter().zip(&fb_reb)) {
        assert!((p - q).abs() <= 1e-9 * p.abs().max(1.0), "{p} vs {q}");
    }
}

#[test]
fn same_instance_in_several_tasks_keeps_the_engine_accurate() {
    // The multitask Gram matrix of one x in several tasks is T ⊗ K'(x,x): full rank for
    // T = (I + L)^{-1}, but with many repeats the set gets close to singular.
    let (d, k) = (3, 4);
    let kernel = BaseKernel::rbf(1.0).unwrap();
    let tk = TaskKernel::complete(k).unwrap();
    let mut m = MTBPRJ::build(&params(30, 0.01), &KernelSetting::new(&tk, kernel, d)).unwrap();
    let mut rng = SplitMix64::new(31);
    let base: Vec<[f64; 3]> = (0..6)
        .map(|_| [unif(&mut rng), unif(&mut rng), unif(&mut rng)])
        .collect();
    let mut scratch = Scratch::default();
    for step in 0..2000 {
        let p = base[rng.below(6) as usize];
        let i = rng.below(k as u64) as usize;
        let y = if (step / 7) % 2 == 0 { 1.0 } else { -1.0 };
        m.update(Row::Dense(&p), i, y, 0.0, &mut scratch).unwrap();
        assert!(m.n_active() <= 30);
    }
    assert!(m.gram.residual() < 1e-6, "residual {:e}", m.gram.residual());
    assert!(m.betas_in_order().iter().all(|b| b.is_finite()));
    assert!(m.n_active() <= 24, "at most |distinct x| * k elements are independent");
}

#[test]
fn mtbprj2_allocates_blocks_lazily() {
    let (n, d, k) = (300, 3, 5);
    let (x, mut tasks, y) = stream(n, d, k, 2);
    tasks.iter_mut().for_each(|t| *t %= 2); // only tasks 0 and 1 appear
    let kernel = BaseKernel::rbf(3.0).unwrap();
    let mut m = mtbprj2(&TaskKernel::disconnected(k).unwrap(), kernel, d, false, params(20, 0.1));
    run(&mut m, &x, &tasks, &y, d);
    let diag: std::collections::HashMap<_, _> = m.diagnostics().into_iter().collect();
    assert_eq!(diag["n_allocated_blocks"], 2.0);
    assert_eq!(diag["n_weights"], 2.0 * m.n_active() as f64);
    let mut c = mtbprj2(&TaskKernel::complete(k).unwrap(), kernel, d, false, params(20, 0.1));
    run(&mut c, &x, &tasks, &y, d);
    assert_eq!(c.n_weights(), k * c.n_active());
    // An untouched task of the disconnected graph scores 0 without any kernel evaluation.
    let mut scratch = Scratch::default();
    assert_eq!(m.score(Row::Dense(&x[..d]), 4, &mut scratch), 0.0);
}

#[test]
fn literal_line14_differs_only_with_several_tasks() {
    let (n, d, k) = (500, 3, 3);
    let (x, tasks, y) = stream(n, d, k, 9);
    let (kernel, tk) = rbf_on_complete(3.0, k);
    let mut a = mtbprj2(&tk, kernel, d, false, params(10, 0.05));
    let literal = MTBPRJ2Params::from_shared(params(10, 0.05), true);
    let mut b = MTBPRJ2::build(&literal, &KernelSetting::new(&tk, kernel, d)).unwrap();
    assert_ne!(run(&mut a, &x, &tasks, &y, d), run(&mut b, &x, &tasks, &y, d));
    let ones = vec![0i64; n];
    let mut a1 = mtbprj2(
        &TaskKernel::disconnected(1).unwrap(),
        kernel,
        d,
        false,
        params(10, 0.05),
    );
    let mut b1 = MTBPRJ2::build(
        &literal,
        &KernelSetting::new(&TaskKernel::disconnected(1).unwrap(), kernel, d),
    )
    .unwrap();
    // With T = [1] the extra factor is 1.
    assert_eq!(run(&mut a1, &x, &ones, &y, d), run(&mut b1, &x, &ones, &y, d));
    let _ = learn(&mut a1, &Rows::dense(&x[..d], 1, d), &[0], &[1.0]).unwrap();
}

#[test]
fn overflowing_kernel_values_leave_the_model_unchanged() {
    // (1e200 <x,x'> + 1)^3 overflows: the update is refused and the model is unchanged.
    let kernel = BaseKernel::poly(3, 1e200, 1.0).unwrap();
    let tk = TaskKernel::complete(2).unwrap();
    let mut a = MTBPRJ::build(&params(4, 0.01), &KernelSetting::new(&tk, kernel, 2)).unwrap();
    let mut b = mtbprj2(&tk, kernel, 2, false, params(4, 0.01));
    let mut scratch = Scratch::default();
    for model in [&mut a as &mut dyn OnlineLearner, &mut b] {
        model
            .update(Row::Dense(&[1e-100, 0.0]), 0, 1.0, 0.0, &mut scratch)
            .unwrap();
        assert_eq!(model.n_active(), 1);
        let before = (model.n_updates(), model.diagnostics());
        let err = model
            .update(Row::Dense(&[1e10, 1e10]), 1, -1.0, 0.0, &mut scratch)
            .unwrap_err();
        assert!(err.to_string().contains("not finite"), "{err}");
        assert_eq!(model.n_active(), 1);
        assert_eq!((model.n_updates(), model.diagnostics()), before);
        let f = model.score(Row::Dense(&[1e-100, 0.0]), 0, &mut scratch);
        assert!(f.is_finite());
    }
}
