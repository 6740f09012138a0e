//! The `.omtl` model file from Rust: an MTRBP learned through an `omtl::model::Model`
//! (which keeps the counts and task labels a file holds), saved, loaded, and scoring the same;
//! Python's `omtl.load` reads the same file (and Rust reads Python's).
//!
//! `cargo run --example model_file` runs the demonstration. Two modes serve the cross-language
//! test (tests/test_model_file_rust.py), with rows in a text file, one per line,
//! `task,label,x1,...,xd` (a task that parses as an integer is one; the label is ignored when
//! scoring):
//! - `model_file learn OUT KIND ROWS`: a new `mt_rbp` or `mt_linear` learns ROWS and is saved
//!   to OUT; prints its post-learning score of every row;
//! - `model_file score PATH ROWS`: prints the score of every row by the model in PATH.

use omtl::data::Rows;
use omtl::kernel::{BaseKernel, TaskKernel};
use omtl::learner::{Build, GraphSetting, KernelSetting, MTLinear, MTLinearParams, MTRBPParams, MTRBP};
use omtl::model::{Labels, Model, TaskId, TaskRef, Tasks};
use omtl::model_file;

/// Rows of `task,label,x1,...,xd` lines: (x row-major, d, task ids, labels).
fn read_rows(path: &str) -> (Vec<f64>, usize, Vec<TaskId>, Vec<f64>) {
    let text = std::fs::read_to_string(path).expect("a rows file");
    let (mut x, mut d, mut tasks, mut y) = (Vec::new(), 0, Vec::new(), Vec::new());
    for line in text.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(',').collect();
        tasks.push(
            fields[0]
                .parse::<i64>()
                .map_or_else(|_| TaskId::from(fields[0]), TaskId::Int),
        );
        y.push(fields[1].parse().expect("a label"));
        x.extend(fields[2..].iter().map(|v| v.parse::<f64>().expect("a number")));
        d = fields.len() - 2;
    }
    (x, d, tasks, y)
}

fn print_scores(scores: &[f64]) {
    for s in scores {
        println!("{s:?}"); // the shortest text that reads back as the same f64
    }
}

fn main() -> omtl::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["score", path, rows] => {
            let model = model_file::load(path)?;
            let (x, d, tasks, _) = read_rows(rows);
            let ids: Vec<TaskRef> = tasks.iter().map(TaskId::as_ref).collect();
            print_scores(&model.decision(&Rows::dense(&x, tasks.len(), d), Tasks::Ids(&ids))?);
        }
        ["learn", out, kind, rows] => {
            let (x, d, tasks, y) = read_rows(rows);
            let named = tasks.iter().any(|t| matches!(t, TaskId::Str(_)));
            let k = 3;
            let learner = match kind {
                "mt_rbp" => {
                    let task_kernel = TaskKernel::complete(k)?;
                    let setting = KernelSetting::new(&task_kernel, BaseKernel::rbf(0.5)?, d);
                    let params = MTRBPParams { budget: 10, seed: 0 };
                    MTRBP::build(&params, &setting)?.into()
                }
                "mt_linear" if named => MTLinear::build(
                    &MTLinearParams::default(),
                    &GraphSetting::new(&TaskKernel::complete_open(2)?, d),
                )?
                .into(),
                "mt_linear" => MTLinear::build(
                    &MTLinearParams::default(),
                    &GraphSetting::new(&TaskKernel::complete(k)?, d),
                )?
                .into(),
                _ => panic!("kind: mt_rbp or mt_linear"),
            };
            let mut model = Model::from_learner(learner, named)?;
            let rows = Rows::dense(&x, tasks.len(), d);
            let ids: Vec<TaskRef> = tasks.iter().map(TaskId::as_ref).collect();
            model.learn(&rows, Tasks::Ids(&ids), Labels::Floats(&y))?;
            model_file::save(out, &model)?;
            print_scores(&model.decision(&rows, Tasks::Ids(&ids))?);
        }
        [] => demonstrate()?,
        _ => panic!("usage: model_file [score PATH ROWS | learn OUT KIND ROWS]"),
    }
    Ok(())
}

/// MTRBP on a small stream with string task ids, saved and loaded: the same scores.
fn demonstrate() -> omtl::Result<()> {
    let (n, d) = (400, 4);
    let mut rng = omtl::rng::SplitMix64::new(5);
    let x: Vec<f64> = (0..n * d)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let users = ["ana", "bo", "cy"];
    let tasks: Vec<TaskRef> = (0..n).map(|t| TaskRef::Str(users[t % 3])).collect();
    let y: Vec<f64> = (0..n)
        .map(|t| if x[t * d] + x[t * d + 1] > 0.0 { 1.0 } else { -1.0 })
        .collect();
    let rows = Rows::dense(&x, n, d);

    let task_kernel = TaskKernel::complete(3)?;
    let setting = KernelSetting::new(&task_kernel, BaseKernel::rbf(0.5)?, d);
    let mut model = Model::from_learner(
        MTRBP::build(&MTRBPParams { budget: 50, seed: 1 }, &setting)?.into(),
        true,
    )?;
    model.learn(&rows, Tasks::Ids(&tasks), Labels::Floats(&y))?;
    let path = std::env::temp_dir().join(format!("omtl-example-{}.omtl", std::process::id()));
    model_file::save(&path, &model)?;
    let loaded = model_file::load(&path)?;
    std::fs::remove_file(&path).ok();
    assert_eq!(
        loaded.decision(&rows, Tasks::Ids(&tasks))?,
        model.decision(&rows, Tasks::Ids(&tasks))?
    );
    let book = loaded.book().expect("fitted");
    println!(
        "{} saved and loaded: {} examples, {} mistakes, tasks {:?}; identical scores",
        loaded.estimator().class().name,
        book.n_seen(),
        book.n_mistakes(),
        book.task_ids()
    );
    Ok(())
}
