//! MTLinear's weight storage (docs/mt_linear.md, M.4 and M.5b) and the undo journal that makes a
//! call atomic without copying the model.
//!
//! Every coordinate `(block, key)` of the feature map has one cell of `stride` f32 values
//! (`[w, G, N]`, the fields the rule uses). Three layouts, chosen from the parameters:
//!
//! - [`Store::Hashed`] (`hash_bits = b`): one table of `2^b` cells shared by every block, each
//!   `(block, key)` hashed into it with a seed per block ([`slot_of`]), as VW's weight table;
//! - [`Store::Dense`] (no hashing, `n_features + 1 <= DENSE_MAX_WIDTH`): one array of the full
//!   width per block, allocated on the block's first update;
//! - [`Store::Sparse`] (no hashing, wider): an open-addressing map from `(block, feature)` to a
//!   slab of cells, so memory follows the distinct pairs touched, whatever the feature indices.

use serde::{Deserialize, Serialize};

use crate::alloc::{Need, ZeroedBuf};
use crate::error::{Error, Result};

/// The block id of the complete graph's shared block (own blocks have their task's index).
pub const SHARED: u32 = u32::MAX;

/// A coordinate with no cell yet (its state reads as zeros).
pub const ABSENT: usize = usize::MAX;

/// Unhashed blocks up to this width (features + intercept) are always dense arrays: 4,096 cells
/// are at most 48 KiB per block, and a dense block of a narrow problem (School's 28 features)
/// costs less than the sparse map would for the same cells.
pub const DENSE_MAX_WIDTH: usize = 4096;

/// Wider unhashed blocks are dense while every block of the model, dense, would take at most
/// this many bytes (a few tasks on a vocabulary: one direct read per cell, the fastest layout),
/// and sparse beyond (many tasks, or a huge feature index: memory follows the pairs touched).
pub const DENSE_MAX_BYTES: usize = 256 << 20;

/// Whether `n_blocks` unhashed blocks of `width` cells of `stride` floats are stored densely.
pub fn dense_fits(width: usize, stride: usize, n_blocks: usize) -> bool {
    width <= DENSE_MAX_WIDTH || (width as u128) * (stride as u128) * 4 * (n_blocks as u128) <= DENSE_MAX_BYTES as u128
}

/// The hash key of the intercept under hashing (never a feature index, which is below 2^32).
pub const INTERCEPT_KEY: u64 = u64::MAX;

/// MurmurHash3's 64-bit finaliser.
#[inline(always)]
fn mix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    k ^= k >> 33;
    k = k.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    k ^ (k >> 33)
}

/// The cell of key `key` of a block hashed with `seed` in a table of `n_slots` cells: the key
/// mixed with the seed (so that collisions in one block are independent of those in another, as
/// VW's hash of a crossed feature differs from the feature's own), reduced by multiply-shift.
#[inline(always)]
pub fn slot_of(key: u64, seed: u32, n_slots: usize) -> usize {
    let k = mix64(key ^ u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Lemire's multiply-shift range reduction: uniform over [0, n_slots) for any n_slots.
    ((u128::from(k) * n_slots as u128) >> 64) as usize
}

/// The position of `(block, key)` in the sparse map's index of `mask + 1` entries.
#[inline(always)]
fn home(block: u32, key: u32, mask: usize) -> usize {
    mix64((u64::from(block) << 32) | u64::from(key)) as usize & mask
}

/// Enters the records `keys` in an empty index (a power of two long, at least twice as long).
fn index_records(index: &mut [u32], keys: &[(u32, u32)]) {
    let mask = index.len().wrapping_sub(1);
    for (r, &(block, key)) in keys.iter().enumerate() {
        let mut i = home(block, key, mask);
        while index[i] != 0 {
            i = (i + 1) & mask;
        }
        index[i] = r as u32 + 1;
    }
}

/// The exact sparse layout: records `(block, key)` with their cells in insertion order (the
/// serialised state), and an open-addressing index (linear probing, load at most 1/2) rebuilt on
/// restore.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "SparseRecords", into = "SparseRecords")]
pub struct SparseCells {
    pub(super) stride: usize,
    pub(super) keys: Vec<(u32, u32)>,
    pub(super) cells: Vec<f32>,
    /// 0 = empty, else record + 1; a power of two long (or empty).
    pub(super) index: Vec<u32>,
    /// Under a user budget, each own block's records chained (derived from the records: not
    /// serialised), so that a user's cells are found in O(their number).
    pub(super) chains: Option<super::budget::Chains>,
}

/// What [`SparseCells`] serialises: the records, not the index.
#[derive(Serialize, Deserialize)]
struct SparseRecords {
    stride: usize,
    keys: Vec<(u32, u32)>,
    cells: Vec<f32>,
}

impl From<SparseCells> for SparseRecords {
    fn from(s: SparseCells) -> Self {
        Self {
            stride: s.stride,
            keys: s.keys,
            cells: s.cells,
        }
    }
}

impl TryFrom<SparseRecords> for SparseCells {
    type Error = String;

    fn try_from(r: SparseRecords) -> std::result::Result<Self, String> {
        if !(1..=3).contains(&r.stride) || r.cells.len() != r.keys.len().saturating_mul(r.stride) {
            return Err("sparse MTLinear cells do not match their keys".into());
        }
        if r.keys.len() >= u32::MAX as usize {
            return Err("too many sparse MTLinear cells".into());
        }
        let mut cells = SparseCells {
            stride: r.stride,
            keys: r.keys,
            cells: r.cells,
            index: Vec::new(),
            chains: None,
        };
        cells.rebuild_index(cells.keys.len()).map_err(|e| e.to_string())?;
        for (i, &(block, key)) in cells.keys.iter().enumerate() {
            if cells.find(block, key) != Some(i) {
                return Err(format!("sparse MTLinear cell ({block}, {key}) appears twice"));
            }
        }
        Ok(cells)
    }
}

impl PartialEq for SparseCells {
    /// The records in order (the index is derived from them).
    fn eq(&self, other: &Self) -> bool {
        self.stride == other.stride && self.keys == other.keys && self.cells == other.cells
    }
}

impl SparseCells {
    pub fn new(stride: usize) -> Self {
        Self {
            stride,
            keys: Vec::new(),
            cells: Vec::new(),
            index: Vec::new(),
            chains: None,
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn cells(&self) -> &[f32] {
        &self.cells
    }

    pub fn cells_mut(&mut self) -> &mut [f32] {
        &mut self.cells
    }

    pub fn keys(&self) -> &[(u32, u32)] {
        &self.keys
    }

    pub fn memory_bytes(&self) -> usize {
        self.keys.capacity() * 8
            + self.cells.capacity() * 4
            + self.index.capacity() * 4
            + self.chains.as_ref().map_or(0, super::budget::Chains::memory_bytes)
    }

    /// The record of `(block, key)`, if it has one.
    #[inline(always)]
    pub fn find(&self, block: u32, key: u32) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let mut i = home(block, key, mask);
        loop {
            let e = self.index[i];
            if e == 0 {
                return None;
            }
            if self.keys[e as usize - 1] == (block, key) {
                return Some(e as usize - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// The offset of the cell of `(block, key)` in [`Self::cells`], or [`ABSENT`].
    #[inline(always)]
    pub fn offset(&self, block: u32, key: u32) -> usize {
        self.find(block, key).map_or(ABSENT, |r| r * self.stride)
    }

    /// An index of at least twice `n` entries over the records.
    pub(super) fn rebuild_index(&mut self, n: usize) -> Result<()> {
        let size = (2 * n.max(8)).next_power_of_two();
        let mut index = Need::new("n_features", size, "MTLinear's sparse weight index").filled(&[size], 0u32)?;
        index_records(&mut index, &self.keys);
        self.index = index;
        Ok(())
    }

    /// Adds a zero cell for `(block, key)` (which has none) and returns its offset. On `Err`
    /// (memory) nothing has changed.
    pub fn insert(&mut self, block: u32, key: u32) -> Result<usize> {
        let n = self.keys.len();
        if n + 1 >= u32::MAX as usize {
            return Err(Error::Numerical("MTLinear's sparse weights hold 2^32 cells".into()));
        }
        let need = Need::new("n_features", n + 1, "MTLinear's sparse weights");
        need.reserve(&mut self.keys, 1)?;
        need.reserve(&mut self.cells, self.stride)?;
        if let Some(chains) = &mut self.chains {
            chains.reserve(n + 1)?;
        }
        if 2 * (n + 1) > self.index.len() {
            self.rebuild_index(n + 1)?;
        }
        self.enter_index(n, block, key);
        self.keys.push((block, key));
        self.cells.resize(self.cells.len() + self.stride, 0.0);
        if self.chains.is_some() {
            self.link(n);
        }
        Ok(n * self.stride)
    }

    /// Enters record `r`, `(block, key)`, in the index (which has room).
    pub(super) fn enter_index(&mut self, r: usize, block: u32, key: u32) {
        let mask = self.index.len() - 1;
        let mut i = home(block, key, mask);
        while self.index[i] != 0 {
            i = (i + 1) & mask;
        }
        self.index[i] = r as u32 + 1;
    }

    /// The index position that holds record `r`.
    pub(super) fn index_position(&self, r: usize) -> usize {
        let (block, key) = self.keys[r];
        let mask = self.index.len() - 1;
        let mut i = home(block, key, mask);
        while self.index[i] as usize != r + 1 {
            i = (i + 1) & mask;
        }
        i
    }

    /// Empties index position `hole` by backward-shift deletion (no tombstone is left).
    pub(super) fn delete_index_entry(&mut self, mut hole: usize) {
        let mask = self.index.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = self.index[j];
            if e == 0 {
                break;
            }
            let (b, k) = self.keys[e as usize - 1];
            let want = home(b, k, mask);
            // The entry at j may move to the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < want && want <= j
            } else {
                hole < want || want <= j
            };
            if !stays {
                self.index[hole] = e;
                hole = j;
            }
        }
        self.index[hole] = 0;
    }

    /// Removes the records of the blocks `blocks`, the others keeping their order, zeroes the
    /// freed room and rebuilds the index in place (no allocation: it cannot fail). Returns the
    /// number removed. O(records).
    pub fn remove_blocks(&mut self, blocks: &std::collections::HashSet<u32>) -> usize {
        let stride = self.stride;
        let mut next = 0;
        for r in 0..self.keys.len() {
            if blocks.contains(&self.keys[r].0) {
                continue;
            }
            if r != next {
                self.keys[next] = self.keys[r];
                self.cells.copy_within(r * stride..(r + 1) * stride, next * stride);
            }
            next += 1;
        }
        let removed = self.keys.len() - next;
        if removed > 0 {
            self.cells[next * stride..].fill(0.0);
            self.cells.truncate(next * stride);
            self.keys[next..].fill((0, 0));
            self.keys.truncate(next);
            self.index.fill(0);
            index_records(&mut self.index, &self.keys);
        }
        removed
    }

    /// Removes the last record (the undo of its [`Self::insert`]): backward-shift deletion from
    /// the index, so no tombstone is left and the other records keep their numbers.
    pub fn pop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let last = self.keys.len() - 1;
        if self.chains.is_some() {
            self.unlink(last);
        }
        self.delete_index_entry(self.index_position(last));
        self.keys.pop();
        self.cells.truncate(self.cells.len() - self.stride);
        if let Some(chains) = &mut self.chains {
            chains.links.pop();
        }
    }

    /// Gives every record of key `from` the key `to` (which no record has), its cells kept: the
    /// intercept of a block whose feature space grows moves to the new end.
    pub fn rekey(&mut self, from: u32, to: u32) {
        for r in 0..self.keys.len() {
            if self.keys[r].1 == from {
                self.delete_index_entry(self.index_position(r));
                self.keys[r].1 = to;
                self.enter_index(r, self.keys[r].0, to);
            }
        }
    }
}

/// The cells of every block (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Store {
    /// One table of `2^bits` cells, allocated on the first update.
    Hashed {
        bits: u32,
        table: Option<ZeroedBuf<f32>>,
    },
    /// Per block (own blocks by task index, then the shared block) a dense array of `width`
    /// cells, allocated on the block's first update.
    Dense {
        width: usize,
        own: Vec<Option<ZeroedBuf<f32>>>,
        shared: Option<ZeroedBuf<f32>>,
    },
    Sparse(SparseCells),
}

impl Store {
    /// The layout for these parameters: `n_own` own blocks (tasks) of `n_blocks`, `width` =
    /// features + intercept.
    pub fn new(hash_bits: Option<u32>, width: usize, stride: usize, n_own: usize, n_blocks: usize) -> Result<Self> {
        Ok(match hash_bits {
            Some(bits) => Self::Hashed { bits, table: None },
            None if dense_fits(width, stride, n_blocks) => Self::Dense {
                width,
                own: Need::new("n_tasks", n_own, "MTLinear's per-task block slots").filled(&[n_own], None)?,
                shared: None,
            },
            None => Self::Sparse(SparseCells::new(stride)),
        })
    }

    pub fn memory_bytes(&self, stride: usize) -> usize {
        let f = std::mem::size_of::<f32>();
        match self {
            Self::Hashed { table, .. } => table.as_ref().map_or(0, |t| t.len() * f),
            Self::Dense { width, own, shared } => {
                let blocks = own.iter().chain(std::iter::once(shared)).flatten().count();
                blocks * width * stride * f + own.capacity() * std::mem::size_of::<Option<ZeroedBuf<f32>>>()
            }
            Self::Sparse(s) => s.memory_bytes(),
        }
    }

    /// The dense layout's cells as a sparse map (the cells holding a nonzero value: a zero cell
    /// and a missing one read and update alike), in block order then feature order.
    pub fn to_sparse(&self, stride: usize) -> Result<SparseCells> {
        let mut out = SparseCells::new(stride);
        self.for_each_dense_cell(stride, |r, key, cell| {
            let at = out.insert(r, key)?;
            out.cells_mut()[at..at + stride].copy_from_slice(cell);
            Ok(())
        })?;
        Ok(out)
    }

    /// The dense layout of `n_own` own blocks of `width` cells holding the sparse map's records
    /// (the inverse of [`Store::to_sparse`]): a block is allocated when a record names it.
    pub fn dense_from(cells: &SparseCells, width: usize, n_own: usize) -> Result<Self> {
        let stride = cells.stride;
        let need = Need::new("n_features", width, "an MTLinear weight block");
        let mut own: Vec<Option<ZeroedBuf<f32>>> =
            Need::new("n_tasks", n_own, "MTLinear's per-task block slots").filled(&[n_own], None)?;
        let mut shared = None;
        for (&(r, key), cell) in cells.keys().iter().zip(cells.cells().chunks_exact(stride)) {
            let slot = if r == SHARED { &mut shared } else { &mut own[r as usize] };
            if slot.is_none() {
                *slot = Some(need.zeroed(&[width, stride])?);
            }
            let block = slot.as_mut().expect("allocated above");
            let at = key as usize * stride;
            block[at..at + stride].copy_from_slice(cell);
        }
        Ok(Self::Dense { width, own, shared })
    }

    /// Calls `f(block, key, cell)` for every written (non-zero) cell of the dense blocks, in
    /// block order (own blocks, then the shared block) then feature order; nothing for the
    /// other layouts.
    pub fn for_each_dense_cell(&self, stride: usize, mut f: impl FnMut(u32, u32, &[f32]) -> Result<()>) -> Result<()> {
        if let Self::Dense { own, shared, .. } = self {
            let blocks = own
                .iter()
                .enumerate()
                .map(|(r, b)| (r as u32, b))
                .chain(std::iter::once((SHARED, shared)));
            for (r, block) in blocks {
                let Some(data) = block else { continue };
                for (key, cell) in data.chunks_exact(stride).enumerate() {
                    if cell.iter().any(|&v| v != 0.0) {
                        f(r, key as u32, cell)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The dense array of block `r` (`Dense` only).
    pub fn dense_block(&self, r: u32) -> Option<&[f32]> {
        match self {
            Self::Dense { own, shared, .. } => {
                let b = if r == SHARED {
                    shared.as_ref()
                } else {
                    own.get(r as usize)?.as_ref()
                };
                b.map(|b| &**b)
            }
            _ => None,
        }
    }

    pub fn dense_block_mut(&mut self, r: u32) -> Option<&mut ZeroedBuf<f32>> {
        match self {
            Self::Dense { own, shared, .. } => {
                if r == SHARED {
                    shared.as_mut()
                } else {
                    own.get_mut(r as usize)?.as_mut()
                }
            }
            _ => None,
        }
    }

    /// The slot of dense block `r` (`Dense` only).
    pub fn dense_slot(&mut self, r: u32) -> &mut Option<ZeroedBuf<f32>> {
        match self {
            Self::Dense { own, shared, .. } => {
                if r == SHARED {
                    shared
                } else {
                    &mut own[r as usize]
                }
            }
            _ => unreachable!("dense_slot on a store that is not dense"),
        }
    }
}

/// A cell's values before a write, padded to three floats.
pub type Cell = [f32; 3];

/// Where a logged cell lives, or (under a user budget) a record added or removed.
#[derive(Debug, Clone, Copy)]
pub enum CellAt {
    /// In the hashed table or the sparse slab, at this offset.
    Flat(usize),
    /// In dense block `r` at this offset.
    Block(u32, usize),
    /// A sparse record appended (undone by removing the last record).
    Inserted,
    /// Sparse record `r`, `(block, key)`, removed with the cell logged next to it (undone by
    /// [`SparseCells::unremove`]).
    Removed { r: usize, block: u32, key: u32 },
}

/// What undoes the calls' changes since [`Journal::begin`]: the cells' values before their
/// writes (in write order, restored in reverse), the component counters, the counts and lengths
/// at the start, and what was allocated. Its size follows the writes of the call, not the model.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    pub active: bool,
    pub cells: Vec<(CellAt, Cell)>,
    /// Dense blocks allocated since the start (dropped on rollback).
    pub new_blocks: Vec<u32>,
    /// The hashed table was allocated since the start.
    pub new_table: bool,
    /// Sparse records at the start (later ones are dropped on rollback, without logging).
    pub sparse_len: usize,
    /// `(component, counters before)` for every component updated.
    pub stats: Vec<(usize, [f64; 3])>,
    pub n_updates: u64,
    pub n_tasks: usize,
    pub n_stats: usize,
    pub n_own: usize,
    /// The task kernel at the start, when tasks were added.
    pub tasks: Option<crate::kernel::TaskKernel>,
    /// The dense store, when tasks added made the layout sparse (restored on rollback), and the
    /// length of `cells` then (the entries before it are the dense store's).
    pub old_store: Option<Store>,
    pub cells_at_convert: usize,
    /// The model as it was at the start, once the log would have outgrown a copy of the model
    /// (a call that writes more cells than the model holds); no more logging then.
    pub snapshot: Option<Box<super::MTLinear>>,
    /// The log size past which the snapshot is taken (the model's bytes; 0 until counted).
    pub limit: usize,
    /// The user budget's changes, in order (undone in reverse), and its eviction count at the
    /// start.
    pub budget: Vec<super::budget::BudgetOp>,
    pub n_evicted: u64,
}

impl Journal {
    /// Room for `n` more logged cells, fallibly (an update reserves before it writes).
    pub fn reserve_cells(&mut self, n: usize) -> Result<()> {
        if !self.logging() {
            return Ok(());
        }
        Need::new("rows", self.cells.len() + n, "MTLinear's undo journal").reserve(&mut self.cells, n)
    }

    /// Forgets what was logged (a commit, or the end of a rollback), keeping the buffers.
    pub fn clear(&mut self) {
        self.active = false;
        self.cells.clear();
        self.new_blocks.clear();
        self.new_table = false;
        self.stats.clear();
        self.tasks = None;
        self.old_store = None;
        self.cells_at_convert = 0;
        self.snapshot = None;
        self.limit = 0;
        self.budget.clear();
    }

    /// Whether writes are still logged (journaled and no snapshot taken).
    pub fn logging(&self) -> bool {
        self.active && self.snapshot.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_cells_insert_find_and_pop_in_any_order_of_collisions() {
        let mut s = SparseCells::new(3);
        let keys: Vec<(u32, u32)> = (0..500u32).map(|i| (i % 7, i.wrapping_mul(2_654_435_761))).collect();
        for (n, &(b, k)) in keys.iter().enumerate() {
            assert_eq!(s.find(b, k), None);
            let at = s.insert(b, k).unwrap();
            s.cells_mut()[at] = n as f32;
        }
        for (n, &(b, k)) in keys.iter().enumerate() {
            assert_eq!(s.find(b, k), Some(n));
        }
        // Undo the last 300 inserts: the first 200 are still found, the others are gone.
        for _ in 0..300 {
            s.pop();
        }
        assert_eq!(s.len(), 200);
        for (n, &(b, k)) in keys.iter().enumerate() {
            assert_eq!(s.find(b, k), (n < 200).then_some(n), "{n}");
        }
        // The serialised records restore the same map.
        let bytes = crate::state::encode(&s).unwrap();
        let back: SparseCells = bincode::deserialize(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.find(keys[10].0, keys[10].1), Some(10));
    }

    #[test]
    fn a_duplicate_record_is_refused_on_restore() {
        let r = SparseRecords {
            stride: 1,
            keys: vec![(0, 5), (0, 5)],
            cells: vec![1.0, 2.0],
        };
        assert!(SparseCells::try_from(r).is_err());
    }

    #[test]
    fn hashed_slots_stay_in_range_and_differ_across_seeds() {
        let n = 1000;
        let mut hits = vec![0usize; n];
        for seed in 0..3u32 {
            for key in 0..50_000u64 {
                hits[slot_of(key, seed, n)] += 1;
            }
        }
        assert!(hits.iter().all(|&h| (60..300).contains(&h)));
        let same = (0..1000u64).filter(|&key| slot_of(key, 0, n) == slot_of(key, 1, n));
        assert!(same.count() < 20);
        assert!(slot_of(INTERCEPT_KEY, SHARED, n) < n);
    }
}
