//! The header of a model file: UTF-8 JSON, read into typed values and checked field by field
//! (a header is untrusted input), then checked against the native state it describes.

use serde_json::{Map, Value};

use super::{fail, Limits};
use crate::error::{Error, Result};
use crate::model::estimator::{find, GRAPH_KEY, GRAPH_KINDS};
use crate::model::{check_book, AnyLearner, Book, ClassLabel, LabelForm, TaskId, STATE_VERSION};

/// Counts are integers in `[low, 2**63)`: what the engine's and Python's counters hold.
const COUNT_END: u64 = 1 << 63;

fn task_id_json(id: &TaskId) -> Value {
    match id {
        TaskId::Int(i) => Value::from(*i),
        TaskId::Str(s) => Value::from(&**s),
    }
}

/// The bookkeeping of a fitted model besides its native state: task ids, counts, classes.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The number of features the model was fitted with (the native state's too).
    pub n_features_in: u64,
    /// Examples learned.
    pub n_seen: u64,
    /// Examples whose pre-update prediction was wrong.
    pub n_mistakes: u64,
    /// Examples learned per task (one count per task of the native state).
    pub seen_per_task: Vec<u64>,
    /// The classes (what predictions are expressed in).
    pub label_form: LabelForm,
    /// MTFORG warned that a row exceeded its radius.
    pub radius_warned: bool,
    /// The value `gamma="scale"` resolved to on the first batch.
    pub gamma_scale: Option<f64>,
    /// Column names of a data frame the model was fitted on (one per feature).
    pub feature_names_in: Option<Vec<String>>,
    /// Task labels in task order (task `i` is `task_labels[i]`, the free tasks skipped);
    /// `None`: tasks are numbered `0..n_tasks` and named by their number.
    pub task_labels: Option<Vec<TaskId>>,
    /// The tasks whose labels were forgotten, free for new labels (label mode), ascending.
    pub free_tasks: Vec<u64>,
    /// Examples of forgotten tasks, counted in `n_seen` and in no task's count.
    pub n_forgotten: u64,
}

/// A model file's header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The estimator class (one of [`crate::model::estimator::classes`]).
    pub class: String,
    /// The layout version of the native state ([`STATE_VERSION`]).
    pub state_version: u32,
    /// The estimator's hyper-parameters by name: JSON scalars, and task graphs as
    /// `{"__omtl_task_graph__": {"kind", "n_tasks", "edges", "weights", "matrix"}}`. The class
    /// that reads them validates their values (the native state carries the learner itself).
    pub params: Map<String, Value>,
    /// The bookkeeping of a fitted model; `None` for an unfitted one (which has no state).
    pub fitted: Option<Fitted>,
    /// JSON data stored with the model (never interpreted).
    pub metadata: Option<Map<String, Value>>,
}

/// A count: an integer in `[low, 2**63)`.
fn count(value: &Value, what: &str, low: u64) -> Result<u64> {
    match value.as_u64() {
        Some(v) if (low..COUNT_END).contains(&v) => Ok(v),
        _ => Err(fail(format!(
            "{what} must be an integer in [{low}, 2**63), got {value}"
        ))),
    }
}

fn task_id(value: &Value) -> Option<TaskId> {
    match value {
        Value::String(s) => Some(TaskId::Str(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(TaskId::Int),
        _ => None,
    }
}

fn class_label(value: &Value) -> Option<ClassLabel> {
    match value {
        Value::String(s) => Some(ClassLabel::Str(s.clone())),
        Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => Some(ClassLabel::Number(n.clone())),
        _ => None,
    }
}

pub(super) fn label_form(value: &Value) -> Result<LabelForm> {
    let unknown = || fail(format!("unknown label form {value}"));
    match value {
        Value::String(s) => match s.as_str() {
            "pm1" => Ok(LabelForm::PlusMinusOne),
            "01" => Ok(LabelForm::ZeroOne),
            "bool" => Ok(LabelForm::Bool),
            _ => Err(unknown()),
        },
        Value::Array(pair) if pair.len() == 2 => {
            let (neg, pos) = (
                class_label(&pair[0]).ok_or_else(unknown)?,
                class_label(&pair[1]).ok_or_else(unknown)?,
            );
            let distinct = match (&neg, &pos) {
                (ClassLabel::Str(a), ClassLabel::Str(b)) => a != b,
                (ClassLabel::Number(a), ClassLabel::Number(b)) => a.as_f64() != b.as_f64(),
                _ => false, // one string, one number
            };
            if distinct {
                Ok(LabelForm::Pair(neg, pos))
            } else {
                Err(unknown())
            }
        }
        _ => Err(unknown()),
    }
}

/// A label form as a header writes it.
fn label_form_json(form: &LabelForm) -> Value {
    let label = |l: &ClassLabel| match l {
        ClassLabel::Number(n) => Value::Number(n.clone()),
        ClassLabel::Str(s) => Value::from(s.as_str()),
    };
    match form {
        LabelForm::PlusMinusOne => Value::from("pm1"),
        LabelForm::ZeroOne => Value::from("01"),
        LabelForm::Bool => Value::from("bool"),
        LabelForm::Pair(neg, pos) => Value::Array(vec![label(neg), label(pos)]),
    }
}

const FITTED_KEYS: &[&str] = &["n_features_in", "n_seen", "n_mistakes", "seen_per_task", "label_form"];
const FITTED_OPTIONAL: &[&str] = &[
    "radius_warned",
    "gamma_scale",
    "feature_names_in",
    "task_labels",
    "free_tasks",
    "n_forgotten",
];

impl Fitted {
    /// A model's book as a header stores it.
    pub fn from_book(book: &Book) -> Self {
        Fitted {
            n_features_in: book.n_features_in() as u64,
            n_seen: book.n_seen(),
            n_mistakes: book.n_mistakes(),
            seen_per_task: book.seen_per_task().to_vec(),
            label_form: book.label_form().clone(),
            radius_warned: book.radius_warned(),
            gamma_scale: book.gamma_scale(),
            feature_names_in: book.feature_names_in().map(<[String]>::to_vec),
            task_labels: book.labels().map(|l| l.iter().map(|id| id.to_owned()).collect()),
            free_tasks: book.free_tasks(),
            n_forgotten: book.n_forgotten(),
        }
    }

    /// The book the header stores (its labels distinct: checked).
    pub fn into_book(self) -> Result<Book> {
        let n_features_in = usize::try_from(self.n_features_in).map_err(|_| fail("n_features_in is too large"))?;
        Book::from_parts(
            n_features_in,
            self.task_labels.as_deref(),
            self.seen_per_task,
            self.label_form,
            self.n_seen,
            self.n_mistakes,
            self.radius_warned,
            self.gamma_scale,
            self.feature_names_in,
        )
        .and_then(|book| book.with_forgotten(&self.free_tasks, self.n_forgotten))
        .map_err(|_| fail("the task labels are not distinct labels of at most n_tasks tasks"))
    }

    /// Reads and checks bookkeeping from its JSON text (the `fitted` object of a header).
    pub fn parse(text: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(text).map_err(|e| fail(format!("unreadable bookkeeping ({e})")))?;
        Self::from_json(&value)
    }

    fn from_json(value: &Value) -> Result<Self> {
        let obj = match value {
            Value::Object(obj)
                if FITTED_KEYS.iter().all(|k| obj.contains_key(*k))
                    && obj
                        .keys()
                        .all(|k| FITTED_KEYS.contains(&k.as_str()) || FITTED_OPTIONAL.contains(&k.as_str())) =>
            {
                obj
            }
            _ => return Err(fail("malformed fitted bookkeeping")),
        };
        let n_features_in = count(&obj["n_features_in"], "n_features_in", 1)?;
        let seen_per_task = match &obj["seen_per_task"] {
            Value::Array(counts) if !counts.is_empty() => counts
                .iter()
                .map(|c| count(c, "a per-task count", 0))
                .collect::<Result<Vec<_>>>()?,
            _ => return Err(fail("seen_per_task must hold one count per task")),
        };
        let n_seen = count(&obj["n_seen"], "n_seen", 0)?;
        let n_mistakes = count(&obj["n_mistakes"], "n_mistakes", 0)?;
        let task_labels = match obj.get("task_labels") {
            None | Some(Value::Null) => None,
            Some(Value::Array(labels)) => Some(
                labels
                    .iter()
                    .map(task_id)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| fail("task_labels must be a list of strings and 64-bit integers"))?,
            ),
            Some(_) => return Err(fail("task_labels must be a list of strings and 64-bit integers")),
        };
        let free_tasks = match obj.get("free_tasks") {
            None => Vec::new(),
            Some(Value::Array(free)) if task_labels.is_some() => {
                let free = free
                    .iter()
                    .map(|t| count(t, "a free task", 0))
                    .collect::<Result<Vec<_>>>()?;
                if !free.windows(2).all(|w| w[0] < w[1]) {
                    return Err(fail("free_tasks must be ascending"));
                }
                free
            }
            Some(_) => {
                return Err(fail(
                    "free_tasks must be a list of task numbers of a model with task labels",
                ))
            }
        };
        let n_forgotten = match obj.get("n_forgotten") {
            None => 0,
            Some(v) => count(v, "n_forgotten", 0)?,
        };
        let label_form = label_form(&obj["label_form"])?;
        let radius_warned = match obj.get("radius_warned") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(fail("radius_warned must be true or absent")),
        };
        let gamma_scale = match obj.get("gamma_scale") {
            None => None,
            Some(Value::Number(n)) if n.as_f64().is_some_and(|g| g > 0.0 && g.is_finite()) => n.as_f64(),
            Some(_) => return Err(fail("gamma_scale must be a positive finite number")),
        };
        let feature_names_in = match obj.get("feature_names_in") {
            None => None,
            Some(Value::Array(names)) if names.len() as u64 == n_features_in && names.iter().all(Value::is_string) => {
                Some(names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
            }
            Some(_) => return Err(fail("feature_names_in must hold one string per feature")),
        };
        Ok(Fitted {
            n_features_in,
            n_seen,
            n_mistakes,
            seen_per_task,
            label_form,
            radius_warned,
            gamma_scale,
            feature_names_in,
            task_labels,
            free_tasks,
            n_forgotten,
        })
    }

    fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("n_features_in".into(), self.n_features_in.into());
        obj.insert("n_seen".into(), self.n_seen.into());
        obj.insert("n_mistakes".into(), self.n_mistakes.into());
        obj.insert("seen_per_task".into(), self.seen_per_task.clone().into());
        obj.insert("label_form".into(), label_form_json(&self.label_form));
        if self.radius_warned {
            obj.insert("radius_warned".into(), true.into());
        }
        if let Some(g) = self.gamma_scale {
            obj.insert("gamma_scale".into(), g.into());
        }
        if let Some(names) = &self.feature_names_in {
            obj.insert("feature_names_in".into(), names.clone().into());
        }
        if let Some(labels) = &self.task_labels {
            obj.insert("task_labels".into(), labels.iter().map(task_id_json).collect());
        }
        if !self.free_tasks.is_empty() {
            obj.insert("free_tasks".into(), self.free_tasks.clone().into());
        }
        if self.n_forgotten > 0 {
            obj.insert("n_forgotten".into(), self.n_forgotten.into());
        }
        Value::Object(obj)
    }

    /// Checks that the bookkeeping agrees with the native state `learner`: its sizes, its
    /// counters, distinct task labels of at most its number of tasks, and (`open_ended`: the
    /// estimator's `n_tasks` is `null`) task labels present. Errors are [`Error::ModelFile`].
    pub fn check_against(&self, learner: &AnyLearner, open_ended: bool) -> Result<()> {
        check_book(&self.clone().into_book()?, learner, open_ended)
    }
}

/// Checks one hyper-parameter's JSON shape: a scalar, or a task graph whose dense task kernel
/// fits `dense_budget` bytes (its values are for the class to validate).
fn check_param(value: &Value, dense_budget: u64) -> Result<()> {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => Ok(()),
        Value::Object(obj) => match obj.get(GRAPH_KEY) {
            Some(spec) if obj.len() == 1 => check_graph(spec, dense_budget),
            _ => Err(fail("a parameter is an unknown object")),
        },
        Value::Array(_) => Err(fail("a parameter has the JSON type list")),
    }
}

fn check_graph(spec: &Value, dense_budget: u64) -> Result<()> {
    const KEYS: [&str; 5] = ["edges", "kind", "matrix", "n_tasks", "weights"];
    let obj = match spec {
        Value::Object(obj) if obj.len() == KEYS.len() && KEYS.iter().all(|k| obj.contains_key(*k)) => obj,
        _ => return Err(fail("malformed task graph")),
    };
    let kind = obj["kind"].as_str().unwrap_or("");
    if !GRAPH_KINDS.contains(&kind) {
        return Err(fail(format!("unknown task graph kind {}", obj["kind"])));
    }
    let k = count(&obj["n_tasks"], "the task graph's n_tasks", 1)?;
    // A graph from edges builds a dense k x k task kernel: a few bytes of header must not make
    // a reader allocate and factor gigabytes. A fitted model's state holds that kernel, so its
    // state is at least as large; an unfitted one may name up to `Limits::max_dense_graph` bytes.
    if matches!(kind, "edges" | "laplacian_pinv") && 8 * u128::from(k) * u128::from(k) > u128::from(dense_budget) {
        return Err(fail(format!(
            "the task graph's {k} x {k} task kernel is larger than the file allows"
        )));
    }
    Ok(())
}

impl Header {
    /// Reads and checks a header (the JSON text of a model file) whose file holds a native state
    /// of `state_len` bytes: the class, the state version, the shape of every hyper-parameter
    /// (task graphs within the size the file allows), the bookkeeping's fields and types.
    pub fn parse(text: &[u8], state_len: usize, limits: &Limits) -> Result<Self> {
        let value: Value = serde_json::from_slice(text).map_err(|e| fail(format!("unreadable header ({e})")))?;
        let Value::Object(mut obj) = value else {
            return Err(fail("the header is not a JSON object"));
        };
        let class = match obj.get("class") {
            Some(Value::String(name)) if find(name, false).is_some() => name.clone(),
            other => {
                let name = other.map_or("None".to_owned(), Value::to_string);
                return Err(fail(format!("class {name} is not an omtl learner")));
            }
        };
        let state_version = match obj.get("state_version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(STATE_VERSION) => STATE_VERSION,
            _ => {
                let v = obj.get("state_version").map_or("None".to_owned(), Value::to_string);
                return Err(fail(format!(
                    "native state version {v}, this omtl reads {STATE_VERSION}"
                )));
            }
        };
        let Some(Value::Object(params)) = obj.remove("params") else {
            return Err(fail(format!("the parameters do not match those of {class}")));
        };
        let fitted = match obj.get("fitted") {
            None | Some(Value::Null) => None,
            Some(f) => Some(Fitted::from_json(f)?),
        };
        // A fitted model's state holds the dense kernel its graph builds (so the graph costs no
        // more to rebuild than the state's size allows); an unfitted model's graph is bounded by
        // the limit, and built only when the model first learns.
        let dense_budget = if fitted.is_some() {
            state_len as u64
        } else {
            limits.max_dense_graph
        };
        for value in params.values() {
            check_param(value, dense_budget)?;
        }
        let metadata = match obj.remove("metadata") {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(fail("the metadata is not a JSON object")),
        };
        Ok(Header {
            class,
            state_version,
            params,
            fitted,
            metadata,
        })
    }

    /// Whether the estimator's `n_tasks` is `null`: an open-ended task set, named by labels.
    pub fn open_ended(&self) -> bool {
        matches!(self.params.get("n_tasks"), Some(Value::Null))
    }

    /// The native learner kind the header's class builds.
    pub fn kind(&self) -> &'static str {
        find(&self.class, false).map_or("", |c| c.kind)
    }

    /// Checks the header against the native state: the state is the learner the class builds,
    /// and the bookkeeping agrees with it ([`Fitted::check_against`]).
    pub fn check_against(&self, learner: &AnyLearner) -> Result<()> {
        if learner.kind() != self.kind() {
            return Err(fail(format!(
                "the engine ({}) is not the one the parameters of {} build",
                learner.kind(),
                self.class
            )));
        }
        match &self.fitted {
            Some(fitted) => fitted.check_against(learner, self.open_ended()),
            None => Err(fail("an unfitted model with a native state")),
        }
    }

    /// The header as JSON text (keys sorted, as every writer of the format writes them).
    pub fn to_json(&self) -> Result<String> {
        let mut obj = Map::new();
        obj.insert("class".into(), self.class.as_str().into());
        obj.insert("state_version".into(), self.state_version.into());
        obj.insert("params".into(), Value::Object(self.params.clone()));
        obj.insert(
            "fitted".into(),
            self.fitted.as_ref().map_or(Value::Null, Fitted::to_json),
        );
        if let Some(m) = &self.metadata {
            obj.insert("metadata".into(), Value::Object(m.clone()));
        }
        serde_json::to_string(&Value::Object(obj)).map_err(|e| Error::CannotSave(format!("its header: {e}")))
    }
}
