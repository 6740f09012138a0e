//! MTLinear's unit tests: the closed-form steps, the factor, the storage layouts, the journal.
use super::loss::logistic_proximal_gain;
use super::*;
use crate::data::Rows;
use crate::learner::learn;
use crate::learner::test_support::stream;

fn labelled(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<i64>) {
    let sign = |task: usize| if task.is_multiple_of(2) { 1.0 } else { -0.5 };
    let (x, tasks, y) = stream(n, d, k, seed, |x, task, _| x[0] + sign(task) * x[1] > 0.1);
    (x, y, tasks)
}

fn params(loss: &str, rule: &str, hash_bits: Option<u32>) -> MTLinearParams {
    MTLinearParams {
        loss: Loss::parse(loss).unwrap(),
        rule: UpdateRule::parse(rule).unwrap(),
        learning_rate: 0.5,
        fit_intercept: true,
        hash_bits,
        shared_rate: 1.0,
        ..MTLinearParams::default()
    }
    .check()
    .map(Checked::into_inner)
    .unwrap()
}

#[test]
fn logistic_gain_solves_the_flow() {
    for &m0 in &[-800.0, -30.0, -2.0, 0.0, 0.7, 5.0, 30.0, 800.0] {
        for &a in &[1e-12, 1e-3, 0.5, 3.0, 1e3, 1e8] {
            let delta = logistic_margin_gain(m0, a);
            assert!(delta >= 0.0 && delta.is_finite(), "m0={m0} a={a}: {delta}");
            if m0.abs() < 100.0 {
                // (m0 + δ) + e^{m0+δ} = m0 + e^{m0} + a
                let lhs = delta + m0.exp() * delta.exp_m1();
                assert!((lhs - a).abs() <= 1e-12 * a.max(1.0), "m0={m0} a={a}: {lhs}");
            }
        }
    }
    // Small steps: the first-order (plain gradient) step.
    let d = logistic_margin_gain(0.3, 1e-9);
    assert!((d / (1e-9 * sigmoid(-0.3)) - 1.0).abs() < 1e-9);
}

#[test]
fn logistic_proximal_gain_solves_its_equation() {
    for &m0 in &[-800.0, -30.0, -2.0, 0.0, 0.7, 5.0, 30.0, 800.0] {
        for &a in &[1e-12, 1e-3, 0.5, 3.0, 1e3, 1e8, 1e300] {
            let delta = logistic_proximal_gain(m0, a);
            assert!(delta >= 0.0 && delta.is_finite(), "m0={m0} a={a}: {delta}");
            if m0.abs() < 100.0 {
                let lhs = delta * (1.0 + (m0 + delta).exp());
                assert!((lhs - a).abs() <= 1e-12 * a, "m0={m0} a={a}: {lhs}");
            }
        }
    }
    // AROW's hinge step: the margin moves by v (1 - m)/(v + r), r = 1/η; none beyond margin 1.
    let (v, eta) = (0.8, 2.0);
    assert!((v * Loss::Hinge.proximal_step(1.0, 0.3, eta, v) - v * 0.7 / (v + 0.5)).abs() < 1e-15);
    assert_eq!(Loss::Hinge.proximal_step(-1.0, -1.5, eta, v), 0.0);
}

#[test]
fn shared_rate_moves_the_shared_share_of_the_first_step() {
    // Complete graph k = 2, one task-0 logistic example x = (2, 0): each of the 4 coordinates
    // (own and shared, feature and intercept) has u² r = 2 under the normalized rule and
    // μ = 1/2, so h = 2 (1 + ρ); the shared block carries ρ/(1 + ρ) of the margin gain δ,
    // which is all task 1 sees. Graphs without a shared block ignore ρ.
    let tk = TaskKernel::complete(2).unwrap();
    for rho in [0.5, 1.0, 3.0] {
        let p = params("logistic", "normalized", None).with_shared_rate(rho).unwrap();
        let mut m = MTLinear::build(&p, &GraphSetting::new(&tk, 2)).unwrap();
        run(&mut m, &[2.0, 0.0], &[1.0], &[0], 2);
        let delta = logistic_margin_gain(0.0, 0.5 * 2.0 * (1.0 + rho));
        let mut scratch = Scratch::default();
        let own_and_shared = m.score(Row::Dense(&[2.0, 0.0]), 0, &mut scratch);
        let shared = m.score(Row::Dense(&[2.0, 0.0]), 1, &mut scratch);
        assert!(
            (own_and_shared - delta).abs() < 1e-6 * delta,
            "{rho}: {own_and_shared} vs {delta}"
        );
        assert!(
            (shared - delta * rho / (1.0 + rho)).abs() < 1e-6 * delta,
            "{rho}: {shared}"
        );
    }
    let (x, y, tasks) = labelled(200, 4, 3, 5);
    let tk = TaskKernel::disconnected(3).unwrap();
    let mut plain = MTLinear::build(&params("logistic", "normalized", None), &GraphSetting::new(&tk, 4)).unwrap();
    let p = params("logistic", "normalized", None).with_shared_rate(3.0).unwrap();
    let mut rho = MTLinear::build(&p, &GraphSetting::new(&tk, 4)).unwrap();
    assert_eq!(run(&mut plain, &x, &y, &tasks, 4), run(&mut rho, &x, &y, &tasks, 4));
}

#[test]
fn a_state_with_a_bad_shared_rate_is_refused() {
    let tk = TaskKernel::complete(2).unwrap();
    let mut m = MTLinear::build(&params("logistic", "normalized", None), &GraphSetting::new(&tk, 2)).unwrap();
    assert!(m.check_state().is_ok());
    for rho in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        m.params.shared_rate = rho;
        assert!(m.check_state().is_err(), "{rho}");
    }
}

#[test]
fn hinge_and_squared_steps_do_not_overshoot() {
    // A huge rate reaches the hinge exactly, and the squared flow approaches the label.
    let s = Loss::Hinge.invariant_step(1.0, -2.0, 1e9, 4.0);
    assert!((-2.0 + 4.0 * s - 1.0).abs() < 1e-12);
    let s = Loss::Squared.invariant_step(-1.0, 3.0, 1e9, 2.0);
    assert!((3.0 + 2.0 * s + 1.0).abs() < 1e-12);
}

fn csr<'a>(indptr: &'a [i64], indices: &'a [u32], data: &'a [f64], n_cols: usize) -> Rows<'a> {
    Rows::Csr {
        indptr,
        indices,
        data,
        n_cols,
    }
}

fn run(model: &mut MTLinear, x: &[f64], y: &[f64], tasks: &[i64], d: usize) -> Vec<f64> {
    let rows = Rows::dense(x, y.len(), d);
    learn(model, &rows, tasks, y).unwrap()
}

#[test]
fn disconnected_equals_independent_learners() {
    for (rule, seed) in [("normalized", 1), ("arow", 4)] {
        let (n, d, k) = (300, 5, 3);
        let (x, y, tasks) = labelled(n, d, k, seed);
        let tk = TaskKernel::disconnected(k).unwrap();
        let mut joint = MTLinear::build(&params("logistic", rule, None), &GraphSetting::new(&tk, d)).unwrap();
        let joint_scores = run(&mut joint, &x, &y, &tasks, d);
        let one = TaskKernel::disconnected(1).unwrap();
        for task in 0..k {
            let idx: Vec<usize> = (0..n).filter(|&t| tasks[t] == task as i64).collect();
            let xs: Vec<f64> = idx.iter().flat_map(|&t| x[t * d..(t + 1) * d].to_vec()).collect();
            let ys: Vec<f64> = idx.iter().map(|&t| y[t]).collect();
            let mut single = MTLinear::build(&params("logistic", rule, None), &GraphSetting::new(&one, d)).unwrap();
            let s = run(&mut single, &xs, &ys, &vec![0; idx.len()], d);
            let expected: Vec<f64> = idx.iter().map(|&t| joint_scores[t]).collect();
            assert_eq!(s, expected, "{rule}");
        }
    }
}

#[test]
fn hashing_holds_every_block_in_one_table() {
    let (n, d, k) = (200, 6, 40);
    let (x, y, tasks) = labelled(n, d, k, 2);
    let tk = TaskKernel::complete(k).unwrap();
    for rule in ["normalized", "adagrad", "sgd", "arow"] {
        let mut small = MTLinear::build(&params("hinge", rule, Some(4)), &GraphSetting::new(&tk, d)).unwrap();
        run(&mut small, &x, &y, &tasks, d);
        assert_eq!(small.width(), 16);
        let stride = small.params.rule.stride();
        // The table, plus counters of one component: nothing per task.
        assert_eq!(
            small.memory_bytes(),
            16 * stride * 4 + std::mem::size_of::<ComponentStats>()
        );
    }
}

/// The same stream learned by the dense and the sparse exact layouts gives the same bits.
#[test]
fn sparse_and_dense_exact_layouts_agree_bit_for_bit() {
    let (n, d, k) = (300, 5, 4);
    let (x, y, tasks) = labelled(n, d, k, 5);
    let tk = TaskKernel::complete(k).unwrap();
    for rule in ["normalized", "adagrad", "sgd", "arow"] {
        let mut dense = MTLinear::build(&params("logistic", rule, None), &GraphSetting::new(&tk, d)).unwrap();
        let mut sparse = dense.clone();
        sparse.store = Store::Sparse(SparseCells::new(dense.params.rule.stride()));
        let (a, b) = (run(&mut dense, &x, &y, &tasks, d), run(&mut sparse, &x, &y, &tasks, d));
        assert_eq!(a, b, "{rule}");
        assert_eq!(dense.block_weights(usize::MAX), sparse.block_weights(usize::MAX));
        let rows = Rows::dense(&x, n, d);
        assert_eq!(
            crate::learner::decision(&sparse, &rows, &tasks).unwrap(),
            crate::learner::decision(&dense, &rows, &tasks).unwrap()
        );
    }
}

/// A failing row at any position leaves the model equal to before (cells, counters, tasks
/// added by the call, allocations), in every layout; the journal is what undoes it.
#[test]
fn a_failing_row_anywhere_leaves_every_layout_as_before() {
    use crate::learner::{learn_grown, OnlineLearner};
    let (n, d) = (60, 6);
    let (x, y, _) = labelled(n, d, 3, 7);
    // Dense; dense until the failing call's three new tasks make it sparse (7 blocks of 2^22
    // cells exceed DENSE_MAX_BYTES); sparse from the start; hashed.
    for (bits, width) in [(None, d), (None, 1 << 22), (None, 1 << 25), (Some(5), d)] {
        let wide = width;
        let tk = TaskKernel::complete_open(1).unwrap();
        let mut model =
            MTLinear::build(&params("squared", "normalized", bits), &GraphSetting::new(&tk, width)).unwrap();
        let ok_tasks: Vec<i64> = (0..20).map(|t| t % 2).collect();
        let dense_rows = |x: &[f64]| -> (Vec<u32>, Vec<f64>, Vec<i64>) {
            // the same values as a sparse batch over `width` columns
            let (mut idx, mut val, mut ptr) = (Vec::new(), Vec::new(), vec![0i64]);
            for row in x.chunks(d) {
                for (j, &v) in row.iter().enumerate() {
                    if v != 0.0 {
                        idx.push((j * (width / d)) as u32);
                        val.push(v);
                    }
                }
                ptr.push(idx.len() as i64);
            }
            (idx, val, ptr)
        };
        let (i0, v0, p0) = dense_rows(&x[..20 * d]);
        learn_grown(&mut model, 2, &csr(&p0, &i0, &v0, width), &ok_tasks, &y[..20]).unwrap();
        let before = model.clone();
        let bytes = crate::state::encode(&model).unwrap();
        for bad_row in [0usize, 5, 19] {
            let mut xs = x[20 * d..40 * d].to_vec();
            xs[bad_row * d] = 1e30; // passes validation; its update overflows f32
            let (i1, v1, p1) = dense_rows(&xs);
            let tasks: Vec<i64> = (0..20).map(|t| 2 + t % 3).collect(); // two new tasks, 2..=4
            let rows = csr(&p1, &i1, &v1, width);
            let err = learn_grown(&mut model, 3, &rows, &tasks, &y[20..40]);
            assert!(
                matches!(err, Err(Error::Numerical(_))),
                "{bits:?} {wide} row {bad_row}: {err:?}"
            );
            assert_eq!(model, before, "{bits:?} {wide} row {bad_row}");
            assert_eq!(crate::state::encode(&model).unwrap(), bytes);
            assert_eq!(model.n_tasks(), 3);
            assert_eq!(matches!(model.store, Store::Sparse(_)), width == 1 << 25);
        }
        // The journal was left clean: the next call learns as a copy of the model would.
        let mut copy = before.clone();
        let (i2, v2, p2) = dense_rows(&x[40 * d..]);
        let rows = csr(&p2, &i2, &v2, width);
        let t: Vec<i64> = (0..20).map(|t| t % 2).collect();
        assert_eq!(
            crate::learner::learn(&mut model, &rows, &t, &y[40..]).unwrap(),
            crate::learner::learn(&mut copy, &rows, &t, &y[40..]).unwrap()
        );
        assert_eq!(model, copy);
    }
}

/// A call that writes more cells than the model holds switches its journal to a snapshot of
/// the model at the start; a failure at its last row still restores the model exactly.
#[test]
fn a_long_failing_call_is_undone_through_its_snapshot() {
    let (n, d) = (6000, 6);
    let (mut x, y, tasks) = labelled(n, d, 4, 9);
    for (bits, rule) in [(None, "normalized"), (Some(6), "adagrad")] {
        let tk = TaskKernel::complete(4).unwrap();
        let mut model = MTLinear::build(&params("squared", rule, bits), &GraphSetting::new(&tk, d)).unwrap();
        run(&mut model, &x[..60 * d], &y[..60], &tasks[..60], d);
        let before = crate::state::encode(&model).unwrap();
        x[(n - 1) * d] = 1e30;
        let rows = Rows::dense(&x, n, d);
        assert!(learn(&mut model, &rows, &tasks, &y).is_err());
        assert!(model.journal.snapshot.is_none() && !model.journal.active);
        assert_eq!(crate::state::encode(&model).unwrap(), before, "{bits:?}");
        x[(n - 1) * d] = 0.5;
    }
}

#[test]
fn a_huge_feature_index_costs_the_cells_it_touches() {
    let width = 1usize << 31;
    let tk = TaskKernel::complete_open(1).unwrap();
    let mut model = MTLinear::build(&params("logistic", "normalized", None), &GraphSetting::new(&tk, width)).unwrap();
    let (idx, val, ptr) = (vec![7u32, (1 << 31) - 1], vec![1.0, 2.0], vec![0i64, 2]);
    crate::learner::learn_grown(&mut model, 1, &csr(&ptr, &idx, &val, width), &[0], &[1.0]).unwrap();
    // Two blocks (own and shared) x (two features + intercept): six cells.
    assert_eq!(model.diagnostics()[2], ("n_cells", 6.0));
    assert!(model.memory_bytes() < 4096, "{}", model.memory_bytes());
    assert!(model.arrays().is_empty()); // no dense picture of 2^31 columns
}

#[test]
fn learns_and_touches_only_its_blocks() {
    let (n, d, k) = (2000, 4, 4);
    let (x, y, tasks) = labelled(n, d, k, 3);
    let tk = TaskKernel::complete(k).unwrap();
    for rule in ["normalized", "arow"] {
        for loss in ["logistic", "hinge", "squared"] {
            let mut m = MTLinear::build(&params(loss, rule, None), &GraphSetting::new(&tk, d)).unwrap();
            let scores = run(&mut m, &x, &y, &tasks, d);
            let late_errors = (n / 2..n).filter(|&t| (scores[t] >= 0.0) != (y[t] > 0.0)).count();
            assert!(late_errors < n / 10, "{rule} {loss}: {late_errors}");
        }
    }
    // Only task 2 seen: its block and the shared block exist.
    let mut m = MTLinear::build(&params("logistic", "normalized", None), &GraphSetting::new(&tk, d)).unwrap();
    run(&mut m, &x[..d], &y[..1], &[2], d);
    assert_eq!(m.diagnostics()[2], ("n_cells", 2.0 * (d + 1) as f64));
    assert!(m.block_weights(usize::MAX).unwrap()[..2 * (d + 1)]
        .iter()
        .all(|&w| w == 0.0));
}

/// Random coordinates of one update: u (some tiny, some negative), the gathered state
/// (some N = 0, some N above |u|), rates, and distinct slots in a block of stride 3.
#[allow(clippy::type_complexity)]
fn random_coords(len: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<usize>, Vec<f32>) {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut draw = |scale: f64| (unit() - 0.3) * scale;
    let u: Vec<f64> = (0..len).map(|i| draw(if i % 5 == 0 { 1e-3 } else { 2.0 })).collect();
    let n_slots = 2 * len + 3;
    let mut block = vec![0.0f32; 3 * n_slots];
    for (i, cell) in block.chunks_exact_mut(3).enumerate() {
        cell[0] = draw(3.0) as f32;
        cell[1] = draw(5.0).abs() as f32;
        cell[2] = if i % 3 == 0 { 0.0 } else { draw(2.0).abs() as f32 };
    }
    let slot: Vec<usize> = (0..len).map(|i| 3 * (2 * i + (i % 2))).collect();
    let cell = |c: usize| slot.iter().map(|&at| f64::from(block[at + c])).collect::<Vec<f64>>();
    (u, cell(0), cell(1), cell(2), slot, block)
}

/// The lane kernels give the bits of the scalar rule in every build (the AVX2 one where the
/// CPU has it), whatever the tail length: the rates and sums in the 4-lane order, the bounds,
/// and the vectorised write-back of distinct slots against the read-modify-write one.
#[test]
fn lane_kernels_match_the_scalar_rule_bit_for_bit() {
    type Portable = [f64; 4];
    for len in [0usize, 1, 3, 4, 5, 8, 11, 37] {
        let (u, w, g, n, slot, block) = random_coords(len, len as u64 + 7);
        let g2 = 0.37;
        // Scalar reference: element i in lane i mod 4, lanes summed pairwise.
        let (mut rates, mut h, mut norm) = (vec![0.0; len], [0.0; 4], [0.0; 4]);
        for i in 0..len {
            let (r, dh, dn) = normalized_rate(g2, u[i], g[i], n[i]);
            (rates[i], h[i % 4], norm[i % 4]) = (r, h[i % 4] + dh, norm[i % 4] + dn);
        }
        let expected = ((h[0] + h[1]) + (h[2] + h[3]), (norm[0] + norm[1]) + (norm[2] + norm[3]));
        let mut got = vec![0.0; len];
        // SAFETY: plain arrays need no CPU feature.
        let sums = unsafe { normalized_rates_lanes::<Portable>(g2, &u, &g, &n, &mut got) };
        assert_eq!((sums, &got), (expected, &rates), "len {len}");
        let bounds = unsafe { write_bounds_lanes::<Portable>(&u, &rates, &w, &g) };
        let max = |v: &[f64]| v.iter().fold(0.0f64, |m, &x| m.max(x));
        assert_eq!(bounds.max_w, max(&w.iter().map(|v| v.abs()).collect::<Vec<_>>()));
        assert_eq!(
            (bounds.max_g, bounds.max_u),
            (max(&g), max(&u.iter().map(|v| v.abs()).collect::<Vec<_>>()))
        );
        let sum_ur: f64 = u.iter().zip(&rates).map(|(u, r)| (u * r).abs()).sum();
        assert!((bounds.sum_ur - sum_ur).abs() <= 1e-12 * sum_ur && bounds.rates_finite);
        let mut bad = rates.clone();
        if len > 0 {
            bad[len - 1] = f64::INFINITY;
            assert!(!unsafe { write_bounds_lanes::<Portable>(&u, &bad, &w, &g) }.rates_finite);
        }
        for stride in [3usize, 2, 1] {
            // The same block laid out with `stride` floats per slot.
            let block: Vec<f32> = block.chunks_exact(3).flat_map(|c| c[..stride].to_vec()).collect();
            let slot: Vec<usize> = slot.iter().map(|&at| at / 3 * stride).collect();
            let mut scalar = block.clone();
            match stride {
                3 => write_block::<3>(&mut scalar, &slot, &u, &rates, g2, -0.8),
                2 => write_block::<2>(&mut scalar, &slot, &u, &rates, g2, -0.8),
                _ => write_block::<1>(&mut scalar, &slot, &u, &rates, g2, -0.8),
            }
            let args = WriteArgs {
                slot: &slot,
                u: &u,
                w: &w,
                g: &g,
                n: &n,
                rates: &rates,
                g2,
                scale: -0.8,
            };
            let mut lanes = block.clone();
            unsafe { write_distinct_stride::<Portable>(&mut lanes, stride, &args) };
            assert_eq!(lanes, scalar, "len {len}, stride {stride}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2(data: &mut [f32], stride: usize, args: &WriteArgs) -> (f64, f64, Vec<f64>) {
                    use std::arch::x86_64::__m256d;
                    write_distinct_stride::<__m256d>(data, stride, args);
                    let mut rates = vec![0.0; args.u.len()];
                    let sums = normalized_rates_lanes::<__m256d>(args.g2, args.u, args.g, args.n, &mut rates);
                    (sums.0, sums.1, rates)
                }
                let mut wide = block.clone();
                // SAFETY: the CPU has AVX2 (checked above).
                let (h, norm, wide_rates) = unsafe { avx2(&mut wide, stride, &args) };
                assert_eq!((wide, (h, norm), wide_rates), (scalar, expected, rates.clone()));
            }
        }
    }
}

#[test]
fn rejects_bad_parameters() {
    assert!(MTLinearParams {
        loss: Loss::Logistic,
        rule: UpdateRule::Sgd,
        learning_rate: 0.0,
        fit_intercept: true,
        hash_bits: None,
        shared_rate: 1.0,
        ..MTLinearParams::default()
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    assert!(MTLinearParams {
        loss: Loss::Logistic,
        rule: UpdateRule::Sgd,
        learning_rate: f64::NAN,
        fit_intercept: true,
        hash_bits: None,
        shared_rate: 1.0,
        ..MTLinearParams::default()
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    assert!(MTLinearParams {
        loss: Loss::Logistic,
        rule: UpdateRule::Sgd,
        learning_rate: 1.0,
        fit_intercept: true,
        hash_bits: Some(0),
        shared_rate: 1.0,
        ..MTLinearParams::default()
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    assert!(MTLinearParams {
        loss: Loss::Logistic,
        rule: UpdateRule::Sgd,
        learning_rate: 1.0,
        fit_intercept: true,
        hash_bits: Some(32),
        shared_rate: 1.0,
        ..MTLinearParams::default()
    }
    .check()
    .map(Checked::into_inner)
    .is_err());
    let ok = MTLinearParams {
        loss: Loss::Logistic,
        rule: UpdateRule::Sgd,
        learning_rate: 1.0,
        fit_intercept: true,
        hash_bits: None,
        shared_rate: 1.0,
        ..MTLinearParams::default()
    }
    .check()
    .map(Checked::into_inner)
    .unwrap();
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(ok.with_shared_rate(rho).is_err(), "{rho}");
    }
    assert_eq!(ok.with_shared_rate(2.5).unwrap().shared_rate, 2.5);
    assert!(Loss::parse("log").is_err());
    assert!(UpdateRule::parse("adam").is_err());
    let tk = TaskKernel::complete(2).unwrap();
    assert!(MTLinear::build(&params("logistic", "sgd", None), &GraphSetting::new(&tk, 0)).is_err());
}

/// Tasks that make the wide dense blocks sparse (`dense_fits`) and then leave, unreached by an
/// interrupted batch, bring the dense layout back: the model is the one that learned the rows
/// completed alone, byte for byte.
#[test]
fn an_interrupt_before_the_tasks_that_made_the_layout_sparse_brings_it_back() {
    use crate::learner::{learn_grown, OnlineLearner};
    let (d, width) = (6, 1usize << 22);
    let (x, y, _) = labelled(400, d, 2, 9);
    // Row r's d values at columns 0, width / d, ...: rows a..b are a CSR batch of their own.
    let idx: Vec<u32> = (0..400 * d).map(|i| ((i % d) * (width / d)) as u32).collect();
    let ptr: Vec<i64> = (0..=400).map(|r| (r * d) as i64).collect();
    let rows = |a: usize, b: usize| csr(&ptr[..=b - a], &idx[a * d..b * d], &x[a * d..b * d], width);
    let tk = TaskKernel::complete_open(2).unwrap();
    let mut cut = MTLinear::build(&params("logistic", "normalized", None), &GraphSetting::new(&tk, width)).unwrap();
    learn_grown(&mut cut, 0, &rows(0, 20), &[0, 1].repeat(10), &y[..20]).unwrap();
    let mut prefix = cut.clone();
    // Rows 20.. name tasks 2, 2, 3, 3, ...: the 190 tasks added make 193 blocks, sparse.
    let tasks: Vec<i64> = (0..380).map(|t| 2 + t / 2).collect();
    let outcome = crate::learner::test_support::interrupted_at_poll(2, || {
        learn_grown(&mut cut, 190, &rows(20, 400), &tasks, &y[20..])
    });
    let Err(Error::Interrupted { scores }) = outcome else {
        panic!("not interrupted: {outcome:?}");
    };
    let n = scores.len();
    let reached = (tasks[n - 1] - 1) as usize;
    assert!(
        n > 0 && reached <= 2,
        "{n} rows name {reached} new tasks: the layout would stay sparse"
    );
    learn_grown(&mut prefix, reached, &rows(20, 20 + n), &tasks[..n], &y[20..20 + n]).unwrap();
    assert!(matches!(prefix.store, Store::Dense { .. }));
    assert_eq!(cut.n_tasks(), 2 + reached);
    assert!(matches!(cut.store, Store::Dense { .. }));
    assert_eq!(
        crate::state::encode(&cut).unwrap(),
        crate::state::encode(&prefix).unwrap()
    );
}
