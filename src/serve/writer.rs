//! The writer: the one thread that changes the model. It takes the operations queued by
//! requests in groups (group commit): numbers them, writes their records to the log with one
//! write, has the log flushed once (unless an fsync interval is set), applies them to the model
//! in that order under the model's write lock, and answers each. The flush of a group (on the
//! flusher thread) overlaps the applying of the group before it. It also starts snapshots
//! (every N events, every T seconds, on request, on shutdown) and removes the log segments a
//! snapshot covers.
//!
//! A forget is a group of its own, tried on a copy of the model first (a refused forget is
//! answered without a record), and is answered once a snapshot taken after it has removed the
//! log segments that held the forgotten tasks' records (docs/DECISIONS.md, "Forgetting in the
//! server").
//!
//! Predictions take the model's read lock only: they wait for a group being applied, never for
//! a write, a flush or a snapshot (a snapshot copies the model under a read lock, which this
//! thread, the only one that takes the write lock, takes itself).

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;

use super::ops::{Effect, Op};
use super::state::{self, Recovered};
use super::wal;
use super::Shared;
use crate::error::Error;

/// The most operations committed as one group.
const MAX_GROUP: usize = 4096;
/// How often the writer wakes with nothing to do (timers: fsync interval, snapshots).
const TICK: Duration = Duration::from_millis(20);

/// The durability and snapshot policy.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// `None`: every acknowledged operation is flushed to disk first. `Some(t)`: operations
    /// are acknowledged once written (they survive the server's crash), and flushed every `t`
    /// (a power cut loses at most the last `t`).
    pub fsync_interval: Option<Duration>,
    /// Snapshot after this many events learned or remembered.
    pub snapshot_events: u64,
    /// Snapshot this long after the last one, if anything changed.
    pub snapshot_interval: Duration,
}

/// What a request is told about its operation.
#[derive(Debug)]
pub enum Outcome {
    /// Applied: the scores or what was forgotten, its log sequence number, the model's events
    /// seen after it.
    Applied {
        /// The scores (before each update, for a learn), or what a forget removed.
        effect: Effect,
        /// The operation's log sequence number.
        lsn: u64,
        /// Events the model has learned.
        n_seen: u64,
    },
    /// The model refused it (nothing changed): a 4xx.
    Refused(Error),
    /// It could not be made durable (nothing changed): a 503.
    Unavailable(String),
}

/// A message to the writer.
pub enum Command {
    /// Log and apply an operation.
    Apply(Op, oneshot::Sender<Outcome>),
    /// Write a snapshot now; answered with the log sequence number it covers.
    Snapshot(oneshot::Sender<Result<u64, String>>),
    /// Finish: flush, snapshot, stop.
    Stop(oneshot::Sender<Result<(), String>>),
}

/// A snapshot being written by its own thread.
struct Job {
    lsn: u64,
    /// The segments it makes unnecessary.
    covers: Vec<PathBuf>,
    /// Whether the log after it starts in an empty segment: once the covered segments are gone,
    /// the state directory holds no record it covers.
    fresh: bool,
    thread: JoinHandle<Result<(), String>>,
    waiters: Vec<oneshot::Sender<Result<u64, String>>>,
}

/// A group written to the log, its flush under way (`None`: an fsync interval is set).
struct Written {
    group: Vec<(Op, oneshot::Sender<Outcome>)>,
    /// The first operation's log sequence number.
    first: u64,
    /// The segment's length before the group.
    before: u64,
    bytes: u64,
    flush: Option<mpsc::Receiver<std::io::Result<()>>>,
}

/// The thread that flushes the log (`fsync`) while the writer applies the group before.
struct Flusher {
    requests: mpsc::Sender<(File, mpsc::Sender<std::io::Result<()>>)>,
}

impl Flusher {
    /// Flushes `file` (a handle of the segment); the result arrives on the receiver.
    fn flush(&self, file: File) -> mpsc::Receiver<std::io::Result<()>> {
        let (tx, rx) = mpsc::channel();
        if let Err(mpsc::SendError((file, tx))) = self.requests.send((file, tx)) {
            let _ = tx.send(file.sync_data());
        }
        rx
    }
}

fn flusher() -> Flusher {
    let (requests, inbox) = mpsc::channel::<(File, mpsc::Sender<std::io::Result<()>>)>();
    let _ = std::thread::Builder::new().name("omtl-flush".into()).spawn(move || {
        for (file, reply) in inbox {
            let _ = reply.send(file.sync_data());
        }
    });
    Flusher { requests }
}

/// The writer's state.
pub struct Writer {
    shared: Arc<Shared>,
    dir: PathBuf,
    policy: Policy,
    segment: Option<wal::Writer>,
    /// Older segments, still needed until a snapshot covers them.
    closed: Vec<PathBuf>,
    /// The last log sequence number given out.
    lsn: u64,
    /// Records written and not yet flushed (fsync interval).
    unsynced: bool,
    last_sync: Instant,
    /// The log holds records that were not applied and could not be cut off: learns are
    /// refused until a snapshot covers them.
    damaged: bool,
    events_since_snapshot: u64,
    lsn_at_snapshot: u64,
    last_snapshot: Instant,
    job: Option<Job>,
    /// Snapshot requests that wait for the next snapshot.
    waiters: Vec<oneshot::Sender<Result<u64, String>>>,
    /// Applied forgets, answered once a snapshot has removed the records they cover.
    forgets: Vec<(u64, Outcome, oneshot::Sender<Outcome>)>,
    payload: Vec<u8>,
    buffer: Vec<u8>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Writer {
    /// The writer of a recovered state directory: it appends to the last segment (its torn tail
    /// cut off) or starts one; if it cannot, learns are refused until it can.
    pub fn new(shared: Arc<Shared>, dir: PathBuf, policy: Policy, recovered: &Recovered) -> Self {
        let mut closed = recovered.segments.clone();
        let segment = match closed.pop() {
            Some(last) => wal::Writer::reopen(&last, recovered.last_len)
                .map_err(|e| eprintln!("omtl serve: cannot append to {}: {e}", last.display()))
                .ok(),
            None => wal::Writer::start(&dir, recovered.lsn + 1)
                .map_err(|e| eprintln!("omtl serve: cannot start a log segment in {}: {e}", dir.display()))
                .ok(),
        };
        shared.metrics.learn_unavailable.store(segment.is_none(), Relaxed);
        shared.metrics.lsn.store(recovered.lsn, Relaxed);
        shared.metrics.snapshot_lsn.store(recovered.snapshot_lsn, Relaxed);
        Writer {
            shared,
            dir,
            policy,
            segment,
            closed,
            lsn: recovered.lsn,
            unsynced: false,
            last_sync: Instant::now(),
            damaged: false,
            events_since_snapshot: recovered.replayed,
            lsn_at_snapshot: recovered.snapshot_lsn,
            last_snapshot: Instant::now(),
            job: None,
            waiters: Vec::new(),
            forgets: Vec::new(),
            payload: Vec::new(),
            buffer: Vec::new(),
        }
    }

    /// Runs until a [`Command::Stop`] (or every sender is gone).
    ///
    /// The flush of one group overlaps the applying of the group before it: a group is written,
    /// its flush handed to the flusher thread, the previous (flushed) group applied and
    /// answered, and then the flush awaited. At most one group is written and not flushed.
    pub fn run(mut self, commands: Receiver<Command>) {
        if self.lsn > self.lsn_at_snapshot {
            self.start_snapshot();
        }
        let flusher = flusher();
        let mut flushed: Option<Written> = None;
        // A forget that ends the group before it: the first command of the next.
        let mut held: Option<Command> = None;
        loop {
            let mut group = Vec::new();
            let mut stop = None;
            let first = match (held.take(), &flushed) {
                (Some(command), _) => Ok(command),
                (None, Some(_)) => commands.try_recv().map_err(|e| e == TryRecvError::Disconnected),
                (None, None) => commands
                    .recv_timeout(TICK)
                    .map_err(|e| e == RecvTimeoutError::Disconnected),
            };
            let mut next = match first {
                Ok(c) => Some(c),
                Err(false) => None,
                Err(true) => break,
            };
            while let Some(command) = next.take() {
                match command {
                    Command::Apply(op @ Op::Forget { .. }, reply) if !group.is_empty() => {
                        held = Some(Command::Apply(op, reply));
                        break;
                    }
                    Command::Apply(op, reply) => group.push((op, reply)),
                    Command::Snapshot(reply) => self.waiters.push(reply),
                    Command::Stop(reply) => stop = Some(reply),
                }
                let forget = matches!(group.first(), Some((Op::Forget { .. }, _)));
                if group.len() < MAX_GROUP && stop.is_none() && !forget {
                    next = commands.try_recv().ok();
                }
            }
            if matches!(group.first(), Some((Op::Forget { .. }, _))) {
                // The forget is tried on the model with every earlier operation applied.
                if let Some(done) = flushed.take() {
                    self.apply(done);
                }
                group = self.try_forget(group);
            }
            let in_flight = if group.is_empty() {
                None
            } else {
                self.write(group, &flusher)
            };
            if let Some(done) = flushed.take() {
                self.apply(done);
            }
            flushed = in_flight.and_then(|w| self.flushed(w));
            // A snapshot is of the model with every written group applied.
            let snapshot = self.job.is_none() && (self.snapshot_due() || !self.waiters.is_empty());
            if stop.is_some() || snapshot {
                if let Some(done) = flushed.take() {
                    self.apply(done);
                }
            }
            self.tick(flushed.is_none());
            if let Some(reply) = stop {
                let _ = reply.send(self.finish());
                return;
            }
        }
        if let Some(done) = flushed.take() {
            self.apply(done);
        }
        let _ = self.finish();
    }

    /// Tries a forget (alone in its group) on a copy of the model: the group to log, or none
    /// if the model refuses it (answered, nothing logged).
    fn try_forget(&self, mut group: Vec<(Op, oneshot::Sender<Outcome>)>) -> Vec<(Op, oneshot::Sender<Outcome>)> {
        let mut trial = self.shared.model.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Err(e) = group[0].0.apply(&mut trial) {
            let (_, reply) = group.remove(0);
            let _ = reply.send(Outcome::Refused(e));
        }
        group
    }

    /// Refuses a group with a 503.
    fn refuse(&self, group: Vec<(Op, oneshot::Sender<Outcome>)>, why: &str) {
        self.shared.metrics.unavailable.fetch_add(group.len() as u64, Relaxed);
        for (_, reply) in group {
            let _ = reply.send(Outcome::Unavailable(why.to_owned()));
        }
    }

    /// Numbers a group, writes its records and (unless an fsync interval is set) hands their
    /// flush to the flusher. A group that cannot be written is answered 503.
    fn write(&mut self, mut group: Vec<(Op, oneshot::Sender<Outcome>)>, flusher: &Flusher) -> Option<Written> {
        if self.damaged {
            self.refuse(
                group,
                "the write-ahead log could not be written; learns resume once a snapshot succeeds",
            );
            return None;
        }
        if self.segment.is_none() {
            // The directory may have become writable again.
            self.segment = wal::Writer::start(&self.dir, self.lsn + 1).ok();
        }
        let Some(segment) = self.segment.as_mut() else {
            self.refuse(
                group,
                "no write-ahead log segment can be created in the state directory",
            );
            return None;
        };
        let now = unix_now();
        self.buffer.clear();
        let first = self.lsn + 1;
        for (i, (op, _)) in group.iter_mut().enumerate() {
            op.stamp(now);
            self.payload.clear();
            op.write(&mut self.payload);
            wal::encode(&mut self.buffer, first + i as u64, op.kind(), &self.payload);
        }
        let before = segment.len();
        let flush = segment
            .append(&self.buffer)
            .and_then(|()| match self.policy.fsync_interval {
                Some(_) => Ok(None),
                None => segment
                    .try_clone()
                    .map(|file| Some(flusher.flush(file)))
                    .map_err(|e| (e, segment.undo_to(before))),
            });
        match flush {
            Ok(flush) => {
                self.lsn += group.len() as u64;
                Some(Written {
                    group,
                    first,
                    before,
                    bytes: self.buffer.len() as u64,
                    flush,
                })
            }
            Err((e, undone)) => {
                self.failed(e, undone, group.len());
                self.refuse(group, "the write-ahead log cannot be written");
                None
            }
        }
    }

    /// Records a failed write or flush: learns unavailable; if the segment could not be cut
    /// back, the records' numbers are given out and the log is damaged until a snapshot.
    fn failed(&mut self, e: std::io::Error, undone: bool, n: usize) {
        self.shared.metrics.learn_unavailable.store(true, Relaxed);
        if !undone {
            // Records that were not applied may stay in the log: give their numbers out, and
            // refuse learns until a snapshot (which covers them) starts a new segment.
            self.lsn += n as u64;
            self.damaged = true;
        }
        eprintln!("omtl serve: cannot write the log ({e}): learns are refused (503), predictions go on");
    }

    /// Waits for a written group's flush: the group, flushed; `None` if the flush failed (the
    /// group answered 503, the segment cut back).
    fn flushed(&mut self, written: Written) -> Option<Written> {
        let Some(flush) = &written.flush else {
            self.unsynced = true;
            return Some(written);
        };
        let result = flush
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the flusher stopped")));
        match result {
            Ok(()) => {
                self.shared.metrics.fsyncs.fetch_add(1, Relaxed);
                Some(written)
            }
            Err(e) => {
                let n = written.group.len();
                self.lsn -= n as u64;
                let undone = self.segment.as_mut().is_some_and(|s| s.undo_to(written.before));
                self.failed(e, undone, n);
                self.refuse(written.group, "the write-ahead log cannot be flushed to disk");
                None
            }
        }
    }

    /// Applies a flushed group to the model, in order, and answers each operation.
    fn apply(&mut self, written: Written) {
        let metrics = &self.shared.metrics;
        metrics.learn_unavailable.store(false, Relaxed);
        metrics.wal_bytes.fetch_add(written.bytes, Relaxed);
        metrics.records.fetch_add(written.group.len() as u64, Relaxed);
        metrics.groups.fetch_add(1, Relaxed);
        let group = written.group;
        let first = written.first;
        let mut outcomes = Vec::with_capacity(group.len());
        {
            let mut model = self.shared.model.write().unwrap_or_else(|e| e.into_inner());
            for (i, (op, _)) in group.iter().enumerate() {
                let outcome = match op.apply(&mut model) {
                    Ok(effect) => Outcome::Applied {
                        effect,
                        lsn: first + i as u64,
                        n_seen: model.book().map_or(0, |b| b.n_seen()),
                    },
                    Err(e) => Outcome::Refused(e),
                };
                outcomes.push(outcome);
            }
        }
        metrics.lsn.store(first + group.len() as u64 - 1, Relaxed);
        for (i, ((op, reply), outcome)) in group.into_iter().zip(outcomes).enumerate() {
            if let Outcome::Applied { .. } = outcome {
                let n = op.n_events() as u64;
                self.events_since_snapshot += n;
                match op {
                    Op::Learn { .. } | Op::Label { .. } => metrics.learned.fetch_add(n, Relaxed),
                    Op::Remember { ref ids, .. } => {
                        metrics.predicted.fetch_add(n, Relaxed);
                        metrics
                            .remembered
                            .fetch_add(ids.iter().flatten().count() as u64, Relaxed)
                    }
                    Op::Forget { ref tasks } => {
                        metrics.forgotten.fetch_add(tasks.len() as u64, Relaxed);
                        // Answered once a snapshot has taken the forgotten tasks' records away.
                        self.forgets.push((first + i as u64, outcome, reply));
                        continue;
                    }
                };
            }
            let _ = reply.send(outcome);
        }
    }

    /// Whether a snapshot is due: events, time, a forget waiting, or a damaged log to leave
    /// behind.
    fn snapshot_due(&self) -> bool {
        let changed = self.lsn > self.lsn_at_snapshot;
        self.events_since_snapshot >= self.policy.snapshot_events
            || !self.forgets.is_empty()
            || (changed && self.last_snapshot.elapsed() >= self.policy.snapshot_interval)
            || (self.damaged && self.last_snapshot.elapsed() >= Duration::from_secs(1))
    }

    /// Timers: the fsync interval, a finished snapshot, a snapshot due (started only when every
    /// written group is applied: `applied`).
    fn tick(&mut self, applied: bool) {
        if let (Some(interval), true) = (self.policy.fsync_interval, self.unsynced) {
            if self.last_sync.elapsed() >= interval {
                self.sync();
            }
        }
        if self.job.as_ref().is_some_and(|j| j.thread.is_finished()) {
            let _ = self.finish_job();
        }
        if applied && self.job.is_none() && (self.snapshot_due() || !self.waiters.is_empty()) {
            self.start_snapshot();
        }
    }

    fn sync(&mut self) {
        let Some(segment) = self.segment.as_mut() else { return };
        match segment.sync() {
            Ok(()) => {
                self.unsynced = false;
                self.shared.metrics.fsyncs.fetch_add(1, Relaxed);
            }
            Err(e) => eprintln!("omtl serve: cannot flush the log: {e}"),
        }
        self.last_sync = Instant::now();
    }

    /// Starts a snapshot of the model as it is (covering the log up to `self.lsn`): a new
    /// segment takes the records after it, and a thread writes the copy.
    fn start_snapshot(&mut self) {
        self.last_snapshot = Instant::now();
        if self.unsynced {
            self.sync();
        }
        if self.segment.as_ref().is_none_or(|s| !s.is_empty()) {
            match wal::Writer::start(&self.dir, self.lsn + 1) {
                Ok(fresh) => {
                    if let Some(old) = self.segment.replace(fresh) {
                        self.closed.push(old.path().to_path_buf());
                    }
                }
                Err(e) => eprintln!("omtl serve: cannot start a log segment: {e}"),
            }
        }
        let fresh = self.segment.as_ref().is_some_and(wal::Writer::is_empty);
        let covers = if fresh { self.closed.clone() } else { Vec::new() };
        let mut copy = self.shared.model.read().unwrap_or_else(|e| e.into_inner()).clone();
        let (dir, lsn) = (self.dir.clone(), self.lsn);
        let thread = std::thread::spawn(move || state::save_snapshot(&dir, &mut copy, lsn).map_err(|e| e.to_string()));
        self.job = Some(Job {
            lsn,
            covers,
            fresh,
            thread,
            waiters: std::mem::take(&mut self.waiters),
        });
        self.events_since_snapshot = 0;
    }

    /// Collects a finished snapshot: removes the segments it covers and answers its waiters.
    fn finish_job(&mut self) -> Result<u64, String> {
        let job = self.job.take().expect("a snapshot job");
        let metrics = &self.shared.metrics;
        let result = job
            .thread
            .join()
            .unwrap_or_else(|_| Err("the snapshot thread panicked".into()))
            .map(|()| job.lsn);
        let mut purged = job.fresh;
        match &result {
            Ok(lsn) => {
                for path in &job.covers {
                    if let Err(e) = std::fs::remove_file(path) {
                        eprintln!("omtl serve: cannot remove {}: {e}", path.display());
                        purged = false;
                    }
                }
                self.closed.retain(|p| !job.covers.contains(p));
                let _ = wal::sync_dir(&self.dir);
                self.lsn_at_snapshot = *lsn;
                if self.damaged && !job.covers.is_empty() {
                    self.damaged = false;
                    metrics.learn_unavailable.store(self.segment.is_none(), Relaxed);
                }
                metrics.snapshots.fetch_add(1, Relaxed);
                metrics.snapshot_lsn.store(*lsn, Relaxed);
                metrics.snapshot_time.store(unix_now() as u64, Relaxed);
            }
            Err(e) => {
                metrics.snapshot_failures.fetch_add(1, Relaxed);
                eprintln!("omtl serve: snapshot failed: {e}");
            }
        }
        for waiter in job.waiters {
            let _ = waiter.send(result.clone());
        }
        self.answer_forgets(job.lsn, result.as_ref().err().map(String::as_str), purged);
        result
    }

    /// Answers the forgets up to `lsn` after a snapshot covering it: applied if the snapshot
    /// succeeded (`failed`: why not) and the state directory holds none of their records
    /// (`purged`), else a 503 that says the tasks are forgotten but their records remain.
    fn answer_forgets(&mut self, lsn: u64, failed: Option<&str>, purged: bool) {
        let (done, waiting) = std::mem::take(&mut self.forgets)
            .into_iter()
            .partition(|(at, _, _)| *at <= lsn);
        self.forgets = waiting;
        for (at, outcome, reply) in done {
            let outcome = match (failed, purged) {
                (None, true) => outcome,
                (failed, _) => Outcome::Unavailable(format!(
                    "the tasks are forgotten (record {at}), but a log segment that holds their \
                     records could not be removed ({}); the next snapshot that succeeds removes it",
                    failed.unwrap_or("the snapshot could not start a log segment or remove one")
                )),
            };
            let _ = reply.send(outcome);
        }
    }

    /// Flushes the log, waits for a running snapshot, writes a last one.
    fn finish(&mut self) -> Result<(), String> {
        if self.unsynced {
            self.sync();
        }
        if self.job.is_some() {
            let _ = self.finish_job();
        }
        if self.lsn > self.lsn_at_snapshot || !self.waiters.is_empty() {
            self.start_snapshot();
            self.finish_job()?;
        }
        Ok(())
    }
}
