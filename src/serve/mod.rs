//! `omtl serve`: one [`Model`] as a durable network service (cargo feature `serve`).
//!
//! An HTTP/1.1 JSON API (`/v1/predict`, `/v1/learn`, `/v1/label`, `/v1/model`, `/v1/snapshot`,
//! `/healthz`, `/metrics`; [`OPENAPI`] describes it) and, optionally, Vowpal Wabbit's daemon
//! line protocol. Every acknowledged learn, label and remembered prediction is in the
//! write-ahead log ([`wal`]) first, flushed to disk before the answer (group commit: the
//! requests waiting together share one flush); snapshots (the model file `model.omtl` in the
//! state directory) bound the log. On start
//! the server loads the last snapshot and replays the log, so the model is the one that learned
//! exactly the acknowledged operations in their order. docs/serving.md is the user's guide;
//! docs/DECISIONS.md ("Serving") the design.
//!
//! ```no_run
//! use omtl::model::{Estimator, Model};
//! use omtl::serve::{Options, Server};
//!
//! let model = Model::new(Estimator::from_text("MTLinear", &[])?);
//! let server = Server::start(Options::new("state", Some(model)))?;
//! println!("serving on http://{}", server.addr());
//! server.shutdown()?; // drains, snapshots, stops
//! # Ok::<(), omtl::Error>(())
//! ```

mod api;
mod fast;
mod http;
mod metrics;
mod ops;
mod state;
mod vw;
pub mod wal;
mod writer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

pub use api::Limits;
pub use writer::Policy;

use crate::error::{Error, Result};
use crate::model::Model;

/// The OpenAPI 3 description of the HTTP API (served at `/v1/openapi.json`).
pub const OPENAPI: &str = include_str!("openapi.json");

/// How long shutdown waits for requests in flight before closing their connections.
const DRAIN: Duration = Duration::from_secs(10);

/// A server's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// The state directory: snapshot and log.
    pub state_dir: PathBuf,
    /// The model to start from when the state directory holds none.
    pub initial: Option<Model>,
    /// The address to listen on. Default `127.0.0.1:8080`.
    pub addr: SocketAddr,
    /// The address of the VW line protocol, if any.
    pub vw_addr: Option<SocketAddr>,
    /// The bearer token every request must bring, if any.
    pub token: Option<String>,
    /// Durability and snapshots.
    pub policy: Policy,
    /// Caps on requests.
    pub limits: Limits,
    /// Worker threads for requests. Default 2.
    pub threads: usize,
}

impl Options {
    /// Defaults: `127.0.0.1:8080`, every acknowledgment flushed, a snapshot every 100,000
    /// events or 60 s, no token, no VW port.
    pub fn new(state_dir: impl Into<PathBuf>, initial: Option<Model>) -> Self {
        Options {
            state_dir: state_dir.into(),
            initial,
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            vw_addr: None,
            token: None,
            policy: Policy {
                fsync_interval: None,
                snapshot_events: 100_000,
                snapshot_interval: Duration::from_secs(60),
            },
            limits: Limits::default(),
            threads: 2,
        }
    }
}

/// What request handlers share.
pub(crate) struct Shared {
    pub(crate) model: RwLock<Model>,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) writer: mpsc::Sender<writer::Command>,
    pub(crate) limits: Limits,
    /// The token's SHA-256, compared with the given token's.
    pub(crate) token: Option<[u8; 32]>,
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    vw_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    thread: JoinHandle<Result<()>>,
}

fn io_error(what: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::File {
        path: what.to_string(),
        reason: e.to_string(),
    }
}

impl Server {
    /// Recovers the state directory (snapshot, then log), binds the addresses and starts
    /// serving in background threads. A corrupt log or snapshot, a locked state directory or an
    /// address in use is an error here.
    pub fn start(options: Options) -> Result<Server> {
        Self::start_with(options, false)
    }

    fn start_with(options: Options, signals: bool) -> Result<Server> {
        #[cfg(target_os = "linux")]
        // SAFETY: setting a signal's disposition to "ignore" installs no handler. A file that
        // reaches the process's size limit is then a write error (a 503), not the server's death.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
        let lock = state::lock(&options.state_dir)?;
        if options.initial.is_some() && options.state_dir.join(state::SNAPSHOT).exists() {
            eprintln!(
                "omtl serve: {} holds a model: serving it (the model given to start from is for a new directory)",
                options.state_dir.display()
            );
        }
        let recovered = state::recover(&options.state_dir, options.initial.clone())?;
        if recovered.torn {
            eprintln!(
                "omtl serve: dropped a torn record at the end of the log (never acknowledged); {} records replayed",
                recovered.replayed
            );
        }
        let listener = std::net::TcpListener::bind(options.addr).map_err(|e| io_error(options.addr, e))?;
        let addr = listener.local_addr().map_err(|e| io_error(options.addr, e))?;
        let vw_listener = options
            .vw_addr
            .map(|a| std::net::TcpListener::bind(a).map_err(|e| io_error(a, e)))
            .transpose()?;
        let vw_addr = vw_listener.as_ref().and_then(|l| l.local_addr().ok());
        for l in std::iter::once(&listener).chain(vw_listener.as_ref()) {
            l.set_nonblocking(true).map_err(|e| io_error(addr, e))?;
        }
        let (commands, inbox) = mpsc::channel();
        let shared = Arc::new(Shared {
            model: RwLock::new(recovered.model.clone()),
            metrics: metrics::Metrics::default(),
            writer: commands,
            limits: options.limits,
            token: options
                .token
                .as_ref()
                .map(|t| Sha256::digest(t.trim().as_bytes()).into()),
        });
        let writer = writer::Writer::new(shared.clone(), options.state_dir.clone(), options.policy, &recovered);
        drop(recovered);
        let writer_thread = std::thread::Builder::new()
            .name("omtl-writer".into())
            .spawn(move || writer.run(inbox))
            .map_err(|e| io_error("the writer thread", e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.threads.max(1))
            .enable_all()
            .build()
            .map_err(|e| io_error("the runtime", e))?;
        let (stop, stopped) = watch::channel(false);
        let stop_signal = stop.clone();
        let thread = std::thread::Builder::new()
            .name("omtl-serve".into())
            .spawn(move || {
                let _lock = lock;
                let result = runtime.block_on(run(
                    shared.clone(),
                    listener,
                    vw_listener,
                    stopped,
                    stop_signal,
                    signals,
                ));
                let (tx, rx) = oneshot::channel();
                let finished = match shared.writer.send(writer::Command::Stop(tx)) {
                    Ok(()) => rx.blocking_recv().unwrap_or_else(|_| Err("the writer stopped".into())),
                    Err(_) => Err("the writer stopped".into()),
                };
                let _ = writer_thread.join();
                runtime.shutdown_timeout(Duration::from_secs(1));
                result?;
                finished.map_err(|e| io_error("the final snapshot", e))
            })
            .map_err(|e| io_error("the server thread", e))?;
        Ok(Server {
            addr,
            vw_addr,
            stop,
            thread,
        })
    }

    /// The HTTP address (with the port the system chose, for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The VW protocol's address, if served.
    pub fn vw_addr(&self) -> Option<SocketAddr> {
        self.vw_addr
    }

    /// Stops: no new connections, requests in flight answered (up to 10 s), the log flushed, a
    /// last snapshot written.
    pub fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.wait()
    }

    /// Waits until the server stops (a signal, for a server started by [`serve`]).
    pub fn wait(self) -> Result<()> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err(io_error("the server thread", "panicked")))
    }
}

/// Serves until SIGTERM or Ctrl-C, then stops as [`Server::shutdown`] does. `ready` is called
/// with the bound addresses once the server accepts connections.
pub fn serve(options: Options, ready: impl FnOnce(SocketAddr, Option<SocketAddr>)) -> Result<()> {
    let server = Server::start_with(options, true)?;
    ready(server.addr(), server.vw_addr());
    server.wait()
}

/// Accepts connections until told to stop, then drains them.
async fn run(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    vw_listener: Option<std::net::TcpListener>,
    mut stopped: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    signals: bool,
) -> Result<()> {
    let listener = TcpListener::from_std(listener).map_err(|e| io_error("listener", e))?;
    if signals {
        tokio::spawn(async move {
            wait_for_signal().await;
            let _ = stop.send(true);
        });
    }
    let mut connections = tokio::task::JoinSet::new();
    if let Some(vw) = vw_listener {
        let vw = TcpListener::from_std(vw).map_err(|e| io_error("listener", e))?;
        connections.spawn(vw::accept(shared.clone(), vw, stopped.clone()));
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                let mut stopped = stopped.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| http::handle(shared.clone(), request));
                    let connection = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service);
                    tokio::pin!(connection);
                    tokio::select! {
                        _ = connection.as_mut() => {}
                        _ = until_stopped(&mut stopped) => {
                            connection.as_mut().graceful_shutdown();
                            let _ = connection.await;
                        }
                    }
                });
            }
            _ = until_stopped(&mut stopped) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(DRAIN, async { while connections.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        connections.abort_all();
    }
    Ok(())
}

/// Returns once the stop flag is set (or its sender is gone).
pub(crate) async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
