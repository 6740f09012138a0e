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
    /// A weight whose steps scale as `1/√G`, `G` the next value of its position (a sum of
    /// squared gradients): added, each replica's change scaled by `√((G₀ + ΔG_r)/(G₀ + Σ ΔG))`,
    /// the rate it stepped at over the rate one model would have reached (or averaged).
    AdaptiveWeight,
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
    /// the last sync had been learned from the state then (a delayed update); an adaptive
    /// weight's changes scaled down to the rate one model would have reached
    /// ([`Mix::AdaptiveWeight`]).
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
    /// The values are single precision (sent as such: an `f32` state loses nothing).
    pub single: bool,
    /// How each scalar (counters beside the positions) combines.
    pub scalars: Vec<Mix>,
}

impl SharedLayout {
    fn check(&self) -> Result<()> {
        let n = self.columns.len();
        // an adaptive weight reads the value after it; a scalar has none
        let adaptive_last = self.columns.last() == Some(&Mix::AdaptiveWeight);
        if n == 0
            || n > MAX_COLUMNS
            || self.scalars.len() > MAX_SCALARS
            || adaptive_last
            || self.scalars.contains(&Mix::AdaptiveWeight)
        {
            return Err(Error::State(format!(
                "a shared-state layout has 1 to {MAX_COLUMNS} values per position (an adaptive weight before its \
                 statistic) and at most {MAX_SCALARS} scalars"
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

/// Values of positions, in the precision of the learner's state ([`SharedLayout::single`]).
/// Serialised as one byte string (little-endian values), read in one copy.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Single precision.
    Single(Vec<f32>),
    /// Double precision.
    Double(Vec<f64>),
}

impl Values {
    /// Empty values of this precision, with room for `n`.
    pub fn with_capacity(single: bool, n: usize) -> Self {
        if single {
            Values::Single(Vec::with_capacity(n))
        } else {
            Values::Double(Vec::with_capacity(n))
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Single(v) => v.len(),
            Values::Double(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`.
    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        match self {
            Values::Single(v) => f64::from(v[i]),
            Values::Double(v) => v[i],
        }
    }

    /// Appends `x` (rounded to single precision if the values are).
    #[inline]
    pub fn push(&mut self, x: f64) {
        match self {
            Values::Single(v) => v.push(x as f32),
            Values::Double(v) => v.push(x),
        }
    }

    fn is_single(&self) -> bool {
        matches!(self, Values::Single(_))
    }

    fn all_finite(&self) -> bool {
        match self {
            Values::Single(v) => v.iter().all(|x| x.is_finite()),
            Values::Double(v) => v.iter().all(|x| x.is_finite()),
        }
    }
}

/// Arrays of numbers as byte strings of their little-endian encodings: bincode reads a byte
/// string in one copy, a sequence number by number (with a growing allocation).
trait Word: Copy {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
    fn take(bytes: &[u8]) -> Self;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn take(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("a word's bytes"))
            }
        }
    )*};
}
word!(u64, f32, f64);

fn to_le<T: Word>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * T::SIZE);
    values.iter().for_each(|v| v.put(&mut out));
    out
}

fn from_le<T: Word, E: serde::de::Error>(bytes: &[u8]) -> std::result::Result<Vec<T>, E> {
    if !bytes.len().is_multiple_of(T::SIZE) {
        return Err(E::custom("a byte string that is not whole numbers"));
    }
    Ok(bytes.chunks_exact(T::SIZE).map(T::take).collect())
}

/// A visitor of one byte string.
struct ByteString;

impl<'de> serde::de::Visitor<'de> for ByteString {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> std::result::Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> std::result::Result<Vec<u8>, E> {
        Ok(v)
    }
}

mod le_words {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&super::to_le(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        super::from_le(&d.deserialize_byte_buf(super::ByteString)?)
    }
}

impl Serialize for Values {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Values::Single(v) => (0u8, serde_bytes_of(&to_le(v))).serialize(s),
            Values::Double(v) => (1u8, serde_bytes_of(&to_le(v))).serialize(s),
        }
    }
}

/// A byte string serialised as one (not as a sequence of numbers).
struct BytesRef<'a>(&'a [u8]);

fn serde_bytes_of(b: &[u8]) -> BytesRef<'_> {
    BytesRef(b)
}

impl Serialize for BytesRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A byte string read as one.
struct BytesBuf(Vec<u8>);

impl<'de> Deserialize<'de> for BytesBuf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(BytesBuf(d.deserialize_byte_buf(ByteString)?))
    }
}

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let (kind, BytesBuf(bytes)) = <(u8, BytesBuf)>::deserialize(d)?;
        match kind {
            0 => Ok(Values::Single(from_le(&bytes)?)),
            1 => Ok(Values::Double(from_le(&bytes)?)),
            _ => Err(serde::de::Error::custom("unknown precision of shared values")),
        }
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
    #[serde(with = "le_words")]
    pub positions: Vec<u64>,
    /// Their values at the last sync, row-major (`positions × columns`).
    pub base: Values,
    /// Their values now.
    pub now: Values,
    /// The scalars at the last sync.
    pub scalar_base: Vec<f64>,
    /// The scalars now.
    pub scalar_now: Vec<f64>,
}

/// The combined changes every replica applies: per position changed by some replica
/// (increasing), the base it was changed from (the first changer's) and the value a replica
/// whose value was that base takes ([`SharedUpdate::value`]); the same for the scalars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedUpdate {
    /// The layout of the learner's shared state.
    pub layout: SharedLayout,
    /// Positions changed by some replica, increasing.
    #[serde(with = "le_words")]
    pub positions: Vec<u64>,
    /// The base the first changer changed each value from (`positions × columns`).
    pub base: Values,
    /// The value a replica whose value is `base` takes.
    pub new: Values,
    /// The scalars' base.
    pub scalar_base: Vec<f64>,
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
    let total: usize = parts.iter().map(|p| p.positions.len()).sum();
    let mut out = SharedUpdate {
        positions: Vec::with_capacity(total),
        base: Values::with_capacity(layout.single, total * nc),
        new: Values::with_capacity(layout.single, total * nc),
        scalar_base: Vec::new(),
        scalar_new: Vec::new(),
        layout,
    };
    // A merge of the reports' increasing positions: per position, the reports that changed it.
    let mut next = vec![0usize; parts.len()];
    let mut rows: Vec<(&SharedChanges, usize)> = Vec::with_capacity(parts.len());
    let (mut base, mut new) = ([0.0; MAX_COLUMNS], [0.0; MAX_COLUMNS]);
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
                if (*i * nc..(*i + 1) * nc).any(|k| p.base.get(k).to_bits() != p.now.get(k).to_bits()) {
                    rows.push((p, *i * nc));
                }
                *i += 1;
            }
        }
        if rows.is_empty() {
            continue;
        }
        let values = rows.iter().map(|&(p, at)| (&p.base, &p.now, at));
        mixed(&out.layout.columns, values, rows.len(), weights, &mut base, &mut new);
        out.positions.push(pos);
        for c in 0..nc {
            out.base.push(base[c]);
            out.new.push(new[c]);
        }
    }
    for c in 0..out.layout.scalars.len() {
        let changed: Vec<usize> = (0..parts.len())
            .filter(|&p| parts[p].scalar_base[c].to_bits() != parts[p].scalar_now[c].to_bits())
            .collect();
        if changed.is_empty() {
            (base[0], new[0]) = (first.scalar_now[c], first.scalar_now[c]);
        } else {
            let (b, n): (Vec<f64>, Vec<f64>) = changed
                .iter()
                .map(|&p| (parts[p].scalar_base[c], parts[p].scalar_now[c]))
                .unzip();
            let (b, n) = (Values::Double(b), Values::Double(n));
            let values = (0..changed.len()).map(|k| (&b, &n, k));
            mixed(
                &[out.layout.scalars[c]],
                values,
                changed.len(),
                weights,
                &mut base,
                &mut new,
            );
        }
        out.scalar_base.push(base[0]);
        out.scalar_new.push(new[0]);
    }
    Ok(out)
}

/// The reference base (the first changer's) and the new values of one position changed by `m`
/// replicas (`(base, now, offset)` of each). One changer: its values verbatim.
fn mixed<'a>(
    columns: &[Mix],
    changers: impl Iterator<Item = (&'a Values, &'a Values, usize)> + Clone,
    m: usize,
    weights: WeightMix,
    base: &mut [f64; MAX_COLUMNS],
    new: &mut [f64; MAX_COLUMNS],
) {
    let (b0, n0, at0) = changers.clone().next().expect("one changer at least");
    for (c, mix) in columns.iter().enumerate() {
        base[c] = b0.get(at0 + c);
        if m == 1 {
            new[c] = n0.get(at0 + c);
            continue;
        }
        let changes = changers.clone().map(|(b, n, at)| (b.get(at + c), n.get(at + c)));
        new[c] = match mix {
            Mix::Precision => 1.0 / (1.0 / base[c] + changes.map(|(b, n)| 1.0 / n - 1.0 / b).sum::<f64>()),
            Mix::Max => changes.map(|(_, n)| n).fold(f64::NEG_INFINITY, f64::max),
            Mix::Weight | Mix::AdaptiveWeight if weights == WeightMix::Mean => {
                base[c] + changes.map(|(b, n)| n - b).sum::<f64>() / m as f64
            }
            Mix::AdaptiveWeight => {
                // the statistic's base and each replica's value of it
                let g = changers
                    .clone()
                    .map(|(b, n, at)| (b.get(at + c + 1), n.get(at + c + 1)));
                let g0 = b0.get(at0 + c + 1);
                let reached = g0 + g.clone().map(|(b, n)| n - b).sum::<f64>();
                base[c]
                    + changes
                        .zip(g)
                        .map(|((b, n), (_, gn))| {
                            let scale = if reached > 0.0 {
                                (gn / reached).sqrt().min(1.0)
                            } else {
                                1.0
                            };
                            (n - b) * scale
                        })
                        .sum::<f64>()
            }
            Mix::Weight | Mix::Sum => base[c] + changes.map(|(b, n)| n - b).sum::<f64>(),
        };
    }
}

impl SharedUpdate {
    /// The value a replica takes for value `c` of position `i` (`scalar`: of scalar `i`), given
    /// its own value now, its value at its last sync, and whether it changed the position. Its
    /// reference value is its value at the sync if it changed the position, else its value now:
    /// a replica whose reference is the update's base (a replica in step) takes the new value,
    /// bit for bit (the one replica that changed a position keeps its value), another moves by
    /// the update's change. A maximum is the larger of the two.
    pub fn value(&self, scalar: bool, i: usize, c: usize, mine_base: f64, mine_now: f64, changed_here: bool) -> f64 {
        let (mix, base, new) = if scalar {
            (self.layout.scalars[i], self.scalar_base[i], self.scalar_new[i])
        } else {
            let k = i * self.layout.columns.len() + c;
            (self.layout.columns[c], self.base.get(k), self.new.get(k))
        };
        if mix == Mix::Max {
            return mine_now.max(new);
        }
        let mine_ref = if changed_here { mine_base } else { mine_now };
        if mine_ref.to_bits() == base.to_bits() {
            new
        } else {
            mine_ref + (new - base)
        }
    }
}

/// The report of a dense shared state (one vector per column, `base` a copy taken at the last
/// sync, `now` the learner's; double precision): the positions where any column differs. Cost:
/// the vectors' length.
pub(crate) fn dense_changes(layout: SharedLayout, base: &[Vec<f64>], now: &[&[f64]]) -> SharedChanges {
    let nc = now.len();
    let (mut positions, mut b, mut n) = (Vec::new(), Vec::new(), Vec::new());
    let len = now.first().map_or(0, |v| v.len());
    for j in 0..len {
        if (0..nc).any(|c| base[c][j].to_bits() != now[c][j].to_bits()) {
            positions.push(j as u64);
            b.extend((0..nc).map(|c| base[c][j]));
            n.extend((0..nc).map(|c| now[c][j]));
        }
    }
    SharedChanges {
        layout,
        positions,
        base: Values::Double(b),
        now: Values::Double(n),
        scalar_base: Vec::new(),
        scalar_now: Vec::new(),
    }
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

fn check_finite(ok: bool) -> Result<()> {
    if !ok {
        return Err(Error::State("a shared-state message holds a non-finite value".into()));
    }
    Ok(())
}

fn check_positions(layout: &SharedLayout, positions: &[u64], values: &[&Values]) -> Result<()> {
    layout.check()?;
    let expected = positions.len().checked_mul(layout.columns.len());
    if values
        .iter()
        .any(|v| Some(v.len()) != expected || v.is_single() != layout.single)
    {
        return Err(Error::State("shared-state values do not match their positions".into()));
    }
    if positions.windows(2).any(|w| w[0] >= w[1]) || positions.last().is_some_and(|&p| p >= layout.space) {
        return Err(Error::State(format!(
            "shared-state positions must increase and stay below {}",
            layout.space
        )));
    }
    check_finite(values.iter().all(|v| v.all_finite()))
}

fn check_scalars(layout: &SharedLayout, scalars: &[&[f64]]) -> Result<()> {
    if scalars.iter().any(|s| s.len() != layout.scalars.len()) {
        return Err(Error::State("shared-state scalars do not match their layout".into()));
    }
    check_finite(scalars.iter().all(|s| s.iter().all(|x| x.is_finite())))
}

impl CheckState for Versioned<SharedChanges> {
    fn check_state(&self) -> Result<()> {
        let m = &self.message;
        check_positions(&m.layout, &m.positions, &[&m.base, &m.now])?;
        check_scalars(&m.layout, &[&m.scalar_base, &m.scalar_now])
    }
}

impl CheckState for Versioned<SharedUpdate> {
    fn check_state(&self) -> Result<()> {
        let m = &self.message;
        check_positions(&m.layout, &m.positions, &[&m.base, &m.new])?;
        check_scalars(&m.layout, &[&m.scalar_base, &m.scalar_new])
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
            single: false,
            scalars: vec![Mix::Sum],
        }
    }

    fn report(positions: &[u64], base: &[f64], now: &[f64], scalars: (f64, f64)) -> SharedChanges {
        SharedChanges {
            layout: layout(),
            positions: positions.to_vec(),
            base: Values::Double(base.to_vec()),
            now: Values::Double(now.to_vec()),
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
        // position 9 did not change: left out
        assert_eq!(u.positions, [3, 7]);
        assert_eq!((0..3).map(|k| u.new.get(k)).collect::<Vec<_>>(), [1.5, 3.0, 1.0]);
        // the mean of (0.2, 0.1) on 0.1; the sum of (1.0, 0.5) on 0.0; the larger of 0.5 and 2.0
        assert!((u.new.get(3) - 0.25).abs() < 1e-15 && u.new.get(4) == 1.5 && u.new.get(5) == 2.0);
        assert_eq!(u.scalar_new, [13.0]);
        let summed = combine(&[a.clone(), b], WeightMix::Sum).unwrap();
        assert!((summed.new.get(3) - 0.4).abs() < 1e-15);
        // the one changer keeps its value, a replica in step takes it, another moves by the change
        assert_eq!(u.value(false, 0, 0, 1.0, 1.5, true), 1.5);
        assert_eq!(u.value(false, 0, 0, 1.0, 1.0, false), 1.5);
        assert_eq!(u.value(false, 0, 1, 5.0, 5.0, false), 6.0);
        assert_eq!(u.value(false, 1, 2, 0.5, 0.7, true), 2.0);
        // one report: the update is each position's value now
        let alone = combine(&[a], WeightMix::Sum).unwrap();
        assert_eq!(alone.new, Values::Double(vec![1.5, 3.0, 1.0, 0.3, 1.0, 0.5]));
        assert_eq!(alone.scalar_new, [12.0]);
    }

    #[test]
    fn precisions_add_up() {
        let mut l = layout();
        l.columns = vec![Mix::Precision];
        let r = |b: f64, n: f64| SharedChanges {
            layout: l.clone(),
            positions: vec![0],
            base: Values::Double(vec![b]),
            now: Values::Double(vec![n]),
            scalar_base: vec![0.0],
            scalar_now: vec![0.0],
        };
        // precisions 1 -> 2 and 1 -> 4: gains 1 and 3, precision 5
        let u = combine(&[r(1.0, 0.5), r(1.0, 0.25)], WeightMix::Sum).unwrap();
        assert!((u.new.get(0) - 0.2).abs() < 1e-15);
    }

    #[test]
    fn messages_round_trip_and_bad_ones_are_refused() {
        let a = report(&[3], &[1.0, 2.0, 1.0], &[1.5, 3.0, 1.0], (0.0, 1.0));
        let back = SharedChanges::from_bytes(&a.to_bytes().unwrap()).unwrap();
        assert_eq!(back, a);
        let u = combine(std::slice::from_ref(&a), WeightMix::Sum).unwrap();
        assert_eq!(SharedUpdate::from_bytes(&u.to_bytes().unwrap()).unwrap(), u);
        let mut bad = a.clone();
        bad.positions = vec![100];
        assert!(SharedChanges::from_bytes(&bad.to_bytes().unwrap()).is_err());
        let mut bad = a.clone();
        bad.now = Values::Double(vec![f64::NAN, 0.0, 0.0]);
        assert!(SharedChanges::from_bytes(&bad.to_bytes().unwrap()).is_err());
        let mut bad = a.clone();
        bad.now = Values::Single(vec![1.0, 0.0, 0.0]);
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
