//! Cost of one MTBPRJ / MTBPRJ-2 budget step (ALGORITHMS.md §4.4 step 4, §4.5 step 4) as the
//! budget B grows: projection of the candidate, tentative insertion, leave-one-out scores,
//! folding and removal, all O(B²). Each measured step starts from the same full model (cloned
//! outside the timing), so the periodic O(B³) recompute (N5, every 1000 structural operations)
//! is measured separately in the `recompute` group.
//!
//! `cargo bench --bench projectron`

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion};
use omtl::data::Row;
use omtl::kernel::{BaseKernel, Scratch, TaskKernel};
use omtl::learner::{
    Build, Checked, KernelSetting, MTBPRJ2Params, OnlineLearner, ParamGuard, ProjectronParams, Threshold, MTBPRJ,
    MTBPRJ2,
};
use omtl::rng::SplitMix64;

const D: usize = 10;
const K: usize = 8;

fn points(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..n * D)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

/// A model holding exactly `b` elements (every fill step is an insertion: far-apart points).
fn filled<L: OnlineLearner>(mut model: L, b: usize) -> L {
    let x = points(b, 1);
    let mut scratch = Scratch::default();
    for t in 0..b {
        // score 0 with label +1 is an update-mistake: every row is offered to the model
        model
            .update(Row::Dense(&x[t * D..(t + 1) * D]), t % K, 1.0, 0.0, &mut scratch)
            .unwrap();
    }
    assert_eq!(model.n_active(), b, "the fill must insert every point");
    model
}

fn budget_step(c: &mut Criterion) {
    let kernel = BaseKernel::rbf(5.0).unwrap();
    let candidates = points(64, 2);
    for (name, two) in [("mtbprj_budget_step", false), ("mtbprj2_budget_step", true)] {
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        for &b in &[100usize, 250, 500, 1000, 2000] {
            let params = ProjectronParams {
                budget: b,
                eta: 0.01,
                threshold: Threshold::Norm,
            }
            .check()
            .map(Checked::into_inner)
            .unwrap();
            let tasks = TaskKernel::complete(K).unwrap();
            if two {
                let model = filled(
                    MTBPRJ2::build(
                        &MTBPRJ2Params::from_shared(params, false),
                        &KernelSetting::new(&tasks, kernel, D),
                    )
                    .unwrap(),
                    b,
                );
                bench_step(&mut group, b, &model, &candidates);
            } else {
                let model = filled(
                    MTBPRJ::build(&params, &KernelSetting::new(&tasks, kernel, D)).unwrap(),
                    b,
                );
                bench_step(&mut group, b, &model, &candidates);
            }
        }
        group.finish();
    }
}

/// Times one mistake on the next of `candidates`, each from a clone of the full `model`.
fn bench_step<L: OnlineLearner + Clone>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    b: usize,
    model: &L,
    candidates: &[f64],
) {
    let mut scratch = Scratch::default();
    let mut which = 0usize;
    group.bench_with_input(BenchmarkId::from_parameter(b), &b, |bench, _| {
        bench.iter_batched(
            || model.clone(),
            |mut m| {
                which = (which + 1) % 64;
                let x = &candidates[which * D..(which + 1) * D];
                m.update(Row::Dense(x), which % K, -1.0, 0.0, &mut scratch).unwrap();
                m
            },
            BatchSize::LargeInput,
        )
    });
}

fn recompute(c: &mut Criterion) {
    let kernel = BaseKernel::rbf(5.0).unwrap();
    let mut group = c.benchmark_group("mtbprj_recompute");
    group.sample_size(10);
    for &b in &[100usize, 250, 500, 1000] {
        let params = ProjectronParams {
            budget: b,
            eta: 0.01,
            threshold: Threshold::Norm,
        }
        .check()
        .map(Checked::into_inner)
        .unwrap();
        let model = filled(
            MTBPRJ::build(
                &params,
                &KernelSetting::new(&TaskKernel::complete(K).unwrap(), kernel, D),
            )
            .unwrap(),
            b,
        );
        group.bench_with_input(BenchmarkId::from_parameter(b), &b, |bench, _| {
            bench.iter_batched(
                || model.clone(),
                |mut m| {
                    m.rebuild_caches();
                    m
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, budget_step, recompute);
criterion_main!(benches);
