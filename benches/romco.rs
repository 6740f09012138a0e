//! ROMCO and PA speed (ALGORITHMS.md §5.5, §6.1): examples per second on a dense 400-feature,
//! 12-task stream (protocol P1 and rounds), the SVT routes on their own, and a sparse stream
//! with d = 500,000.

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput};
use omtl::bench::{eigen_update, svt};
use omtl::data::Rows;
use omtl::learner::{
    learn, learn_rounds, Build, LinearSetting, OnlineLearner, PaVariant, PassiveAggressive, PassiveAggressiveParams,
    Romco, RomcoParams, RomcoTrigger, SvtRoute,
};
use omtl::rng::SplitMix64;

fn dense_stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>, Vec<i64>) {
    let mut rng = SplitMix64::new(seed);
    let mut normal = || {
        let u = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let v = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    let w: Vec<f64> = (0..d * k).map(|_| normal()).collect();
    let shared: Vec<f64> = (0..d).map(|_| normal()).collect();
    let x: Vec<f64> = (0..n * d).map(|_| normal()).collect();
    // Round-robin tasks, so consecutive groups of k rows are rounds.
    let tasks: Vec<i64> = (0..n).map(|t| (t % k) as i64).collect();
    let y = (0..n)
        .map(|t| {
            let i = tasks[t] as usize;
            let m: f64 = (0..d).map(|j| x[t * d + j] * (2.0 * shared[j] + w[i * d + j])).sum();
            if m >= 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let rounds = (0..n).map(|t| (t / k) as i64).collect();
    (x, tasks, y, rounds)
}

/// Times P1 (`learn`) over `rows` on a model from `setup` each iteration (the routine returns the
/// model so that freeing it is not timed).
fn bench_learn<M: OnlineLearner + Clone>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    setup: impl Fn() -> M,
    (rows, tasks, y): (&Rows, &[i64], &[f64]),
) {
    g.bench_function(name, |b| {
        b.iter_batched(
            &setup,
            |mut m| {
                learn(&mut m, rows, tasks, y).unwrap();
                m
            },
            BatchSize::LargeInput,
        )
    });
}

fn bench_stream(c: &mut Criterion) {
    let (n, d, k) = (3000, 400, 12);
    let (x, tasks, y, rounds) = dense_stream(n, d, k, 1);
    let rows = Rows::dense(&x, n, d);
    let mut g = c.benchmark_group("dense 400 x 12 tasks");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    let fresh = || {
        Romco::build(
            &RomcoParams {
                eta1: 0.1,
                eta2: 0.1,
                lambda1: 1e-4,
                lambda2: 1e-4,
                update: RomcoTrigger::Loss,
                svt_route: SvtRoute::Auto,
            },
            &LinearSetting::new(k, d),
        )
        .unwrap()
    };
    bench_learn(&mut g, "ROMCO P1 (default parameters)", fresh, (&rows, &tasks, &y));
    let factored = || fresh().with_route(SvtRoute::Brand);
    bench_learn(
        &mut g,
        "ROMCO P1 (default parameters, route (c) instead of (b)/(a))",
        factored,
        (&rows, &tasks, &y),
    );
    g.bench_function("ROMCO P2 rounds (default parameters)", |b| {
        b.iter_batched(
            fresh,
            |mut m| learn_rounds(&mut m, &rows, &tasks, &y, &rounds).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let gram = || {
        Romco::build(
            &RomcoParams {
                eta1: 0.1,
                eta2: 0.1,
                lambda1: 0.5,
                lambda2: 1e-4,
                update: RomcoTrigger::Loss,
                svt_route: SvtRoute::Auto,
            },
            &LinearSetting::new(k, d),
        )
        .unwrap()
    };
    bench_learn(&mut g, "ROMCO P1 (lambda1 = 0.5)", gram, (&rows, &tasks, &y));
    let pa = || {
        PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1.0,
                variant: PaVariant::Pa1,
            },
            &LinearSetting::new(k, d),
        )
        .unwrap()
    };
    bench_learn(&mut g, "PA-Unique", pa, (&rows, &tasks, &y));
    g.finish();
}

fn bench_svt(c: &mut Criterion) {
    let (d, k) = (400, 12);
    let (x, ..) = dense_stream(d, k, 1, 2);
    let theta = 0.5;
    let mut g = c.benchmark_group("SVT 400 x 12");
    let c_hat = svt::gram(&x, d, k);
    g.bench_function("gram route (eigen)", |b| b.iter(|| svt::gram_route(&c_hat, k, theta)));
    // The eigendecomposition of the Gram matrix after one column changes, updated from the
    // previous one (P1's route (b)) or recomputed.
    let eig = nalgebra::SymmetricEigen::new(nalgebra::DMatrix::from_row_slice(k, k, &c_hat));
    let z: Vec<f64> = (0..k * k).map(|i| eig.eigenvectors[(i / k, i % k)]).collect();
    let mu: Vec<f64> = eig.eigenvalues.iter().copied().collect();
    let a: Vec<f64> = (0..d).map(|r| 0.1 * x[(r * 7) % (d * k)]).collect();
    let g_col: Vec<f64> = (0..k).map(|j| (0..d).map(|r| x[j * d + r] * a[r]).sum()).collect();
    let alpha: f64 = a.iter().map(|v| v * v).sum();
    g.bench_function("Gram eigendecomposition after a column change: updated", |b| {
        b.iter(|| eigen_update::column_update(&z, &mu, 3, &g_col, alpha))
    });
    g.bench_function("thresholding from a known eigendecomposition (Pi)", |b| {
        b.iter(|| svt::gram_route_from_eigen(mu.clone(), z.clone(), 1e-5, false))
    });
    g.bench_function(
        "Gram eigendecomposition after a column change: recomputed (nalgebra)",
        |b| b.iter(|| nalgebra::SymmetricEigen::new(nalgebra::DMatrix::from_row_slice(k, k, &c_hat))),
    );
    g.bench_function("qr route (TSQR + SVD)", |b| b.iter(|| svt::qr_route(&x, d, k, theta)));
    let cols: Vec<usize> = (0..k).collect();
    g.bench_function("R factor (TSQR)", |b| b.iter(|| svt::r_factor(&x, d, &cols)));
    let r = svt::r_factor(&x, d, &cols);
    g.bench_function("Jacobi SVD of R (cold)", |b| b.iter(|| svt::jacobi_svd(&r, k, k, None)));
    let z = svt::qr_route(&x, d, k, theta).unwrap().z;
    g.bench_function("Jacobi SVD of R (warm)", |b| {
        b.iter(|| svt::jacobi_svd(&r, k, k, Some(&z)))
    });
    g.bench_function("nalgebra SVD of R", |b| {
        b.iter(|| nalgebra::DMatrix::from_row_slice(k, k, &r).svd(false, true))
    });
    let s = svt::qr_route(&x, d, k, theta).unwrap();
    g.bench_function("U <- U Pi", |b| {
        b.iter_batched(
            || x.clone(),
            |mut u| svt::right_multiply_in_place(&mut u, d, k, &s.pi),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// `M <- M P` alone (ROMCO applies it to U at every SVT): P is a Householder reflection, so
/// applying it over and over keeps M's entries the same size (no overflow or subnormals).
fn bench_right_multiply(c: &mut Criterion) {
    let mut g = c.benchmark_group("right_multiply");
    for (d, k) in [(400, 12), (400, 5), (400, 40), (5000, 12), (200_000, 12)] {
        let (m, ..) = dense_stream(d, k, 1, 4);
        let v: Vec<f64> = (0..k).map(|i| 1.0 + (i % 3) as f64).collect();
        let vv: f64 = v.iter().map(|x| x * x).sum();
        let p: Vec<f64> = (0..k * k)
            .map(|ij| f64::from(u8::from(ij / k == ij % k)) - 2.0 * v[ij / k] * v[ij % k] / vv)
            .collect();
        let mut u = m.clone();
        g.bench_function(format!("{d}x{k}"), |b| {
            b.iter(|| svt::right_multiply_in_place(std::hint::black_box(&mut u), d, k, &p))
        });
    }
    g.finish();
}

fn bench_sparse_huge(c: &mut Criterion) {
    let (n, d, k, nnz) = (200, 500_000, 12, 50);
    let mut rng = SplitMix64::new(3);
    let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
    for _ in 0..n {
        let mut cols: Vec<u32> = (0..nnz).map(|_| rng.below(d as u64) as u32).collect();
        cols.sort_unstable();
        cols.dedup();
        for &col in &cols {
            indices.push(col);
            data.push(((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) - 0.5);
        }
        indptr.push(indices.len() as i64);
    }
    let rows = Rows::Csr {
        indptr: &indptr,
        indices: &indices,
        data: &data,
        n_cols: d,
    };
    let tasks: Vec<i64> = (0..n).map(|t| (t % k) as i64).collect();
    let y: Vec<f64> = (0..n).map(|t| if t % 3 == 0 { 1.0 } else { -1.0 }).collect();
    let mut g = c.benchmark_group("sparse d = 500,000, 12 tasks");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    // Models warmed on the stream once, so the timing excludes first-touch page faults of U, V;
    // the routines return the model so that freeing it is not timed either.
    let warm = |lambda1: f64| {
        let mut m = Romco::build(
            &RomcoParams {
                eta1: 0.1,
                eta2: 0.1,
                lambda1,
                lambda2: 1e-4,
                update: RomcoTrigger::Loss,
                svt_route: SvtRoute::Auto,
            },
            &LinearSetting::new(k, d),
        )
        .unwrap();
        learn(&mut m, &rows, &tasks, &y).unwrap();
        m
    };
    let (full, fast) = (warm(1e-4), warm(0.0));
    bench_learn(&mut g, "ROMCO P1", || full.clone(), (&rows, &tasks, &y));
    bench_learn(
        &mut g,
        "ROMCO P1, lambda1 = 0 (fast path)",
        || fast.clone(),
        (&rows, &tasks, &y),
    );
    g.finish();
}

criterion_group!(
    benches,
    bench_stream,
    bench_svt,
    bench_right_multiply,
    bench_sparse_huge
);
criterion_main!(benches);
