//! The JSON API's requests and answers: parsing a body into an operation, every field checked
//! (an error names the field: `events[3].features.cheap: not a finite number`), within the
//! server's [`Limits`]; and writing predictions in the model's label form.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::ops::{Events, Features, OwnedLabels};
use crate::hashing::RowBuilder;
use crate::model::{ClassLabel, Model, Predicted, TaskId, MAX_LABEL_BYTES};

/// Caps on what one request may ask.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest body, in bytes. Default 16 MiB.
    pub max_body_bytes: usize,
    /// The most events (or labels, or tasks) in one request. Default 10,000.
    pub max_events: usize,
    /// The most features in one event. Default 100,000.
    pub max_features: usize,
    /// The deepest nesting of JSON arrays and objects. Default 8 (a request needs 4).
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 << 20,
            max_events: 10_000,
            max_features: 100_000,
            max_depth: 8,
        }
    }
}

/// A request the server refuses: its status and message.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest {
    /// The HTTP status (400, 404, 413).
    pub status: u16,
    /// What is wrong, naming the field.
    pub message: String,
}

/// A 400 naming `field`.
pub fn bad(field: impl std::fmt::Display, what: impl std::fmt::Display) -> BadRequest {
    BadRequest {
        status: 400,
        message: format!("{field}: {what}"),
    }
}

/// Item `at` of a request's list as an object holding no field but `fields`.
pub fn entry<'a>(item: &'a Value, at: &str, fields: &[&str]) -> Result<&'a Map<String, Value>, BadRequest> {
    let Value::Object(entry) = item else {
        return Err(bad(at, "not an object"));
    };
    if let Some(k) = entry.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(bad(
            format!("{at}.{k}"),
            format!("unknown field (expected {})", fields.join(", ")),
        ));
    }
    Ok(entry)
}

/// The nesting depth of a JSON text (strings skipped), stopping past `max`.
pub fn depth(body: &[u8], max: usize) -> usize {
    let (mut level, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                level += 1;
                deepest = deepest.max(level);
                if deepest > max {
                    return deepest;
                }
            }
            b']' | b'}' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The body as a JSON object, its depth checked, its keys among `keys`.
pub fn object(body: &[u8], limits: &Limits, keys: &[&str]) -> Result<Map<String, Value>, BadRequest> {
    if depth(body, limits.max_depth) > limits.max_depth {
        return Err(bad(
            "body",
            format!("JSON nested deeper than {} levels", limits.max_depth),
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| bad("body", format!("not valid JSON ({e})")))?;
    let Value::Object(map) = value else {
        return Err(bad("body", "not a JSON object"));
    };
    if let Some(k) = map.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(bad(k, format!("unknown field (expected {})", keys.join(", "))));
    }
    Ok(map)
}

/// The array under `key`: present, non-empty, within the event cap.
pub fn items<'a>(map: &'a Map<String, Value>, key: &str, limits: &Limits) -> Result<&'a [Value], BadRequest> {
    match map.get(key) {
        Some(Value::Array(items)) if items.is_empty() => Err(bad(key, "empty")),
        Some(Value::Array(items)) if items.len() > limits.max_events => Err(BadRequest {
            status: 413,
            message: format!("{key}: {} items, over the limit of {}", items.len(), limits.max_events),
        }),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(bad(key, "not an array")),
        None => Err(bad(key, "missing")),
    }
}

/// A task id: an integer or a string.
pub fn task(value: &Value, field: &dyn Fn() -> String) -> Result<TaskId, BadRequest> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(TaskId::Int)
            .ok_or_else(|| bad(field(), "a task id is a 64-bit integer or a string")),
        Value::String(s) if s.len() > MAX_LABEL_BYTES => {
            Err(bad(field(), format!("longer than {MAX_LABEL_BYTES} bytes")))
        }
        Value::String(s) => Ok(TaskId::Str(s.as_str().into())),
        _ => Err(bad(field(), "a task id is a 64-bit integer or a string")),
    }
}

/// Builds a batch's events (features and tasks) one event at a time.
pub struct EventsBuilder {
    width: usize,
    max_features: usize,
    dense: Option<Vec<f64>>,
    n_cols: usize,
    indptr: Vec<i64>,
    indices: Vec<u32>,
    values: Vec<f64>,
    tasks: Vec<TaskId>,
    with_tasks: Option<bool>,
    row: RowBuilder,
    scratch: (Vec<u32>, Vec<f64>),
    n: usize,
}

impl EventsBuilder {
    /// A builder for a model whose named features hash into `width` columns.
    pub fn new(width: usize, limits: &Limits) -> Self {
        EventsBuilder {
            width,
            max_features: limits.max_features,
            dense: None,
            n_cols: 0,
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
            tasks: Vec::new(),
            with_tasks: None,
            row: RowBuilder::default(),
            scratch: (Vec::new(), Vec::new()),
            n: 0,
        }
    }

    /// Adds event `i` (`at`: its field name, e.g. `events[3]`): its `features` and `task`.
    pub fn push(&mut self, at: &str, features: Option<&Value>, task_value: Option<&Value>) -> Result<(), BadRequest> {
        let has_task = task_value.is_some_and(|t| !t.is_null());
        match self.with_tasks {
            Some(w) if w != has_task => {
                return Err(bad(
                    format!("{at}.task"),
                    if has_task {
                        "given, while the batch's first event has none (every event has a task, or none)"
                    } else {
                        "missing (every event of a batch has a task, or none)"
                    },
                ))
            }
            _ => self.with_tasks = Some(has_task),
        }
        if let Some(t) = task_value.filter(|t| !t.is_null()) {
            self.tasks.push(task(t, &|| format!("{at}.task"))?);
        }
        let first = self.n == 0;
        match features {
            None => return Err(bad(format!("{at}.features"), "missing")),
            Some(Value::Array(numbers)) => {
                if numbers.len() > self.max_features {
                    return Err(too_many(at, numbers.len(), self.max_features));
                }
                if first {
                    self.dense = Some(Vec::with_capacity(numbers.len()));
                    self.n_cols = numbers.len();
                }
                let Some(data) = self.dense.as_mut() else {
                    return Err(bad(
                        format!("{at}.features"),
                        "an array, while the batch's first event has named features (a batch is of one kind)",
                    ));
                };
                if numbers.len() != self.n_cols {
                    return Err(bad(
                        format!("{at}.features"),
                        format!(
                            "{} numbers, while the batch's first event has {}",
                            numbers.len(),
                            self.n_cols
                        ),
                    ));
                }
                if numbers.is_empty() {
                    return Err(bad(format!("{at}.features"), "empty"));
                }
                for (j, v) in numbers.iter().enumerate() {
                    data.push(finite(v).ok_or_else(|| bad(format!("{at}.features[{j}]"), "not a finite number"))?);
                }
            }
            Some(Value::Object(named)) => {
                if !first && self.dense.is_some() {
                    return Err(bad(
                        format!("{at}.features"),
                        "an object, while the batch's first event has an array of numbers (a batch is of one kind)",
                    ));
                }
                if named.len() > self.max_features {
                    return Err(too_many(at, named.len(), self.max_features));
                }
                self.row.clear();
                for (name, v) in named {
                    let added = match v {
                        Value::String(s) => self.row.categorical(name.as_bytes(), s.as_bytes(), self.width),
                        v => match finite(v) {
                            Some(x) => self.row.named(name.as_bytes(), x, self.width),
                            None => {
                                return Err(bad(format!("{at}.features.{name}"), "not a finite number or a string"))
                            }
                        },
                    };
                    added.map_err(|e| bad(format!("{at}.features.{name}"), e))?;
                }
                let (idx, val) = &mut self.scratch;
                self.row.finish(idx, val);
                self.indices.extend_from_slice(idx);
                self.values.extend_from_slice(val);
                self.indptr.push(self.indices.len() as i64);
            }
            Some(_) => {
                return Err(bad(
                    format!("{at}.features"),
                    "an object of name -> number or an array of numbers",
                ))
            }
        }
        self.n += 1;
        Ok(())
    }

    /// The events.
    pub fn finish(self) -> Events {
        let features = match self.dense {
            Some(data) => Features::Dense {
                data,
                n_cols: self.n_cols,
            },
            None => Features::Named {
                indptr: self.indptr,
                indices: self.indices,
                values: self.values,
            },
        };
        Events {
            features,
            tasks: (self.with_tasks == Some(true)).then_some(self.tasks),
        }
    }
}

fn too_many(at: &str, n: usize, max: usize) -> BadRequest {
    BadRequest {
        status: 413,
        message: format!("{at}.features: {n} features, over the limit of {max}"),
    }
}

fn finite(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()),
        _ => None,
    }
}

/// Builds a batch's labels, all of one JSON type.
#[derive(Default)]
pub struct LabelsBuilder {
    labels: Option<OwnedLabels>,
}

impl LabelsBuilder {
    /// Adds a label (`at`: its field name).
    pub fn push(&mut self, at: &str, value: Option<&Value>) -> Result<(), BadRequest> {
        let Some(value) = value else {
            return Err(bad(at, "missing"));
        };
        let mismatch = || {
            bad(
                at,
                "of another JSON type than the batch's first label (labels of a batch are of one type)",
            )
        };
        match (value, &mut self.labels) {
            (Value::Number(n), None) => {
                self.labels = Some(match n.as_i64() {
                    Some(i) => OwnedLabels::Ints(vec![i]),
                    None => OwnedLabels::Floats(vec![finite(value).ok_or_else(|| bad(at, "not a finite number"))?]),
                })
            }
            (Value::Number(n), Some(OwnedLabels::Ints(v))) => match n.as_i64() {
                Some(i) => v.push(i),
                None => {
                    let x = finite(value).ok_or_else(|| bad(at, "not a finite number"))?;
                    let mut floats: Vec<f64> = v.iter().map(|&i| i as f64).collect();
                    floats.push(x);
                    self.labels = Some(OwnedLabels::Floats(floats));
                }
            },
            (Value::Number(_), Some(OwnedLabels::Floats(v))) => {
                v.push(finite(value).ok_or_else(|| bad(at, "not a finite number"))?)
            }
            (Value::Bool(b), None) => self.labels = Some(OwnedLabels::Bools(vec![*b])),
            (Value::Bool(b), Some(OwnedLabels::Bools(v))) => v.push(*b),
            (Value::String(s), None) => self.labels = Some(OwnedLabels::Strs(vec![s.clone()])),
            (Value::String(s), Some(OwnedLabels::Strs(v))) => v.push(s.clone()),
            (Value::Number(_) | Value::Bool(_) | Value::String(_), Some(_)) => return Err(mismatch()),
            _ => return Err(bad(at, "a label is a number, a boolean or a string")),
        }
        Ok(())
    }

    /// The labels (at least one was pushed).
    pub fn finish(self) -> OwnedLabels {
        self.labels.expect("a label")
    }
}

/// An id under which an event is remembered.
pub fn id(value: &Value, at: &str) -> Result<String, BadRequest> {
    match value {
        Value::String(s) if !s.is_empty() && s.len() <= MAX_LABEL_BYTES => Ok(s.clone()),
        _ => Err(bad(
            at,
            format!("an id is a non-empty string of at most {MAX_LABEL_BYTES} bytes"),
        )),
    }
}

/// Whether the model gives probabilities (MTLinear with the logistic loss).
pub fn has_probabilities(model: &Model) -> bool {
    let est = model.estimator();
    est.class().name == "MTLinear" && est.params().get("loss").and_then(Value::as_str) == Some("logistic")
}

/// Writes `{"predictions": [...]` (the caller closes the object): each score's label in the
/// model's form, the score, and the probability where the model has one.
pub fn predictions(out: &mut String, model: &Model, scores: &[f64]) {
    let form = model.label_form();
    let probabilities = has_probabilities(model);
    out.push_str("{\"predictions\":[");
    for (i, &s) in scores.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"label\":");
        match form.predicted(s >= 0.0) {
            Predicted::Int(v) => {
                let _ = write!(out, "{v}");
            }
            Predicted::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Predicted::Class(ClassLabel::Number(n)) => {
                let _ = write!(out, "{n}");
            }
            Predicted::Class(ClassLabel::Str(text)) => {
                out.push_str(&Value::from(text.as_str()).to_string());
            }
        }
        let _ = write!(out, ",\"score\":{}", number(s));
        if probabilities {
            let _ = write!(out, ",\"probability\":{}", number(0.5 * (1.0 + (0.5 * s).tanh())));
        }
        out.push('}');
    }
    out.push(']');
}

/// A float as JSON (finite; a non-finite value, which the engine never scores, as null).
pub fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

/// An error body: `{"error": "..."}`.
pub fn error_body(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_skips_strings_and_stops_early() {
        assert_eq!(depth(br#"{"a": [1, {"b": "[[[["}]}"#, 10), 3);
        assert_eq!(depth(&[b'['; 1000], 8), 9);
        assert_eq!(depth(br#"{"a\"[": 1}"#, 10), 1);
    }

    #[test]
    fn events_name_the_field_that_is_wrong() {
        let limits = Limits::default();
        let mut b = EventsBuilder::new(64, &limits);
        let ok: Value = serde_json::json!({"cheap": 1, "kind": "promo"});
        b.push("events[0]", Some(&ok), Some(&Value::from("alice"))).unwrap();
        let err = b.push("events[1]", Some(&serde_json::json!([1.0])), Some(&Value::from("bob")));
        assert!(err.unwrap_err().message.starts_with("events[1].features: an array"));
        let err = b.push(
            "events[1]",
            Some(&serde_json::json!({"x": true})),
            Some(&Value::from(1)),
        );
        assert_eq!(
            err.unwrap_err().message,
            "events[1].features.x: not a finite number or a string"
        );
        let err = b.push("events[1]", Some(&ok), None);
        assert!(err.unwrap_err().message.starts_with("events[1].task: missing"));
        let events = b.finish();
        assert_eq!(events.features.len(), 1);
        let mut labels = LabelsBuilder::default();
        labels.push("events[0].label", Some(&Value::from(1))).unwrap();
        labels.push("events[1].label", Some(&Value::from(0.5))).unwrap();
        assert_eq!(labels.finish(), OwnedLabels::Floats(vec![1.0, 0.5]));
        let mut labels = LabelsBuilder::default();
        labels.push("a", Some(&Value::from("spam"))).unwrap();
        assert!(labels.push("b", Some(&Value::from(1))).is_err());
    }
}
