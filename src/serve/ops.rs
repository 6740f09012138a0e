//! What the server does to its model: the operations a request asks for, their log record
//! payloads (binary, little-endian, the model file's pending-row encoding for rows and tasks),
//! and applying one to the model. Each kind keeps its payload; a kind is added, never changed,
//! so a log holds any mix of kinds and an older log replays as it was written. Applying is deterministic (time comes in the record), so a
//! replay of the log gives the model the live server had.

use crate::data::Rows;
use crate::error::{Error, Result};
use crate::model::{ForgetReport, Labels, Model, PendingEvent, PendingRow, TaskId, TaskRef, Tasks};
use crate::model_file::pending::{read_task, text, write_task, Cursor};

/// Record kinds.
pub mod kind {
    /// Learn a batch.
    pub const LEARN: u8 = 1;
    /// Score a batch and remember some of its events.
    pub const REMEMBER: u8 = 2;
    /// Learn remembered events with their labels.
    pub const LABEL: u8 = 3;
    /// Forget tasks.
    pub const FORGET: u8 = 4;
}

/// A batch's features, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Features {
    /// Dense rows of one width.
    Dense {
        /// The values, row after row.
        data: Vec<f64>,
        /// The width.
        n_cols: usize,
    },
    /// Named features hashed into the estimator's `n_features` columns, as CSR.
    Named {
        /// Row starts.
        indptr: Vec<i64>,
        /// Columns (sorted, distinct within a row).
        indices: Vec<u32>,
        /// Values.
        values: Vec<f64>,
    },
}

impl Features {
    /// The number of rows.
    pub fn len(&self) -> usize {
        match self {
            Features::Dense { data, n_cols } => data.len() / (*n_cols).max(1),
            Features::Named { indptr, .. } => indptr.len() - 1,
        }
    }

    /// The rows (`width`: the estimator's hashed width, for named features).
    pub fn rows(&self, width: usize) -> Rows<'_> {
        match self {
            Features::Dense { data, n_cols } => Rows::dense(data, self.len(), *n_cols),
            Features::Named {
                indptr,
                indices,
                values,
            } => Rows::Csr {
                indptr,
                indices,
                data: values,
                n_cols: width,
            },
        }
    }

    /// Row `r`, owned, as the pending store keeps it.
    pub fn row(&self, r: usize) -> PendingRow {
        match self {
            Features::Dense { data, n_cols } => PendingRow::Dense(data[r * n_cols..(r + 1) * n_cols].to_vec()),
            Features::Named {
                indptr,
                indices,
                values,
            } => {
                let (a, b) = (indptr[r] as usize, indptr[r + 1] as usize);
                PendingRow::Named {
                    indices: indices[a..b].to_vec(),
                    values: values[a..b].to_vec(),
                }
            }
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Features::Dense { data, n_cols } => {
                out.push(0);
                out.extend_from_slice(&(*n_cols as u64).to_le_bytes());
                out.extend_from_slice(&(data.len() as u64).to_le_bytes());
                data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            Features::Named {
                indptr,
                indices,
                values,
            } => {
                out.push(1);
                out.extend_from_slice(&(indptr.len() as u64).to_le_bytes());
                indptr.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
                out.extend_from_slice(&(indices.len() as u64).to_le_bytes());
                indices.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
                values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
        }
    }

    fn read(cursor: &mut Cursor) -> Result<Self> {
        let numbers = |cursor: &mut Cursor, n: usize| -> Result<Vec<f64>> {
            Ok(cursor
                .items(n, 8)?
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect())
        };
        match cursor.u8()? {
            0 => {
                let n_cols = cursor.size()?;
                let n = cursor.size()?;
                Ok(Features::Dense {
                    data: numbers(cursor, n)?,
                    n_cols,
                })
            }
            1 => {
                let n = cursor.size()?;
                let indptr = cursor
                    .items(n, 8)?
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                let nnz = cursor.size()?;
                let indices = cursor
                    .items(nnz, 4)?
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect();
                Ok(Features::Named {
                    indptr,
                    indices,
                    values: numbers(cursor, nnz)?,
                })
            }
            k => Err(corrupt(format!("unknown features kind {k}"))),
        }
    }
}

/// A batch's labels, owned, one type.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedLabels {
    /// Integers.
    Ints(Vec<i64>),
    /// Floating-point numbers.
    Floats(Vec<f64>),
    /// Booleans.
    Bools(Vec<bool>),
    /// Strings.
    Strs(Vec<String>),
}

impl OwnedLabels {
    /// Borrowed, with `strs` the strings borrowed (kept by the caller).
    pub fn with<T>(&self, f: impl FnOnce(Labels) -> T) -> T {
        match self {
            OwnedLabels::Ints(v) => f(Labels::Ints(v)),
            OwnedLabels::Floats(v) => f(Labels::Floats(v)),
            OwnedLabels::Bools(v) => f(Labels::Bools(v)),
            OwnedLabels::Strs(v) => {
                let refs: Vec<&str> = v.iter().map(String::as_str).collect();
                f(Labels::Strs(&refs))
            }
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        let (tag, n) = match self {
            OwnedLabels::Ints(v) => (0, v.len()),
            OwnedLabels::Floats(v) => (1, v.len()),
            OwnedLabels::Bools(v) => (2, v.len()),
            OwnedLabels::Strs(v) => (3, v.len()),
        };
        out.push(tag);
        out.extend_from_slice(&(n as u64).to_le_bytes());
        match self {
            OwnedLabels::Ints(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            OwnedLabels::Floats(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            OwnedLabels::Bools(v) => out.extend(v.iter().map(|&b| u8::from(b))),
            OwnedLabels::Strs(v) => v.iter().for_each(|s| text(out, s)),
        }
    }

    fn read(cursor: &mut Cursor) -> Result<Self> {
        let tag = cursor.u8()?;
        let n = cursor.size()?;
        Ok(match tag {
            0 => OwnedLabels::Ints(
                cursor
                    .items(n, 8)?
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
            1 => OwnedLabels::Floats(
                cursor
                    .items(n, 8)?
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
            2 => OwnedLabels::Bools(cursor.items(n, 1)?.iter().map(|&b| b != 0).collect()),
            3 => {
                if n > cursor.data.len() / 4 {
                    return Err(corrupt("truncated labels"));
                }
                OwnedLabels::Strs(
                    (0..n)
                        .map(|_| cursor.text().map(str::to_owned))
                        .collect::<Result<_>>()?,
                )
            }
            t => return Err(corrupt(format!("unknown label tag {t}"))),
        })
    }
}

/// The events of a batch: features and (all or none) tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Events {
    /// Their features.
    pub features: Features,
    /// Their tasks (`None`: a model with one task).
    pub tasks: Option<Vec<TaskId>>,
}

impl Events {
    fn with_tasks<T>(&self, f: impl FnOnce(Tasks) -> T) -> T {
        match &self.tasks {
            None => f(Tasks::Omitted),
            Some(ids) => {
                let refs: Vec<TaskRef> = ids.iter().map(TaskId::as_ref).collect();
                f(Tasks::Ids(&refs))
            }
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        self.features.write(out);
        match &self.tasks {
            None => out.push(0),
            Some(ids) => {
                out.push(1);
                out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
                ids.iter().for_each(|id| write_task(out, Some(id)));
            }
        }
    }

    fn read(cursor: &mut Cursor) -> Result<Self> {
        let features = Features::read(cursor)?;
        let tasks = match cursor.u8()? {
            0 => None,
            _ => {
                let n = cursor.size()?;
                if n > cursor.data.len() / 9 + 1 {
                    return Err(corrupt("truncated tasks"));
                }
                let ids = (0..n)
                    .map(|_| read_task(cursor)?.ok_or_else(|| corrupt("a missing task")))
                    .collect::<Result<_>>()?;
                Some(ids)
            }
        };
        Ok(Events { features, tasks })
    }
}

/// An operation on the model that the log keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Learn a batch (scores before each update).
    Learn {
        /// The events.
        events: Events,
        /// Their labels.
        labels: OwnedLabels,
    },
    /// Score a batch and remember the events that have an id.
    Remember {
        /// The events.
        events: Events,
        /// One optional id per event.
        ids: Vec<Option<String>>,
        /// The time, seconds since the Unix epoch.
        now: f64,
    },
    /// Learn remembered events.
    Label {
        /// Their ids.
        ids: Vec<String>,
        /// Their labels.
        labels: OwnedLabels,
        /// The time, seconds since the Unix epoch.
        now: f64,
    },
    /// Forget tasks ([`Model::forget`]).
    Forget {
        /// Their ids (distinct).
        tasks: Vec<TaskId>,
    },
}

/// What an applied operation gives back.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The events' scores (before each update, for a learn).
    Scores(Vec<f64>),
    /// What a forget removed.
    Forgot(ForgetReport),
}

impl Effect {
    /// The scores (none for a forget).
    pub fn into_scores(self) -> Vec<f64> {
        match self {
            Effect::Scores(scores) => scores,
            Effect::Forgot(_) => Vec::new(),
        }
    }
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::State(format!("a log record does not decode: {}", msg.into()))
}

impl Op {
    /// The record kind.
    pub fn kind(&self) -> u8 {
        match self {
            Op::Learn { .. } => kind::LEARN,
            Op::Remember { .. } => kind::REMEMBER,
            Op::Label { .. } => kind::LABEL,
            Op::Forget { .. } => kind::FORGET,
        }
    }

    /// Events the operation learns or scores.
    pub fn n_events(&self) -> usize {
        match self {
            Op::Learn { events, .. } | Op::Remember { events, .. } => events.features.len(),
            Op::Label { ids, .. } => ids.len(),
            Op::Forget { .. } => 0,
        }
    }

    /// Sets the time of an operation that reads it.
    pub fn stamp(&mut self, time: f64) {
        if let Op::Remember { now, .. } | Op::Label { now, .. } = self {
            *now = time;
        }
    }

    /// The record payload.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Op::Learn { events, labels } => {
                events.write(out);
                labels.write(out);
            }
            Op::Remember { events, ids, now } => {
                events.write(out);
                out.extend_from_slice(&now.to_le_bytes());
                for id in ids {
                    match id {
                        None => out.push(0),
                        Some(id) => {
                            out.push(1);
                            text(out, id);
                        }
                    }
                }
            }
            Op::Label { ids, labels, now } => {
                out.extend_from_slice(&now.to_le_bytes());
                out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
                ids.iter().for_each(|id| text(out, id));
                labels.write(out);
            }
            Op::Forget { tasks } => {
                out.extend_from_slice(&(tasks.len() as u64).to_le_bytes());
                tasks.iter().for_each(|id| write_task(out, Some(id)));
            }
        }
    }

    /// An operation from its record kind and payload.
    pub fn read(kind: u8, payload: &[u8]) -> Result<Self> {
        let mut cursor = Cursor::new(payload);
        let op = match kind {
            kind::LEARN => Op::Learn {
                events: Events::read(&mut cursor)?,
                labels: OwnedLabels::read(&mut cursor)?,
            },
            kind::REMEMBER => {
                let events = Events::read(&mut cursor)?;
                let now = cursor.f64()?;
                let n = events.features.len();
                if n > cursor.data.len() {
                    return Err(corrupt("truncated ids"));
                }
                let ids = (0..n)
                    .map(|_| match cursor.u8()? {
                        0 => Ok(None),
                        _ => Ok(Some(cursor.text()?.to_owned())),
                    })
                    .collect::<Result<_>>()?;
                Op::Remember { events, ids, now }
            }
            kind::LABEL => {
                let now = cursor.f64()?;
                let n = cursor.size()?;
                if n > cursor.data.len() / 4 {
                    return Err(corrupt("truncated ids"));
                }
                let ids = (0..n)
                    .map(|_| cursor.text().map(str::to_owned))
                    .collect::<Result<_>>()?;
                Op::Label {
                    ids,
                    labels: OwnedLabels::read(&mut cursor)?,
                    now,
                }
            }
            kind::FORGET => {
                let n = cursor.size()?;
                // A task takes at least 5 bytes (a tag and a string's length).
                if n > cursor.data.len() / 5 {
                    return Err(corrupt("truncated tasks"));
                }
                let tasks = (0..n)
                    .map(|_| read_task(&mut cursor)?.ok_or_else(|| corrupt("a missing task")))
                    .collect::<Result<_>>()?;
                Op::Forget { tasks }
            }
            k => return Err(corrupt(format!("unknown record kind {k}"))),
        };
        if !cursor.data.is_empty() {
            return Err(corrupt("bytes after the payload"));
        }
        Ok(op)
    }

    /// Applies the operation to `model`: the scores of the events (before each update, for a
    /// learn), or what a forget removed. Atomic: an error leaves the model as it was.
    pub fn apply(&self, model: &mut Model) -> Result<Effect> {
        if let Op::Forget { tasks } = self {
            let refs: Vec<TaskRef> = tasks.iter().map(TaskId::as_ref).collect();
            return model.forget(&refs).map(Effect::Forgot);
        }
        self.score(model).map(Effect::Scores)
    }

    /// Applies a learn, remember or label: the scores.
    fn score(&self, model: &mut Model) -> Result<Vec<f64>> {
        let width = model.estimator().dict_width();
        match self {
            Op::Learn { events, labels } => {
                let rows = events.features.rows(width);
                events.with_tasks(|tasks| labels.with(|labels| model.learn(&rows, tasks, labels)))
            }
            Op::Remember { events, ids, now } => {
                let rows = events.features.rows(width);
                let scores = events.with_tasks(|tasks| model.decision(&rows, tasks))?;
                // Every event fits the store (the ids were checked by the parser): the
                // remembering below cannot fail half-way.
                let max_bytes = model.pending().limits.max_bytes;
                for (r, id) in ids.iter().enumerate() {
                    let Some(id) = id else { continue };
                    let event = PendingEvent {
                        id: id.as_str().into(),
                        task: events.tasks.as_ref().map(|t| t[r].clone()),
                        row: events.features.row(r),
                        score: 0.0,
                        time: *now,
                    };
                    if event.bytes() > max_bytes {
                        return Err(Error::InvalidParameter {
                            name: "events",
                            reason: format!(
                                "events[{r}] takes {} bytes, over the pending store's max_bytes={max_bytes}",
                                event.bytes()
                            ),
                        });
                    }
                }
                for (r, id) in ids.iter().enumerate() {
                    let Some(id) = id else { continue };
                    let row = events.features.row(r);
                    let task = events.tasks.as_ref().map(|t| t[r].as_ref());
                    model.remember(id, row.event(), task, *now)?;
                }
                Ok(scores)
            }
            Op::Label { ids, labels, now } => {
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                labels.with(|labels| model.learn_labels(&ids, labels, *now))
            }
            Op::Forget { .. } => unreachable!("a forget is applied by Op::apply"),
        }
    }
}

#[cfg(test)]
mod tests;
