//! The fast path for a well-formed `/v1/predict` or `/v1/learn` body: parsed by serde straight
//! into typed events (no JSON tree), then into the batch. Anything unexpected — a JSON error, a
//! wrong type, a rule broken — gives `None`, and the caller parses the body again with
//! [`super::api`], whose errors name the field. So errors are worded in one place, and valid
//! requests, the common case, pay only for this pass.

use std::collections::HashSet;
use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::api::Limits;
use super::ops::{Events, Features, OwnedLabels};
use crate::hashing::RowBuilder;
use crate::model::{TaskId, MAX_LABEL_BYTES};

/// An event's features as sent: a dense row, or name → number or string.
enum FeaturesIn {
    Dense(Vec<f64>),
    Named(Vec<(String, Scalar)>),
}

/// A JSON scalar: a number or a string (the types a feature value, task or label takes).
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl<'de> Deserialize<'de> for FeaturesIn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FeaturesVisitor;

        impl<'de> Visitor<'de> for FeaturesVisitor {
            type Value = FeaturesIn;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of numbers or an object of name -> number")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FeaturesIn, A::Error> {
                let mut row = Vec::with_capacity(seq.size_hint().unwrap_or(16));
                while let Some(v) = seq.next_element::<f64>()? {
                    row.push(v);
                }
                Ok(FeaturesIn::Dense(row))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FeaturesIn, A::Error> {
                let mut named = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some(entry) = map.next_entry::<String, Scalar>()? {
                    named.push(entry);
                }
                Ok(FeaturesIn::Named(named))
            }
        }

        deserializer.deserialize_any(FeaturesVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventIn {
    #[serde(default)]
    task: Option<Scalar>,
    features: FeaturesIn,
    #[serde(default)]
    label: Option<Scalar>,
    #[serde(default)]
    remember: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    events: Vec<EventIn>,
}

/// A batch from the fast path.
pub struct Parsed {
    /// The events.
    pub events: Events,
    /// Their labels (a learn).
    pub labels: Option<OwnedLabels>,
    /// Their ids to remember (a predict), one per event.
    pub ids: Vec<Option<String>>,
}

fn task(value: Scalar) -> Option<TaskId> {
    match value {
        Scalar::Int(i) => Some(TaskId::Int(i)),
        Scalar::Str(s) if s.len() <= MAX_LABEL_BYTES => Some(TaskId::Str(s.into())),
        _ => None,
    }
}

/// Adds `label` to `labels` (all of one JSON type; integers turn floats beside a float).
fn push_label(labels: &mut Option<OwnedLabels>, label: Scalar) -> Option<()> {
    match (labels.as_mut(), label) {
        (None, Scalar::Int(i)) => *labels = Some(OwnedLabels::Ints(vec![i])),
        (None, Scalar::Float(x)) => *labels = Some(OwnedLabels::Floats(vec![x])),
        (None, Scalar::Bool(b)) => *labels = Some(OwnedLabels::Bools(vec![b])),
        (None, Scalar::Str(s)) => *labels = Some(OwnedLabels::Strs(vec![s])),
        (Some(OwnedLabels::Ints(v)), Scalar::Int(i)) => v.push(i),
        (Some(OwnedLabels::Ints(v)), Scalar::Float(x)) => {
            let mut floats: Vec<f64> = v.iter().map(|&i| i as f64).collect();
            floats.push(x);
            *labels = Some(OwnedLabels::Floats(floats));
        }
        (Some(OwnedLabels::Floats(v)), Scalar::Int(i)) => v.push(i as f64),
        (Some(OwnedLabels::Floats(v)), Scalar::Float(x)) => v.push(x),
        (Some(OwnedLabels::Bools(v)), Scalar::Bool(b)) => v.push(b),
        (Some(OwnedLabels::Strs(v)), Scalar::Str(s)) => v.push(s),
        _ => return None,
    }
    Some(())
}

/// A valid request's batch (`learn`: every event has a label and none is remembered), or
/// `None`. `width`: the model's hashed width for named features.
pub fn parse(body: &[u8], limits: &Limits, width: usize, learn: bool) -> Option<Parsed> {
    let request: Request = serde_json::from_slice(body).ok()?;
    let n = request.events.len();
    if n == 0 || n > limits.max_events {
        return None;
    }
    let dense = matches!(request.events[0].features, FeaturesIn::Dense(_));
    let with_tasks = request.events[0].task.is_some();
    let n_cols = match &request.events[0].features {
        FeaturesIn::Dense(row) => row.len(),
        FeaturesIn::Named(_) => 0,
    };
    let (mut data, mut indptr, mut indices) = (Vec::new(), vec![0i64], Vec::new());
    let (mut tasks, mut labels, mut ids) = (Vec::new(), None, Vec::new());
    let mut seen = HashSet::new();
    let mut row = RowBuilder::default();
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    for event in request.events {
        if event.task.is_some() != with_tasks || event.label.is_some() != learn || (learn && event.remember.is_some()) {
            return None;
        }
        if let Some(t) = event.task {
            tasks.push(task(t)?);
        }
        if let Some(label) = event.label {
            if matches!(label, Scalar::Float(x) if !x.is_finite()) {
                return None;
            }
            push_label(&mut labels, label)?;
        }
        if let Some(id) = &event.remember {
            if id.is_empty() || id.len() > MAX_LABEL_BYTES || !seen.insert(id.clone()) {
                return None;
            }
        }
        ids.push(event.remember);
        match event.features {
            FeaturesIn::Dense(values) if dense => {
                if values.len() != n_cols || n_cols == 0 || n_cols > limits.max_features {
                    return None;
                }
                if values.iter().any(|v| !v.is_finite()) {
                    return None;
                }
                data.extend_from_slice(&values);
            }
            FeaturesIn::Named(named) if !dense => {
                if named.len() > limits.max_features {
                    return None;
                }
                row.clear();
                for (name, value) in named {
                    match value {
                        Scalar::Int(i) => row.named(name.as_bytes(), i as f64, width).ok()?,
                        Scalar::Float(x) => row.named(name.as_bytes(), x, width).ok()?,
                        Scalar::Str(s) => row.categorical(name.as_bytes(), s.as_bytes(), width).ok()?,
                        Scalar::Bool(_) => return None,
                    }
                }
                row.finish(&mut idx, &mut val);
                indices.extend_from_slice(&idx);
                data.extend_from_slice(&val);
                indptr.push(indices.len() as i64);
            }
            _ => return None,
        }
    }
    let features = if dense {
        Features::Dense { data, n_cols }
    } else {
        Features::Named {
            indptr,
            indices,
            values: data,
        }
    };
    Some(Parsed {
        events: Events {
            features,
            tasks: with_tasks.then_some(tasks),
        },
        labels,
        ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::api::{EventsBuilder, LabelsBuilder};
    use serde_json::Value;

    /// The Value path's batch of a body (the reference the fast path must equal).
    fn slow(body: &str, learn: bool) -> (Events, Option<OwnedLabels>) {
        let limits = Limits::default();
        let v: Value = serde_json::from_str(body).unwrap();
        let mut events = EventsBuilder::new(64, &limits);
        let mut labels = LabelsBuilder::default();
        for (i, e) in v["events"].as_array().unwrap().iter().enumerate() {
            events
                .push(&format!("events[{i}]"), e.get("features"), e.get("task"))
                .unwrap();
            if learn {
                labels.push("label", e.get("label")).unwrap();
            }
        }
        (events.finish(), learn.then(|| labels.finish()))
    }

    #[test]
    fn valid_bodies_give_the_batch_the_field_by_field_parser_gives() {
        let limits = Limits::default();
        for (body, learn) in [
            (
                r#"{"events": [{"task": "a", "features": {"x": 1, "k": "v"}, "label": 1}, {"task": 7, "features": {"y": 2.5}, "label": 0.5}]}"#,
                true,
            ),
            (
                r#"{"events": [{"features": [1, 2.5], "label": "spam"}, {"features": [0, -1e-3], "label": "ham"}]}"#,
                true,
            ),
            (
                r#"{"events": [{"task": "a", "features": [1, 2], "remember": "m1"}, {"task": "b", "features": [3, 4]}]}"#,
                false,
            ),
        ] {
            let fast = parse(body.as_bytes(), &limits, 64, learn).expect("valid");
            let (events, labels) = slow(body, learn);
            assert_eq!(fast.events, events);
            assert_eq!(fast.labels, labels);
        }
    }

    #[test]
    fn anything_off_falls_back() {
        let limits = Limits::default();
        for (body, learn) in [
            (r#"{"events": []}"#, false),
            (r#"{"events": [{"features": [1], "extra": 1}]}"#, false),
            (r#"{"events": [{"features": [1]}, {"features": [1, 2]}]}"#, false),
            (
                r#"{"events": [{"features": [1], "task": 1}, {"features": [1]}]}"#,
                false,
            ),
            (r#"{"events": [{"features": {"a": true}}]}"#, false),
            (
                r#"{"events": [{"features": [1], "label": 1}, {"features": [1], "label": "x"}]}"#,
                true,
            ),
            (r#"{"events": [{"features": [1], "label": 1, "remember": "a"}]}"#, true),
            (
                r#"{"events": [{"features": [1], "remember": "a"}, {"features": [2], "remember": "a"}]}"#,
                false,
            ),
            (r#"{"events": [{"features": [1]}]}"#, true),
            (r#"{"events": [{"features": [1e999]}]}"#, false),
        ] {
            assert!(parse(body.as_bytes(), &limits, 64, learn).is_none(), "{body}");
        }
    }
}
