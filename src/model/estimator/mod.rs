//! An estimator: a class and its hyper-parameters, as Python's `omtl.MTLinear(...)`, a model
//! file's header, `omtl learn --learner NAME --param k=v` and the server name one. It checks
//! the parameters once and builds the learner when a model's first batch gives the number of
//! features (and, for `gamma="scale"`, the data).
//!
//! ```
//! use omtl::model::Estimator;
//!
//! let est = Estimator::from_text("mtlinear", &[("loss", "hinge"), ("hash_bits", "18")])?;
//! assert_eq!(est.class().name, "MTLinear");
//! assert_eq!(est.params()["learning_rate"], 0.5); // the default
//! assert!(Estimator::from_text("MTLinear", &[("loss", "cubic")]).is_err());
//! # Ok::<(), omtl::Error>(())
//! ```

mod describe;
mod family;
mod graph;
mod table;
mod values;

use serde_json::{Map, Value};

pub use graph::{GraphParam, GRAPH_KEY, GRAPH_KINDS, MAX_DENSE_GRAPH_BYTES};
pub use table::{classes, find, Class, Shape, ALIASES};
pub use values::{parse_text, Default, Params};

use crate::data::Rows;
use crate::error::{invalid, Error, Result};
use crate::hashing::MAX_HASHED_COLUMNS;
use crate::kernel::{scale_gamma, BaseKernel, KernelKind, TaskKernel};
use crate::learner::{GraphSetting, KernelSetting, LinearSetting};
use crate::model::AnyLearner;
pub(crate) use family::Family;

/// The highest polynomial degree (the kernel's own limit).
const MAX_DEGREE: i128 = 32;

/// A class and its complete, checked hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimator {
    class: &'static Class,
    params: Map<String, Value>,
}

impl Estimator {
    /// The class `class` (its exact name or an alias) with `params` (by name; the others take
    /// their defaults), every value checked: its type, its range, the combination (an
    /// open-ended `n_tasks = None` needs a class and graph that can grow).
    pub fn new(class: &str, params: Map<String, Value>) -> Result<Self> {
        let class = find(class, false).ok_or_else(|| unknown_class(class))?;
        Self::of_class(class, params)
    }

    /// [`Estimator::new`] from `--param name=value` texts ([`parse_text`]); the class name is
    /// case-insensitive, as on the command line.
    pub fn from_text(class: &str, params: &[(&str, &str)]) -> Result<Self> {
        let class = find(class, true).ok_or_else(|| unknown_class(class))?;
        let mut map = Map::new();
        for (name, text) in params {
            map.insert((*name).to_owned(), parse_text(text));
        }
        Self::of_class(class, map)
    }

    fn of_class(class: &'static Class, given: Map<String, Value>) -> Result<Self> {
        let mut params = Map::new();
        for (name, default) in class.params {
            params.insert((*name).to_owned(), default.to_json());
        }
        for (name, value) in given {
            if !params.contains_key(&name) {
                let valid: Vec<&str> = class.params.iter().map(|p| p.0).collect();
                return Err(Error::InvalidParameter {
                    name: "params",
                    reason: format!("invalid parameter {name:?} for {}; valid: {valid:?}", class.name),
                });
            }
            params.insert(name, value);
        }
        let est = Estimator { class, params };
        est.check()?;
        Ok(est)
    }

    /// The estimator that builds `learner`, a learner built in Rust: its class and
    /// hyper-parameters as a model file names them (MTLinear, MTRBP and MTFORG; any other
    /// learner is an [`Error::CannotSave`]: describe it by its class and parameters instead).
    pub fn describing(learner: &AnyLearner) -> Result<Self> {
        let (class, params) = describe::estimator_of(learner)?;
        Self::new(class, params)
    }

    /// The same estimator with `n_tasks` tasks (a model grown by `add_tasks`).
    pub fn with_n_tasks(&self, n_tasks: u64) -> Result<Self> {
        let mut params = self.params.clone();
        params.insert("n_tasks".into(), Value::from(n_tasks));
        if let Some(Value::Object(graph)) = params.get_mut("graph") {
            if let Some(Value::Object(spec)) = graph.get_mut(GRAPH_KEY) {
                spec.insert("n_tasks".into(), Value::from(n_tasks));
            }
        }
        Self::of_class(self.class, params)
    }

    /// The class.
    pub fn class(&self) -> &'static Class {
        self.class
    }

    /// Every hyper-parameter by name (JSON; a task graph as its object).
    pub fn params(&self) -> &Map<String, Value> {
        &self.params
    }

    fn p(&self) -> Params<'_> {
        Params(&self.params)
    }

    /// The `n_tasks` parameter: `None` for an open-ended model (tasks added as labels arrive).
    pub fn n_tasks(&self) -> Option<u64> {
        self.params.get("n_tasks").and_then(Value::as_u64)
    }

    /// Whether tasks are added as new labels arrive (`n_tasks = None`).
    pub fn open_ended(&self) -> bool {
        self.n_tasks().is_none()
    }

    /// The number of columns named features are hashed into (the `n_features` parameter).
    pub fn dict_width(&self) -> usize {
        self.params
            .get("n_features")
            .and_then(Value::as_u64)
            .map_or(1 << 18, |w| w as usize)
    }

    /// The number of engine tasks that holds `n_labels` labels: MTLinear's open-ended complete
    /// graph keeps at least two (with one, its factor is a single block that does not split
    /// into the shared and own blocks a second task needs).
    pub fn engine_n_tasks(&self, n_labels: usize) -> usize {
        let complete = matches!(self.graph(), Ok(Some(GraphParam::Complete)));
        if self.class.shape == Shape::Graph && self.open_ended() && complete {
            n_labels.max(2)
        } else {
            n_labels
        }
    }

    /// The `graph` parameter, for the classes that have one.
    fn graph(&self) -> Result<Option<GraphParam<'_>>> {
        match self.class.shape {
            Shape::Graph | Shape::GraphKernel => GraphParam::read(self.p().raw("graph")).map(Some),
            Shape::DisconnectedKernel => Ok(Some(GraphParam::Disconnected)),
            Shape::Linear => Ok(None),
        }
    }

    /// Whether the base kernel's `gamma` is read from the first batch (`"scale"`, or the rbf
    /// default `None`).
    pub fn scales_gamma(&self) -> bool {
        let has_kernel = matches!(self.class.shape, Shape::GraphKernel | Shape::DisconnectedKernel);
        let gamma = self.p().raw("gamma");
        has_kernel && (gamma.as_str() == Some("scale") || gamma.is_null() && self.p().raw("kernel") == "rbf")
    }

    /// The value `gamma="scale"` takes on a first batch, where the class reads it from the data.
    pub fn gamma_of(&self, first: &Rows) -> Option<f64> {
        self.scales_gamma().then(|| scale_gamma(first))
    }

    fn check(&self) -> Result<()> {
        let p = self.p();
        match p.optional_integer("n_tasks", 1, i64::MAX.into()) {
            Ok(_) => {}
            Err(_) => {
                return Err(invalid(
                    "n_tasks",
                    format!("n_tasks must be None or an integer >= 1, got {}", p.raw("n_tasks")),
                ))
            }
        }
        let width = p.raw("n_features");
        if !width
            .as_u64()
            .is_some_and(|w| (1..=MAX_HASHED_COLUMNS as u64).contains(&w))
        {
            return Err(invalid(
                "n_features",
                format!("n_features (the column space of dict rows) must be an integer in [1, 2**31 - 1], got {width}"),
            ));
        }
        let graph = self.graph()?;
        if self.open_ended() {
            if !self.class.grows {
                return Err(invalid(
                    "n_tasks",
                    format!(
                        "{} needs n_tasks (an integer): it learns or sizes a relation between a fixed set of tasks, \
                         which a new task would change everywhere; label strings are fine up to n_tasks labels",
                        self.class.name
                    ),
                ));
            }
            if graph.as_ref().is_some_and(|g| !g.is_named()) {
                return Err(invalid(
                    "n_tasks",
                    "n_tasks=None (open-ended tasks) is not available here: a TaskGraph fixes the set of tasks; pass \
                     graph='complete' or 'disconnected'",
                ));
            }
        }
        if let (Some(GraphParam::Object { n_tasks: k, .. }), Some(n)) = (&graph, self.n_tasks()) {
            if *k != n {
                return Err(invalid(
                    "graph",
                    format!("the task graph has {k} tasks but n_tasks={n}"),
                ));
            }
        }
        if matches!(self.class.shape, Shape::GraphKernel | Shape::DisconnectedKernel) {
            self.kernel(1, Some(1.0))?;
        }
        (self.class.check)(p)
    }

    /// The base kernel for `n_features` features; `gamma_scale`: the value `"scale"` resolved
    /// to (`None` for a model saved without one, which keeps `1/n_features` for rbf).
    fn kernel(&self, n_features: usize, gamma_scale: Option<f64>) -> Result<BaseKernel> {
        let p = self.p();
        let name = p.name("kernel", |s| Ok(s.to_owned()))?;
        let gamma = match p.raw("gamma") {
            Value::Null if name == "rbf" => gamma_scale.unwrap_or(1.0 / n_features as f64),
            Value::Null => 1.0,
            Value::String(s) if s == "scale" => gamma_scale.ok_or_else(|| {
                invalid(
                    "gamma",
                    "gamma=\"scale\" is resolved from the first batch a model learns",
                )
            })?,
            v => v.as_f64().filter(|g| *g > 0.0 && g.is_finite()).ok_or_else(|| {
                invalid(
                    "gamma",
                    format!("gamma must be a positive number, None or \"scale\", got {v}"),
                )
            })?,
        };
        let degree = p.integer("degree", 1, MAX_DEGREE)? as u32;
        let coef0 = p.number("coef0")?;
        if !(coef0 >= 0.0 && coef0.is_finite()) {
            return Err(invalid(
                "coef0",
                format!(
                    "coef0 must be a finite number >= 0 (a negative coef0 can make the kernel indefinite), got {coef0}"
                ),
            ));
        }
        let kind = match name.as_str() {
            "linear" => KernelKind::Linear,
            "poly" => KernelKind::Poly { degree, gamma, coef0 },
            "rbf" => KernelKind::Rbf { gamma },
            other => {
                return Err(invalid(
                    "kernel",
                    format!("kernel must be one of ('linear', 'poly', 'rbf'), got {other:?}"),
                ))
            }
        };
        BaseKernel::new(kind, p.boolean("normalize")?)
    }

    /// The task kernel over `k` engine tasks.
    pub fn task_kernel(&self, k: usize) -> Result<Option<TaskKernel>> {
        self.graph()?.map(|g| g.task_kernel(k, self.open_ended())).transpose()
    }

    /// The learner for `n_tasks` engine tasks and `n_features` features (`sparse`: the rows
    /// will mostly be sparse), `gamma_scale` as for the base kernel.
    pub fn build(
        &self,
        n_tasks: usize,
        n_features: usize,
        sparse: bool,
        gamma_scale: Option<f64>,
    ) -> Result<AnyLearner> {
        let n_tasks = match self.n_tasks() {
            Some(k) => usize::try_from(k).map_err(|_| invalid("n_tasks", format!("n_tasks={k} is too large")))?,
            None => n_tasks,
        };
        let task_kernel = self.task_kernel(n_tasks)?;
        let kernel = match self.class.shape {
            Shape::GraphKernel | Shape::DisconnectedKernel => Some(self.kernel(n_features, gamma_scale)?),
            _ => None,
        };
        let family = match (&task_kernel, kernel) {
            (Some(task_kernel), Some(kernel)) => Family::Kernel(KernelSetting {
                task_kernel,
                kernel,
                n_features,
                sparse,
            }),
            (Some(task_kernel), None) => Family::Graph(GraphSetting::new(task_kernel, n_features)),
            (None, _) => Family::Linear(LinearSetting {
                n_tasks,
                n_features,
                sparse,
            }),
        };
        (self.class.build)(self.p(), &family)
    }

    /// Checks that `learner` is what this estimator builds (its kind).
    pub fn check_learner(&self, learner: &AnyLearner) -> Result<()> {
        if learner.kind() != self.class.kind {
            return Err(Error::ModelFile(format!(
                "the engine ({}) is not the one the parameters of {} build",
                learner.kind(),
                self.class.name
            )));
        }
        Ok(())
    }
}

fn unknown_class(name: &str) -> Error {
    let names: Vec<&str> = classes().iter().map(|c| c.name).collect();
    invalid(
        "learner",
        format!("unknown learner {name:?}; the learners are {}", names.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::OnlineLearner;

    #[test]
    fn every_class_builds_with_its_defaults_and_fixed_tasks() {
        for class in classes() {
            let mut params = Map::new();
            params.insert("n_tasks".into(), Value::from(3));
            let est = Estimator::new(class.name, params).unwrap_or_else(|e| panic!("{}: {e}", class.name));
            let learner = est
                .build(3, 4, false, Some(0.5))
                .unwrap_or_else(|e| panic!("{}: {e}", class.name));
            assert_eq!(learner.kind(), class.kind);
            assert_eq!((learner.n_tasks(), learner.n_features()), (3, 4));
            est.check_learner(&learner).unwrap();
        }
        for (alias, class) in ALIASES {
            assert_eq!(find(alias, false).unwrap().name, *class);
        }
    }

    #[test]
    fn open_ended_models_need_a_class_and_graph_that_grow() {
        let open = Estimator::new("MTLinear", Map::new()).unwrap();
        assert!(open.open_ended());
        assert_eq!(open.engine_n_tasks(1), 2);
        assert!(Estimator::new("ROMCO", Map::new()).is_err());
        let chain: Value = serde_json::from_str(
            r#"{"__omtl_task_graph__": {"kind": "edges", "n_tasks": 3, "edges": [[0, 1]], "weights": null, "matrix": null}}"#,
        )
        .unwrap();
        let mut params = Map::new();
        params.insert("graph".into(), chain.clone());
        assert!(Estimator::new("MTLinear", params.clone()).is_err());
        params.insert("n_tasks".into(), Value::from(3));
        assert!(Estimator::new("MTLinear", params.clone()).is_ok());
        params.insert("n_tasks".into(), Value::from(4));
        assert!(Estimator::new("MTLinear", params).is_err());
    }

    #[test]
    fn bad_values_are_refused_with_their_name() {
        let err = |class: &str, pairs: &[(&str, &str)]| Estimator::from_text(class, pairs).unwrap_err().to_string();
        assert!(err("MTLinear", &[("loss", "cubic")]).contains("loss"));
        assert!(err("MTLinear", &[("learning_rate", "-1")]).contains("learning_rate"));
        assert!(err("MTLinear", &[("nope", "1")]).contains("valid"));
        assert!(err("MTRBP", &[("budget", "0")]).contains("budget"));
        assert!(err("MTRBP", &[("kernel", "cosine")]).contains("kernel"));
        assert!(err("MTRBP", &[("gamma", "-2")]).contains("gamma"));
        assert!(err("MTRBP", &[("n_features", "0")]).contains("n_features"));
        assert!(err("Nope", &[]).contains("unknown learner"));
        let rbf = Estimator::from_text("MTRBP", &[]).unwrap();
        assert!(rbf.scales_gamma());
        assert!(!Estimator::from_text("MTRBP", &[("gamma", "0.5")])
            .unwrap()
            .scales_gamma());
        assert!(!Estimator::from_text("MTPerceptron", &[]).unwrap().scales_gamma());
    }
}
