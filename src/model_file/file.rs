//! Model files on disk: [`save`] replaces a file whole or not at all, also across a crash;
//! [`load`] reads one. Python's `omtl.save` writes the same way (temporary file, flush, rename,
//! directory flush), with its own file-system code: docs/DECISIONS.md says why.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::{read_from, Limits};
use crate::error::{Error, Result};
use crate::model::Model;

fn file_error(path: &Path, e: &std::io::Error) -> Error {
    Error::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Writes `model` to `path` as a model file. The bytes go to a fresh temporary file in the same
/// directory (created exclusively under a name no other writer uses), are flushed to disk, take
/// the permissions of the file they replace, and are renamed over `path`; then the directory
/// entry is flushed. A crash leaves the old file or the new one, and at most a temporary file
/// (`.<name>.<pid>-<n>.omtl-tmp`).
pub fn save(path: impl AsRef<Path>, model: &Model) -> Result<()> {
    let path = path.as_ref();
    let data = model.to_bytes()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let name = path
        .file_name()
        .ok_or_else(|| file_error(path, &std::io::Error::other("not a file name")))?
        .to_string_lossy()
        .into_owned();
    let permissions = fs::metadata(path).ok().map(|m| m.permissions());
    let (tmp, mut file) = create_temporary(&dir, &name)?;
    let written = (|| {
        file.write_all(&data)?;
        if let Some(p) = permissions {
            file.set_permissions(p)?;
        }
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(file_error(path, &e));
    }
    // The rename is atomic without this; the flush makes it durable (some file systems cannot
    // flush a directory, which is not an error).
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A fresh temporary file next to the target, opened exclusively (never a planted symlink).
pub(crate) fn create_temporary(dir: &Path, name: &str) -> Result<(std::path::PathBuf, File)> {
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for attempt in 0..100u32 {
        let tmp = dir.join(format!(".{name}.{pid}-{nanos:x}{attempt}.omtl-tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(file_error(&tmp, &e)),
        }
    }
    Err(file_error(
        dir,
        &last.unwrap_or_else(|| std::io::Error::other("no temporary file")),
    ))
}

/// Reads and checks the model file at `path` ([`Model::from_bytes`]), reading no further
/// than its first bytes say ([`read_from`]).
pub fn load(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    Model::from_bytes(&read_file(path, &Limits::default())?)
}

/// The bytes of the model file at `path`, read as [`read_from`] reads (a regular file's size
/// is known up front; a stream's is not).
pub fn read_file(path: impl AsRef<Path>, limits: &Limits) -> Result<Vec<u8>> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| file_error(path, &e))?;
    let meta = file.metadata().map_err(|e| file_error(path, &e))?;
    let size = meta.is_file().then_some(meta.len());
    read_from(file, size, limits).map_err(|e| match e {
        Error::File { reason, .. } => Error::File {
            path: path.display().to_string(),
            reason,
        },
        e => e,
    })
}
