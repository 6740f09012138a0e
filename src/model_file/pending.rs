//! The pending section of a model file (format version 2): the events a model keeps until
//! their labels arrive ([`PendingStore`]), binary, little-endian:
//!
//! | field                                   | bytes                                   |
//! |-----------------------------------------|-----------------------------------------|
//! | section version ([`SECTION_VERSION`])    | 4                                       |
//! | `max_events`, `max_bytes`, `max_age`     | 8 + 8 + 8 (`max_age` an `f64`)          |
//! | `evicted`, `expired`                     | 8 + 8                                   |
//! | number of events                         | 8                                       |
//! | each event, oldest first                 | id (4-byte length, UTF-8), task (1-byte tag: 0 none, 1 an `i64`, 2 a 4-byte length and UTF-8), row (1-byte kind: 0 dense, 1 columns, 2 named; 8-byte count; the `u32` columns unless dense; the `f64` values), served score and time (`f64`) |
//!
//! Reading trusts nothing: every length is checked against the bytes left before anything is
//! allocated, and the events against [`PendingStore::from_parts`]'s rules.

use std::sync::Arc;

use super::fail;
use crate::error::Result;
use crate::model::{PendingEvent, PendingLimits, PendingRow, PendingStore, TaskId};

/// The layout version of the pending section.
pub const SECTION_VERSION: u32 = 1;

/// The section's bytes.
pub fn encode(store: &PendingStore) -> Vec<u8> {
    let mut out = Vec::with_capacity(52 + store.bytes());
    let limits = store.limits();
    let info = store.info();
    out.extend_from_slice(&SECTION_VERSION.to_le_bytes());
    out.extend_from_slice(&(limits.max_events as u64).to_le_bytes());
    out.extend_from_slice(&(limits.max_bytes as u64).to_le_bytes());
    out.extend_from_slice(&limits.max_age.to_le_bytes());
    out.extend_from_slice(&info.evicted.to_le_bytes());
    out.extend_from_slice(&info.expired.to_le_bytes());
    out.extend_from_slice(&(store.len() as u64).to_le_bytes());
    for event in store.iter() {
        text(&mut out, &event.id);
        write_task(&mut out, event.task.as_ref());
        write_row(&mut out, &event.row);
        out.extend_from_slice(&event.score.to_le_bytes());
        out.extend_from_slice(&event.time.to_le_bytes());
    }
    out
}

/// Writes a task: a 1-byte tag (0 none, 1 an `i64`, 2 a 4-byte length and UTF-8) and its id.
pub(crate) fn write_task(out: &mut Vec<u8>, task: Option<&TaskId>) {
    match task {
        None => out.push(0),
        Some(TaskId::Int(i)) => {
            out.push(1);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Some(TaskId::Str(s)) => {
            out.push(2);
            text(out, s);
        }
    }
}

/// Writes a row: a 1-byte kind (0 dense, 1 columns, 2 named), an 8-byte count, the `u32`
/// columns unless dense, the `f64` values.
pub(crate) fn write_row(out: &mut Vec<u8>, row: &PendingRow) {
    let (kind, indices, values) = match row {
        PendingRow::Dense(v) => (0, None, v),
        PendingRow::Columns { indices, values } => (1, Some(indices), values),
        PendingRow::Named { indices, values } => (2, Some(indices), values),
    };
    out.push(kind);
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    for &i in indices.into_iter().flatten() {
        out.extend_from_slice(&i.to_le_bytes());
    }
    for &v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Writes a string: a 4-byte length and its UTF-8.
pub(crate) fn text(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Reads bytes off the front of the section, each read checked against what is left.
pub(crate) struct Cursor<'a> {
    pub(crate) data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.data.len() {
            return Err(fail("the pending section is truncated"));
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub(crate) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    pub(crate) fn size(&mut self) -> Result<usize> {
        usize::try_from(self.u64()?).map_err(|_| fail("a size in the pending section is too large"))
    }

    pub(crate) fn text(&mut self) -> Result<&'a str> {
        let n = u32::from_le_bytes(self.array()?) as usize;
        std::str::from_utf8(self.take(n)?).map_err(|_| fail("a pending event's id or task is not UTF-8"))
    }

    /// `n` items of `width` bytes each, checked to fit before the caller allocates for them.
    pub(crate) fn items(&mut self, n: usize, width: usize) -> Result<&'a [u8]> {
        let bytes = n
            .checked_mul(width)
            .ok_or_else(|| fail("the pending section is truncated"))?;
        self.take(bytes)
    }
}

/// Reads a row ([`write_row`]), checked: sorted distinct columns, finite values.
pub(crate) fn read_row(cursor: &mut Cursor) -> Result<PendingRow> {
    let kind = cursor.u8()?;
    let n = cursor.size()?;
    let indices: Option<Vec<u32>> = match kind {
        0 => None,
        1 | 2 => Some(
            cursor
                .items(n, 4)?
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        ),
        _ => return Err(fail(format!("unknown pending row kind {kind}"))),
    };
    let values: Vec<f64> = cursor
        .items(n, 8)?
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    if indices.as_ref().is_some_and(|i| i.windows(2).any(|w| w[0] >= w[1])) {
        return Err(fail("a pending row's columns are not sorted and distinct"));
    }
    if values.iter().any(|v| !v.is_finite()) {
        return Err(fail("a pending row holds a value that is not finite"));
    }
    Ok(match (kind, indices) {
        (_, None) => PendingRow::Dense(values),
        (1, Some(indices)) => PendingRow::Columns { indices, values },
        (_, Some(indices)) => PendingRow::Named { indices, values },
    })
}

/// Reads a task ([`write_task`]).
pub(crate) fn read_task(cursor: &mut Cursor) -> Result<Option<TaskId>> {
    Ok(match cursor.u8()? {
        0 => None,
        1 => Some(TaskId::Int(i64::from_le_bytes(cursor.array()?))),
        2 => Some(TaskId::Str(cursor.text()?.into())),
        tag => return Err(fail(format!("unknown task tag {tag}"))),
    })
}

/// The store a section holds, checked (module documentation).
pub fn decode(data: &[u8]) -> Result<PendingStore> {
    let mut cursor = Cursor::new(data);
    let version = u32::from_le_bytes(cursor.array()?);
    if version != SECTION_VERSION {
        return Err(fail(format!(
            "pending section version {version}, this omtl reads {SECTION_VERSION}"
        )));
    }
    let limits = PendingLimits {
        max_events: cursor.size()?,
        max_bytes: cursor.size()?,
        max_age: cursor.f64()?,
    };
    let (evicted, expired) = (cursor.u64()?, cursor.u64()?);
    let n = cursor.size()?;
    // An event takes at least 4 + 1 + 1 + 8 + 16 bytes: a count beyond that is a lie.
    if n > cursor.data.len() / 30 {
        return Err(fail("the pending section is truncated"));
    }
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        let id: Arc<str> = cursor.text()?.into();
        let task = read_task(&mut cursor)?;
        let row = read_row(&mut cursor)?;
        let (score, time) = (cursor.f64()?, cursor.f64()?);
        events.push(PendingEvent {
            id,
            task,
            row,
            score,
            time,
        });
    }
    if !cursor.data.is_empty() {
        return Err(fail("the pending section has bytes after its events"));
    }
    PendingStore::from_parts(events, limits, evicted, expired).map_err(|e| fail(format!("pending events: {e}")))
}
