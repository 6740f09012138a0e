//! Every learner, fitted on a small stream, survives its own state and thousands of corrupted
//! ones: decoding gives an error or a state the learner can run on without panicking (debug
//! assertions included, as tests build them).

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{decode, encode, CheckState};
use crate::data::Rows;
use crate::kernel::{BaseKernel, TaskKernel};
use crate::learner::test_support::Csr;
use crate::learner::{
    decision, learn, BatchMtl, BatchMtlParams, Build, Checked, CwCol, CwColParams, GlobalNorm, GraphSetting,
    KernelSetting, LinearSetting, Loss, MTBPRJ2Params, MTFORGParams, MTLinear, MTLinearParams, MTPerceptron,
    MTRBPParams, NoParams, Omtl, OmtlParams, Omtrl, OmtrlParams, OnlineLearner, PaVariant, ParamGuard,
    PassiveAggressive, PassiveAggressiveParams, ProjectronParams, Regularizer, RelationUpdate, Romco, RomcoParams,
    RomcoTrigger, SvtRoute, Threshold, UpdateRule, MTBPRJ, MTBPRJ2, MTFORG, MTRBP,
};
use crate::rng::SplitMix64;

const N: usize = 120;
const D: usize = 4;
const K: usize = 3;

struct Stream {
    dense: Vec<f64>,
    sparse: Csr,
    tasks: Vec<i64>,
    y: Vec<f64>,
}

impl Stream {
    fn new() -> Self {
        let mut rng = SplitMix64::new(5);
        let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let mut dense: Vec<f64> = (0..N * D).map(|_| unif()).collect();
        // About a third of the entries zero, so the sparse stream is sparse.
        dense.iter_mut().for_each(|v| {
            if v.abs() < 0.3 {
                *v = 0.0
            }
        });
        let sparse = Csr::of_dense(&dense, D);
        let tasks = (0..N).map(|t| (t % K) as i64).collect();
        let y = (0..N)
            .map(|t| {
                if dense[t * D] + 0.5 * dense[t * D + 1] + 0.3 * unif() > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            })
            .collect();
        Self {
            dense,
            sparse,
            tasks,
            y,
        }
    }

    fn rows(&self, sparse: bool) -> Rows<'_> {
        if sparse {
            self.sparse.rows()
        } else {
            Rows::dense(&self.dense, N, D)
        }
    }
}

/// Offsets of the 8-byte words whose value is a small count (a likely length or size field).
fn size_fields(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len().saturating_sub(7))
        .filter(|&p| {
            let v = u64::from_le_bytes(bytes[p..p + 8].try_into().unwrap());
            (1..=10_000).contains(&v)
        })
        .collect()
}

fn corrupt(state: &[u8], fields: &[usize], rng: &mut SplitMix64) -> Vec<u8> {
    let mut b = state.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..=rng.below(3) {
                let p = rng.below(b.len() as u64) as usize;
                b[p] ^= 1 << rng.below(8);
            }
        }
        1 => b.truncate(rng.below(b.len() as u64) as usize),
        _ if !fields.is_empty() => {
            let p = fields[rng.below(fields.len() as u64) as usize];
            let old = u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
            let new = [0, 1, old - 1, old + 1, 2 * old, 1 << 31, 1 << 62, u64::MAX][rng.below(8) as usize];
            b[p..p + 8].copy_from_slice(&new.to_le_bytes());
        }
        _ => b[0] ^= 1,
    }
    b
}

fn fuzz<L>(name: &str, mut model: L, sparse: bool, trials: usize)
where
    L: OnlineLearner + Clone + Serialize + DeserializeOwned + CheckState,
{
    let s = Stream::new();
    let rows = s.rows(sparse);
    let half = N / 2;
    let mut buf = Vec::new();
    let head = rows.range(0, half, &mut buf);
    learn(&mut model, &head, &s.tasks[..half], &s.y[..half]).unwrap();
    model
        .check_state()
        .unwrap_or_else(|e| panic!("{name}: a fitted state fails its check: {e}"));
    let state = encode(&model).unwrap();
    // The restored model continues exactly as the original.
    let mut restored: L = decode(&state).unwrap_or_else(|e| panic!("{name}: cannot restore its own state: {e}"));
    let a = learn(&mut model, &rows, &s.tasks, &s.y).unwrap();
    let b = learn(&mut restored, &rows, &s.tasks, &s.y).unwrap();
    assert_eq!(a, b, "{name}: the restored model diverged");
    let state = encode(&model).unwrap();
    let fields = size_fields(&state);
    let mut rng = SplitMix64::new(name.len() as u64 + 17 * u64::from(sparse));
    let (mut valid, mut rejected) = (0, 0);
    for trial in 0..trials {
        let bytes = corrupt(&state, &fields, &mut rng);
        let outcome = catch_unwind(AssertUnwindSafe(|| match decode::<L>(&bytes) {
            Err(_) => false,
            Ok(mut m) => {
                // Feed rows of the decoded shape, tasks of its range: any panic is a failure.
                let d = m.n_features().min(1 << 16);
                let k = m.n_tasks().min(K) as i64;
                let x: Vec<f64> = (0..8 * d).map(|i| s.dense[i % s.dense.len()]).collect();
                let rows = Rows::dense(&x, 8, d);
                let tasks: Vec<i64> = (0..8).map(|t| t % k).collect();
                let _ = decision(&m, &rows, &tasks);
                let _ = learn(&mut m, &rows, &tasks, &s.y[..8]);
                true
            }
        }));
        match outcome {
            Ok(true) => valid += 1,
            Ok(false) => rejected += 1,
            Err(_) => panic!("{name}: corrupted state {trial} panicked (bytes {bytes:?})"),
        }
    }
    assert!(
        rejected > 0 && valid + rejected == trials,
        "{name}: {valid} valid, {rejected} rejected"
    );
}

const TRIALS: usize = 3000;

fn kernels() -> Vec<BaseKernel> {
    vec![BaseKernel::rbf(0.5).unwrap(), BaseKernel::linear()]
}

fn graphs() -> Vec<TaskKernel> {
    vec![
        TaskKernel::complete(K).unwrap(),
        TaskKernel::disconnected(K).unwrap(),
        TaskKernel::from_edges(K, &[(0, 1, 1.0)]).unwrap(),
    ]
}

#[test]
fn kernel_perceptrons_and_budget_learners() {
    for sparse in [false, true] {
        for tk in graphs() {
            for kernel in kernels() {
                fuzz(
                    "mtp",
                    MTPerceptron::build(
                        &NoParams,
                        &KernelSetting {
                            task_kernel: &tk.clone(),
                            kernel,
                            n_features: D,
                            sparse,
                        },
                    )
                    .unwrap(),
                    sparse,
                    TRIALS / 4,
                );
                fuzz(
                    "rbp",
                    MTRBP::build(
                        &MTRBPParams { budget: 6, seed: 3 },
                        &KernelSetting {
                            task_kernel: &tk,
                            kernel,
                            n_features: D,
                            sparse,
                        },
                    )
                    .unwrap(),
                    sparse,
                    TRIALS / 4,
                );
                fuzz(
                    "forg",
                    MTFORG::build(
                        &MTFORGParams { budget: 6, radius: 1.5 },
                        &KernelSetting {
                            task_kernel: &tk,
                            kernel,
                            n_features: D,
                            sparse,
                        },
                    )
                    .unwrap(),
                    sparse,
                    TRIALS / 4,
                );
            }
        }
    }
}

#[test]
fn projectrons() {
    let params = ProjectronParams {
        budget: 6,
        eta: 0.1,
        threshold: Threshold::Norm,
    }
    .check()
    .map(Checked::into_inner)
    .unwrap();
    for sparse in [false, true] {
        for tk in graphs() {
            let kernel = BaseKernel::rbf(0.5).unwrap();
            fuzz(
                "prj",
                MTBPRJ::build(
                    &params,
                    &KernelSetting {
                        task_kernel: &tk,
                        kernel,
                        n_features: D,
                        sparse,
                    },
                )
                .unwrap(),
                sparse,
                TRIALS / 2,
            );
            fuzz(
                "prj2",
                MTBPRJ2::build(
                    &MTBPRJ2Params::from_shared(params, false),
                    &KernelSetting {
                        task_kernel: &tk,
                        kernel,
                        n_features: D,
                        sparse,
                    },
                )
                .unwrap(),
                sparse,
                TRIALS / 2,
            );
        }
    }
}

#[test]
fn mt_linear() {
    for sparse in [false, true] {
        for tasks in graphs() {
            for (rule, hash_bits) in [
                (UpdateRule::Normalized, None),
                (UpdateRule::Normalized, Some(2)),
                (UpdateRule::Adagrad, None),
                (UpdateRule::Sgd, Some(2)),
                (UpdateRule::Arow, Some(2)),
            ] {
                let params = MTLinearParams {
                    loss: Loss::Logistic,
                    rule,
                    learning_rate: 0.5,
                    fit_intercept: true,
                    hash_bits,
                    shared_rate: 1.0,
                }
                .check()
                .map(Checked::into_inner)
                .unwrap();
                fuzz(
                    "mt_linear",
                    MTLinear::build(&params, &GraphSetting::new(&tasks, D)).unwrap(),
                    sparse,
                    TRIALS / 4,
                );
            }
        }
    }
}

#[test]
fn linear_learners() {
    for sparse in [false, true] {
        fuzz(
            "cw",
            CwCol::build(
                &CwColParams {
                    confidence: 0.8,
                    a: 1.0,
                    omega: 0.5,
                },
                &LinearSetting::new(K, D),
            )
            .unwrap(),
            sparse,
            TRIALS,
        );
        fuzz(
            "omtl",
            Omtl::build(
                &OmtlParams {
                    c: 1.0,
                    global_norm: GlobalNorm::L2,
                    explicit: false,
                },
                &LinearSetting::new(K, D),
            )
            .unwrap(),
            sparse,
            TRIALS,
        );
        fuzz(
            "omtrl",
            Omtrl::build(
                &OmtrlParams {
                    relation_update: RelationUpdate::LogDet,
                    eta: 0.1,
                    epoch: 20,
                },
                &LinearSetting::new(K, D),
            )
            .unwrap(),
            sparse,
            TRIALS,
        );
        fuzz(
            "pa",
            PassiveAggressive::build(
                &PassiveAggressiveParams {
                    shared: false,
                    c: 1.0,
                    variant: PaVariant::Pa1,
                },
                &LinearSetting::new(K, D),
            )
            .unwrap(),
            sparse,
            TRIALS,
        );
        for reg in [Regularizer::L21, Regularizer::Trace] {
            fuzz(
                "mtl",
                BatchMtl::build(
                    &BatchMtlParams {
                        regularizer: reg,
                        rho: 0.1,
                        retrain_every: 25,
                    },
                    &LinearSetting {
                        n_tasks: K,
                        n_features: D,
                        sparse,
                    },
                )
                .unwrap(),
                sparse,
                TRIALS / 2,
            );
        }
        for route in [SvtRoute::Auto, SvtRoute::Qr, SvtRoute::Brand] {
            let romco = Romco::build(
                &RomcoParams {
                    eta1: 0.1,
                    eta2: 0.1,
                    lambda1: 0.5,
                    lambda2: 0.5,
                    update: RomcoTrigger::Loss,
                    svt_route: SvtRoute::Auto,
                },
                &LinearSetting::new(K, D),
            )
            .unwrap();
            fuzz("romco", romco.with_route(route), sparse, TRIALS / 2);
        }
    }
}
