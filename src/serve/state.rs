//! The state directory: the last snapshot (`model.omtl`, a model file that records the log
//! sequence number it covers), the log segments after it, and a lock file that keeps a second
//! server away. Recovery loads the snapshot and replays the log.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ops::Op;
use super::wal;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::model_file;

/// The snapshot's file name.
pub const SNAPSHOT: &str = "model.omtl";
/// The metadata key under which a snapshot records the last log sequence number it covers.
pub const LSN_KEY: &str = "omtl_serve_lsn";

fn file_error(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Opens (creating) the state directory and locks it: one server per directory.
pub fn lock(dir: &Path) -> Result<File> {
    fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let path = dir.join("lock");
    // Read-only once it exists: a lock needs no write access (a read-only directory still
    // serves predictions).
    let file = File::open(&path)
        .or_else(|_| File::options().create(true).truncate(false).write(true).open(&path))
        .map_err(|e| file_error(&path, e))?;
    file.try_lock()
        .map_err(|_| file_error(dir, "another omtl server holds this state directory"))?;
    Ok(file)
}

/// Writes `model` as the snapshot covering the log up to `lsn` (atomic and durable:
/// [`model_file::save`]).
pub fn save_snapshot(dir: &Path, model: &mut Model, lsn: u64) -> Result<()> {
    model
        .metadata_mut()
        .get_or_insert_with(Default::default)
        .insert(LSN_KEY.into(), Value::from(lsn));
    model_file::save(dir.join(SNAPSHOT), model)
}

/// The model recovered from a state directory.
pub struct Recovered {
    /// The model: the snapshot with the log replayed.
    pub model: Model,
    /// The last log sequence number applied (or skipped as refused).
    pub lsn: u64,
    /// The snapshot's log sequence number.
    pub snapshot_lsn: u64,
    /// Records replayed.
    pub replayed: u64,
    /// The segments, oldest first; the last one (its valid length) is appended to.
    pub segments: Vec<PathBuf>,
    /// The valid length of the last segment (a torn tail beyond it is to be cut off).
    pub last_len: u64,
    /// Whether a torn tail was dropped.
    pub torn: bool,
}

/// Loads the snapshot (or takes `initial` for a directory without one) and replays the log.
/// A corrupt record is an error naming its file and offset.
pub fn recover(dir: &Path, initial: Option<Model>) -> Result<Recovered> {
    let path = dir.join(SNAPSHOT);
    let (mut model, snapshot_lsn) = if path.exists() {
        let mut model = model_file::load(&path).map_err(|e| file_error(&path, e))?;
        let lsn = match model.metadata_mut().as_mut().and_then(|m| m.remove(LSN_KEY)) {
            Some(v) => v
                .as_u64()
                .ok_or_else(|| file_error(&path, format!("{LSN_KEY} is not a log sequence number")))?,
            None => 0,
        };
        if model.metadata().is_some_and(|m| m.is_empty()) {
            *model.metadata_mut() = None;
        }
        (model, lsn)
    } else {
        let mut model = initial.ok_or_else(|| {
            file_error(
                dir,
                "holds no model yet: give the model to start from (--model FILE or --learner NAME)",
            )
        })?;
        // The directory holds its model from the start: a restart needs no command-line model.
        let mut first = model.clone();
        save_snapshot(dir, &mut first, 0)?;
        if let Some(m) = model.metadata_mut().as_mut() {
            m.remove(LSN_KEY);
        }
        (model, 0)
    };
    let segments = wal::segments(dir).map_err(|e| file_error(dir, e))?;
    let mut lsn = snapshot_lsn;
    let mut replayed = 0;
    let (mut last_len, mut torn) = (0, false);
    for (i, (_, seg_path)) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let segment = wal::read(seg_path, last).map_err(|e| Error::File {
            path: seg_path.display().to_string(),
            reason: e,
        })?;
        for record in &segment.records {
            if record.lsn <= lsn {
                continue;
            }
            if record.lsn != lsn + 1 {
                return Err(file_error(
                    seg_path,
                    format!("record {} follows record {lsn}: the log has a gap", record.lsn),
                ));
            }
            let op = Op::read(record.kind, &record.payload)
                .map_err(|e| file_error(seg_path, format!("record {}: {e}", record.lsn)))?;
            // A refused operation was refused live too (the model is deterministic): skipped.
            let _ = op.apply(&mut model);
            lsn = record.lsn;
            replayed += 1;
        }
        if last {
            last_len = segment.valid_len;
            torn = segment.torn;
        }
    }
    Ok(Recovered {
        model,
        lsn,
        snapshot_lsn,
        replayed,
        segments: segments.into_iter().map(|(_, p)| p).collect(),
        last_len,
        torn,
    })
}
