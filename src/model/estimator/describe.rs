//! The class and hyper-parameters of a learner built in Rust, so that a model of it (and its
//! file) reads as the estimator that builds the same learner.

use serde_json::{Map, Value};

use super::graph::{GRAPH_KEY, MAX_DENSE_GRAPH_BYTES};
use crate::error::{Error, Result};
use crate::kernel::{BaseKernel, KernelKind, TaskKernel};
use crate::learner::{Loss, OnlineLearner, UpdateRule};
use crate::model::AnyLearner;

/// The column space of dict rows Python's estimators default to (`n_features=2**18`): a file
/// written from Rust names it so that the estimator's parameters are complete.
const DICT_WIDTH: u64 = 1 << 18;

/// The task graph of a task kernel, as the `graph` parameter and `n_tasks`: the complete and
/// disconnected graphs by name, the open-ended complete graph as `n_tasks = null`, anything else
/// as its task kernel matrix.
fn graph(tasks: &TaskKernel) -> Result<(Value, Value)> {
    let k = tasks.n_tasks();
    let kp1 = (k + 1) as f64;
    match *tasks {
        TaskKernel::Complete { diag, off, .. } if diag == 1.0 && off == 0.5 => Ok(("complete".into(), Value::Null)),
        TaskKernel::Complete { diag, off, .. } if diag == 2.0 / kp1 && off == 1.0 / kp1 => {
            Ok(("complete".into(), k.into()))
        }
        TaskKernel::Disconnected { scale: 1.0, .. } => Ok(("disconnected".into(), k.into())),
        _ if 8 * (k as u128) * (k as u128) > u128::from(MAX_DENSE_GRAPH_BYTES) => Err(Error::CannotSave(format!(
            "its {k} x {k} task kernel is too large to write as a matrix in the header"
        ))),
        _ => {
            let dense = tasks.to_dense();
            let matrix: Vec<Value> = (0..k).map(|i| (0..k).map(|j| dense.get(i, j)).collect()).collect();
            let mut spec = Map::new();
            spec.insert("kind".into(), "task_kernel".into());
            spec.insert("n_tasks".into(), k.into());
            spec.insert("edges".into(), Value::Null);
            spec.insert("weights".into(), Value::Null);
            spec.insert("matrix".into(), matrix.into());
            let mut graph = Map::new();
            graph.insert(GRAPH_KEY.into(), Value::Object(spec));
            Ok((Value::Object(graph), k.into()))
        }
    }
}

/// The base kernel's parameters (`kernel`, `gamma`, `degree`, `coef0`, `normalize`).
fn kernel_params(params: &mut Map<String, Value>, kernel: &BaseKernel) {
    let (name, gamma, degree, coef0) = match kernel.kind {
        KernelKind::Linear => ("linear", Value::Null, 2, 1.0),
        KernelKind::Poly { degree, gamma, coef0 } => ("poly", gamma.into(), degree, coef0),
        KernelKind::Rbf { gamma } => ("rbf", gamma.into(), 2, 1.0),
    };
    params.insert("kernel".into(), name.into());
    params.insert("gamma".into(), gamma);
    params.insert("degree".into(), degree.into());
    params.insert("coef0".into(), coef0.into());
    params.insert("normalize".into(), kernel.normalize.into());
}

fn loss_name(loss: Loss) -> &'static str {
    match loss {
        Loss::Logistic => "logistic",
        Loss::Hinge => "hinge",
        Loss::Squared => "squared",
    }
}

fn rule_name(rule: UpdateRule) -> &'static str {
    match rule {
        UpdateRule::Normalized => "normalized",
        UpdateRule::Adagrad => "adagrad",
        UpdateRule::Sgd => "sgd",
        UpdateRule::Arow => "arow",
    }
}

/// The estimator class and hyper-parameters that build `learner`. Learners whose estimator
/// parameters are not a function of the native settings alone (a seed consumed into a
/// generator is taken as 0: the learner's settings do not depend on it) are MTLinear, MTRBP
/// and MTFORG; any other learner is an [`Error::CannotSave`] (save it from Python).
pub(super) fn estimator_of(learner: &AnyLearner) -> Result<(&'static str, Map<String, Value>)> {
    let mut params = Map::new();
    let (tasks, kernel) = match learner {
        AnyLearner::MTLinear(m) => {
            let p = m.params();
            params.insert("loss".into(), loss_name(p.loss).into());
            params.insert("update".into(), rule_name(p.rule).into());
            params.insert("learning_rate".into(), p.learning_rate.into());
            params.insert("fit_intercept".into(), p.fit_intercept.into());
            params.insert("hash_bits".into(), p.hash_bits.map_or(Value::Null, Value::from));
            params.insert("shared_rate".into(), p.shared_rate.into());
            (m.task_kernel(), None)
        }
        AnyLearner::MTRBP(m) => {
            params.insert("budget".into(), m.budget().into());
            params.insert("seed".into(), 0.into());
            (m.task_kernel(), m.base_kernel())
        }
        AnyLearner::MTFORG(m) => {
            params.insert("budget".into(), m.budget().into());
            params.insert("radius".into(), m.radius().into());
            (m.task_kernel(), m.base_kernel())
        }
        other => {
            return Err(Error::CannotSave(format!(
                "a model file written from Rust holds MTLinear, MTRBP or MTFORG, got {}; save it from Python",
                other.kind()
            )))
        }
    };
    let (graph, n_tasks) = graph(tasks)?;
    params.insert("graph".into(), graph);
    params.insert("n_tasks".into(), n_tasks);
    if let Some(kernel) = kernel {
        kernel_params(&mut params, kernel);
    }
    params.insert("n_features".into(), DICT_WIDTH.into());
    let class = match learner {
        AnyLearner::MTLinear(_) => "MTLinear",
        AnyLearner::MTRBP(_) => "MTRBP",
        _ => "MTFORG",
    };
    Ok((class, params))
}
