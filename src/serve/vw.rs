//! Vowpal Wabbit's daemon protocol (`vw --daemon`): VW text examples in, one line per example
//! out, over plain TCP, so that VW clients switch without code changes.
//!
//! A line is read as `omtl learn` reads a `.vw` file (`label [importance] ['tag]|namespace
//! feature[:value] ...`, the task the one name in namespace `t`, names hashed into the model's
//! `n_features` columns). A line with a label is learned (logged first, as `/v1/learn`) and
//! answered with the score before the update; a line without one is scored. The answer is the
//! score with six decimals, then the tag if the line had one (`0.123456 msg-17`), as
//! `vw --daemon` writes it. A line that cannot be read or learned is answered
//! `error: <why>`, and the connection goes on. Lines that arrive together are learned as one
//! batch (one log record, one flush).

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use super::metrics::Route;
use super::ops::{Events, Features, Op, OwnedLabels};
use super::writer::{Command, Outcome};
use super::Shared;
use crate::model::{TaskId, TaskRef, Tasks};

/// The longest line read (a longer one ends the connection).
const MAX_LINE: usize = 1 << 20;

/// One example, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// Its label (-1/+1, or 0/1), if any.
    pub label: Option<f64>,
    /// Its tag, if any.
    pub tag: Option<String>,
    /// Its task (the one name in namespace `t`), if any.
    pub task: Option<String>,
    /// Its hashed columns (sorted, distinct).
    pub indices: Vec<u32>,
    /// Their values.
    pub values: Vec<f64>,
}

/// The tag of a line: a word after the label section's `'`, or its last word that is not a
/// number (VW's rule).
fn tag(head: &str) -> Option<String> {
    let mut tag = None;
    for (k, word) in head.split_whitespace().enumerate() {
        if let Some(t) = word.strip_prefix('\'') {
            tag = Some(t.to_owned());
        } else if k > 0 && word.parse::<f64>().is_err() {
            tag = Some(word.to_owned());
        }
    }
    tag
}

/// Reads one VW text example (`None`: a blank line).
pub fn parse(line: &str, n_features: usize) -> Result<Option<Example>, String> {
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    let Some((label, task)) = crate::io::read_vw_line(line.as_bytes(), n_features as u64, &mut indices, &mut values)?
    else {
        return Ok(None);
    };
    let head = line.split_once('|').map_or("", |(h, _)| h);
    Ok(Some(Example {
        label,
        tag: tag(head),
        task,
        indices,
        values,
    }))
}

/// Accepts VW connections until told to stop.
pub async fn accept(shared: Arc<Shared>, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
    let template = stopped.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(shared.clone(), stream, template.clone()));
            }
            _ = super::until_stopped(&mut stopped) => return,
        }
    }
}

async fn connection(shared: Arc<Shared>, stream: TcpStream, mut stopped: watch::Receiver<bool>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        let mut lines = Vec::new();
        // One line (waiting), then every complete line already received.
        loop {
            line.clear();
            let n = {
                let mut limited = (&mut reader).take(MAX_LINE as u64);
                tokio::select! {
                    n = limited.read_until(b'\n', &mut line) => n,
                    _ = super::until_stopped(&mut stopped), if lines.is_empty() => return,
                }
            };
            match n {
                Ok(0) | Err(_) if lines.is_empty() => return,
                Ok(0) | Err(_) => break,
                Ok(_) if !line.ends_with(b"\n") && line.len() >= MAX_LINE => return,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']).to_owned();
            if !text.trim().is_empty() {
                lines.push(text);
            }
            if lines.len() >= shared.limits.max_events || !reader.buffer().contains(&b'\n') {
                break;
            }
        }
        let started = std::time::Instant::now();
        let answers = answer(&shared, &lines).await;
        shared.metrics.request(Route::Vw, 200, started.elapsed());
        if write.write_all(answers.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The answers to lines that arrived together, one line each, in order.
async fn answer(shared: &Shared, lines: &[String]) -> String {
    let width = shared
        .model
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .estimator()
        .dict_width();
    let parsed: Vec<Result<Example, String>> = lines
        .iter()
        .map(|l| parse(l, width).and_then(|e| e.ok_or_else(|| "no example".to_owned())))
        .collect();
    let mut answers: Vec<String> = vec![String::new(); lines.len()];
    // Runs of consecutive readable lines, learned (labelled) or scored together.
    let mut start = 0;
    while start < parsed.len() {
        let Ok(first) = &parsed[start] else {
            answers[start] = format!("error: {}", parsed[start].as_ref().unwrap_err());
            start += 1;
            continue;
        };
        let learn = first.label.is_some();
        let has_task = first.task.is_some();
        let end = (start..parsed.len())
            .find(|&i| match &parsed[i] {
                Ok(e) => e.label.is_some() != learn || e.task.is_some() != has_task,
                Err(_) => true,
            })
            .unwrap_or(parsed.len());
        let run: Vec<&Example> = parsed[start..end].iter().filter_map(|e| e.as_ref().ok()).collect();
        let scores = match score_run(shared, &run, learn).await {
            Ok(scores) => scores.into_iter().map(Ok).collect(),
            Err(_) if run.len() > 1 => {
                // One line spoiled the batch: each line on its own.
                let mut each = Vec::with_capacity(run.len());
                for e in &run {
                    each.push(score_run(shared, &[*e], learn).await.map(|s| s[0]));
                }
                each
            }
            Err(e) => vec![Err(e)],
        };
        for (k, score) in scores.into_iter().enumerate() {
            let e = run[k];
            answers[start + k] = match (score, &e.tag) {
                (Ok(s), Some(tag)) => format!("{s:.6} {tag}"),
                (Ok(s), None) => format!("{s:.6}"),
                (Err(why), _) => format!("error: {why}"),
            };
        }
        start = end;
    }
    let mut out = answers.join("\n");
    out.push('\n');
    out
}

/// Scores (or learns, `learn`) a run of examples as one batch.
async fn score_run(shared: &Shared, run: &[&Example], learn: bool) -> Result<Vec<f64>, String> {
    let mut indptr = vec![0i64];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for e in run {
        indices.extend_from_slice(&e.indices);
        values.extend_from_slice(&e.values);
        indptr.push(indices.len() as i64);
    }
    let tasks: Option<Vec<TaskId>> = run.iter().map(|e| e.task.as_deref().map(TaskId::from)).collect();
    let events = Events {
        features: Features::Named {
            indptr,
            indices,
            values,
        },
        tasks,
    };
    if !learn {
        let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
        let rows = events.features.rows(model.estimator().dict_width());
        let refs: Option<Vec<TaskRef>> = events.tasks.as_ref().map(|t| t.iter().map(TaskId::as_ref).collect());
        let tasks = refs.as_deref().map_or(Tasks::Omitted, Tasks::Ids);
        return model.decision(&rows, tasks).map_err(|e| e.to_string());
    }
    let labels = OwnedLabels::Floats(run.iter().map(|e| e.label.unwrap_or(f64::NAN)).collect());
    let (tx, rx) = oneshot::channel();
    let op = Op::Learn { events, labels };
    shared
        .writer
        .send(Command::Apply(op, tx))
        .map_err(|_| "the server is shutting down".to_owned())?;
    match rx.await {
        Ok(Outcome::Applied { effect, .. }) => Ok(effect.into_scores()),
        Ok(Outcome::Refused(e)) => Err(e.to_string()),
        Ok(Outcome::Unavailable(why)) => Err(why),
        Err(_) => Err("the server is shutting down".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_read_as_omtl_learn_reads_them() {
        let e = parse("1 'msg-17 |words cheap pills:2 |t alice| free", 1 << 18)
            .unwrap()
            .unwrap();
        assert_eq!(e.label, Some(1.0));
        assert_eq!(e.tag.as_deref(), Some("msg-17"));
        assert_eq!(e.task.as_deref(), Some("alice"));
        assert_eq!(e.indices.len(), 3);
        assert!(e.values.contains(&2.0));
        let e = parse("-1 tag7| a b:0.5", 1 << 18).unwrap().unwrap();
        assert_eq!((e.label, e.tag.as_deref()), (Some(-1.0), Some("tag7")));
        let e = parse("|f x", 1 << 18).unwrap().unwrap();
        assert_eq!((e.label, e.tag), (None, None));
        assert_eq!(parse("   ", 1 << 18), Ok(None));
        assert!(parse("1 a b c", 1 << 18).is_err());
        assert!(parse("x |f a", 1 << 18).is_err());
    }
}
