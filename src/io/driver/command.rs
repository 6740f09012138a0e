//! `omtl learn` and `omtl predict` whole, from the command line's values to the model file:
//! the learner from `--learner NAME --param k=v` ([`Estimator::from_text`]) or a saved model
//! (`-i`), how the file is read (the command line, completed by what the model file's
//! [`METADATA_KEY`] metadata says the training file was), the passes, the per-example outputs
//! and the saved model. The caller parses the arguments and shows the summary.

use std::io::Write;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::layout::{resolve_layout, Width};
use super::outputs::{link_target, Outputs};
use super::report::{finished, Finished};
use super::{predict, ChunkSink, Source, StreamError, StreamLearner};
use crate::io::{format_of_path, is_stream, Chunk, Format, Options, DEFAULT_MAX_LINE_BYTES};
use crate::model::{Estimator, LabelForm, Model};

/// The key of a model file's metadata that holds how `omtl learn` read its training file.
pub const METADATA_KEY: &str = "omtl_cli";

/// How to read the data file and where the per-example outputs go, as the command line gives
/// them (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// The data file (`-`: standard input).
    pub data: String,
    /// `--format` (svmlight, vw, csv, parquet); default from the extension.
    pub format: Option<String>,
    /// `--n-features` (or `2^--bits`).
    pub n_features: Option<u64>,
    /// `--zero-based`.
    pub zero_based: bool,
    /// `--task-namespace`.
    pub task_namespace: Option<String>,
    /// `--task-tag`.
    pub task_tag: bool,
    /// `--task-column`.
    pub task_column: Option<String>,
    /// `--label-column`.
    pub label_column: Option<String>,
    /// `--skip-bad-lines`.
    pub skip_bad_lines: bool,
    /// `--max-line-bytes`.
    pub max_line_bytes: Option<usize>,
    /// `--chunk-rows`.
    pub chunk_rows: usize,
    /// `--quiet`.
    pub quiet: bool,
    /// `--predictions`/`-p` (`-`: standard output).
    pub predictions: Option<String>,
    /// `--raw-predictions`/`-r`.
    pub raw_predictions: Option<String>,
    /// `--probabilities`: `-p` writes P(+1) instead of the label.
    pub probabilities: bool,
}

/// `omtl learn`.
#[derive(Debug, Clone, Default)]
pub struct Learn {
    /// The file and the outputs.
    pub reading: Reading,
    /// `--learner` (default MTLinear).
    pub learner: Option<String>,
    /// `--param key=value`, in order.
    pub params: Vec<String>,
    /// `--passes`.
    pub passes: usize,
    /// `--initial-model`/`-i`.
    pub initial_model: Option<String>,
    /// `--save`/`-f`.
    pub save: Option<String>,
}

/// `omtl predict`.
#[derive(Debug, Clone, Default)]
pub struct Predict {
    /// The file and the outputs.
    pub reading: Reading,
    /// `--model`/`-i`.
    pub model: String,
}

/// The columns a table (Parquet, read by the caller) is read with: the task and label columns,
/// the feature columns in model order (`None`: every other column, in the table's order).
#[derive(Debug, Clone)]
pub struct TableColumns {
    /// The task column.
    pub task: String,
    /// The label column.
    pub label: String,
    /// The feature columns.
    pub features: Option<Vec<String>>,
    /// Whether every row needs a label.
    pub require_labels: bool,
    /// Skip a bad row (counted in the chunk) instead of failing.
    pub skip_bad_lines: bool,
}

/// Reads a table whole as one chunk (its feature columns named in it).
pub type TableReader<'a> = dyn FnMut(&TableColumns) -> Result<Chunk, StreamError> + 'a;

/// What a run did, besides what it printed.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Examples learned or predicted.
    pub n: u64,
    /// Of those, predicted wrongly before their update (`learn`) or against the file's labels
    /// (`predict`).
    pub mistakes: u64,
    /// `predict`: the rows with a label.
    pub labelled: u64,
    /// Lines skipped.
    pub skipped: u64,
    /// The first skipped line's message.
    pub first_skipped: Option<String>,
    /// The last lines to show (`learn`: VW's "finished run"; `predict`: where the predictions
    /// went and their error).
    pub text: String,
}

/// The `omtl_cli` metadata of a model file: how its training file was read.
#[derive(Debug, Clone, Default)]
struct Saved {
    format: Option<String>,
    n_features: Option<u64>,
    zero_based: Option<bool>,
    task_namespace: Option<Option<String>>,
    task_column: Option<String>,
    label_column: Option<String>,
    feature_columns: Vec<String>,
}

/// The formats a model file's metadata may name.
const FORMATS: [&str; 4] = ["svmlight", "vw", "csv", "parquet"];

/// A value as Python's `repr(str(value)[:40])` shows it, near enough for a message.
fn shown(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!("'{}'", text.chars().take(40).collect::<String>())
}

impl Saved {
    /// The metadata of `model` (read from `path`), checked against it; empty for a model saved
    /// without it (from Python).
    fn of(model: &Model, path: &str) -> Result<Self, StreamError> {
        let Some(saved) = model.metadata().and_then(|m| m.get(METADATA_KEY)) else {
            return Ok(Saved::default());
        };
        let bad = |why: String| {
            StreamError::Refused(format!(
                "{path}: the model file's {METADATA_KEY} metadata is invalid ({why}); save the model again with omtl \
                 learn --save"
            ))
        };
        let Value::Object(m) = saved else {
            let kind = match saved {
                Value::String(_) => "str",
                Value::Array(_) => "list",
                Value::Number(_) => "number",
                Value::Bool(_) => "bool",
                _ => "None",
            };
            return Err(bad(format!("not an object but {kind}")));
        };
        let typed = |key: &str, ok: fn(&Value) -> bool| -> Result<Option<&Value>, StreamError> {
            match m.get(key) {
                Some(v) if !ok(v) => Err(bad(format!("{key} = {}", shown(v)))),
                v => Ok(v),
            }
        };
        let text = |key: &str| -> Result<Option<String>, StreamError> {
            Ok(typed(key, Value::is_string)?.and_then(Value::as_str).map(str::to_owned))
        };
        let optional_text = |v: &Value| v.is_string() || v.is_null();
        let format = text("format")?;
        let n_features = typed("n_features", Value::is_u64)?.and_then(Value::as_u64);
        let zero_based = typed("zero_based", |v| v.is_boolean() || v.is_null())?.and_then(Value::as_bool);
        let task_namespace = typed("task_namespace", optional_text)?.map(|v| v.as_str().map(str::to_owned));
        let (task_column, label_column) = (text("task_column")?, text("label_column")?);
        typed("zero_one_labels", Value::is_boolean)?;
        let columns = typed("feature_columns", Value::is_array)?.and_then(Value::as_array);
        if !format.as_deref().is_some_and(|f| FORMATS.contains(&f)) {
            return Err(bad(format!("format {}", m.get("format").map_or("None".into(), shown))));
        }
        let feature_columns: Vec<String> = match columns {
            Some(cols) => cols
                .iter()
                .map(|c| c.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("feature_columns must be strings".into()))?,
            None => Vec::new(),
        };
        if let Some(width) = model.book().map(|b| b.n_features_in() as u64) {
            if n_features.is_some_and(|n| n != width) {
                return Err(bad(format!(
                    "n_features {} but the model has {width} features",
                    n_features.unwrap_or(0)
                )));
            }
            if !feature_columns.is_empty() && feature_columns.len() as u64 != width {
                return Err(bad(format!(
                    "{} feature columns but the model has {width} features",
                    feature_columns.len()
                )));
            }
        }
        Ok(Saved {
            format,
            n_features,
            zero_based,
            task_namespace,
            task_column,
            label_column,
            feature_columns,
        })
    }
}

/// The model file at `path`, every failure one line naming it.
fn load_model(path: &str) -> Result<Model, StreamError> {
    if std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Err(StreamError::Refused(format!("{path}: model file not found")));
    }
    crate::model_file::load(path)
        .map_err(|e| StreamError::Refused(format!("{path}: not a readable omtl model file ({e})")))
}

/// How a run reads its file, settled from the command line and the model's metadata.
struct Plan {
    format: String,
    opts: Options,
    n_features: Option<u64>,
    zero_based: Option<bool>,
    task_namespace: Option<String>,
    task_column: String,
    label_column: String,
}

impl Plan {
    fn new(r: &Reading, saved: &Saved, require_labels: bool) -> Result<Self, StreamError> {
        let by_extension = (r.data != "-").then(|| format_of_path(&r.data)).flatten();
        let format = match (&r.format, by_extension, &saved.format) {
            (Some(f), _, _) => f.clone(),
            (None, Some(f), _) => f.to_string(),
            (None, None, Some(f)) => f.clone(),
            (None, None, None) => return Err(StreamError::Refused(format_hint(&r.data))),
        };
        let task_namespace = if r.task_tag {
            None
        } else {
            r.task_namespace
                .clone()
                .or_else(|| saved.task_namespace.clone().unwrap_or(Some("t".into())))
        };
        let task_column = r
            .task_column
            .clone()
            .or(saved.task_column.clone())
            .unwrap_or("task".into());
        let label_column = r
            .label_column
            .clone()
            .or(saved.label_column.clone())
            .unwrap_or("label".into());
        let engine = if format == "parquet" {
            Format::Csv // a table: read by the caller, then as CSV columns
        } else {
            Format::parse(&format).map_err(StreamError::Refused)?
        };
        let mut opts = Options::new(engine, 1);
        opts.chunk_rows = r.chunk_rows.max(1);
        opts.max_line_bytes = r.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
        opts.skip_bad_lines = r.skip_bad_lines;
        opts.vw_task_namespace.clone_from(&task_namespace);
        opts.csv_task_column.clone_from(&task_column);
        opts.csv_label_column.clone_from(&label_column);
        opts.csv_feature_columns = (!saved.feature_columns.is_empty()).then(|| saved.feature_columns.clone());
        opts.require_labels = require_labels;
        Ok(Plan {
            format,
            opts,
            n_features: r.n_features.or(saved.n_features),
            zero_based: if r.zero_based { Some(true) } else { saved.zero_based },
            task_namespace,
            task_column,
            label_column,
        })
    }

    /// The source: the file, or (Parquet) the table `read_table` reads.
    fn source(&self, data: &str, read_table: &mut Option<&mut TableReader>) -> Result<Source, StreamError> {
        if self.format != "parquet" {
            return Ok(Source::File(data.to_string()));
        }
        let read = read_table
            .as_mut()
            .ok_or_else(|| StreamError::Refused(format!("{data}: Parquet is read by the omtl command")))?;
        let table = read(&TableColumns {
            task: self.task_column.clone(),
            label: self.label_column.clone(),
            features: self.opts.csv_feature_columns.clone(),
            require_labels: self.opts.require_labels,
            skip_bad_lines: self.opts.skip_bad_lines,
        })?;
        Ok(Source::Chunks {
            name: data.to_string(),
            chunks: vec![table],
        })
    }

    /// The metadata a model learned on this file keeps: what it held, with [`METADATA_KEY`] set to
    /// how this file was read.
    fn metadata(&self, model: &Model, zero_based: Option<bool>, columns: &[String]) -> Map<String, Value> {
        let mut m = model.metadata().cloned().unwrap_or_default();
        let cli = json!({
            "format": self.format,
            "n_features": model.book().map_or(0, |b| b.n_features_in()),
            "zero_based": zero_based,
            "task_namespace": self.task_namespace,
            "task_column": self.task_column,
            "label_column": self.label_column,
            "feature_columns": columns,
            "zero_one_labels": *model.label_form() == LabelForm::ZeroOne,
        });
        m.insert(METADATA_KEY.into(), cli);
        m
    }
}

/// The message for a file whose format cannot be told.
fn format_hint(data: &str) -> String {
    let formats = FORMATS.join("|");
    if data == "-" {
        return format!("<stdin>: cannot tell the format of standard input; pass --format {formats}");
    }
    let path = std::path::Path::new(data);
    let mut suffix = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if suffix == "gz" {
        let stem = std::path::Path::new(path.file_stem().unwrap_or_default());
        suffix = stem
            .extension()
            .map(|e| e.to_string_lossy().to_lowercase())
            .unwrap_or_default();
    }
    let suffix = if suffix.is_empty() {
        String::new()
    } else {
        format!(".{suffix}")
    };
    format!("{data}: cannot tell the format from the extension '{suffix}'; pass --format {formats}")
}

/// Refuses `--probabilities` for a model whose scores are not log-odds.
fn check_probabilities(r: &Reading, est: &Estimator) -> Result<(), StreamError> {
    let logistic =
        est.class().kind == "mt_linear" && est.params().get("loss").and_then(Value::as_str) == Some("logistic");
    if r.probabilities && !logistic {
        return Err(StreamError::Refused(format!(
            "--probabilities: the scores of {} are not log-odds (those of MTLinear with loss=logistic are); write \
             the scores with --raw-predictions",
            est.class().name
        )));
    }
    if r.probabilities && r.predictions.is_none() {
        return Err(StreamError::Refused(
            "--probabilities writes the probabilities to the --predictions file: give one (-p FILE, or -p - for \
             standard output)"
                .into(),
        ));
    }
    Ok(())
}

/// The estimator `--learner NAME --param k=v ...` names.
fn estimator(learner: Option<&str>, params: &[String]) -> Result<Estimator, StreamError> {
    let mut pairs = Vec::new();
    for pair in params {
        match pair.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => pairs.push((key.trim(), value)),
            _ => return Err(StreamError::Refused(format!("--param '{pair}': expected key=value"))),
        }
    }
    Ok(Estimator::from_text(learner.unwrap_or("MTLinear"), &pairs)?)
}

/// Runs `omtl learn`: the report and the last lines go to `report`, standard output (`-p -`)
/// to `stdout`, a Parquet file is read by `read_table`.
pub fn learn_command(
    cmd: &Learn,
    report: &mut dyn FnMut(&str) -> std::io::Result<()>,
    stdout: Option<Box<dyn Write + '_>>,
    mut read_table: Option<&mut TableReader>,
) -> Result<Summary, StreamError> {
    let start = Instant::now();
    let r = &cmd.reading;
    if cmd.passes < 1 {
        return Err(StreamError::Refused("--passes must be >= 1".into()));
    }
    if cmd.passes > 1 && is_stream(&r.data) {
        return Err(StreamError::Refused(
            "--passes > 1 reads the data again: give a file, not standard input or a pipe".into(),
        ));
    }
    let (model, saved) = match &cmd.initial_model {
        Some(path) => {
            if cmd.learner.is_some() || !cmd.params.is_empty() {
                return Err(StreamError::Refused(
                    "--initial-model continues the saved learner: leave out --learner and --param".into(),
                ));
            }
            let model = load_model(path)?;
            let saved = Saved::of(&model, path)?;
            (model, saved)
        }
        None => (
            Model::new(estimator(cmd.learner.as_deref(), &cmd.params)?),
            Saved::default(),
        ),
    };
    check_probabilities(r, model.estimator())?;
    let mut plan = Plan::new(r, &saved, true)?;
    let fitted_width = model.book().map(|b| b.n_features_in() as u64);
    let keeps_width = (!model.grows_features()).then(|| model.estimator().class().name);
    let n_features = match (plan.opts.format, fitted_width) {
        (Format::Svmlight, Some(w)) => {
            if r.n_features.is_some_and(|n| n < w) {
                return Err(StreamError::Refused(format!(
                    "--n-features {}: the model has {w} features",
                    r.n_features.unwrap_or(0)
                )));
            }
            // A stream read by a learner that keeps its width: the model's width.
            r.n_features
                .or((keeps_width.is_some() && is_stream(&r.data)).then_some(w))
        }
        (Format::Vw, Some(w)) => {
            if r.n_features.is_some_and(|n| n != w) {
                return Err(StreamError::Refused(format!(
                    "--n-features {}: the model has {w} features",
                    r.n_features.unwrap_or(0)
                )));
            }
            Some(w)
        }
        _ => plan.n_features,
    };
    let mut outputs = Outputs::create(
        r.predictions.as_deref(),
        r.raw_predictions.as_deref(),
        r.probabilities,
        stdout,
    )?;
    let mut stream = StreamLearner::new(model);
    for _ in 0..cmd.passes {
        let width = if plan.format == "parquet" {
            Width::Fixed(1)
        } else {
            resolve_layout(&r.data, &mut plan.opts, n_features, plan.zero_based, keeps_width)?
        };
        // Later passes read the file as the first did.
        plan.zero_based = Some(plan.opts.zero_based);
        let source = plan.source(&r.data, &mut read_table)?;
        stream.learn(source, &mut plan.opts, width, r.quiet, report, &mut outputs)?;
    }
    let n = stream.progress.n;
    if n == 0 {
        return Err(StreamError::Refused(format!("{}: no examples", r.data)));
    }
    let mut written = outputs.written();
    let zero_based = (plan.opts.format == Format::Svmlight && plan.format != "parquet").then_some(plan.opts.zero_based);
    let columns = if stream.feature_columns.is_empty() {
        saved.feature_columns.clone()
    } else {
        stream.feature_columns.clone()
    };
    let model = &mut stream.model;
    if let Some(path) = &cmd.save {
        let metadata = plan.metadata(model, zero_based.or(saved.zero_based), &columns);
        *model.metadata_mut() = Some(metadata);
        crate::model_file::save(link_target(std::path::Path::new(path)), model)?;
        written.push(format!(
            "model written to {path} (omtl predict DATA --model {path}; or omtl.load in Python)"
        ));
    }
    outputs.commit()?;
    let book = model.book().expect("a model that learned examples");
    let n_tasks = book.labels().map_or(book.seen_per_task().len(), |l| l.len());
    let f = Finished {
        n,
        passes: cmd.passes,
        loss: stream.progress.loss(),
        n_tasks,
        n_features: book.n_features_in(),
        seconds: start.elapsed().as_secs_f64(),
        skipped: stream.skipped,
        first_skipped: stream.first_skipped.clone(),
        written,
    };
    Ok(Summary {
        n,
        mistakes: stream.progress.mistakes,
        labelled: 0,
        skipped: stream.skipped,
        first_skipped: stream.first_skipped,
        text: finished(&f, r.quiet),
    })
}

/// Runs `omtl predict`: the predictions go to `-p` (default standard output, `stdout`).
pub fn predict_command(
    cmd: &Predict,
    stdout: Option<Box<dyn Write + '_>>,
    mut read_table: Option<&mut TableReader>,
) -> Result<Summary, StreamError> {
    let r = &cmd.reading;
    let model = load_model(&cmd.model)?;
    let Some(width) = model.book().map(|b| b.n_features_in() as u64) else {
        return Err(StreamError::Refused(format!(
            "{}: the model was never trained",
            cmd.model
        )));
    };
    let saved = Saved::of(&model, &cmd.model)?;
    check_probabilities(
        &Reading {
            predictions: Some(r.predictions.clone().unwrap_or("-".into())),
            ..r.clone()
        },
        model.estimator(),
    )?;
    let mut plan = Plan::new(r, &saved, false)?;
    if plan.format != "parquet" {
        let n = (plan.opts.format != Format::Csv).then_some(width);
        resolve_layout(&r.data, &mut plan.opts, n, plan.zero_based, None)?;
    }
    let predictions = r.predictions.clone().unwrap_or("-".into());
    let mut outputs = Outputs::create(
        Some(&predictions),
        r.raw_predictions.as_deref(),
        r.probabilities,
        stdout,
    )?;
    let source = plan.source(&r.data, &mut read_table)?;
    let s = predict(&model, source, &plan.opts, &mut outputs as &mut dyn ChunkSink)?;
    if s.n == 0 {
        return Err(StreamError::Refused(format!("{}: no examples", r.data)));
    }
    let mut text = Vec::new();
    if !r.quiet {
        let what = if r.probabilities {
            "probabilities"
        } else {
            "predictions"
        };
        let shown = if predictions == "-" {
            "standard output"
        } else {
            &predictions
        };
        text.push(format!("{}: {} {what} written to {shown}", r.data, s.n));
        text.extend(outputs.written().into_iter().skip(1));
        if s.labelled > 0 {
            text.push(format!(
                "against the file's labels ({} rows): error {:.2} %",
                s.labelled,
                100.0 * s.mistakes as f64 / s.labelled as f64
            ));
        }
    }
    if s.n_skipped > 0 {
        let first = s.first_skipped.as_deref().unwrap_or("");
        text.push(format!(
            "omtl predict: skipped {} bad lines (first: {first})",
            s.n_skipped
        ));
    }
    outputs.commit()?;
    Ok(Summary {
        n: s.n,
        mistakes: s.mistakes,
        labelled: s.labelled,
        skipped: s.n_skipped,
        first_skipped: s.first_skipped,
        text: text.join("\n"),
    })
}
