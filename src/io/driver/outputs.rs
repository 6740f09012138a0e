//! Where the command line's per-example outputs go: the predicted labels (`-p`), the raw scores
//! (`-r`), or, with `--probabilities`, the probability of the positive class instead of the
//! label. A file is written whole or not at all: the lines go to a temporary file next to it,
//! renamed over it once the run succeeded ([`Outputs::commit`]) and removed otherwise, so a
//! failed or interrupted run leaves no partial file. A path that is a symbolic link is written
//! through to its target; a path that exists and is not a regular file (`/dev/stdout`, a named
//! pipe) is written in place. `-` is the caller's standard output.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::report::push_label;
use super::{ChunkSink, StreamError};
use crate::io::Chunk;
use crate::model::LabelForm;

/// Symbolic links followed at most (as the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The file a write to `path` should replace: `path` itself, or the target its symbolic links
/// lead to (relative targets read from the link's folder), so that writing a model or a
/// prediction file through a link updates what the link points to instead of replacing it.
pub fn link_target(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(target) => {
                    p = match p.parent() {
                        Some(dir) if target.is_relative() => dir.join(target),
                        _ => target,
                    }
                }
                Err(_) => return p,
            },
            _ => return p,
        }
    }
    p
}

/// One output: standard output (a writer the caller gives), a device or pipe written in place,
/// or a regular file written through a temporary file.
pub struct Output<'a> {
    out: Box<dyn Write + 'a>,
    /// `(temporary file, the file it becomes)`.
    rename: Option<(PathBuf, PathBuf)>,
    shown: String,
}

impl<'a> Output<'a> {
    /// The output `path` (`-`: `stdout`, which must then be given). Creating the file is the
    /// first thing a run does, so an unwritable path fails before anything is learned.
    pub fn create(path: &str, stdout: &mut Option<Box<dyn Write + 'a>>) -> Result<Self, StreamError> {
        if path == "-" {
            let out = stdout.take().ok_or_else(|| {
                StreamError::Refused("standard output takes one output: give the others a file".into())
            })?;
            return Ok(Output {
                out,
                rename: None,
                shown: "standard output".into(),
            });
        }
        let fail = |e: std::io::Error| StreamError::Refused(format!("{path}: cannot be written ({e})"));
        let target = link_target(Path::new(path));
        if let Ok(m) = std::fs::metadata(&target) {
            if m.is_dir() {
                return Err(fail(std::io::Error::other("is a folder")));
            }
            if !m.is_file() {
                let file = std::fs::OpenOptions::new().write(true).open(&target).map_err(fail)?;
                return Ok(Output {
                    out: Box::new(BufWriter::with_capacity(1 << 16, file)),
                    rename: None,
                    shown: path.to_string(),
                });
            }
        }
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| fail(std::io::Error::other("not a file name")))?;
        let (tmp, file) = crate::model_file::create_temporary(&dir, &name).map_err(|e| {
            let reason = match e {
                crate::Error::File { reason, .. } => reason,
                e => e.to_string(),
            };
            StreamError::Refused(format!("{path}: cannot be written ({reason})"))
        })?;
        Ok(Output {
            out: Box::new(BufWriter::with_capacity(1 << 20, file)),
            rename: Some((tmp, target)),
            shown: path.to_string(),
        })
    }

    /// Writes `text`.
    fn write(&mut self, text: &str) -> std::io::Result<()> {
        self.out.write_all(text.as_bytes())
    }

    /// Flushes and puts the file in place.
    fn commit(mut self) -> std::io::Result<()> {
        self.out.flush()?;
        if let Some((tmp, target)) = self.rename.take() {
            drop(std::mem::replace(&mut self.out, Box::new(std::io::sink())));
            if let Err(e) = std::fs::rename(&tmp, &target) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Drop for Output<'_> {
    /// An output not committed leaves nothing behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.rename.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The per-example outputs of a run.
#[derive(Default)]
pub struct Outputs<'a> {
    /// The predicted labels (or probabilities), one per line.
    pub predictions: Option<Output<'a>>,
    /// The raw scores, one per line.
    pub raw: Option<Output<'a>>,
    /// Write `P(+1) = 1 / (1 + e^-score)` instead of the label (a logistic model's scores are
    /// log-odds).
    pub probabilities: bool,
    text: String,
}

impl<'a> Outputs<'a> {
    /// The outputs at `predictions` and `raw` (either may be `-`, `stdout`).
    pub fn create(
        predictions: Option<&str>,
        raw: Option<&str>,
        probabilities: bool,
        mut stdout: Option<Box<dyn Write + 'a>>,
    ) -> Result<Self, StreamError> {
        Ok(Outputs {
            predictions: predictions.map(|p| Output::create(p, &mut stdout)).transpose()?,
            raw: raw.map(|p| Output::create(p, &mut stdout)).transpose()?,
            probabilities,
            text: String::new(),
        })
    }

    /// Lines saying where the outputs went.
    pub fn written(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(p) = &self.predictions {
            let what = if self.probabilities {
                "probabilities"
            } else {
                "predictions"
            };
            lines.push(format!("{what} written to {}", p.shown));
        }
        if let Some(r) = &self.raw {
            lines.push(format!("raw scores written to {}", r.shown));
        }
        lines
    }

    /// Flushes every output and puts the files in place (the end of a successful run).
    pub fn commit(self) -> std::io::Result<()> {
        let Outputs { predictions, raw, .. } = self;
        predictions.map_or(Ok(()), Output::commit)?;
        raw.map_or(Ok(()), Output::commit)
    }
}

impl ChunkSink for Outputs<'_> {
    fn chunk(&mut self, _chunk: &Chunk, scores: &[f64], form: &LabelForm) -> std::io::Result<()> {
        use std::fmt::Write as _;
        if let Some(out) = &mut self.predictions {
            self.text.clear();
            for &s in scores {
                if self.probabilities {
                    let _ = writeln!(self.text, "{}", 1.0 / (1.0 + (-s).exp()));
                } else {
                    push_label(&mut self.text, &form.predicted(s >= 0.0));
                    self.text.push('\n');
                }
            }
            out.write(&self.text)?;
        }
        if let Some(out) = &mut self.raw {
            self.text.clear();
            for &s in scores {
                let _ = writeln!(self.text, "{s}");
            }
            out.write(&self.text)?;
        }
        Ok(())
    }
}
