//! The sparse path of the kernel sums: an inverted index from feature to the stored rows that
//! hold it, so a score costs the (stored row, query) feature matches rather than a gather of
//! every stored non-zero.
//!
//! A feature held by few stored rows keeps a list of `(slot, value)` postings (one scattered add
//! per match). A feature held by at least an eighth of them keeps a dense column over the slots
//! instead, zero where a row lacks it, which a score adds with vector loads (on text the
//! frequent terms carry most of the matches: ~92% of them on the text-like stream of
//! `benches/compare_budget.py`). Each posting knows its place in its row and each row the
//! places of its postings, so an eviction costs O(1) per stored non-zero of the two rows it
//! touches (the victim and the row moved into its slot).
//!
//! Each dot product still adds its terms in ascending feature order, so the result is the
//! gather's, bit for bit: a column adds `0 * v = ±0` where a row lacks the feature, which leaves
//! the dot product as it was (it starts at `+0` and a sum of finite products never becomes `-0`;
//! a query with a non-finite value takes the gather instead).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::kernel::{ActiveSet, BaseKernel, KernelKind, Query, TaskKernel};
use crate::simd::{fma_builds, prefetch};

/// A multiplicative hash for feature ids (SipHash would cost more than the postings it finds).
#[derive(Default, Clone, Copy)]
pub(crate) struct FeatureHasher(u64);

impl Hasher for FeatureHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.0 = (u64::from(i) ^ 0x5851_F42D_4C95_7F2D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A stored row's value of a feature.
#[derive(Debug, Clone, Copy)]
struct Posting {
    slot: u32,
    /// The feature's place among the row's non-zeros (where the row keeps this posting's
    /// position in the list).
    entry: u32,
    value: f64,
}

/// The position kept for a non-zero whose feature has a dense column.
const NOT_LISTED: u32 = u32::MAX;

/// The stored rows holding one feature.
#[derive(Debug, Clone)]
enum Postings {
    /// Each one's slot and value (side by side: a short list is one cache line), in no
    /// particular order.
    List(Vec<Posting>),
    /// Column `column` of [`Columns`], and how many stored rows hold the feature.
    Column { column: u32, count: u32 },
}

/// The dense columns: column `c` is `data[c * stride..(c + 1) * stride]`, indexed by slot, zero
/// at every slot whose row lacks the feature and at every slot past the active set.
#[derive(Debug, Clone, Default)]
struct Columns {
    data: Vec<f64>,
    stride: usize,
    /// The feature of each column.
    features: Vec<u32>,
}

impl Columns {
    fn column(&self, c: usize) -> &[f64] {
        &self.data[c * self.stride..(c + 1) * self.stride]
    }

    fn column_mut(&mut self, c: usize) -> &mut [f64] {
        &mut self.data[c * self.stride..(c + 1) * self.stride]
    }

    /// Room for `len` slots in every column (doubling, so pushes cost amortised O(columns)).
    fn reserve_slots(&mut self, len: usize) {
        if len <= self.stride {
            return;
        }
        let stride = len.max(2 * self.stride).max(64);
        let mut data = vec![0.0; self.features.len() * stride];
        for c in 0..self.features.len() {
            data[c * stride..c * stride + self.stride].copy_from_slice(self.column(c));
        }
        self.data = data;
        self.stride = stride;
    }
}

/// A feature held by at least `1 / DENSE_SHARE` of the stored rows moves to a dense column. On
/// the text-like stream (B = 1,000) 8 left ~3,000 scattered adds and ~70 column passes per
/// score (1.7 MB of columns) and was as fast as 4 (~6,000 and ~55, 0.85 MB) and faster than 16
/// (whose 3.4 MB of columns left L2).
const DENSE_SHARE: usize = 8;

/// A column whose feature is held by fewer than `1 / LIST_SHARE` of the stored rows goes back to
/// a list (hysteresis: a feature near the threshold does not move at every change, and the
/// columns hold at most `2 LIST_SHARE` values per stored non-zero: `LIST_SHARE` at a review, and
/// the set at most doubles until the next).
const LIST_SHARE: usize = 16;

/// Active-set size from which a sparse store keeps an inverted index. Below it, keeping the
/// index up to date on every eviction costs more than the gathers it saves (measured on
/// text-like rows, where the most frequent terms occur in every row).
pub const INDEX_FROM: usize = 256;

/// Dense columns applied in one pass over the slots (consecutive query features that have one).
const RUN: usize = 4;

/// Feature -> the stored sparse rows holding it, as a postings list or a dense column. A cache
/// of the active set's rows, built once the set reaches `from` elements and maintained from then
/// on; not serialised (rebuilt at the first update after unpickling; until then scores take the
/// gather path, which gives the same numbers) and ignored by `==`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SparseIndex {
    /// Whether the rows are stored sparse (else the index stays empty).
    enabled: bool,
    /// Build the index once the active set has this many elements.
    from: usize,
    #[serde(skip)]
    postings: HashMap<u32, Postings, BuildHasherDefault<FeatureHasher>>,
    #[serde(skip)]
    columns: Columns,
    /// For each slot, the position of each of its row's non-zeros in that feature's list
    /// ([`NOT_LISTED`] for a column), so that a removal finds its postings in O(1).
    #[serde(skip)]
    positions: Vec<Vec<u32>>,
    /// Columns that lost a row since the last insertion (each goes back to a list at the next
    /// insertion if its share fell below `1 / LIST_SHARE`).
    #[serde(skip)]
    thinned: Vec<u32>,
    /// The active-set size at the last review of every column's share (at each doubling of the
    /// set, columns whose share fell while the set grew go back to lists).
    #[serde(skip)]
    reviewed_at: usize,
    #[serde(skip)]
    built: bool,
}

impl PartialEq for SparseIndex {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl SparseIndex {
    /// An index that is never built (every score takes the row-store loop).
    pub const fn disabled() -> Self {
        Self {
            enabled: false,
            from: usize::MAX,
            postings: HashMap::with_hasher(BuildHasherDefault::new()),
            columns: Columns {
                data: Vec::new(),
                stride: 0,
                features: Vec::new(),
            },
            positions: Vec::new(),
            thinned: Vec::new(),
            reviewed_at: 0,
            built: false,
        }
    }

    /// An index for rows stored sparse (`sparse`; else it stays empty), built from
    /// [`INDEX_FROM`] stored rows on.
    pub fn new(sparse: bool) -> Self {
        Self::with_threshold(sparse, INDEX_FROM)
    }

    /// [`SparseIndex::new`], built from `from` stored rows on.
    pub fn with_threshold(sparse: bool, from: usize) -> Self {
        Self {
            enabled: sparse,
            from,
            ..Self::default()
        }
    }

    /// The index must agree with the representation of the rows it indexes (a restored one is
    /// never built: the postings are not serialised; a live one may be).
    pub(crate) fn check_state(&self, set: &ActiveSet) -> crate::Result<()> {
        crate::state::ensure(self.enabled == set.rows().is_sparse(), || {
            "the sparse index does not match the stored rows' representation".into()
        })
    }

    /// Whether the postings are built (scores use them) rather than pending.
    pub fn is_built(&self) -> bool {
        self.built
    }

    /// How many features hold a dense column (the rest hold postings lists).
    #[cfg(test)]
    pub(super) fn n_columns(&self) -> usize {
        self.columns.features.len()
    }

    /// Drops the postings (after the set changed other than by [`Self::add`] and
    /// [`Self::remove`], e.g. a stable removal of many slots); [`Self::ensure`] builds them
    /// again, and until then scores take the gather path, which gives the same numbers.
    pub fn reset(&mut self) {
        *self = Self::with_threshold(self.enabled, self.from);
    }

    /// Builds the index if it is due and missing (call before changing the set).
    pub fn ensure(&mut self, set: &ActiveSet) {
        if self.built || !self.enabled || set.len() < self.from {
            return;
        }
        self.postings.clear();
        self.columns = Columns::default();
        self.positions.clear();
        self.thinned.clear();
        self.built = true;
        self.reviewed_at = set.len();
        for slot in 0..set.len() {
            self.add(set, slot);
        }
    }

    /// Records the row at `slot`, the next slot (call after pushing it).
    pub fn add(&mut self, set: &ActiveSet, slot: usize) {
        if !self.built {
            return;
        }
        debug_assert_eq!(slot, self.positions.len(), "rows are indexed in slot order");
        // Columns thinned by the last removals go back to lists now that the set is
        // consistent again (the rows are read to find each posting's entry).
        for j in std::mem::take(&mut self.thinned) {
            if let Some(&Postings::Column { count, .. }) = self.postings.get(&j) {
                if (count as usize) * LIST_SHARE < slot {
                    self.make_list(set, j, slot);
                }
            }
        }
        let len = set.len();
        self.columns.reserve_slots(len);
        let Row::Sparse { indices, values } = set.rows().row(slot) else {
            self.positions.push(Vec::new());
            return;
        };
        let mut positions = vec![NOT_LISTED; indices.len()];
        for (e, (&j, &v)) in indices.iter().zip(values).enumerate() {
            let entry = self.postings.entry(j).or_insert_with(|| Postings::List(Vec::new()));
            let dense_enough = match entry {
                Postings::List(list) => {
                    positions[e] = list.len() as u32;
                    list.push(Posting {
                        slot: slot as u32,
                        entry: e as u32,
                        value: v,
                    });
                    list.len() * DENSE_SHARE >= len && len >= 2 * DENSE_SHARE
                }
                Postings::Column { column, count } => {
                    *count += 1;
                    let c = *column as usize;
                    self.columns.column_mut(c)[slot] = v;
                    false
                }
            };
            if dense_enough {
                self.make_column(j);
            }
        }
        self.positions.push(positions);
        if len >= 2 * self.reviewed_at.max(1) {
            self.reviewed_at = len;
            let thin: Vec<u32> = (self.columns.features.iter().copied())
                .filter(|j| {
                    matches!(self.postings.get(j),
                        Some(&Postings::Column { count, .. }) if (count as usize) * LIST_SHARE < len)
                })
                .collect();
            for j in thin {
                self.make_list(set, j, slot + 1);
            }
        }
    }

    /// Forgets the row at `slot` and renames the last slot `last` to `slot`, mirroring the
    /// swap-remove [`ActiveSet::remove_at`] is about to do (call before it). O(1) per stored
    /// non-zero of the two rows: each posting knows its place in its list and the other way round.
    pub fn remove(&mut self, set: &ActiveSet, slot: usize) {
        if !self.built {
            return;
        }
        let last = set.len() - 1;
        debug_assert_eq!(self.positions.len(), set.len());
        if let Row::Sparse { indices, .. } = set.rows().row(slot) {
            for (e, j) in indices.iter().enumerate() {
                match self.postings.get_mut(j) {
                    Some(Postings::List(list)) => {
                        let pos = self.positions[slot][e] as usize;
                        list.swap_remove(pos);
                        if let Some(moved) = list.get(pos) {
                            self.positions[moved.slot as usize][moved.entry as usize] = pos as u32;
                        } else if list.is_empty() {
                            self.postings.remove(j);
                        }
                    }
                    Some(Postings::Column { column, count }) => {
                        *count = count.saturating_sub(1);
                        let c = *column as usize;
                        self.columns.column_mut(c)[slot] = 0.0;
                        self.thinned.push(*j);
                    }
                    None => {}
                }
            }
        }
        if last != slot {
            // The moved row's features: its postings and its column values (a column the row
            // lacks is zero at both slots: at `slot` the victim's value was just cleared).
            if let Row::Sparse { indices, .. } = set.rows().row(last) {
                for (e, j) in indices.iter().enumerate() {
                    match self.postings.get_mut(j) {
                        Some(Postings::List(list)) => {
                            list[self.positions[last][e] as usize].slot = slot as u32;
                        }
                        Some(&mut Postings::Column { column, .. }) => {
                            let column = self.columns.column_mut(column as usize);
                            column[slot] = column[last];
                            column[last] = 0.0;
                        }
                        None => {}
                    }
                }
            }
        }
        self.positions.swap_remove(slot);
    }

    /// Moves feature `j`'s postings list into a new dense column.
    fn make_column(&mut self, j: u32) {
        let Some(Postings::List(list)) = self.postings.remove(&j) else {
            return;
        };
        let c = self.columns.features.len();
        let stride = self.columns.stride;
        self.columns.data.resize((c + 1) * stride, 0.0);
        self.columns.features.push(j);
        let column = self.columns.column_mut(c);
        for p in &list {
            column[p.slot as usize] = p.value;
        }
        let count = list.len() as u32;
        self.postings.insert(
            j,
            Postings::Column {
                column: c as u32,
                count,
            },
        );
    }

    /// Moves feature `j`'s dense column (over the first `len` slots, the rows of `set`) back
    /// into a postings list; the last column takes its place.
    fn make_list(&mut self, set: &ActiveSet, j: u32, len: usize) {
        let Some(&Postings::Column { column, .. }) = self.postings.get(&j) else {
            return;
        };
        let c = column as usize;
        let mut list = Vec::new();
        // Stored values are non-zero (the row store drops zeros).
        for (s, &value) in self.columns.column(c)[..len].iter().enumerate() {
            if value == 0.0 {
                continue;
            }
            if let Row::Sparse { indices, .. } = set.rows().row(s) {
                if let Ok(e) = indices.binary_search(&j) {
                    self.positions[s][e] = list.len() as u32;
                    list.push(Posting {
                        slot: s as u32,
                        entry: e as u32,
                        value,
                    });
                }
            }
        }
        if list.is_empty() {
            self.postings.remove(&j);
        } else {
            self.postings.insert(j, Postings::List(list));
        }
        let last = self.columns.features.len() - 1;
        let stride = self.columns.stride;
        if c != last {
            self.columns
                .data
                .copy_within(last * stride..(last + 1) * stride, c * stride);
            let moved = self.columns.features[last];
            self.columns.features[c] = moved;
            if let Some(Postings::Column { column, .. }) = self.postings.get_mut(&moved) {
                *column = c as u32;
            }
        }
        self.columns.features.pop();
        self.columns.data.truncate(last * stride);
    }

    /// `sum_j beta_j T[i_j, task] K'(x_j, q)` for a sparse query, or `None` when a query value
    /// is not finite (a column would add `0 * inf` to the rows lacking the feature; the caller
    /// takes the gather).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn score(
        &self,
        set: &ActiveSet,
        kernel: &BaseKernel,
        tasks: &TaskKernel,
        indices: &[u32],
        values: &[f64],
        q: &Query,
        task: usize,
    ) -> Option<f64> {
        if !values.iter().all(|v| v.is_finite()) {
            return None;
        }
        // Every feature looked up first, and its list's first line prefetched: the lookups are
        // independent, so their cache misses overlap instead of each waiting behind the
        // previous feature's adds.
        let mut found: Vec<(&Postings, f64)> = Vec::with_capacity(indices.len());
        for (j, &v) in indices.iter().zip(values) {
            if let Some(postings) = self.postings.get(j) {
                if let Postings::List(list) = postings {
                    prefetch(list.as_ptr());
                }
                found.push((postings, v));
            }
        }
        let mut dots = vec![0.0f64; set.len()];
        let mut run = [(0u32, 0.0f64); RUN];
        let mut r = 0;
        let stride = self.columns.stride;
        for &(postings, v) in &found {
            match *postings {
                Postings::List(ref list) => {
                    if r > 0 {
                        add_columns(&mut dots, &self.columns.data, stride, &run[..r]);
                        r = 0;
                    }
                    for p in list {
                        dots[p.slot as usize] += p.value * v;
                    }
                }
                Postings::Column { column, .. } => {
                    run[r] = (column, v);
                    r += 1;
                    if r == RUN {
                        add_columns(&mut dots, &self.columns.data, stride, &run);
                        r = 0;
                    }
                }
            }
        }
        if r > 0 {
            add_columns(&mut dots, &self.columns.data, stride, &run[..r]);
        }
        Some(weighted_kernel_sum(set, kernel, tasks, &mut dots, q, task))
    }
}

fma_builds! {
    /// `dots[s] = (dots[s] + c_1[s] v_1) + c_2[s] v_2 + …` over the columns of `run` (`(column,
    /// v)` pairs, in the query's feature order): plain arithmetic, the same bits in every
    /// build, only wider.
    fn add_columns(dots: &mut [f64], data: &[f64], stride: usize, run: &[(u32, f64)]) {
        avx512: add_columns_plain(dots, data, stride, run),
        avx2: add_columns_plain(dots, data, stride, run),
        portable: add_columns_plain(dots, data, stride, run),
    }
}

#[inline(always)]
fn add_columns_plain(dots: &mut [f64], data: &[f64], stride: usize, run: &[(u32, f64)]) {
    let n = dots.len();
    let mut cols: [&[f64]; RUN] = [&[]; RUN];
    let mut vs = [0.0; RUN];
    for (i, &(c, v)) in run.iter().enumerate() {
        let start = c as usize * stride;
        cols[i] = &data[start..start + n];
        vs[i] = v;
    }
    match run.len() {
        1 => {
            for (d, &a) in dots.iter_mut().zip(cols[0]) {
                *d += a * vs[0];
            }
        }
        2 => {
            for ((d, &a), &b) in dots.iter_mut().zip(cols[0]).zip(cols[1]) {
                *d = (*d + a * vs[0]) + b * vs[1];
            }
        }
        3 => {
            for (((d, &a), &b), &c) in dots.iter_mut().zip(cols[0]).zip(cols[1]).zip(cols[2]) {
                *d = ((*d + a * vs[0]) + b * vs[1]) + c * vs[2];
            }
        }
        _ => {
            for ((((d, &a), &b), &c), &e) in dots.iter_mut().zip(cols[0]).zip(cols[1]).zip(cols[2]).zip(cols[3]) {
                *d = (((*d + a * vs[0]) + b * vs[1]) + c * vs[2]) + e * vs[3];
            }
        }
    }
}

/// `x^n` by repeated squaring, the operations of `f64::powi` (compiler-rt's `__powidf2`), so
/// the bits are the same, inlined (the call was 3% of a sparse MTRBP profile).
#[inline(always)]
fn powi_inline(mut x: f64, n: u32) -> f64 {
    let (mut acc, mut e) = (1.0, n);
    loop {
        if e & 1 != 0 {
            acc *= x;
        }
        e >>= 1;
        if e == 0 {
            return acc;
        }
        x *= x;
    }
}

/// `sum_s beta_s T[i_s, task] K'(x_s, q)` over the slots in `task`'s component, from the dot
/// products (turned into kernel values in place): [`BaseKernel::from_dot`] per slot with the
/// kernel's formula chosen once, summed in slot order as the row-store loop sums.
fn weighted_kernel_sum(
    set: &ActiveSet,
    kernel: &BaseKernel,
    tasks: &TaskKernel,
    dots: &mut [f64],
    q: &Query,
    task: usize,
) -> f64 {
    let sqs = &set.rows().sq_norms()[..dots.len()];
    match kernel.kind {
        KernelKind::Linear => {}
        KernelKind::Poly { degree, gamma, coef0 } => {
            for d in dots.iter_mut() {
                *d = powi_inline(gamma * *d + coef0, degree);
            }
        }
        KernelKind::Rbf { .. } => {
            for (d, &sq) in dots.iter_mut().zip(sqs) {
                *d = kernel.raw_from_dot(*d, sq, q.sq_norm);
            }
        }
    }
    if kernel.normalizes() {
        for (d, &sq) in dots.iter_mut().zip(sqs) {
            // `raw_self(sq)`, inlined (only the linear and the polynomial kernels normalise).
            let own = match kernel.kind {
                KernelKind::Poly { degree, gamma, coef0 } => powi_inline(gamma * sq + coef0, degree),
                _ => sq,
            };
            let denom = own * q.self_raw;
            *d = if denom > 0.0 { *d / denom.sqrt() } else { 0.0 };
        }
    }
    let (betas, owners) = (set.betas(), set.task_ids());
    let mut total = 0.0;
    match *tasks {
        TaskKernel::Complete { diag, off, .. } => {
            let task = task as u32;
            for ((&kv, &beta), &owner) in dots.iter().zip(betas).zip(owners) {
                let t = if owner == task { diag } else { off };
                total += beta * t * kv;
            }
        }
        _ => {
            let component = tasks.component(task);
            for ((&kv, &beta), &owner) in dots.iter().zip(betas).zip(owners) {
                let owner = owner as usize;
                if tasks.component(owner) == component {
                    total += beta * tasks.get(owner, task) * kv;
                }
            }
        }
    }
    total
}
