//! Learning from an svmlight/libsvm file read line by line, one example at a time, with the
//! tasks given as `qid:<task>` (the format `omtl learn` reads): `<label> qid:<task> <index>:<value> ...`,
//! labels ±1 (or 0/1), indices 1-based, `#` starting a comment.
//!
//! `cargo run --release --example stream_from_file [FILE]`; without FILE it writes a small
//! synthetic file to the temporary directory and streams that. The model is MTLinear over the
//! open-ended complete graph with hashed features, so neither the number of tasks nor the
//! number of features needs to be known before the first line: a new task is added when its id
//! first appears, and any feature index fits in the 2^18 hashed slots.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;

use omtl::data::Rows;
use omtl::kernel::TaskKernel;
use omtl::learner::{learn_grown, predict_sign, MTLinear, MTLinearParams, OnlineLearner};

/// The widest feature index a line may use (columns are hashed into `2^HASH_BITS` slots).
const MAX_FEATURES: usize = 1 << 24;
const HASH_BITS: u32 = 18;

/// One parsed line: label, task, sorted 0-based column indices and their values.
struct Example {
    label: f64,
    task: i64,
    indices: Vec<u32>,
    values: Vec<f64>,
}

/// Parses one line; `Ok(None)` for a blank or comment-only line.
fn parse_line(line: &str) -> Result<Option<Example>, String> {
    let content = line.split('#').next().unwrap_or("").trim();
    let mut fields = content.split_whitespace();
    let Some(label) = fields.next() else { return Ok(None) };
    let label = match label.parse::<f64>().map_err(|e| format!("label {label:?}: {e}"))? {
        v if v > 0.0 => 1.0,
        _ => -1.0,
    };
    let (mut task, mut pairs) = (0, Vec::new());
    for field in fields {
        let (key, value) = field
            .split_once(':')
            .ok_or_else(|| format!("{field:?} is not index:value"))?;
        if key == "qid" {
            task = value.parse().map_err(|e| format!("qid {value:?}: {e}"))?;
            continue;
        }
        let index: usize = key.parse().map_err(|e| format!("index {key:?}: {e}"))?;
        if index == 0 || index > MAX_FEATURES {
            return Err(format!("index {index} outside [1, {MAX_FEATURES}]"));
        }
        let value: f64 = value.parse().map_err(|e| format!("value {value:?}: {e}"))?;
        pairs.push(((index - 1) as u32, value));
    }
    // The engine takes canonical sparse rows: sorted indices, each once.
    pairs.sort_by_key(|&(j, _)| j);
    if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("a feature index appears twice".into());
    }
    let (indices, values) = pairs.into_iter().unzip();
    Ok(Some(Example {
        label,
        task,
        indices,
        values,
    }))
}

/// A synthetic file: 3 tasks sharing a sparse linear concept, each with its own extra feature.
fn write_synthetic(path: &PathBuf) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    let mut rng = omtl::rng::SplitMix64::new(5);
    writeln!(out, "# label qid:task index:value ... (1-based indices)")?;
    for t in 0..6000u64 {
        let task = t % 3;
        let features: Vec<(u64, f64)> = (0..6)
            .map(|_| (1 + rng.below(40), rng.below(1000) as f64 / 500.0 - 1.0))
            .collect();
        let mut features: Vec<(u64, f64)> = features
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        features.push((41 + task, 1.0));
        let margin: f64 = features
            .iter()
            .map(|&(j, v)| {
                if j <= 20 {
                    v
                } else if j <= 40 {
                    -v
                } else {
                    0.2 * (task as f64 - 1.0)
                }
            })
            .sum();
        write!(out, "{} qid:{task}", if margin >= 0.0 { 1 } else { -1 })?;
        features.iter().try_for_each(|(j, v)| write!(out, " {j}:{v}"))?;
        writeln!(out)?;
    }
    out.flush()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args_os().nth(1) {
        Some(path) => PathBuf::from(path),
        None => {
            let path = std::env::temp_dir().join("omtl_stream_example.svm");
            write_synthetic(&path)?;
            path
        }
    };
    let params = MTLinearParams {
        hash_bits: Some(HASH_BITS),
        ..MTLinearParams::default()
    };
    let mut model = MTLinear::new(&TaskKernel::complete_open(2)?, MAX_FEATURES, params)?;
    let (mut n_rows, mut n_mistakes, mut last_mistakes) = (0u64, 0u64, 0u64);
    for (number, line) in BufReader::new(File::open(&path)?).lines().enumerate() {
        let line = line?;
        let example = match parse_line(&line) {
            Ok(Some(example)) => example,
            Ok(None) => continue,
            Err(e) => return Err(format!("{}:{}: {e}", path.display(), number + 1).into()),
        };
        let rows = Rows::Csr {
            indptr: &[0, example.indices.len() as i64],
            indices: &example.indices,
            data: &example.values,
            n_cols: MAX_FEATURES,
        };
        // A task id seen for the first time adds the tasks up to it (ids are 0, 1, 2, ...).
        let n_new = usize::try_from(example.task + 1).map_or(0, |k| k.saturating_sub(model.n_tasks()));
        let score = learn_grown(&mut model, n_new, &rows, &[example.task], &[example.label])?[0];
        n_rows += 1;
        n_mistakes += u64::from(predict_sign(score) != example.label);
        if n_rows % 2000 == 0 {
            println!(
                "{n_rows:>7} rows: {:>5.1}% mistakes over the last 2000",
                (n_mistakes - last_mistakes) as f64 / 20.0
            );
            last_mistakes = n_mistakes;
        }
    }
    println!(
        "{}: {n_rows} rows, {} tasks, {n_mistakes} online mistakes ({:.1}%)",
        path.display(),
        model.n_tasks(),
        100.0 * n_mistakes as f64 / n_rows.max(1) as f64
    );
    Ok(())
}
