//! Kernel evaluation and Perceptron steps (issue: foundation). Run with `cargo bench --bench perceptron`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use omtl::data::{Row, Rows};
use omtl::kernel::{BaseKernel, Query, RowStore, Scratch, TaskKernel};
use omtl::learner::{learn, Build, KernelSetting, MTPerceptron, NoParams};
use omtl::rng::SplitMix64;

fn uniform(rng: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect()
}

/// One kernel row (query against every stored row) for stores of growing size.
fn kernel_rows(c: &mut Criterion) {
    let d = 28;
    let mut rng = SplitMix64::new(1);
    let mut group = c.benchmark_group("kernel_row_rbf_d28");
    for &n in &[100usize, 1000, 5000] {
        let kernel = BaseKernel::rbf(1.0 / d as f64).unwrap();
        let mut store = RowStore::new(d, false);
        for _ in 0..n {
            store.push(Row::Dense(&uniform(&mut rng, d)), &kernel);
        }
        let q = uniform(&mut rng, d);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            let mut scratch = Scratch::default();
            b.iter(|| {
                let query = Query::new(Row::Dense(black_box(&q)), &kernel);
                let mut acc = 0.0;
                store.for_each_kernel(&kernel, &query, &mut scratch, |_| true, |_, v| acc += v);
                acc
            })
        });
    }
    group.finish();
}

/// A full online pass of the Perceptron: linear (primal) and rbf (dual), dense 2,000 x 400, 12 tasks.
fn perceptron_pass(c: &mut Criterion) {
    let (n, d, k) = (2000usize, 400usize, 12usize);
    let mut rng = SplitMix64::new(7);
    let x = uniform(&mut rng, n * d);
    let w = uniform(&mut rng, d);
    let y: Vec<f64> = (0..n)
        .map(|t| {
            if x[t * d..(t + 1) * d].iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() >= 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let tasks: Vec<i64> = (0..n).map(|t| (t % k) as i64).collect();
    let rows = Rows::dense(&x, n, d);
    let mut group = c.benchmark_group("perceptron_pass_2000x400");
    group.throughput(Throughput::Elements(n as u64));
    group.sample_size(10);
    for (name, kernel) in [
        ("linear", BaseKernel::linear()),
        ("rbf", BaseKernel::rbf(1.0 / d as f64).unwrap()),
    ] {
        for (gname, tk) in [
            ("complete", TaskKernel::complete(k).unwrap()),
            ("battery", TaskKernel::disconnected(k).unwrap()),
        ] {
            group.bench_function(format!("{name}/{gname}"), |b| {
                b.iter(|| {
                    let mut model =
                        MTPerceptron::build(&NoParams, &KernelSetting::new(&tk.clone(), kernel, d)).unwrap();
                    learn(&mut model, &rows, &tasks, &y).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, kernel_rows, perceptron_pass);
criterion_main!(benches);
