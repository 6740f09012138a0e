//! The HTTP/JSON API: routing, the bearer token, body caps, and each route's work. Learns,
//! labels, forgets and remembering predictions go through the writer (logged, then applied);
//! predictions read the model under its read lock.

use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::api::{self, bad, BadRequest, EventsBuilder, LabelsBuilder};
use super::fast;
use super::metrics::Route;
use super::ops::{Effect, Events, Op};
use super::writer::{Command, Outcome};
use super::Shared;
use crate::error::Error;

/// An answer: status, content type, body.
struct Answer {
    status: u16,
    json: bool,
    body: String,
}

impl Answer {
    fn json(status: u16, body: String) -> Self {
        Answer {
            status,
            json: true,
            body,
        }
    }

    fn error(status: u16, message: &str) -> Self {
        Answer::json(status, api::error_body(message))
    }
}

impl From<BadRequest> for Answer {
    fn from(e: BadRequest) -> Self {
        Answer::error(e.status, &e.message)
    }
}

/// Compares a request's `Authorization` header with the token in constant time (the digests
/// are compared, so neither the token's length nor its bytes leak through timing).
pub fn authorized(expected: &[u8; 32], header: Option<&HeaderValue>) -> bool {
    let given = header
        .and_then(|h| h.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or(b"");
    let digest = Sha256::digest(given);
    let diff = digest.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    diff == 0 && !given.is_empty()
}

/// Serves one request.
pub async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let started = Instant::now();
    let route = match request.uri().path() {
        "/v1/predict" => Route::Predict,
        "/v1/learn" => Route::Learn,
        "/v1/label" => Route::Label,
        "/v1/forget" => Route::Forget,
        "/v1/model" => Route::Model,
        "/v1/snapshot" => Route::Snapshot,
        "/healthz" => Route::Health,
        "/metrics" => Route::Metrics,
        "/v1/openapi.json" => Route::OpenApi,
        _ => Route::Other,
    };
    let answer = answer(&shared, route, request).await;
    shared.metrics.request(route, answer.status, started.elapsed());
    let mut response = Response::new(Full::new(Bytes::from(answer.body)));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind = if answer.json {
        "application/json"
    } else {
        "text/plain; version=0.0.4"
    };
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    Ok(response)
}

async fn answer(shared: &Shared, route: Route, request: Request<Incoming>) -> Answer {
    if let Some(token) = &shared.token {
        if !authorized(token, request.headers().get(AUTHORIZATION)) {
            return Answer::error(401, "a valid Authorization: Bearer <token> header is required");
        }
    }
    let post = match (route, request.method()) {
        (Route::Other, _) => return Answer::error(404, &format!("no route {}", request.uri().path())),
        (Route::Predict | Route::Learn | Route::Label | Route::Forget | Route::Snapshot, &Method::POST) => true,
        (Route::Model | Route::Health | Route::Metrics | Route::OpenApi, &Method::GET) => false,
        _ => {
            return Answer::error(
                405,
                &format!("{} does not take {}", request.uri().path(), request.method()),
            )
        }
    };
    let body = if post {
        match read_body(shared, request).await {
            Ok(b) => b,
            Err(a) => return a,
        }
    } else {
        Bytes::new()
    };
    let result = match route {
        Route::Predict => predict(shared, &body).await,
        Route::Learn => learn(shared, &body).await,
        Route::Label => label(shared, &body).await,
        Route::Forget => forget(shared, &body).await,
        Route::Snapshot => snapshot(shared).await,
        Route::Model => Ok(model_info(shared)),
        Route::Health => Ok(Answer::json(
            200,
            json!({"status": "ok", "learn_available": !shared.metrics.learn_unavailable.load(Relaxed)}).to_string(),
        )),
        Route::Metrics => Ok(Answer {
            status: 200,
            json: false,
            body: metrics(shared),
        }),
        Route::OpenApi => Ok(Answer::json(200, super::OPENAPI.to_owned())),
        Route::Vw | Route::Other => unreachable!("routed above"),
    };
    result.unwrap_or_else(Answer::from)
}

async fn read_body(shared: &Shared, request: Request<Incoming>) -> Result<Bytes, Answer> {
    let max = shared.limits.max_body_bytes;
    let too_large = || Answer::error(413, &format!("body: larger than the limit of {max} bytes"));
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    match Limited::new(request.into_body(), max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(Answer::error(400, &format!("body: cannot be read ({e})"))),
    }
}

/// The status of an error the model gave.
fn refused(e: &Error) -> BadRequest {
    let message = e.to_string();
    let status = match e {
        Error::UnknownId(_) | Error::UnknownTask { .. } => 404,
        Error::InvalidParameter { name: "tasks", reason } if reason.contains("unknown task") => 404,
        Error::Memory { .. } => 413,
        _ => 400,
    };
    BadRequest { status, message }
}

/// Sends an operation to the writer and waits for its outcome.
async fn submit(shared: &Shared, op: Op) -> Result<(Effect, u64, u64), Answer> {
    let (tx, rx) = oneshot::channel();
    if shared.writer.send(Command::Apply(op, tx)).is_err() {
        return Err(Answer::error(503, "the server is shutting down"));
    }
    match rx.await {
        Ok(Outcome::Applied { effect, lsn, n_seen }) => Ok((effect, lsn, n_seen)),
        Ok(Outcome::Refused(e)) => Err(refused(&e).into()),
        Ok(Outcome::Unavailable(why)) => Err(Answer::error(503, &why)),
        Err(_) => Err(Answer::error(503, "the server is shutting down")),
    }
}

fn width(shared: &Shared) -> usize {
    shared
        .model
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .estimator()
        .dict_width()
}

/// A predict body's events and ids to remember: the fast path, else field by field.
fn predict_request(shared: &Shared, body: &[u8]) -> Result<(Events, Vec<Option<String>>), BadRequest> {
    let limits = &shared.limits;
    if api::depth(body, limits.max_depth) <= limits.max_depth {
        if let Some(parsed) = fast::parse(body, limits, width(shared), false) {
            return Ok((parsed.events, parsed.ids));
        }
    }
    let map = api::object(body, limits, &["events"])?;
    let items = api::items(&map, "events", limits)?;
    let mut events = EventsBuilder::new(width(shared), limits);
    let mut ids: Vec<Option<String>> = Vec::with_capacity(items.len());
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("events[{i}]");
        let event = api::entry(item, &at, &["task", "features", "remember"])?;
        events.push(&at, event.get("features"), event.get("task"))?;
        let id = match event.get("remember") {
            None | Some(Value::Null) => None,
            Some(v) => Some(api::id(v, &format!("{at}.remember"))?),
        };
        if let Some(id) = &id {
            if !seen.insert(id.clone()) {
                return Err(bad(format!("{at}.remember"), "the id appears twice in the batch"));
            }
        }
        ids.push(id);
    }
    Ok((events.finish(), ids))
}

async fn predict(shared: &Shared, body: &[u8]) -> Result<Answer, BadRequest> {
    let (events, ids) = predict_request(shared, body)?;
    let n = events.features.len() as u64;
    let mut out = String::with_capacity(64 * events.features.len());
    if ids.iter().any(Option::is_some) {
        let op = Op::Remember { events, ids, now: 0.0 };
        let (scores, lsn) = match submit(shared, op).await {
            Ok((effect, lsn, _)) => (effect.into_scores(), lsn),
            Err(answer) => return Ok(answer),
        };
        let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
        api::predictions(&mut out, &model, &scores);
        out.push_str(&format!(",\"lsn\":{lsn}}}"));
        return Ok(Answer::json(200, out));
    }
    let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
    let rows = events.features.rows(model.estimator().dict_width());
    let scores = match &events.tasks {
        None => model.decision(&rows, crate::model::Tasks::Omitted),
        Some(ids) => {
            let refs: Vec<_> = ids.iter().map(crate::model::TaskId::as_ref).collect();
            model.decision(&rows, crate::model::Tasks::Ids(&refs))
        }
    }
    .map_err(|e| refused(&e))?;
    api::predictions(&mut out, &model, &scores);
    drop(model);
    out.push('}');
    shared.metrics.predicted.fetch_add(n, Relaxed);
    Ok(Answer::json(200, out))
}

/// A learn body's operation: the fast path, else field by field.
fn learn_request(shared: &Shared, body: &[u8]) -> Result<Op, BadRequest> {
    let limits = &shared.limits;
    if api::depth(body, limits.max_depth) <= limits.max_depth {
        if let Some(parsed) = fast::parse(body, limits, width(shared), true) {
            let labels = parsed.labels.expect("a learn's labels");
            return Ok(Op::Learn {
                events: parsed.events,
                labels,
            });
        }
    }
    let map = api::object(body, limits, &["events"])?;
    let items = api::items(&map, "events", limits)?;
    let mut events = EventsBuilder::new(width(shared), limits);
    let mut labels = LabelsBuilder::default();
    for (i, item) in items.iter().enumerate() {
        let at = format!("events[{i}]");
        let event = api::entry(item, &at, &["task", "features", "label"])?;
        events.push(&at, event.get("features"), event.get("task"))?;
        labels.push(&format!("{at}.label"), event.get("label"))?;
    }
    Ok(Op::Learn {
        events: events.finish(),
        labels: labels.finish(),
    })
}

async fn learn(shared: &Shared, body: &[u8]) -> Result<Answer, BadRequest> {
    let op = learn_request(shared, body)?;
    Ok(applied(shared, op).await)
}

async fn label(shared: &Shared, body: &[u8]) -> Result<Answer, BadRequest> {
    let limits = &shared.limits;
    let map = api::object(body, limits, &["labels"])?;
    let items = api::items(&map, "labels", limits)?;
    let mut ids = Vec::with_capacity(items.len());
    let mut labels = LabelsBuilder::default();
    for (i, item) in items.iter().enumerate() {
        let at = format!("labels[{i}]");
        let entry = api::entry(item, &at, &["id", "label"])?;
        let id = entry.get("id").ok_or_else(|| bad(format!("{at}.id"), "missing"))?;
        ids.push(api::id(id, &format!("{at}.id"))?);
        labels.push(&format!("{at}.label"), entry.get("label"))?;
    }
    let op = Op::Label {
        ids,
        labels: labels.finish(),
        now: 0.0,
    };
    Ok(applied(shared, op).await)
}

/// Submits a learning operation; its predictions, `n_seen` and `lsn`.
async fn applied(shared: &Shared, op: Op) -> Answer {
    match submit(shared, op).await {
        Ok((effect, lsn, n_seen)) => {
            let scores = effect.into_scores();
            let mut out = String::with_capacity(64 * scores.len());
            let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
            api::predictions(&mut out, &model, &scores);
            drop(model);
            out.push_str(&format!(",\"n_seen\":{n_seen},\"lsn\":{lsn}}}"));
            Answer::json(200, out)
        }
        Err(answer) => answer,
    }
}

/// Forgets tasks: answered once the state directory holds none of their records (the
/// writer's snapshot after the forget).
async fn forget(shared: &Shared, body: &[u8]) -> Result<Answer, BadRequest> {
    let map = api::object(body, &shared.limits, &["tasks"])?;
    let items = api::items(&map, "tasks", &shared.limits)?;
    let tasks = items
        .iter()
        .enumerate()
        .map(|(i, v)| api::task(v, &|| format!("tasks[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let named: Vec<Value> = tasks.iter().map(task_value).collect();
    Ok(match submit(shared, Op::Forget { tasks }).await {
        Ok((Effect::Forgot(report), lsn, _)) => Answer::json(
            200,
            json!({
                "forgotten": named,
                "n_examples": report.n_examples,
                "n_stored": report.n_stored,
                "n_pending": report.n_pending,
                "lsn": lsn,
                "snapshot_lsn": shared.metrics.snapshot_lsn.load(Relaxed),
            })
            .to_string(),
        ),
        Ok((Effect::Scores(_), ..)) => unreachable!("a forget's effect"),
        Err(answer) => answer,
    })
}

fn task_value(task: &crate::model::TaskId) -> Value {
    match task {
        crate::model::TaskId::Int(i) => Value::from(*i),
        crate::model::TaskId::Str(s) => Value::from(&**s),
    }
}

async fn snapshot(shared: &Shared) -> Result<Answer, BadRequest> {
    let (tx, rx) = oneshot::channel();
    if shared.writer.send(Command::Snapshot(tx)).is_err() {
        return Ok(Answer::error(503, "the server is shutting down"));
    }
    Ok(match rx.await {
        Ok(Ok(lsn)) => Answer::json(200, json!({ "lsn": lsn }).to_string()),
        Ok(Err(e)) => Answer::error(503, &format!("the snapshot failed: {e}")),
        Err(_) => Answer::error(503, "the server is shutting down"),
    })
}

/// At most this many task ids are listed by `GET /v1/model`.
const TASKS_LISTED: usize = 1000;

fn model_info(shared: &Shared) -> Answer {
    let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
    let est = model.estimator();
    let pending = model.pending();
    let book = model.book();
    let task_ids: Vec<Value> = book.map_or(Vec::new(), |b| {
        b.task_ids()
            .into_iter()
            .take(TASKS_LISTED)
            .map(|t| task_value(&t))
            .collect()
    });
    let n_tasks = book.map_or(0, |b| b.labels().map_or(b.seen_per_task().len(), |l| l.len()));
    let (n_seen, n_mistakes) = book.map_or((0, 0), |b| (b.n_seen(), b.n_mistakes()));
    let m = &shared.metrics;
    let body = json!({
        "class": est.class().name,
        "params": est.params(),
        "fitted": model.is_fitted(),
        "n_features_in": book.map(|b| b.n_features_in()),
        "n_tasks": n_tasks,
        "tasks": task_ids,
        "tasks_listed": task_ids.len(),
        "n_seen": n_seen,
        "n_mistakes": n_mistakes,
        "progressive_error": if n_seen > 0 { Some(n_mistakes as f64 / n_seen as f64) } else { None },
        "memory_bytes": model.memory_bytes(),
        "probabilities": api::has_probabilities(&model),
        "pending": {
            "count": pending.count,
            "bytes": pending.bytes,
            "max_events": pending.limits.max_events,
            "max_bytes": pending.limits.max_bytes,
            "max_age": pending.limits.max_age,
            "evicted": pending.evicted,
            "expired": pending.expired,
        },
        "lsn": m.lsn.load(Relaxed),
        "snapshot_lsn": m.snapshot_lsn.load(Relaxed),
        "learn_available": !m.learn_unavailable.load(Relaxed),
    });
    Answer::json(200, body.to_string())
}

fn metrics(shared: &Shared) -> String {
    let gauges = {
        let model = shared.model.read().unwrap_or_else(|e| e.into_inner());
        let (n_seen, n_mistakes) = model.book().map_or((0, 0), |b| (b.n_seen(), b.n_mistakes()));
        let pending = model.pending();
        [
            ("omtl_model_events_seen", "Events the model has learned.", n_seen as f64),
            (
                "omtl_model_mistakes",
                "Progressive mistakes (the prediction served before each update).",
                n_mistakes as f64,
            ),
            (
                "omtl_model_progressive_error",
                "Progressive error rate (mistakes / events seen).",
                if n_seen > 0 {
                    n_mistakes as f64 / n_seen as f64
                } else {
                    0.0
                },
            ),
            (
                "omtl_model_memory_bytes",
                "Bytes the model holds.",
                model.memory_bytes() as f64,
            ),
            (
                "omtl_pending_events",
                "Events remembered and waiting for a label.",
                pending.count as f64,
            ),
            (
                "omtl_pending_bytes",
                "Bytes of the pending events.",
                pending.bytes as f64,
            ),
            (
                "omtl_pending_evicted",
                "Pending events evicted as the store was full.",
                pending.evicted as f64,
            ),
            (
                "omtl_pending_expired",
                "Pending events dropped as expired.",
                pending.expired as f64,
            ),
        ]
    };
    shared.metrics.render(&gauges)
}
