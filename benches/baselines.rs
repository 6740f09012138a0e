//! The baselines of ROMCO's paper (PA, OMTL, OMTRL, CW-COL, MTFL/TRML). Run with `cargo bench --bench baselines`.
//!
//! - `batch_mtl_retrain/{mtfl,trml}/n`: one warm-started retrain of MTFL/TRML on the first `n`
//!   examples of a dense 12-task, 400-feature stream (the warm start is the solution on the first
//!   `n - 100`, as in the online schedule), i.e. the per-retrain cost against examples seen;
//! - `svt_400x12`: one singular value thresholding of a 400 x 12 matrix (TRML's prox);
//! - `online_pass_2000x400`: one online pass of CW-COL, OMTRL, OMTL (linear, O(nnz) per example).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use omtl::data::Rows;
use omtl::learner::batch_mtl::{solve, svt};
use omtl::learner::{
    learn, Build, CwCol, CwColParams, GlobalNorm, LinearSetting, Omtl, OmtlParams, Omtrl, OmtrlParams, Regularizer,
    RelationUpdate, SolverOptions,
};
use omtl::rng::SplitMix64;

fn uniform(rng: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect()
}

/// A dense stream of related linear tasks with 10% label noise.
fn stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
    let mut rng = SplitMix64::new(seed);
    let x = uniform(&mut rng, n * d);
    let w0 = uniform(&mut rng, d);
    let dw = uniform(&mut rng, k * d);
    let tasks: Vec<i64> = (0..n).map(|_| rng.below(k as u64) as i64).collect();
    let y = (0..n)
        .map(|t| {
            let i = tasks[t] as usize;
            let m: f64 = (0..d).map(|j| x[t * d + j] * (w0[j] + 0.7 * dw[i * d + j])).sum();
            let flip = rng.below(10) == 0;
            if (m >= 0.0) != flip {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    (x, tasks, y)
}

fn retrain_cost(c: &mut Criterion) {
    let (n_max, d, k) = (18_000usize, 400usize, 12usize);
    let (x, tasks, y) = stream(n_max, d, k, 3);
    let t32: Vec<u32> = tasks.iter().map(|&t| t as u32).collect();
    let mut group = c.benchmark_group("batch_mtl_retrain");
    group.sample_size(10);
    for (name, reg) in [("mtfl", Regularizer::L21), ("trml", Regularizer::Trace)] {
        for &n in &[1000usize, 4000, 9000, 18_000] {
            // The warm start: the solution on the first n - 100 examples.
            let prev = Rows::dense(&x[..(n - 100) * d], n - 100, d);
            let (mut w0, mut c0) = (vec![0.0; d * k], vec![0.0; k]);
            solve(
                &prev,
                &t32[..n - 100],
                &y[..n - 100],
                k,
                reg,
                1e-2,
                &mut w0,
                &mut c0,
                SolverOptions::default(),
            )
            .expect("no interrupt hook is installed");
            let rows = Rows::dense(&x[..n * d], n, d);
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    let (mut w, mut c) = (w0.clone(), c0.clone());
                    solve(
                        &rows,
                        &t32[..n],
                        &y[..n],
                        k,
                        reg,
                        1e-2,
                        &mut w,
                        &mut c,
                        SolverOptions::default(),
                    )
                    .expect("no interrupt hook is installed")
                })
            });
        }
    }
    group.finish();
}

fn svt_cost(c: &mut Criterion) {
    let (d, k) = (400, 12);
    let m = uniform(&mut SplitMix64::new(5), d * k);
    c.bench_function("svt_400x12", |b| {
        b.iter(|| {
            let mut w = m.clone();
            svt(black_box(&mut w), d, k, 0.5)
        })
    });
}

fn online_passes(c: &mut Criterion) {
    let (n, d, k) = (2000usize, 400usize, 12usize);
    let (x, tasks, y) = stream(n, d, k, 9);
    let rows = Rows::dense(&x, n, d);
    let mut group = c.benchmark_group("online_pass_2000x400");
    group.throughput(Throughput::Elements(n as u64));
    group.sample_size(10);
    group.bench_function("cwcol", |b| {
        b.iter(|| {
            learn(
                &mut CwCol::build(
                    &CwColParams {
                        confidence: 0.85,
                        a: 1.0,
                        omega: 0.5,
                    },
                    &LinearSetting::new(k, d),
                )
                .unwrap(),
                &rows,
                &tasks,
                &y,
            )
            .unwrap()
        })
    });
    group.bench_function("omtrl_batch", |b| {
        b.iter(|| {
            learn(
                &mut Omtrl::build(
                    &OmtrlParams {
                        relation_update: RelationUpdate::Batch,
                        eta: 1e-3,
                        epoch: 1000,
                    },
                    &LinearSetting::new(k, d),
                )
                .unwrap(),
                &rows,
                &tasks,
                &y,
            )
            .unwrap()
        })
    });
    group.bench_function("omtl_linf", |b| {
        b.iter(|| {
            learn(
                &mut Omtl::build(
                    &OmtlParams {
                        c: 1.0,
                        global_norm: GlobalNorm::LInf,
                        explicit: false,
                    },
                    &LinearSetting::new(k, d),
                )
                .unwrap(),
                &rows,
                &tasks,
                &y,
            )
            .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, svt_cost, online_passes, retrain_cost);
criterion_main!(benches);
