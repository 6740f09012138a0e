//! The `graph` hyper-parameter: `"complete"`, `"disconnected"`, or a task graph object as a
//! model file stores it (`{"__omtl_task_graph__": {"kind", "n_tasks", "edges", "weights",
//! "matrix"}}`, Python's `TaskGraph`), turned into the engine's [`TaskKernel`].

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::kernel::TaskKernel;
use crate::linalg::SymMatrix;

/// The key of a task graph object among the hyper-parameters.
pub const GRAPH_KEY: &str = "__omtl_task_graph__";

/// The largest dense task kernel (bytes) a graph given as a matrix in a model file's header
/// may take by default (64 MiB: k = 2,896 tasks).
pub const MAX_DENSE_GRAPH_BYTES: u64 = 1 << 26;

/// The task-graph kinds a graph object may name (Python's `TaskGraph.kind`).
pub const GRAPH_KINDS: &[&str] = &[
    "complete",
    "complete_open",
    "disconnected",
    "edges",
    "laplacian_pinv",
    "interaction",
    "psd_plus_identity",
    "task_kernel",
];

/// A `graph` value, checked for its shape (its numbers are checked when the kernel is built).
#[derive(Debug, Clone, PartialEq)]
pub enum GraphParam<'a> {
    /// Every pair of tasks related (T = (I + 11ᵀ)/(k + 1); open-ended: T_ii = 1, T_ij = 1/2).
    Complete,
    /// No task related to another (T = I).
    Disconnected,
    /// A graph object: its kind, number of tasks and arrays.
    Object {
        /// One of [`GRAPH_KINDS`].
        kind: &'a str,
        /// Its number of tasks.
        n_tasks: u64,
        /// The object itself.
        spec: &'a Map<String, Value>,
    },
}

fn bad(reason: impl Into<String>) -> Error {
    Error::InvalidParameter {
        name: "graph",
        reason: reason.into(),
    }
}

impl<'a> GraphParam<'a> {
    /// Reads a `graph` value.
    pub fn read(value: &'a Value) -> Result<Self> {
        match value {
            Value::String(s) if s == "complete" => Ok(GraphParam::Complete),
            Value::String(s) if s == "disconnected" => Ok(GraphParam::Disconnected),
            Value::Object(obj) => {
                let spec = match obj.get(GRAPH_KEY) {
                    Some(Value::Object(spec)) if obj.len() == 1 => spec,
                    _ => return Err(bad("a task graph object must be {\"__omtl_task_graph__\": {...}}")),
                };
                let kind = spec.get("kind").and_then(Value::as_str).unwrap_or("");
                if !GRAPH_KINDS.contains(&kind) {
                    return Err(bad(format!("unknown task graph kind {:?}", spec.get("kind"))));
                }
                let n_tasks = spec
                    .get("n_tasks")
                    .and_then(Value::as_u64)
                    .filter(|&k| k >= 1)
                    .ok_or_else(|| bad("a task graph's n_tasks must be an integer >= 1"))?;
                Ok(GraphParam::Object { kind, n_tasks, spec })
            }
            other => Err(bad(format!(
                "graph must be 'complete', 'disconnected' or a TaskGraph, got {other}"
            ))),
        }
    }

    /// Whether the graph is one a fitted model can grow (the complete graph of an open-ended
    /// model, the disconnected graph).
    pub fn is_named(&self) -> bool {
        !matches!(self, GraphParam::Object { .. })
    }

    /// The task kernel over `k` tasks; `open_ended`: the model has `n_tasks = None`, and the
    /// complete graph is the open-ended one.
    pub fn task_kernel(&self, k: usize, open_ended: bool) -> Result<TaskKernel> {
        match *self {
            GraphParam::Complete if open_ended => TaskKernel::complete_open(k),
            GraphParam::Complete => TaskKernel::complete(k),
            GraphParam::Disconnected => TaskKernel::disconnected(k),
            GraphParam::Object { kind, n_tasks, spec } => {
                if n_tasks != k as u64 {
                    return Err(bad(format!("the task graph has {n_tasks} tasks but n_tasks={k}")));
                }
                object_kernel(kind, k, spec)
            }
        }
    }
}

fn edges(spec: &Map<String, Value>, k: usize) -> Result<Vec<(usize, usize, f64)>> {
    let pairs = match spec.get("edges") {
        Some(Value::Array(rows)) => rows,
        Some(Value::Null) | None => return Ok(Vec::new()),
        _ => return Err(bad("a task graph's edges must be a list of [i, j] pairs")),
    };
    let weights: Option<&Vec<Value>> = match spec.get("weights") {
        Some(Value::Array(w)) => Some(w),
        Some(Value::Null) | None => None,
        _ => return Err(bad("a task graph's weights must be a list of numbers")),
    };
    if weights.is_some_and(|w| w.len() != pairs.len()) {
        return Err(bad("a task graph needs one weight per edge"));
    }
    let task = |v: &Value| {
        v.as_u64()
            .filter(|&i| i < k as u64)
            .map(|i| i as usize)
            .ok_or_else(|| bad(format!("an edge names a task outside [0, {k})")))
    };
    pairs
        .iter()
        .enumerate()
        .map(|(e, pair)| match pair {
            Value::Array(ij) if ij.len() == 2 => {
                let w = match weights {
                    Some(w) => w[e]
                        .as_f64()
                        .ok_or_else(|| bad("a task graph's weights must be numbers"))?,
                    None => 1.0,
                };
                Ok((task(&ij[0])?, task(&ij[1])?, w))
            }
            _ => Err(bad("a task graph's edges must be a list of [i, j] pairs")),
        })
        .collect()
}

fn matrix(spec: &Map<String, Value>, k: usize) -> Result<SymMatrix> {
    let Some(Value::Array(rows)) = spec.get("matrix") else {
        return Err(bad("this task graph needs its matrix"));
    };
    if rows.len() != k {
        return Err(bad(format!("a task graph's matrix must be {k} x {k}")));
    }
    let mut data = crate::alloc::Need::new("n_tasks", k, "a task graph's matrix").filled(&[k, k], 0.0)?;
    for (i, row) in rows.iter().enumerate() {
        match row {
            Value::Array(values) if values.len() == k => {
                for (j, v) in values.iter().enumerate() {
                    data[i * k + j] = v
                        .as_f64()
                        .ok_or_else(|| bad("a task graph's matrix must hold numbers"))?;
                }
            }
            _ => return Err(bad(format!("a task graph's matrix must be {k} x {k}"))),
        }
    }
    Ok(SymMatrix { n: k, data })
}

fn object_kernel(kind: &str, k: usize, spec: &Map<String, Value>) -> Result<TaskKernel> {
    match kind {
        "complete" => TaskKernel::complete(k),
        "complete_open" => TaskKernel::complete_open(k),
        "disconnected" => TaskKernel::disconnected(k),
        "edges" => TaskKernel::from_edges(k, &edges(spec, k)?),
        "laplacian_pinv" => TaskKernel::laplacian_pinv(k, &edges(spec, k)?),
        "interaction" => TaskKernel::from_interaction(matrix(spec, k)?),
        "psd_plus_identity" => TaskKernel::from_psd_plus_identity(matrix(spec, k)?),
        "task_kernel" => TaskKernel::from_task_kernel(matrix(spec, k)?),
        other => Err(bad(format!("unknown task graph kind {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_read_by_name_and_as_objects() {
        let complete = Value::from("complete");
        assert_eq!(GraphParam::read(&complete).unwrap(), GraphParam::Complete);
        assert!(GraphParam::read(&Value::from("ring")).is_err());
        let chain: Value = serde_json::from_str(
            r#"{"__omtl_task_graph__": {"kind": "edges", "n_tasks": 3, "edges": [[0, 1], [1, 2]], "weights": null, "matrix": null}}"#,
        )
        .unwrap();
        let g = GraphParam::read(&chain).unwrap();
        assert!(!g.is_named());
        let t = g.task_kernel(3, false).unwrap();
        assert_eq!(t.n_tasks(), 3);
        assert!(t.get(0, 2) > 0.0);
        assert!(g.task_kernel(4, false).is_err());
        let open = GraphParam::Complete.task_kernel(2, true).unwrap();
        assert_eq!(open.get(0, 1), 0.5);
    }
}
