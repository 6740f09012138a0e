//! `omtl.serve` (python/omtl/serve.py): runs the crate's server ([`crate::serve`]) with the
//! GIL released until SIGTERM or Ctrl-C. Converts the arguments; the server is the crate's.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use super::convert::to_pyerr;
use crate::model::{Estimator, Model};
use crate::serve::Options;

fn address(host: &str, port: u16) -> PyResult<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| PyValueError::new_err(format!("host {host:?}: {e}")))?
        .next()
        .ok_or_else(|| PyValueError::new_err(format!("host {host:?} has no address")))
}

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| PyValueError::new_err(format!("{name} must be a positive number of seconds, got {value}")))
}

/// Serves one model until SIGTERM or Ctrl-C (see `omtl.serve`). `model`: a model file's bytes;
/// else `learner` and `params` (`name=value` texts) build one. Prints the listening address to
/// stderr once connections are accepted.
#[pyfunction]
#[pyo3(signature = (state_dir, *, model, learner, params, host, port, vw_port, token, fsync_interval,
                    snapshot_events, snapshot_interval, max_body_bytes, max_events, max_features, threads))]
#[allow(clippy::too_many_arguments)]
fn serve(
    py: Python<'_>,
    state_dir: PathBuf,
    model: Option<Vec<u8>>,
    learner: Option<String>,
    params: Vec<(String, String)>,
    host: String,
    port: u16,
    vw_port: Option<u16>,
    token: Option<String>,
    fsync_interval: Option<f64>,
    snapshot_events: u64,
    snapshot_interval: f64,
    max_body_bytes: usize,
    max_events: usize,
    max_features: usize,
    threads: usize,
) -> PyResult<()> {
    let initial = match (model, learner) {
        (Some(bytes), _) => Some(Model::from_bytes(&bytes).map_err(to_pyerr)?),
        (None, Some(name)) => {
            let pairs: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Some(Model::new(Estimator::from_text(&name, &pairs).map_err(to_pyerr)?))
        }
        (None, None) => None,
    };
    let mut options = Options::new(state_dir, initial);
    options.addr = address(&host, port)?;
    options.vw_addr = vw_port.map(|p| address(&host, p)).transpose()?;
    options.token = token;
    options.policy.fsync_interval = fsync_interval.map(|s| seconds("fsync_interval", s)).transpose()?;
    options.policy.snapshot_events = snapshot_events.max(1);
    options.policy.snapshot_interval = seconds("snapshot_interval", snapshot_interval)?;
    options.limits.max_body_bytes = max_body_bytes;
    options.limits.max_events = max_events;
    options.limits.max_features = max_features;
    options.threads = threads;
    py.detach(|| {
        crate::serve::serve(options, |addr, vw| match vw {
            Some(vw) => eprintln!("omtl serve: listening on http://{addr} (VW protocol on {vw})"),
            None => eprintln!("omtl serve: listening on http://{addr}"),
        })
    })
    .map_err(|e| match e {
        crate::Error::File { .. } => PyOSError::new_err(e.to_string()),
        e => to_pyerr(e),
    })
}

/// Adds `serve`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(serve, m)?)
}
