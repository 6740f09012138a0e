//! The server's counters and latency histograms, written in Prometheus's text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// The routes requests are counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/predict`.
    Predict,
    /// `POST /v1/learn`.
    Learn,
    /// `POST /v1/label`.
    Label,
    /// `POST /v1/forget`.
    Forget,
    /// `GET /v1/model`.
    Model,
    /// `POST /v1/snapshot`.
    Snapshot,
    /// `GET /healthz`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// `GET /v1/openapi.json`.
    OpenApi,
    /// Lines on the VW port.
    Vw,
    /// Anything else.
    Other,
}

const ROUTES: [(Route, &str); 11] = [
    (Route::Predict, "/v1/predict"),
    (Route::Learn, "/v1/learn"),
    (Route::Label, "/v1/label"),
    (Route::Forget, "/v1/forget"),
    (Route::Model, "/v1/model"),
    (Route::Snapshot, "/v1/snapshot"),
    (Route::Health, "/healthz"),
    (Route::Metrics, "/metrics"),
    (Route::OpenApi, "/v1/openapi.json"),
    (Route::Vw, "vw"),
    (Route::Other, "other"),
];

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A latency histogram.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    micros: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| s <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.micros.fetch_add(d.as_micros() as u64, Relaxed);
    }
}

/// Every counter the server keeps.
#[derive(Debug, Default)]
pub struct Metrics {
    latency: [Histogram; ROUTES.len()],
    /// Requests by route and status code.
    statuses: Mutex<Vec<(Route, u16, u64)>>,
    /// Events learned (by learns and labels).
    pub learned: AtomicU64,
    /// Events scored.
    pub predicted: AtomicU64,
    /// Events remembered for a later label.
    pub remembered: AtomicU64,
    /// Tasks forgotten.
    pub forgotten: AtomicU64,
    /// The last log sequence number applied.
    pub lsn: AtomicU64,
    /// Log bytes written.
    pub wal_bytes: AtomicU64,
    /// Log flushes (fsync) done.
    pub fsyncs: AtomicU64,
    /// Log records written.
    pub records: AtomicU64,
    /// Groups of records written together (one write, one flush).
    pub groups: AtomicU64,
    /// Snapshots written.
    pub snapshots: AtomicU64,
    /// Snapshots that failed.
    pub snapshot_failures: AtomicU64,
    /// The log sequence number of the last snapshot.
    pub snapshot_lsn: AtomicU64,
    /// When the last snapshot was written (seconds since the Unix epoch).
    pub snapshot_time: AtomicU64,
    /// Whether learns are refused (the log cannot be written).
    pub learn_unavailable: AtomicBool,
    /// Learns refused as the log could not be written.
    pub unavailable: AtomicU64,
}

fn index(route: Route) -> usize {
    ROUTES.iter().position(|(r, _)| *r == route).expect("a listed route")
}

impl Metrics {
    /// Counts a request: its route, status and time taken.
    pub fn request(&self, route: Route, status: u16, elapsed: Duration) {
        self.latency[index(route)].observe(elapsed);
        let mut statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        match statuses.iter_mut().find(|(r, s, _)| *r == route && *s == status) {
            Some(entry) => entry.2 += 1,
            None => statuses.push((route, status, 1)),
        }
    }

    /// The metrics in Prometheus's text format; `model` adds the model's gauges (events seen,
    /// mistakes, memory, pending events).
    pub fn render(&self, model: &[(&str, &str, f64)]) -> String {
        let mut out = String::with_capacity(8192);
        let counters: [(&str, &str, &AtomicU64); 13] = [
            (
                "omtl_events_learned_total",
                "Events learned (learns and labels).",
                &self.learned,
            ),
            ("omtl_events_predicted_total", "Events scored.", &self.predicted),
            (
                "omtl_events_remembered_total",
                "Events remembered for a later label.",
                &self.remembered,
            ),
            ("omtl_tasks_forgotten_total", "Tasks forgotten.", &self.forgotten),
            (
                "omtl_wal_bytes_total",
                "Bytes written to the write-ahead log.",
                &self.wal_bytes,
            ),
            (
                "omtl_wal_records_total",
                "Records written to the write-ahead log.",
                &self.records,
            ),
            (
                "omtl_wal_groups_total",
                "Groups of records written with one write and one flush.",
                &self.groups,
            ),
            (
                "omtl_wal_fsyncs_total",
                "Flushes (fsync) of the write-ahead log.",
                &self.fsyncs,
            ),
            ("omtl_snapshots_total", "Snapshots written.", &self.snapshots),
            (
                "omtl_snapshot_failures_total",
                "Snapshots that failed.",
                &self.snapshot_failures,
            ),
            (
                "omtl_learn_unavailable_total",
                "Learns refused (503) as the log could not be written.",
                &self.unavailable,
            ),
            ("omtl_wal_lsn", "The last log sequence number applied.", &self.lsn),
            (
                "omtl_snapshot_lsn",
                "The log sequence number the last snapshot covers.",
                &self.snapshot_lsn,
            ),
        ];
        for (name, help, value) in counters {
            let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                value.load(Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP omtl_snapshot_timestamp_seconds When the last snapshot was written.\n# TYPE omtl_snapshot_timestamp_seconds gauge\nomtl_snapshot_timestamp_seconds {}",
            self.snapshot_time.load(Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP omtl_learn_available Whether learns are accepted (the log can be written).\n# TYPE omtl_learn_available gauge\nomtl_learn_available {}",
            u8::from(!self.learn_unavailable.load(Relaxed))
        );
        for (name, help, value) in model {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        let _ = writeln!(
            out,
            "# HELP omtl_requests_total Requests by route and status.\n# TYPE omtl_requests_total counter"
        );
        let statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (route, status, n) in statuses {
            let path = ROUTES[index(route)].1;
            let _ = writeln!(out, "omtl_requests_total{{route=\"{path}\",status=\"{status}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP omtl_request_seconds Request latency by route.\n# TYPE omtl_request_seconds histogram"
        );
        for (i, (_, path)) in ROUTES.iter().enumerate() {
            let h = &self.latency[i];
            let count = h.count.load(Relaxed);
            if count == 0 {
                continue;
            }
            let mut cumulative = 0;
            for (b, bound) in BUCKETS.iter().enumerate() {
                cumulative += h.buckets[b].load(Relaxed);
                let _ = writeln!(
                    out,
                    "omtl_request_seconds_bucket{{route=\"{path}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "omtl_request_seconds_bucket{{route=\"{path}\",le=\"+Inf\"}} {count}"
            );
            let sum = h.micros.load(Relaxed) as f64 / 1e6;
            let _ = writeln!(out, "omtl_request_seconds_sum{{route=\"{path}\"}} {sum}");
            let _ = writeln!(out, "omtl_request_seconds_count{{route=\"{path}\"}} {count}");
        }
        out
    }
}
