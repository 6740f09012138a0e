//! The shared state of coupled learners, kept in step across replicas (docs/scale-out.md,
//! "Coupled sharding"; docs/DECISIONS.md, "Coupled shards").
//!
//! A learner whose tasks share state (MTLinear's shared block on the complete graph, PA-Global's
//! and CW-COL's global model) can run as several replicas, each learning the rows of its own
//! tasks and holding a copy of the shared state. Every so often the replicas are brought back
//! in step, as Vowpal Wabbit's AllReduce and Jubatus' MIX do:
//!
//! 1. each replica reports the positions of its shared state that changed since its last sync,
//!    with their values then and now ([`SharedChanges`], [`Replica::shared_changes`]);
//! 2. [`combine`] merges the reports into one [`SharedUpdate`]: per position, the changes of
//!    the replicas that changed it added (or averaged: [`WeightMix`]) for a weight
//!    ([`Mix::Weight`]), added for an accumulated statistic ([`Mix::Sum`], [`Mix::Precision`]),
//!    the largest value for a running maximum ([`Mix::Max`]);
//! 3. every replica applies it ([`Replica::apply_shared`]) and starts recording afresh.
//!
//! A replica's cost per sync follows the positions changed (at most its shared state), and
//! combining costs the sum of the reports. A position changed by one replica only takes that
//! replica's value bit for bit, so syncing after every row reproduces the one model exactly
//! when the replicas' own state does not interact (no hashed table shared with the task blocks).
//!
//! Reports and updates travel as bytes ([`SharedChanges::to_bytes`], [`SharedUpdate::to_bytes`]):
//! [`SHARED_LAYOUT_VERSION`], then the message, decoded within its size and checked like a state.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Error, Result};
use crate::state::{self, CheckState};

/// The layout version of the shared-state messages ([`SharedChanges`], [`SharedUpdate`]).
pub const SHARED_LAYOUT_VERSION: u32 = 1;

/// At most this many values per position and scalars per message (a learner's cell is at most
/// three floats; its counters a handful).
const MAX_COLUMNS: usize = 4;
const MAX_SCALARS: usize = 8;

/// How the replicas' changes of one value combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mix {
    /// A weight: the base plus the replicas' changes, added or averaged ([`WeightMix`]).
    Weight,
    /// An accumulated statistic (a sum of squared gradients, a count): the base plus the sum of
    /// the changes, as one model that saw every replica's rows would hold.
    Sum,
    /// A variance that shrinks as its precision (its inverse) accumulates: the precisions'
    /// changes added.
    Precision,
    /// A running maximum (a normalizer's scale): the largest value of any replica.
    Max,
}

/// How the changes of a weight ([`Mix::Weight`]) combine when several replicas changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WeightMix {
    /// Added: every replica's updates are applied once, as if the rows of all replicas since
    /// the last sync had been learned from the state then (a delayed update).
    Sum,
    /// Averaged over the replicas that changed it (parameter mixing: Vowpal Wabbit's AllReduce
    /// averaging, Jubatus' MIX).
    Mean,
}

impl WeightMix {
    /// `"sum"` or `"mean"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "sum" => Ok(Self::Sum),
            "mean" => Ok(Self::Mean),
            other => Err(invalid("mix", format!("expected 'sum' or 'mean', got {other:?}"))),
        }
    }
}

/// What a learner's shared state looks like: only replicas of one layout combine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedLayout {
    /// The learner kind ([`crate::model::AnyLearner::kind`]).
    pub kind: String,
    /// The settings the positions depend on (the learner's description of them).
    pub settings: String,
    /// Positions range over `0..space`.
    pub space: u64,
    /// How each value of a position combines.
    pub columns: Vec<Mix>,
    /// How each scalar (counters beside the positions) combines.
    pub scalars: Vec<Mix>,
}

impl SharedLayout {
    fn check(&self) -> Result<()> {
        if self.columns.is_empty() || self.columns.len() > MAX_COLUMNS || self.scalars.len() > MAX_SCALARS {
            return Err(Error::State(format!(
                "a shared-state layout has 1 to {MAX_COLUMNS} values per position and at most {MAX_SCALARS} scalars"
            )));
        }
        Ok(())
    }

    fn same_as(&self, other: &SharedLayout) -> Result<()> {
        if self != other {
            return Err(invalid(
                "shared",
                format!(
                    "shared state of another model: {} ({}) and {} ({})",
                    self.kind, self.settings, other.kind, other.settings
                ),
            ));
        }
        Ok(())
    }
}

/// One replica's changes since its last sync: the positions (increasing) whose values changed,
/// with their values at the sync (`base`) and now (`now`), `columns` values per position, and
/// the scalars then and now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedChanges {
    /// The layout of the learner's shared state.
    pub layout: SharedLayout,
    /// Positions changed, increasing.
    pub positions: Vec<u64>,
    /// Their values at the last sync, row-major (`positions × columns`).
    pub base: Vec<f64>,
    /// Their values now.
    pub now: Vec<f64>,
    /// The scalars at the last sync.
    pub scalar_base: Vec<f64>,
    /// The scalars now.
    pub scalar_now: Vec<f64>,
}

/// The combined changes every replica applies: per position (increasing), how many replicas
/// changed it, the base they changed it from (the first changer's), the combined change and the
/// value it gives ([`SharedUpdate::value`]); the same for the scalars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedUpdate {
    /// The layout of the learner's shared state.
    pub layout: SharedLayout,
    /// Positions changed by some replica, increasing.
    pub positions: Vec<u64>,
    /// Per position, the number of replicas that changed it (>= 1).
    pub changers: Vec<u32>,
    /// The base the first changer changed each value from (`positions × columns`).
    pub base: Vec<f64>,
    /// The combined change of each value ([`Mix`]).
    pub change: Vec<f64>,
    /// The value a replica whose value is `base` takes.
    pub new: Vec<f64>,
    /// Per scalar: replicas that changed it (0: none), the base, the change, the new value.
    pub scalar_changers: Vec<u32>,
    /// The scalars' base.
    pub scalar_base: Vec<f64>,
    /// The scalars' combined change.
    pub scalar_change: Vec<f64>,
    /// The scalars' new values.
    pub scalar_new: Vec<f64>,
}

/// A learner whose shared state can be reported, combined and brought in step.
pub trait Replica {
    /// The layout of the shared state; an error for a learner (or a setting of it) with no state
    /// shared between tasks to keep in step.
    fn shared_layout(&self) -> Result<SharedLayout>;

    /// Starts recording the changes to the shared state: the present state is the base of the
    /// next report. Recording is not part of the saved state (a replica is saved in step).
    fn track_shared(&mut self) -> Result<()>;

    /// The changes since the last sync (or [`Replica::track_shared`]); an error if not recording.
    fn shared_changes(&self) -> Result<SharedChanges>;

    /// Brings the shared state in step with `update` ([`SharedUpdate::value`] for every value)
    /// and records afresh from there. On `Err` (another layout, a value beyond the state's
    /// precision, memory) the learner is unchanged.
    fn apply_shared(&mut self, update: &SharedUpdate) -> Result<()>;

    /// One model of `n_tasks` tasks from replicas in step (equal shared states): the shared state
    /// of any of them, and each replica's task states under their merged numbers (`maps[p][j]`:
    /// the merged task of replica `p`'s task `j`; `None`: a task with no state, dropped). An
    /// error if the replicas are not in step, two replicas hold state for one merged task, or the
    /// learner's task states cannot move to other task numbers.
    fn merge_replicas(parts: &[&Self], maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<Self>
    where
        Self: Sized;
}

/// The error of a replica asked for changes before it records them.
pub(crate) fn not_tracking() -> Error {
    Error::State("this model does not record its shared state: call track_shared() first".into())
}

/// The error of replicas that are not in step (merged before a sync).
pub(crate) fn not_in_step(what: &str) -> Error {
    invalid(
        "parts",
        format!("the replicas' {what} differ: bring them in step (a sync) before merging them"),
    )
}

/// Checks the merge arguments: one map per part, every merged task below `n_tasks`.
pub(crate) fn check_maps(n_parts: usize, maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<()> {
    if n_parts == 0 || maps.len() != n_parts {
        return Err(invalid("maps", "merging replicas needs one task map per replica"));
    }
    if maps.iter().flatten().flatten().any(|&t| t >= n_tasks) {
        return Err(invalid("maps", format!("a merged task number is not below {n_tasks}")));
    }
    Ok(())
}

/// Whether two rows of values differ in any bit.
fn differs(a: &[f64], b: &[f64]) -> bool {
    a.iter().zip(b).any(|(x, y)| x.to_bits() != y.to_bits())
}

/// Combines the replicas' changes (one report per replica, any order of replicas but the same
/// every time: ties take the first report's base), weights by `weights`. Cost: the reports'
/// total size (a sort of their positions).
pub fn combine(parts: &[SharedChanges], weights: WeightMix) -> Result<SharedUpdate> {
    let first = parts
        .first()
        .ok_or_else(|| invalid("parts", "no shared-state report to combine"))?;
    for p in parts {
        p.layout.same_as(&first.layout)?;
    }
    let layout = first.layout.clone();
    let nc = layout.columns.len();
    let mut out = SharedUpdate {
        layout,
        positions: Vec::new(),
        changers: Vec::new(),
        base: Vec::new(),
        change: Vec::new(),
        new: Vec::new(),
        scalar_changers: Vec::new(),
        scalar_base: Vec::new(),
        scalar_change: Vec::new(),
        scalar_new: Vec::new(),
    };
    // A merge of the reports' increasing positions: per position, the reports that changed it.
    let mut next = vec![0usize; parts.len()];
    let mut rows: Vec<(&[f64], &[f64])> = Vec::with_capacity(parts.len());
    let (mut base, mut change, mut new) = ([0.0; MAX_COLUMNS], [0.0; MAX_COLUMNS], [0.0; MAX_COLUMNS]);
    loop {
        let pos = parts
            .iter()
            .zip(&next)
            .filter_map(|(p, &i)| p.positions.get(i).copied())
            .min();
        let Some(pos) = pos else { break };
        rows.clear();
        for (p, i) in parts.iter().zip(next.iter_mut()) {
            if p.positions.get(*i) == Some(&pos) {
                let span = *i * nc..(*i + 1) * nc;
                if differs(&p.base[span.clone()], &p.now[span.clone()]) {
                    rows.push((&p.base[span.clone()], &p.now[span]));
                }
                *i += 1;
            }
        }
        if rows.is_empty() {
            continue;
        }
        mixed(&out.layout.columns, &rows, weights, (&mut base, &mut change, &mut new));
        out.positions.push(pos);
        out.changers.push(rows.len() as u32);
        out.base.extend_from_slice(&base[..nc]);
        out.change.extend_from_slice(&change[..nc]);
        out.new.extend_from_slice(&new[..nc]);
    }
    for c in 0..out.layout.scalars.len() {
        rows.clear();
        rows.extend(
            parts
                .iter()
                .map(|p| (&p.scalar_base[c..c + 1], &p.scalar_now[c..c + 1]))
                .filter(|(b, n)| differs(b, n)),
        );
        if rows.is_empty() {
            let v = first.scalar_now[c];
            (base[0], change[0], new[0]) = (v, 0.0, v);
        } else {
            mixed(
                &[out.layout.scalars[c]],
                &rows,
                weights,
                (&mut base, &mut change, &mut new),
            );
        }
        out.scalar_changers.push(rows.len() as u32);
        out.scalar_base.push(base[0]);
        out.scalar_change.push(change[0]);
        out.scalar_new.push(new[0]);
    }
    Ok(out)
}

type Values<'a> = (
    &'a mut [f64; MAX_COLUMNS],
    &'a mut [f64; MAX_COLUMNS],
    &'a mut [f64; MAX_COLUMNS],
);

/// The reference base, combined change and new values of one position changed by `rows`
/// (`(base, now)` per changing replica, at least one). One changer: its value verbatim.
fn mixed(columns: &[Mix], rows: &[(&[f64], &[f64])], weights: WeightMix, (base, change, new): Values) {
    let (first_base, first_now) = rows[0];
    let m = rows.len() as f64;
    for (c, mix) in columns.iter().enumerate() {
        base[c] = first_base[c];
        if rows.len() == 1 {
            change[c] = first_now[c] - first_base[c];
            new[c] = first_now[c];
            continue;
        }
        let total: f64 = rows.iter().map(|(b, n)| n[c] - b[c]).sum();
        match mix {
            Mix::Precision => {
                let gained: f64 = rows.iter().map(|(b, n)| 1.0 / n[c] - 1.0 / b[c]).sum();
                new[c] = 1.0 / (1.0 / base[c] + gained);
                change[c] = new[c] - base[c];
            }
            Mix::Weight | Mix::Sum => {
                change[c] = if *mix == Mix::Weight && weights == WeightMix::Mean {
                    total / m
                } else {
                    total
                };
                new[c] = base[c] + change[c];
            }
            Mix::Max => {
                new[c] = rows.iter().map(|(_, n)| n[c]).fold(f64::NEG_INFINITY, f64::max);
                change[c] = new[c] - base[c];
            }
        }
    }
}

impl SharedUpdate {
    /// The value a replica takes for value `c` of position `i` (`scalar`: of scalar `i`), given
    /// its own value now, its value at its last sync, and whether it changed the position. A
    /// replica that alone changed it keeps its value; one whose reference value (its value at the
    /// sync if it changed the position, else now) is the update's base takes the new value, bit
    /// for bit; another moves by the combined change. A maximum is the larger of the two.
    pub fn value(&self, scalar: bool, i: usize, c: usize, mine_base: f64, mine_now: f64, changed_here: bool) -> f64 {
        let (mix, changers, k) = if scalar {
            (self.layout.scalars[i], self.scalar_changers[i], i)
        } else {
            (
                self.layout.columns[c],
                self.changers[i],
                i * self.layout.columns.len() + c,
            )
        };
        let (base, change, new) = if scalar {
            (self.scalar_base[k], self.scalar_change[k], self.scalar_new[k])
        } else {
            (self.base[k], self.change[k], self.new[k])
        };
        if changers == 0 || (changers == 1 && changed_here) {
            return mine_now;
        }
        if mix == Mix::Max {
            return mine_now.max(new);
        }
        let mine_ref = if changed_here { mine_base } else { mine_now };
        if mine_ref.to_bits() == base.to_bits() {
            new
        } else {
            mine_ref + change
        }
    }
}

/// The report of a dense shared state (one vector per column, `base` a copy taken at the last
/// sync, `now` the learner's): the positions where any column differs. Cost: the vectors' length.
pub(crate) fn dense_changes(layout: SharedLayout, base: &[Vec<f64>], now: &[&[f64]]) -> SharedChanges {
    let nc = now.len();
    let mut out = SharedChanges {
        layout,
        positions: Vec::new(),
        base: Vec::new(),
        now: Vec::new(),
        scalar_base: Vec::new(),
        scalar_now: Vec::new(),
    };
    let len = now.first().map_or(0, |v| v.len());
    for j in 0..len {
        if (0..nc).any(|c| base[c][j].to_bits() != now[c][j].to_bits()) {
            out.positions.push(j as u64);
            out.base.extend((0..nc).map(|c| base[c][j]));
            out.now.extend((0..nc).map(|c| now[c][j]));
        }
    }
    out
}

/// The new values of a dense shared state under `update` (`base` the copy taken at the last
/// sync, `now` the learner's vectors): `(position, values)` for every position of the update.
pub(crate) fn dense_applied(update: &SharedUpdate, base: &[Vec<f64>], now: &[&[f64]]) -> Vec<(usize, Vec<f64>)> {
    let nc = now.len();
    update
        .positions
        .iter()
        .enumerate()
        .map(|(i, &pos)| {
            let j = pos as usize;
            let changed_here = (0..nc).any(|c| base[c][j].to_bits() != now[c][j].to_bits());
            let values = (0..nc)
                .map(|c| update.value(false, i, c, base[c][j], now[c][j], changed_here))
                .collect();
            (j, values)
        })
        .collect()
}

/// The message as it travels: the layout version, then the message.
#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    version: u32,
    message: T,
}

fn check_values(what: &str, values: &[f64]) -> Result<()> {
    if values.iter().any(|v| !v.is_finite()) {
        return Err(Error::State(format!("a shared-state {what} holds a non-finite value")));
    }
    Ok(())
}

fn check_positions(layout: &SharedLayout, positions: &[u64], values: &[&[f64]]) -> Result<()> {
    layout.check()?;
    let n = positions.len();
    let expected = n.checked_mul(layout.columns.len());
    if values.iter().any(|v| Some(v.len()) != expected) {
        return Err(Error::State("shared-state values do not match their positions".into()));
    }
    if positions.windows(2).any(|w| w[0] >= w[1]) || positions.last().is_some_and(|&p| p >= layout.space) {
        return Err(Error::State(format!(
            "shared-state positions must increase and stay below {}",
            layout.space
        )));
    }
    Ok(())
}

fn check_scalars(layout: &SharedLayout, scalars: &[&[f64]]) -> Result<()> {
    if scalars.iter().any(|s| s.len() != layout.scalars.len()) {
        return Err(Error::State("shared-state scalars do not match their layout".into()));
    }
    Ok(())
}

impl CheckState for Versioned<SharedChanges> {
    fn check_state(&self) -> Result<()> {
        let m = &self.message;
        check_positions(&m.layout, &m.positions, &[&m.base, &m.now])?;
        check_scalars(&m.layout, &[&m.scalar_base, &m.scalar_now])?;
        for (what, v) in [("base", &m.base), ("value", &m.now)] {
            check_values(what, v)?;
        }
        check_values("scalar", &m.scalar_base)?;
        check_values("scalar", &m.scalar_now)
    }
}

impl CheckState for Versioned<SharedUpdate> {
    fn check_state(&self) -> Result<()> {
        let m = &self.message;
        check_positions(&m.layout, &m.positions, &[&m.base, &m.change, &m.new])?;
        if m.changers.len() != m.positions.len() || m.changers.contains(&0) {
            return Err(Error::State(
                "a shared-state update names no changer for a position".into(),
            ));
        }
        check_scalars(&m.layout, &[&m.scalar_base, &m.scalar_change, &m.scalar_new])?;
        if m.scalar_changers.len() != m.layout.scalars.len() {
            return Err(Error::State("shared-state scalars do not match their layout".into()));
        }
        for v in [
            &m.base,
            &m.change,
            &m.new,
            &m.scalar_base,
            &m.scalar_change,
            &m.scalar_new,
        ] {
            check_values("update", v)?;
        }
        Ok(())
    }
}

fn to_bytes<T: Serialize>(message: &T) -> Result<Vec<u8>> {
    state::encode(&Versioned {
        version: SHARED_LAYOUT_VERSION,
        message,
    })
}

fn from_bytes<T>(bytes: &[u8]) -> Result<T>
where
    T: serde::de::DeserializeOwned,
    Versioned<T>: CheckState,
{
    let head: [u8; 4] = bytes
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Error::State("a shared-state message needs at least 4 bytes".into()))?;
    let version = u32::from_le_bytes(head);
    if version != SHARED_LAYOUT_VERSION {
        return Err(Error::State(format!(
            "the shared-state message has layout version {version}, this omtl reads version {SHARED_LAYOUT_VERSION}"
        )));
    }
    Ok(state::decode::<Versioned<T>>(bytes)?.message)
}

impl SharedChanges {
    /// The report as bytes ([`SHARED_LAYOUT_VERSION`], then bincode).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        to_bytes(self)
    }

    /// A report from untrusted bytes, checked (lengths, increasing positions, finite values).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        from_bytes(bytes)
    }
}

impl SharedUpdate {
    /// The update as bytes ([`SHARED_LAYOUT_VERSION`], then bincode).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        to_bytes(self)
    }

    /// An update from untrusted bytes, checked.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        from_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> SharedLayout {
        SharedLayout {
            kind: "test".into(),
            settings: String::new(),
            space: 100,
            columns: vec![Mix::Weight, Mix::Sum, Mix::Max],
            scalars: vec![Mix::Sum],
        }
    }

    fn report(positions: &[u64], base: &[f64], now: &[f64], scalars: (f64, f64)) -> SharedChanges {
        SharedChanges {
            layout: layout(),
            positions: positions.to_vec(),
            base: base.to_vec(),
            now: now.to_vec(),
            scalar_base: vec![scalars.0],
            scalar_now: vec![scalars.1],
        }
    }

    #[test]
    fn one_changer_is_taken_verbatim_and_several_are_mixed() {
        let a = report(
            &[3, 7],
            &[1.0, 2.0, 1.0, 0.1, 0.0, 0.5],
            &[1.5, 3.0, 1.0, 0.3, 1.0, 0.5],
            (10.0, 12.0),
        );
        let b = report(
            &[7, 9],
            &[0.1, 0.0, 0.5, 0.0, 0.0, 0.0],
            &[0.2, 0.5, 2.0, 0.0, 0.0, 0.0],
            (10.0, 11.0),
        );
        let u = combine(&[a.clone(), b.clone()], WeightMix::Mean).unwrap();
        let summed = combine(&[a.clone(), b], WeightMix::Sum).unwrap();
        assert!((summed.new[3] - 0.4).abs() < 1e-15);
        // position 9 did not change: left out
        assert_eq!(u.positions, [3, 7]);
        assert_eq!(u.changers, [1, 2]);
        assert_eq!(&u.new[..3], &[1.5, 3.0, 1.0]);
        // mean of (0.2, 0.1) = 0.15 on 0.1; sum of (1.0, 0.5) on 0.0; max of 0.5 and 2.0
        assert!((u.new[3] - 0.25).abs() < 1e-15 && u.new[4] == 1.5 && u.new[5] == 2.0);
        assert_eq!((u.scalar_changers[0], u.scalar_new[0]), (2, 13.0));
        // the lone changer keeps its value; a replica in step takes the new value
        assert_eq!(u.value(false, 0, 0, 1.0, 1.5, true), 1.5);
        assert_eq!(u.value(false, 0, 0, 1.0, 1.0, false), 1.5);
        // out of step (another base): moves by the change
        assert_eq!(u.value(false, 0, 1, 5.0, 5.0, false), 6.0);
        // one report: the update is each position's value now
        let alone = combine(&[a], WeightMix::Sum).unwrap();
        assert_eq!(alone.new, [1.5, 3.0, 1.0, 0.3, 1.0, 0.5]);
        assert_eq!(alone.scalar_new, [12.0]);
    }

    #[test]
    fn messages_round_trip_and_bad_ones_are_refused() {
        let a = report(&[3], &[1.0, 2.0, 1.0], &[1.5, 3.0, 1.0], (0.0, 1.0));
        let back = SharedChanges::from_bytes(&a.to_bytes().unwrap()).unwrap();
        assert_eq!(back, a);
        let u = combine(&[a.clone()], WeightMix::Sum).unwrap();
        assert_eq!(SharedUpdate::from_bytes(&u.to_bytes().unwrap()).unwrap(), u);
        let mut bad = a.clone();
        bad.positions = vec![100];
        assert!(SharedChanges::from_bytes(&bad.to_bytes().unwrap()).is_err());
        let mut bad = a.clone();
        bad.now[0] = f64::NAN;
        assert!(SharedChanges::from_bytes(&bad.to_bytes().unwrap()).is_err());
        let mut other = a.clone();
        other.layout.space = 5;
        other.positions = vec![1];
        assert!(combine(&[a.clone(), other], WeightMix::Sum).is_err());
        let mut bytes = a.to_bytes().unwrap();
        bytes[0] = 9;
        assert!(SharedChanges::from_bytes(&bytes)
            .unwrap_err()
            .to_string()
            .contains("version 9"));
    }
}
