//! The width and indexing a file is read with, where the command line leaves them open: an
//! svmlight file's largest index and whether an index 0 appears come from a quick first pass over
//! it; a stream (standard input, a pipe: [`crate::io::is_stream`]) cannot be read twice, so it is
//! 1-based unless told otherwise and its width either given (`--n-features`) or open, the model
//! widening as larger indices arrive (where its learner can: [`crate::model::Model::grows_features`]).

use crate::io::{is_stream, read_twice_message, svmlight_width, Format, Options, ReadError, MAX_COLUMNS};

/// The width VW-format names are hashed into unless told otherwise (VW's `-b 18`).
pub const DEFAULT_HASHED_FEATURES: u64 = 1 << 18;

/// How wide the rows of a file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Every row has this many columns (given, or found by the first pass).
    Fixed(u64),
    /// Not known before reading: each chunk is as wide as its largest column (a stream read by a
    /// learner that widens).
    Open,
}

/// Fills in the width and indexing `opts` leave open, as `omtl.datasets.iter_file` does:
/// svmlight takes the largest index of a first quick pass (0-based when an index 0 appears),
/// VW hashes into [`DEFAULT_HASHED_FEATURES`] columns, CSV takes its header's columns (the
/// width is set to [`MAX_COLUMNS`] until the header is read). A stream in svmlight without
/// `n_features` is read with an open width, unless `keeps_width` names the class of a learner
/// that keeps its width: then it is refused.
pub fn resolve_layout(
    path: &str,
    opts: &mut Options,
    n_features: Option<u64>,
    zero_based: Option<bool>,
    keeps_width: Option<&str>,
) -> Result<Width, ReadError> {
    let fail = |message: String| ReadError {
        path: path.to_string(),
        line: None,
        message,
    };
    let width = match opts.format {
        Format::Svmlight if is_stream(path) => {
            opts.zero_based = zero_based.unwrap_or(false);
            match (n_features, keeps_width) {
                (Some(n), _) => Width::Fixed(n),
                (None, None) => Width::Open,
                (None, Some(learner)) => {
                    return Err(fail(format!(
                        "{} (only MTLinear widens its feature space as a stream shows larger indices)",
                        read_twice_message(&format!("{learner} on svmlight"))
                    )))
                }
            }
        }
        Format::Svmlight => match (n_features, zero_based) {
            (Some(n), Some(z)) => {
                opts.zero_based = z;
                Width::Fixed(n)
            }
            _ => {
                let (max_index, has_zero) = svmlight_width(path, opts.max_line_bytes)?;
                let z = zero_based.unwrap_or(has_zero);
                opts.zero_based = z;
                Width::Fixed(n_features.unwrap_or_else(|| max_index.map_or(1, |m| (m + u64::from(z)).max(1))))
            }
        },
        Format::Vw => Width::Fixed(n_features.unwrap_or(DEFAULT_HASHED_FEATURES)),
        Format::Csv => Width::Fixed(n_features.unwrap_or(MAX_COLUMNS)),
    };
    opts.n_features = match width {
        Width::Fixed(n) if !(1..=MAX_COLUMNS).contains(&n) => {
            // The words of omtl.datasets.iter_file, which names standard input "-" here.
            return Err(ReadError {
                path: String::new(),
                line: None,
                message: format!("{path}: {n} feature columns; the engine takes 1 to {MAX_COLUMNS}"),
            });
        }
        Width::Fixed(n) => n,
        Width::Open => MAX_COLUMNS,
    };
    Ok(width)
}
