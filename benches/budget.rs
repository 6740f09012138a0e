//! Budget learners (MTRBP, MTFORG) over budgets 100..5000.
//!
//! - `*/learn`: the online protocol over 1,000 examples, starting from a model whose active set
//!   is already full (so every mistake evicts), reported per example;
//! - `kernel_row/*`: the kernel row alone (one pass of `RowStore::for_each_kernel`), the floor
//!   of any kernel learner's per-example cost.
//!
//! Streams: dense School-like (d = 28, 139 tasks, rbf) and sparse text-like (d = 100,000,
//! ~200 non-zeros from a Zipf-like law, 4 tasks, poly degree 2).
//!
//! `cargo bench --bench budget` (add `-- dense` or `-- sparse` to select).

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use omtl::data::{Row, Rows};
use omtl::kernel::{BaseKernel, Query, RowStore, Scratch, TaskKernel};
use omtl::learner::{learn, Build, KernelSetting, MTFORGParams, MTRBPParams, OnlineLearner, MTFORG, MTRBP};
use omtl::rng::SplitMix64;
use std::time::Duration;

const STEPS: usize = 1000;

fn unif(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn normal(rng: &mut SplitMix64) -> f64 {
    // Box-Muller.
    let (u, v) = (unif(rng).max(1e-300), unif(rng));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

struct Dense {
    x: Vec<f64>,
    tasks: Vec<i64>,
    y: Vec<f64>,
    d: usize,
}

fn dense_stream(n: usize, d: usize, k: usize, seed: u64) -> Dense {
    let mut rng = SplitMix64::new(seed);
    let x: Vec<f64> = (0..n * d).map(|_| normal(&mut rng)).collect();
    let tasks: Vec<i64> = (0..n).map(|_| rng.below(k as u64) as i64).collect();
    let y = (0..n)
        .map(|t| {
            let m = x[t * d] + 0.5 * x[t * d + 1] - 0.3 * x[t * d + 2] + 0.5 * normal(&mut rng);
            if m >= 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    Dense { x, tasks, y, d }
}

struct Sparse {
    indptr: Vec<i64>,
    indices: Vec<u32>,
    data: Vec<f64>,
    tasks: Vec<i64>,
    y: Vec<f64>,
    d: usize,
}

/// ~`nnz` distinct terms per row, term r drawn with probability ~ 1/r (Zipf), unit rows.
fn sparse_stream(n: usize, d: usize, k: usize, nnz: usize, seed: u64) -> Sparse {
    let mut rng = SplitMix64::new(seed);
    let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
    let log_d = (d as f64).ln();
    for _ in 0..n {
        let mut cols: Vec<u32> = (0..nnz)
            .map(|_| ((unif(&mut rng) * log_d).exp() as usize - 1).min(d - 1) as u32)
            .map(|r| r.wrapping_mul(2_654_435_761) % d as u32)
            .collect();
        cols.sort_unstable();
        cols.dedup();
        let vals: Vec<f64> = cols.iter().map(|_| 0.5 + unif(&mut rng)).collect();
        let norm = vals.iter().map(|v| v * v).sum::<f64>().sqrt();
        indices.extend_from_slice(&cols);
        data.extend(vals.iter().map(|v| v / norm));
        indptr.push(indices.len() as i64);
    }
    let tasks: Vec<i64> = (0..n).map(|_| rng.below(k as u64) as i64).collect();
    let y = (0..n).map(|_| if unif(&mut rng) < 0.5 { 1.0 } else { -1.0 }).collect();
    Sparse {
        indptr,
        indices,
        data,
        tasks,
        y,
        d,
    }
}

/// A group timing STEPS examples per iteration: 10 samples, measured for `measure` after `warm_up`.
fn step_group<'a>(
    c: &'a mut Criterion,
    name: &str,
    measure: Duration,
    warm_up: Duration,
) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .measurement_time(measure)
        .warm_up_time(warm_up)
        .throughput(Throughput::Elements(STEPS as u64));
    g
}

/// A model filled on the first `fill` examples, then the protocol over the next STEPS.
fn bench_learner<L: OnlineLearner + Clone>(
    c: &mut Criterion,
    group: &str,
    budgets: &[usize],
    make: impl Fn(usize) -> L,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
) {
    let mut g = step_group(c, group, Duration::from_secs(3), Duration::from_millis(500));
    for &budget in budgets {
        let mut model = make(budget);
        let n = rows.len();
        let mut t = 0;
        let mut scratch = Scratch::default();
        while model.n_active() < budget && t + STEPS < n {
            model
                .learn_one(rows.row(t), tasks[t] as usize, y[t], &mut scratch)
                .unwrap();
            t += 1;
        }
        let (a, b) = (t, t + STEPS);
        let mut buf = Vec::new();
        let slice = rows.range(a, b, &mut buf);
        g.bench_with_input(BenchmarkId::from_parameter(budget), &budget, |bench, _| {
            bench.iter_batched(
                || model.clone(),
                |mut m| {
                    learn(&mut m, &slice, &tasks[a..b], &y[a..b])
                        .expect("a valid batch")
                        .len()
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn kernel_row_bound(c: &mut Criterion, group: &str, budgets: &[usize], kernel: BaseKernel, rows: &Rows) {
    let mut g = step_group(c, group, Duration::from_secs(2), Duration::from_millis(300));
    for &budget in budgets {
        let mut store = RowStore::new(rows.n_cols(), rows.is_sparse());
        (0..budget).for_each(|t| {
            store.push(rows.row(t % rows.len()), &kernel);
        });
        let queries: Vec<Row> = (0..STEPS).map(|t| rows.row((t * 7 + 3) % rows.len())).collect();
        g.bench_with_input(BenchmarkId::from_parameter(budget), &budget, |bench, _| {
            let mut scratch = Scratch::default();
            bench.iter(|| {
                let mut total = 0.0;
                for q in &queries {
                    let q = Query::new(*q, &kernel);
                    store.for_each_kernel(&kernel, &q, &mut scratch, |_| true, |_, kv| total += kv);
                }
                total
            })
        });
    }
    g.finish();
}

/// MTRBP and MTFORG (with `radius`) over `rows` under the complete graph of `k` tasks, and the
/// kernel-row bound, in the groups `{prefix}/...`.
#[allow(clippy::too_many_arguments)]
fn bench_budget_learners(
    c: &mut Criterion,
    prefix: &str,
    budgets: &[usize],
    kernel: BaseKernel,
    k: usize,
    radius: f64,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
) {
    let (d, sparse) = (rows.n_cols(), rows.is_sparse());
    let tk = TaskKernel::complete(k).unwrap();
    bench_learner(
        c,
        &format!("{prefix}/mtrbp_learn"),
        budgets,
        |b| {
            MTRBP::build(
                &MTRBPParams { budget: b, seed: 0 },
                &KernelSetting {
                    task_kernel: &tk,
                    kernel,
                    n_features: d,
                    sparse,
                },
            )
            .unwrap()
        },
        rows,
        tasks,
        y,
    );
    bench_learner(
        c,
        &format!("{prefix}/mtforg_learn"),
        budgets,
        |b| {
            MTFORG::build(
                &MTFORGParams { budget: b, radius },
                &KernelSetting {
                    task_kernel: &tk,
                    kernel,
                    n_features: d,
                    sparse,
                },
            )
            .unwrap()
        },
        rows,
        tasks,
        y,
    );
    kernel_row_bound(c, &format!("{prefix}/kernel_row"), budgets, kernel, rows);
}

fn dense(c: &mut Criterion) {
    let (d, k) = (28, 139);
    let s = dense_stream(30_000, d, k, 1);
    let rows = Rows::dense(&s.x, s.y.len(), s.d);
    let kernel = BaseKernel::rbf(1.0 / d as f64).unwrap();
    let budgets = [100, 200, 1000, 5000];
    bench_budget_learners(c, "dense_rbf", &budgets, kernel, k, 1.0, &rows, &s.tasks, &s.y);
}

fn sparse(c: &mut Criterion) {
    let k = 4;
    let s = sparse_stream(12_000, 100_000, k, 200, 2);
    let rows = Rows::Csr {
        indptr: &s.indptr,
        indices: &s.indices,
        data: &s.data,
        n_cols: s.d,
    };
    let kernel = BaseKernel::poly(2, 1.0, 1.0).unwrap();
    let budgets = [100, 1000, 5000];
    bench_budget_learners(c, "sparse_poly", &budgets, kernel, k, 2.0, &rows, &s.tasks, &s.y);
}

criterion_group!(benches, dense, sparse);
criterion_main!(benches);
