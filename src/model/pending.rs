//! Delayed labels: events scored when they arrive and learned when their label comes, later.
//!
//! [`Model::remember`] scores an event as [`Model::decision_one`] does and keeps its row, task,
//! served score and time under an id in the model's [`PendingStore`]; [`Model::learn_label`]
//! learns the kept event as [`Model::learn_one`] would at that point, and the progressive
//! counters (`n_mistakes`) count the prediction that was served, not the one the model would
//! make at learning time. Learning events through `remember` + `learn_label` in any order of
//! label arrival gives the model, bit for bit, that `learn_one` gives in the order the labels
//! arrived.
//!
//! Time is the caller's: every call takes `now` (seconds, any origin), and the engine never
//! reads a clock, so replaying the same calls gives the same store.
//!
//! The store is bounded ([`PendingLimits`]), and the rule is:
//! - **size**: at most `max_events` events and `max_bytes` bytes ([`PendingStore::bytes`]
//!   counts ids, task labels and rows); remembering an event that would exceed either evicts
//!   the oldest remembered events first (counted in [`PendingInfo::evicted`]);
//! - **age**: an event remembered more than `max_age` seconds before `now` is expired:
//!   `learn_label` refuses it ([`Error::InvalidParameter`] naming its age) and leaves it;
//!   `remember` first drops the expired events at the old end of the store (counted in
//!   [`PendingInfo::expired`]).
//!
//! An id unknown to the store (never remembered, learned already, evicted or dropped) is an
//! [`Error::UnknownId`]. Remembering an id that is pending replaces its event. The store is
//! saved with the model (a section of the model file, [`crate::model_file`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{EventRow, Label, Labels, Model, TaskId, TaskRef, Tasks, MAX_LABEL_BYTES};
use crate::data::Rows;
use crate::error::{invalid, Error, Result};
use crate::learner::predict_sign;

/// The bytes an event costs besides its id, task label and row (its score, time, order and
/// index entries): a fixed figure, so that the store's size, and so its evictions, are the same
/// on every machine and in every replay.
pub const EVENT_OVERHEAD: usize = 96;

/// The bounds of a [`PendingStore`] (the module documentation states the eviction rule).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PendingLimits {
    /// The most events kept. Default 1,000,000.
    pub max_events: usize,
    /// The most bytes kept ([`PendingStore::bytes`]). Default 256 MiB.
    pub max_bytes: usize,
    /// The age, in seconds, beyond which an event can no longer be learned. Default 30 days.
    pub max_age: f64,
}

impl Default for PendingLimits {
    fn default() -> Self {
        PendingLimits {
            max_events: 1_000_000,
            max_bytes: 256 << 20,
            max_age: 30.0 * 86_400.0,
        }
    }
}

impl PendingLimits {
    /// Checks the limits: `max_events` and `max_bytes` at least 1, `max_age` positive (it may be
    /// infinite).
    pub fn check(&self) -> Result<()> {
        if self.max_events == 0 || self.max_bytes == 0 {
            return Err(invalid("pending_limits", "max_events and max_bytes must be at least 1"));
        }
        if self.max_age.is_nan() || self.max_age <= 0.0 {
            return Err(invalid(
                "pending_limits",
                format!("max_age must be a positive number of seconds, got {}", self.max_age),
            ));
        }
        Ok(())
    }
}

/// What [`Model::pending`] reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PendingInfo {
    /// Events kept.
    pub count: usize,
    /// Their size ([`PendingStore::bytes`]).
    pub bytes: usize,
    /// The bounds.
    pub limits: PendingLimits,
    /// Events evicted to make room since the store began.
    pub evicted: u64,
    /// Expired events dropped since the store began.
    pub expired: u64,
}

/// A kept event's row, owned, in the form it was given.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingRow {
    /// A dense row.
    Dense(Vec<f64>),
    /// Integer columns and their values.
    Columns {
        /// The columns.
        indices: Vec<u32>,
        /// Their values.
        values: Vec<f64>,
    },
    /// Hashed named features (columns) and their values.
    Named {
        /// The columns.
        indices: Vec<u32>,
        /// Their values.
        values: Vec<f64>,
    },
}

impl PendingRow {
    /// The row, owned.
    pub fn of(x: &EventRow) -> Self {
        match *x {
            EventRow::Dense(v) => PendingRow::Dense(v.to_vec()),
            EventRow::Columns { indices, values } => PendingRow::Columns {
                indices: indices.to_vec(),
                values: values.to_vec(),
            },
            EventRow::Named { indices, values } => PendingRow::Named {
                indices: indices.to_vec(),
                values: values.to_vec(),
            },
        }
    }

    /// The row, borrowed.
    pub fn event(&self) -> EventRow<'_> {
        match self {
            PendingRow::Dense(v) => EventRow::Dense(v),
            PendingRow::Columns { indices, values } => EventRow::Columns { indices, values },
            PendingRow::Named { indices, values } => EventRow::Named { indices, values },
        }
    }

    fn bytes(&self) -> usize {
        match self {
            PendingRow::Dense(v) => 8 * v.len(),
            PendingRow::Columns { indices, values } | PendingRow::Named { indices, values } => {
                4 * indices.len() + 8 * values.len()
            }
        }
    }
}

/// One kept event.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    /// Its id.
    pub id: Arc<str>,
    /// Its task (`None`: a model with one task).
    pub task: Option<TaskId>,
    /// Its row.
    pub row: PendingRow,
    /// The score served when it was remembered.
    pub score: f64,
    /// When it was remembered (the caller's `now`).
    pub time: f64,
}

impl PendingEvent {
    /// The bytes it counts for in the store.
    pub fn bytes(&self) -> usize {
        let task = match &self.task {
            Some(TaskId::Str(s)) => s.len(),
            _ => 0,
        };
        EVENT_OVERHEAD + self.id.len() + task + self.row.bytes()
    }

    /// Its age at `now`, if that is beyond `max_age`.
    fn expired_age(&self, now: f64, max_age: f64) -> Option<f64> {
        let age = now - self.time;
        (age > max_age).then_some(age)
    }
}

/// The events a model keeps until their labels arrive, oldest first. See the module
/// documentation for its bounds and eviction rule.
#[derive(Debug, Clone, Default)]
pub struct PendingStore {
    /// Events by order of remembering.
    events: BTreeMap<u64, PendingEvent>,
    /// Each id's place in `events`.
    by_id: HashMap<Arc<str>, u64>,
    next: u64,
    bytes: usize,
    limits: PendingLimits,
    evicted: u64,
    expired: u64,
}

impl PartialEq for PendingStore {
    /// Equal events in equal order, limits and counters (the places' numbering aside).
    fn eq(&self, other: &Self) -> bool {
        self.limits == other.limits
            && self.evicted == other.evicted
            && self.expired == other.expired
            && self.events.values().eq(other.events.values())
    }
}

impl PendingStore {
    /// A store of `events` (oldest first) with its limits and counters, checked: distinct ids
    /// of at most [`MAX_LABEL_BYTES`] bytes, finite scores and times, within the limits.
    pub fn from_parts(events: Vec<PendingEvent>, limits: PendingLimits, evicted: u64, expired: u64) -> Result<Self> {
        limits.check()?;
        let mut store = PendingStore {
            limits,
            evicted,
            expired,
            ..PendingStore::default()
        };
        if events.len() > limits.max_events {
            return Err(invalid("pending", "more events than max_events"));
        }
        for event in events {
            check_id(&event.id)?;
            if !event.score.is_finite() || !event.time.is_finite() {
                return Err(invalid("pending", "an event's score and time must be finite"));
            }
            if store.by_id.contains_key(&event.id) {
                return Err(invalid("pending", format!("the id {:?} appears twice", &*event.id)));
            }
            store.push(event);
        }
        if store.bytes > limits.max_bytes {
            return Err(invalid("pending", "more bytes than max_bytes"));
        }
        Ok(store)
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The size of the events kept ([`PendingEvent::bytes`] summed).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The bounds.
    pub fn limits(&self) -> PendingLimits {
        self.limits
    }

    /// The counters and bounds.
    pub fn info(&self) -> PendingInfo {
        PendingInfo {
            count: self.len(),
            bytes: self.bytes,
            limits: self.limits,
            evicted: self.evicted,
            expired: self.expired,
        }
    }

    /// The events, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &PendingEvent> + '_ {
        self.events.values()
    }

    /// The event kept under `id`.
    pub fn get(&self, id: &str) -> Option<&PendingEvent> {
        self.by_id.get(id).map(|seq| &self.events[seq])
    }

    /// Removes the events of the tasks `tasks`; returns how many.
    pub fn remove_tasks(&mut self, tasks: &[TaskRef]) -> usize {
        let doomed: Vec<u64> = self
            .events
            .iter()
            .filter(|(_, e)| e.task.as_ref().is_some_and(|t| tasks.contains(&t.as_ref())))
            .map(|(&seq, _)| seq)
            .collect();
        for seq in &doomed {
            self.remove(*seq);
        }
        doomed.len()
    }

    fn push(&mut self, event: PendingEvent) {
        self.insert(self.next, event);
        self.next += 1;
    }

    fn insert(&mut self, seq: u64, event: PendingEvent) {
        self.bytes += event.bytes();
        self.by_id.insert(event.id.clone(), seq);
        self.events.insert(seq, event);
    }

    fn remove(&mut self, seq: u64) -> PendingEvent {
        let event = self.events.remove(&seq).expect("a kept place");
        self.by_id.remove(&event.id);
        self.bytes -= event.bytes();
        event
    }

    /// Makes room for an event of `bytes` bytes at `now`: drops the expired events at the old
    /// end, then evicts the oldest while either bound would be exceeded.
    fn make_room(&mut self, bytes: usize, now: f64) {
        while let Some((&seq, oldest)) = self.events.first_key_value() {
            if oldest.expired_age(now, self.limits.max_age).is_none() {
                break;
            }
            self.remove(seq);
            self.expired += 1;
        }
        while let Some((&seq, _)) = self.events.first_key_value() {
            if self.events.len() < self.limits.max_events && self.bytes + bytes <= self.limits.max_bytes {
                break;
            }
            self.remove(seq);
            self.evicted += 1;
        }
    }
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_LABEL_BYTES {
        return Err(invalid(
            "id",
            format!("an id is a non-empty string of at most {MAX_LABEL_BYTES} bytes"),
        ));
    }
    Ok(())
}

fn expired(id: &str, age: f64, max_age: f64) -> Error {
    invalid(
        "id",
        format!("the event {id:?} was remembered {age} s ago, longer than max_age={max_age} s: it expired"),
    )
}

/// The rows and tasks of pending events, as one batch.
struct EventBatch {
    indptr: Vec<i64>,
    indices: Vec<u32>,
    values: Vec<f64>,
    /// The width of dense rows; `None`: the rows are columns or named features.
    dense: Option<usize>,
    tasks: Vec<TaskId>,
    all_tasks: bool,
}

impl EventBatch {
    fn of(events: &[&PendingEvent]) -> Result<Self> {
        let mixed = || {
            invalid(
                "id",
                "the events of one batch of labels must have rows of one kind (dense rows of one width, or columns, \
                 or named features): label them in separate batches",
            )
        };
        let first = &events[0].row;
        let mut batch = EventBatch {
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
            dense: match first {
                PendingRow::Dense(v) => Some(v.len()),
                _ => None,
            },
            tasks: Vec::with_capacity(events.len()),
            all_tasks: events[0].task.is_some(),
        };
        for event in events {
            match (&event.row, first) {
                (PendingRow::Dense(v), PendingRow::Dense(_)) if Some(v.len()) == batch.dense => {
                    batch.values.extend_from_slice(v);
                }
                (PendingRow::Columns { indices, values }, PendingRow::Columns { .. })
                | (PendingRow::Named { indices, values }, PendingRow::Named { .. }) => {
                    batch.indices.extend_from_slice(indices);
                    batch.values.extend_from_slice(values);
                    batch.indptr.push(batch.indices.len() as i64);
                }
                _ => return Err(mixed()),
            }
            match &event.task {
                Some(task) if batch.all_tasks => batch.tasks.push(task.clone()),
                None if !batch.all_tasks => {}
                _ => {
                    return Err(invalid(
                        "tasks",
                        "the events of one batch of labels must all have tasks, or none",
                    ))
                }
            }
        }
        Ok(batch)
    }

    /// The rows (`n_cols`: the width of sparse rows, as for one event).
    fn rows(&self, n_cols: usize) -> Rows<'_> {
        match self.dense {
            Some(d) => Rows::dense(&self.values, self.values.len() / d.max(1), d),
            None => Rows::Csr {
                indptr: &self.indptr,
                indices: &self.indices,
                data: &self.values,
                n_cols,
            },
        }
    }
}

fn check_now(now: f64) -> Result<()> {
    if !now.is_finite() {
        return Err(invalid(
            "now",
            format!("the time must be a finite number of seconds, got {now}"),
        ));
    }
    Ok(())
}

impl Model {
    /// Scores one event as [`Model::decision_one`] does and keeps it under `id` (replacing the
    /// event pending under that id) until [`Model::learn_label`] learns it. `now`: the time in
    /// seconds. May evict events (module documentation). Atomic; returns the score.
    pub fn remember(&mut self, id: &str, x: EventRow, task: Option<TaskRef>, now: f64) -> Result<f64> {
        check_id(id)?;
        check_now(now)?;
        let score = self.decision_one(x, task)?;
        let event = PendingEvent {
            id: id.into(),
            task: task.map(TaskRef::to_owned),
            row: PendingRow::of(&x),
            score,
            time: now,
        };
        let store = &mut self.pending;
        if event.bytes() > store.limits.max_bytes {
            return Err(invalid(
                "x",
                format!(
                    "the event takes {} bytes, over the pending store's max_bytes={}",
                    event.bytes(),
                    store.limits.max_bytes
                ),
            ));
        }
        if let Some(seq) = store.by_id.get(id).copied() {
            store.remove(seq);
        }
        store.make_room(event.bytes(), now);
        store.push(event);
        Ok(score)
    }

    /// Learns the event kept under `id` with its label `y`, as [`Model::learn_one`] would at
    /// this point, and returns the score it has before this update. The book counts the
    /// prediction served by [`Model::remember`] (a mistake if its sign disagrees with `y`).
    /// `now`: the time in seconds; an event older than the store's `max_age` is refused. Atomic:
    /// on an error the model and the store are as they were.
    pub fn learn_label(&mut self, id: &str, y: Label, now: f64) -> Result<f64> {
        check_now(now)?;
        let Some(&seq) = self.pending.by_id.get(id) else {
            return Err(Error::UnknownId(id.to_owned()));
        };
        let max_age = self.pending.limits.max_age;
        if let Some(age) = self.pending.events[&seq].expired_age(now, max_age) {
            return Err(expired(id, age, max_age));
        }
        let (y_pm1, _) = super::read_label(y, self.book().map(|b| &b.label_form))?;
        let event = self.pending.remove(seq);
        match self.learn_one(event.row.event(), event.task.as_ref().map(TaskId::as_ref), y) {
            Ok(score) => {
                let book = &mut self.fitted.as_mut().expect("learned an event").book;
                let pre_update = u64::from(predict_sign(score) != y_pm1);
                let served = u64::from(predict_sign(event.score) != y_pm1);
                book.n_mistakes = book.n_mistakes - pre_update + served;
                Ok(score)
            }
            Err(e) => {
                self.pending.insert(seq, event);
                Err(e)
            }
        }
    }

    /// Learns the events kept under `ids` with their `labels`, in order, as one batch
    /// ([`Model::learn`]: a batch's label rules apply), and returns their scores before their
    /// updates; the book counts the served predictions. The events' rows must be of one kind
    /// (dense rows of one width, or columns, or named features). Atomic, as
    /// [`Model::learn_label`] (an interrupt keeps the events learned before it, and removes
    /// them from the store).
    pub fn learn_labels(&mut self, ids: &[&str], labels: Labels, now: f64) -> Result<Vec<f64>> {
        check_now(now)?;
        if labels.len() != ids.len() {
            return Err(Error::LengthMismatch {
                rows: ids.len(),
                what: "y",
                len: labels.len(),
            });
        }
        let max_age = self.pending.limits.max_age;
        let mut seqs = Vec::with_capacity(ids.len());
        for &id in ids {
            let seq = *self
                .pending
                .by_id
                .get(id)
                .ok_or_else(|| Error::UnknownId(id.to_owned()))?;
            if let Some(age) = self.pending.events[&seq].expired_age(now, max_age) {
                return Err(expired(id, age, max_age));
            }
            if seqs.contains(&seq) {
                return Err(invalid("id", format!("the id {id:?} is labelled twice in one batch")));
            }
            seqs.push(seq);
        }
        let events: Vec<&PendingEvent> = seqs.iter().map(|s| &self.pending.events[s]).collect();
        let batch = EventBatch::of(&events)?;
        let served: Vec<f64> = events.iter().map(|e| e.score).collect();
        let n_cols = self.event_rows(&events[0].row.event(), &[0, 0])?.n_cols();
        let task_refs: Vec<TaskRef> = batch.tasks.iter().map(TaskId::as_ref).collect();
        let rows = batch.rows(n_cols);
        let tasks = if batch.all_tasks {
            Tasks::Ids(&task_refs)
        } else {
            Tasks::Omitted
        };
        let current = self.book().map(|b| &b.label_form);
        let mut y = Vec::new();
        super::read_labels(labels, current, !self.is_fitted(), &mut y)?;
        let outcome = self.learn(&rows, tasks, labels);
        let done = match &outcome {
            Ok(scores) | Err(Error::Interrupted { scores }) => scores.len(),
            Err(_) => 0,
        };
        if done > 0 {
            let scores = match &outcome {
                Ok(s) | Err(Error::Interrupted { scores: s }) => s,
                Err(_) => unreachable!("done > 0"),
            };
            let book = &mut self.fitted.as_mut().expect("learned events").book;
            for ((&score, &served), &y) in scores.iter().zip(&served).zip(&y) {
                book.n_mistakes =
                    book.n_mistakes - u64::from(predict_sign(score) != y) + u64::from(predict_sign(served) != y);
            }
            for &seq in &seqs[..done] {
                self.pending.remove(seq);
            }
        }
        outcome
    }

    /// The pending store's size, bounds and counters.
    pub fn pending(&self) -> PendingInfo {
        self.pending.info()
    }

    /// The pending store.
    pub fn pending_store(&self) -> &PendingStore {
        &self.pending
    }

    /// Replaces the pending store (a model file's, checked by [`PendingStore::from_parts`]).
    pub fn set_pending_store(&mut self, store: PendingStore) {
        self.pending = store;
    }

    /// Sets the pending store's bounds; a store over the new size bounds evicts its oldest
    /// events (expired ones stay until `remember` or `learn_label` meets them).
    pub fn set_pending_limits(&mut self, limits: PendingLimits) -> Result<()> {
        limits.check()?;
        let store = &mut self.pending;
        store.limits = limits;
        while store.len() > limits.max_events || store.bytes > limits.max_bytes {
            let (&seq, _) = store.events.first_key_value().expect("a non-empty store");
            store.remove(seq);
            store.evicted += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "pending_tests.rs"]
mod tests;
