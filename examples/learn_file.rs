//! `omtl learn FILE` from Rust: the streaming driver ([`omtl::io::driver`]) reads an svmlight
//! file (`<label> qid:<task> <index>:<value> ...`) on a thread of its own while MTLinear (the
//! command line's default learner) learns it chunk by chunk, and prints Vowpal Wabbit's
//! progressive report. Tasks are the file's `qid:` strings, added to the model as they appear;
//! the width and indexing come from one quick pass over the file.
//!
//! `cargo run --release --example learn_file [FILE] [--phases]`; without FILE it writes a small
//! synthetic file to the temporary directory. `--phases` also times the parts of the run one
//! after another: the width pass, reading every chunk, and learning chunks already in memory
//! (the floors of the overlapped run, docs/results/cli.md).

use std::io::Write;
use std::time::Instant;

use omtl::data::Rows;
use omtl::io::driver::{resolve_layout, ChunkSink, StreamLearner, TaskMap};
use omtl::io::{svmlight_width, Chunk, Format, Options, Reader};
use omtl::kernel::TaskKernel;
use omtl::learner::{learn_grown, Build, GraphSetting, MTLinear, MTLinearParams, OnlineLearner};

/// Counts the rows learned (a sink could write the predictions instead).
struct Count(u64);

impl ChunkSink for Count {
    fn chunk(&mut self, chunk: &Chunk, _scores: &[f64], _predicted: &[i64]) -> std::io::Result<()> {
        self.0 += chunk.n_rows() as u64;
        Ok(())
    }
}

/// MTLinear with its default parameters over the open-ended complete graph (VW's `-q st`).
fn mt_linear(n_tasks: usize, n_features: usize) -> omtl::Result<MTLinear> {
    MTLinear::build(
        &MTLinearParams::default(),
        &GraphSetting::new(&TaskKernel::complete_open(n_tasks)?, n_features),
    )
}

fn synthetic() -> std::io::Result<String> {
    let path = std::env::temp_dir().join("omtl-learn-file-example.svm");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut rng = omtl::rng::SplitMix64::new(3);
    for t in 0..20_000u64 {
        let task = t % 4;
        let (a, b) = (1 + rng.below(30), 31 + rng.below(30));
        let label = if (a + task) % 2 == 0 { 1 } else { -1 };
        writeln!(out, "{label} qid:shop{task} {a}:1 {b}:0.5")?;
    }
    Ok(path.to_string_lossy().into_owned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let phases = args.iter().any(|a| a == "--phases");
    let path = match args.iter().find(|a| !a.starts_with("--")) {
        Some(p) => p.clone(),
        None => synthetic()?,
    };
    let start = Instant::now();
    let mut opts = Options::new(Format::Svmlight, 1);
    resolve_layout(&path, &mut opts, None, None)?;
    let mut stream = StreamLearner::new(None, TaskMap::default(), 2);
    let mut sink = Count(0);
    let mut report = |text: &str| writeln!(std::io::stderr(), "{text}");
    stream.learn_file(&path, &mut opts, &mut mt_linear, false, &mut report, &mut sink)?;
    let seconds = start.elapsed().as_secs_f64();
    let s = &stream.summary;
    eprintln!(
        "\n{} examples, {} tasks, {} feature columns, average 0/1 loss {:.6}, {seconds:.3} s",
        s.n_seen,
        stream.tasks.len(),
        opts.n_features,
        s.n_mistakes as f64 / s.n_seen.max(1) as f64
    );
    if phases {
        let t = Instant::now();
        svmlight_width(&path, opts.max_line_bytes)?;
        let width_pass = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let chunks: Vec<Chunk> = Reader::open(&path, opts.clone())?.collect::<Result<_, _>>()?;
        let read = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (mut model, mut tasks, mut ids): (Option<MTLinear>, TaskMap, Vec<u32>) = (None, TaskMap::default(), vec![]);
        for c in &chunks {
            ids.extend(c.new_tasks.iter().map(|n| tasks.insert(n)));
            let indptr: Vec<i64> = c.indptr.iter().map(|&p| p as i64).collect();
            let task_ids: Vec<i64> = c.task_ids.iter().map(|&k| i64::from(ids[k as usize])).collect();
            let y: Vec<f64> = c.labels.iter().map(|&l| if l == 1.0 { 1.0 } else { -1.0 }).collect();
            let rows = Rows::Csr {
                indptr: &indptr,
                indices: &c.indices,
                data: &c.data,
                n_cols: opts.n_features as usize,
            };
            let n_tasks = tasks.len().max(2);
            let m = match model.as_mut() {
                Some(m) => m,
                None => model.insert(mt_linear(n_tasks, opts.n_features as usize)?),
            };
            let n_new = n_tasks - m.n_tasks();
            learn_grown(m, n_new, &rows, &task_ids, &y)?;
        }
        let learn = t.elapsed().as_secs_f64();
        eprintln!("phases, one after another: width pass {width_pass:.3} s, read {read:.3} s, learn {learn:.3} s");
    }
    Ok(())
}
