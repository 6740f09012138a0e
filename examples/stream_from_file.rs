//! Learning from an svmlight/libsvm file as a stream, with the crate's reader ([`omtl::io`]):
//! `<label> qid:<task> <index>:<value> ...` per line (the format `omtl learn` reads), labels
//! ±1 or 0/1, indices 1-based, `#` starting a comment. The reader yields chunks of rows (a CSR
//! matrix with labels and task ids), so memory is bounded by the chunk, not by the file.
//!
//! `cargo run --release --example stream_from_file [FILE]`; without FILE it writes a small
//! synthetic file to the temporary directory and streams that. The model is MTLinear over the
//! open-ended complete graph with hashed features, so neither the number of tasks nor the
//! number of features needs to be known before the first line: the tasks a chunk introduces are
//! added before it is learned, and any column below 2^24 fits in the 2^18 hashed slots.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use omtl::data::Rows;
use omtl::io::{Format, Options, Reader};
use omtl::kernel::TaskKernel;
use omtl::learner::{learn_grown, predict_sign, Build, GraphSetting, MTLinear, MTLinearParams, OnlineLearner};

/// The width of the feature space (columns are hashed into `2^HASH_BITS` slots).
const N_FEATURES: usize = 1 << 24;
const HASH_BITS: u32 = 18;

/// A synthetic file: 3 tasks sharing a sparse linear concept, each with its own extra feature.
fn write_synthetic(path: &PathBuf) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    let mut rng = omtl::rng::SplitMix64::new(5);
    writeln!(out, "# label qid:task index:value ... (1-based indices)")?;
    for t in 0..6000u64 {
        let task = t % 3;
        let mut features = std::collections::BTreeMap::new();
        for _ in 0..6 {
            features.insert(1 + rng.below(40), rng.below(1000) as f64 / 500.0 - 1.0);
        }
        features.insert(41 + task, 1.0);
        let weight = |j: u64| match j {
            1..=20 => 1.0,
            21..=40 => -1.0,
            _ => 0.2 * (task as f64 - 1.0),
        };
        let margin: f64 = features.iter().map(|(&j, &v)| weight(j) * v).sum();
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
    let options = Options {
        chunk_rows: 2000,
        ..Options::new(Format::Svmlight, N_FEATURES as u64)
    };
    let mut reader = Reader::open(&path.to_string_lossy(), options)?;
    let params = MTLinearParams {
        hash_bits: Some(HASH_BITS),
        ..MTLinearParams::default()
    };
    let mut model = MTLinear::build(&params, &GraphSetting::new(&TaskKernel::complete_open(2)?, N_FEATURES))?;
    let (mut n_rows, mut n_mistakes) = (0, 0);
    while let Some(chunk) = reader.next_chunk()? {
        let indptr: Vec<i64> = chunk.indptr.iter().map(|&p| p as i64).collect();
        let rows = Rows::Csr {
            indptr: &indptr,
            indices: &chunk.indices,
            data: &chunk.data,
            n_cols: N_FEATURES,
        };
        let tasks: Vec<i64> = chunk.task_ids.iter().map(|&t| i64::from(t)).collect();
        let y: Vec<f64> = chunk.labels.iter().map(|&label| predict_sign(label - 0.5)).collect(); // 0/1 or ±1 -> ±1
                                                                                                 // Task ids count up from 0 in order of first appearance: add the tasks this chunk names.
        let n_tasks = chunk.task_ids.iter().max().map_or(0, |&t| t as usize + 1);
        let n_new = n_tasks.saturating_sub(model.n_tasks());
        // Online: each row is predicted by the model before it, then learned.
        let scores = learn_grown(&mut model, n_new, &rows, &tasks, &y)?;
        let mistakes = scores.iter().zip(&y).filter(|&(&f, &y)| predict_sign(f) != y).count();
        (n_rows, n_mistakes) = (n_rows + y.len(), n_mistakes + mistakes);
        println!(
            "{n_rows:>7} rows: {:>5.1}% mistakes in the last {}",
            100.0 * mistakes as f64 / y.len() as f64,
            y.len()
        );
    }
    println!(
        "{}: {n_rows} rows, {} tasks, {n_mistakes} online mistakes ({:.1}%)",
        path.display(),
        model.n_tasks(),
        100.0 * n_mistakes as f64 / n_rows.max(1) as f64
    );
    Ok(())
}
