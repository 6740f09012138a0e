//! Vowpal Wabbit's daemon protocol (`vw --daemon`): VW text examples in, one line per example
//! out, over plain TCP, so that VW clients switch without code changes.
//!
//! A line is `[label [importance]] ['tag]|namespace feature[:value] ... |namespace ...`. A line
//! with a label is learned (logged first, as `/v1/learn`) and answered with the score before the
//! update; a line without one is scored. The answer is the score with six decimals, then the
//! tag if the line had one (`0.123456 msg-17`), as `vw --daemon` writes it. Features are named
//! `namespace^feature` (a feature in the default namespace by its name) and hashed as
//! `learn_one` hashes str keys; the namespace `task` names the event's task (`|task alice`).
//! A line that cannot be read is answered `error: <why>`, and the connection goes on.
//! Lines that arrive together are learned as one batch (one log record, one flush).

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use super::api::{EventsBuilder, LabelsBuilder};
use super::metrics::Route;
use super::ops::Op;
use super::writer::{Command, Outcome};
use super::Shared;

/// The longest line read (a longer one ends the connection).
const MAX_LINE: usize = 1 << 20;

/// One example, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// Its label (-1/+1, or 0/1), if any.
    pub label: Option<f64>,
    /// Its tag, if any.
    pub tag: Option<String>,
    /// Its task (the `task` namespace's first feature), if any.
    pub task: Option<String>,
    /// Its features: name and value.
    pub features: Map<String, Value>,
}

/// Reads one VW text example.
pub fn parse(line: &str) -> Result<Example, String> {
    let (head, body) = line
        .split_once('|')
        .ok_or("no '|': a VW example has at least one namespace")?;
    let mut example = Example {
        label: None,
        tag: None,
        task: None,
        features: Map::new(),
    };
    let tokens: Vec<&str> = head.split_whitespace().collect();
    let adjacent_tag = !head.is_empty() && !head.ends_with(char::is_whitespace);
    for (i, token) in tokens.iter().enumerate() {
        if let Some(tag) = token.strip_prefix('\'') {
            example.tag = Some(tag.to_owned());
        } else if adjacent_tag && i + 1 == tokens.len() && i > 0 {
            example.tag = Some((*token).to_owned());
        } else if i == 0 {
            let y: f64 = token.parse().map_err(|_| format!("label {token:?} is not a number"))?;
            example.label = Some(y);
        } else if i > 2 || token.parse::<f64>().is_err() {
            return Err(format!("unexpected {token:?} before the first '|'"));
        }
    }
    for section in body.split('|') {
        let mut tokens = section.split_whitespace();
        let namespace = if section.starts_with(char::is_whitespace) {
            ""
        } else {
            match tokens.next() {
                Some(ns) => ns.split(':').next().unwrap_or(""),
                None => "",
            }
        };
        for token in tokens {
            let (name, value) = match token.rsplit_once(':') {
                Some((n, v)) => (
                    n,
                    v.parse::<f64>()
                        .map_err(|_| format!("feature {token:?}: value is not a number"))?,
                ),
                None => (token, 1.0),
            };
            if namespace == "task" {
                example.task.get_or_insert_with(|| name.to_owned());
                continue;
            }
            if !value.is_finite() {
                return Err(format!("feature {token:?}: value is not finite"));
            }
            let key = if namespace.is_empty() {
                name.to_owned()
            } else {
                format!("{namespace}^{name}")
            };
            let sum = example.features.get(&key).and_then(Value::as_f64).unwrap_or(0.0) + value;
            example.features.insert(key, Value::from(sum));
        }
    }
    Ok(example)
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
    let parsed: Vec<Result<Example, String>> = lines.iter().map(|l| parse(l)).collect();
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
    let width = shared
        .model
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .estimator()
        .dict_width();
    let mut events = EventsBuilder::new(width, &shared.limits);
    let mut labels = LabelsBuilder::default();
    for (i, e) in run.iter().enumerate() {
        let task = e.task.as_ref().map(|t| Value::from(t.as_str()));
        let features = Value::Object(e.features.clone());
        events
            .push(&format!("line {i}"), Some(&features), task.as_ref())
            .map_err(|b| b.message)?;
        if let Some(y) = e.label {
            labels.push("label", Some(&Value::from(y))).map_err(|b| b.message)?;
        }
    }
    let events = events.finish();
    if !learn {
        let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
        let rows = events.features.rows(width);
        let result = match &events.tasks {
            None => model.decision(&rows, crate::model::Tasks::Omitted),
            Some(ids) => {
                let refs: Vec<_> = ids.iter().map(crate::model::TaskId::as_ref).collect();
                model.decision(&rows, crate::model::Tasks::Ids(&refs))
            }
        };
        return result.map_err(|e| e.to_string());
    }
    let (tx, rx) = oneshot::channel();
    let op = Op::Learn {
        events,
        labels: labels.finish(),
    };
    shared
        .writer
        .send(Command::Apply(op, tx))
        .map_err(|_| "the server is shutting down".to_owned())?;
    match rx.await {
        Ok(Outcome::Applied { scores, .. }) => Ok(scores),
        Ok(Outcome::Refused(e)) => Err(e.to_string()),
        Ok(Outcome::Unavailable(why)) => Err(why),
        Err(_) => Err("the server is shutting down".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_read_as_vw_reads_them() {
        let e = parse("1 2.0 'msg-17 |words cheap pills:2 |task alice| free").unwrap();
        assert_eq!(e.label, Some(1.0));
        assert_eq!(e.tag.as_deref(), Some("msg-17"));
        assert_eq!(e.task.as_deref(), Some("alice"));
        assert_eq!(e.features["words^cheap"], 1.0);
        assert_eq!(e.features["words^pills"], 2.0);
        assert_eq!(e.features["free"], 1.0);
        let e = parse("-1 tag7| a b:0.5").unwrap();
        assert_eq!((e.label, e.tag.as_deref()), (Some(-1.0), Some("tag7")));
        let e = parse("|f x").unwrap();
        assert_eq!((e.label, e.tag), (None, None));
        assert!(parse("1 a b c").is_err());
        assert!(parse("x |f a").is_err());
        assert!(parse("1 |f a:nan").is_err());
    }
}
