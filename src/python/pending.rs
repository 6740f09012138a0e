//! Pending events (delayed labels) between Python's store (`omtl._delayed`) and the crate's
//! [`PendingStore`], for the model file's pending section: conversion only.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::model::{PendingEvent, PendingLimits, PendingRow, PendingStore, TaskId};

/// One event as Python keeps it: id, task (None, an int or a str), row kind (`"dense"` or
/// `"columns"`), the row's values (dense) or indices, its values (columns; None for dense),
/// the score served and the time it was remembered.
pub type EventTuple = (String, Option<TaskValue>, String, Vec<f64>, Option<Vec<f64>>, f64, f64);

/// The events, the limits `(max_events, max_bytes, max_age)`, and the evicted and expired counts.
pub type PendingTuple = (Vec<EventTuple>, (usize, usize, f64), u64, u64);

/// A task id as Python gives it.
#[derive(FromPyObject, IntoPyObject)]
pub enum TaskValue {
    /// An integer id.
    Int(i64),
    /// A string label.
    Str(String),
}

/// The crate's store of Python's events, checked ([`PendingStore::from_parts`]).
pub fn pending_store(pending: &Bound<'_, PyAny>) -> PyResult<PendingStore> {
    let (events, (max_events, max_bytes, max_age), evicted, expired): PendingTuple = pending.extract()?;
    let mut out = Vec::with_capacity(events.len());
    for (id, task, kind, a, b, score, time) in events {
        let row = match (kind.as_str(), b) {
            ("dense", None) => PendingRow::Dense(a),
            ("columns", Some(values)) => {
                let indices = a
                    .iter()
                    .map(|&i| u32::try_from(i as i64).ok().filter(|&j| f64::from(j) == i))
                    .collect::<Option<Vec<u32>>>()
                    .ok_or_else(|| PyValueError::new_err("a pending row's columns must be integers in [0, 2^32)"))?;
                PendingRow::Columns { indices, values }
            }
            _ => return Err(PyValueError::new_err(format!("unknown pending row kind {kind:?}"))),
        };
        let task = task.map(|t| match t {
            TaskValue::Int(i) => TaskId::Int(i),
            TaskValue::Str(s) => TaskId::Str(s.into()),
        });
        out.push(PendingEvent {
            id: id.into(),
            task,
            row,
            score,
            time,
        });
    }
    let limits = PendingLimits {
        max_events,
        max_bytes,
        max_age,
    };
    super::convert::guarded(|| PendingStore::from_parts(out, limits, evicted, expired))
}

/// Python's form of the crate's store (named rows as columns: both are columns of the
/// model's width).
pub fn pending_tuple(store: &PendingStore) -> PendingTuple {
    let events = store
        .iter()
        .map(|e| {
            let (kind, a, b) = match &e.row {
                PendingRow::Dense(v) => ("dense", v.clone(), None),
                PendingRow::Columns { indices, values } | PendingRow::Named { indices, values } => (
                    "columns",
                    indices.iter().map(|&i| f64::from(i)).collect(),
                    Some(values.clone()),
                ),
            };
            let task = e.task.as_ref().map(|t| match t {
                TaskId::Int(i) => TaskValue::Int(*i),
                TaskId::Str(s) => TaskValue::Str(s.to_string()),
            });
            (e.id.to_string(), task, kind.to_owned(), a, b, e.score, e.time)
        })
        .collect();
    let info = store.info();
    let l = store.limits();
    (
        events,
        (l.max_events, l.max_bytes, l.max_age),
        info.evicted,
        info.expired,
    )
}
