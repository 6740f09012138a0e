//! MTLinear as a replica of a coupled model ([`crate::learner::shared`]): on the complete graph
//! the state every task reads is the shared block's cells and the component's normalizer
//! counters (docs/DECISIONS.md, "Coupled shards").
//!
//! A replica records, on the first write to each shared cell since its last sync, the cell's
//! position and its values then ([`SharedTracker`]); a report reads those cells again. So a
//! report costs the cells the replica's shared block wrote, whatever the size of the model.
//! Positions are the shared block's keys (the feature, `n_features` for the intercept) with
//! exact cells, and its slots in the table under `hash_bits`: the table is shared with the task
//! blocks, so a slot the shared block writes may also hold a task's colliding coordinates, and
//! the sync carries those changes to the other replicas like the shared block's own (the
//! collision noise of a hashed model, spread over the replicas).
//!
//! [`MTLinear::merge_replicas`] joins replicas in step into one model: the shared block of any
//! of them and every replica's task blocks under their merged task numbers; with exact cells
//! only (a hashed task block cannot move: its slots depend on its task number).

use std::collections::HashSet;

use super::*;
use crate::learner::shared::{
    check_maps, not_in_step, not_tracking, Mix, Replica, SharedChanges, SharedLayout, SharedUpdate, Values,
};

/// Positions tracked in a bitmap up to this many (32 MiB of bits); a set beyond.
const MAX_BITMAP_POSITIONS: u64 = 1 << 28;

/// The positions of the shared block written since the last sync.
#[derive(Debug, Clone)]
enum Dirty {
    Bits(Vec<u64>),
    Set(HashSet<u64>),
}

impl Dirty {
    fn new(space: u64) -> Result<Self> {
        if space <= MAX_BITMAP_POSITIONS {
            let words = space.div_ceil(64) as usize;
            Ok(Dirty::Bits(
                Need::new("hash_bits", words, "MTLinear's shared-cell record").filled(&[words], 0u64)?,
            ))
        } else {
            Ok(Dirty::Set(HashSet::new()))
        }
    }

    /// Marks `pos`; true if it was not marked.
    #[inline]
    fn mark(&mut self, pos: u64) -> bool {
        match self {
            Dirty::Bits(bits) => {
                let (w, b) = ((pos / 64) as usize, 1u64 << (pos % 64));
                let fresh = bits[w] & b == 0;
                bits[w] |= b;
                fresh
            }
            Dirty::Set(set) => set.insert(pos),
        }
    }

    fn clear(&mut self, positions: impl Iterator<Item = u64>) {
        match self {
            Dirty::Bits(bits) => positions.for_each(|p| bits[(p / 64) as usize] = 0),
            Dirty::Set(set) => set.clear(),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Dirty::Bits(bits) => bits.capacity() * 8,
            Dirty::Set(set) => set.capacity() * 16,
        }
    }
}

/// A replica's record since its last sync: the shared cells written (position, values before
/// the first write) and the component counters then.
#[derive(Debug, Clone)]
pub(super) struct SharedTracker {
    dirty: Dirty,
    cells: Vec<(u64, store::Cell)>,
    stats: ComponentStats,
}

impl SharedTracker {
    pub(super) fn memory_bytes(&self) -> usize {
        self.dirty.memory_bytes() + self.cells.capacity() * std::mem::size_of::<(u64, store::Cell)>()
    }
}

impl MTLinear {
    /// The number of shared positions: the table's slots, or the block's keys.
    fn shared_space(&self) -> u64 {
        match self.store {
            Store::Hashed { bits, .. } => 1u64 << bits,
            _ => (self.n_features + usize::from(self.params.fit_intercept)) as u64,
        }
    }

    /// The values of the shared cell at `pos` (zeros where no cell exists).
    fn shared_cell(&self, pos: u64) -> store::Cell {
        let stride = self.params.rule.stride();
        let zero = [0.0f32; 3];
        match &self.store {
            Store::Hashed { table, .. } => table
                .as_ref()
                .map_or(zero, |t| update::read_cell(t, pos as usize * stride, stride)),
            Store::Dense { .. } => self
                .store
                .dense_block(SHARED)
                .map_or(zero, |b| update::read_cell(b, pos as usize * stride, stride)),
            Store::Sparse(cells) => cells
                .find(SHARED, pos as u32)
                .map_or(zero, |r| update::read_cell(cells.cells(), r * stride, stride)),
        }
    }

    /// Records the shared cells the update in progress is about to write (called before the
    /// writes, with the task's terms). Cost: one bit test per shared coordinate.
    pub(super) fn note_shared_writes(&mut self, terms: &[(u32, f64)]) {
        let Some(term) = terms.iter().position(|&(r, _)| r == SHARED) else {
            return;
        };
        let Some(mut tracker) = self.tracker.take() else {
            return;
        };
        let stride = self.params.rule.stride();
        let n = self.entries.len();
        let hashed = matches!(self.store, Store::Hashed { .. });
        for i in 0..n {
            let pos = if hashed {
                (self.pad.slot[term * n + i] / stride) as u64
            } else {
                self.entries[i].0 as u64
            };
            if tracker.dirty.mark(pos) {
                tracker.cells.push((pos, self.shared_cell(pos)));
            }
        }
        self.tracker = Some(tracker);
    }

    /// The layout's columns: the weight, then the rule's statistic (summed), then the
    /// normalizer's scale (the largest).
    fn shared_columns(&self) -> Vec<Mix> {
        match self.params.rule {
            UpdateRule::Normalized => vec![Mix::AdaptiveWeight, Mix::Sum, Mix::Max],
            UpdateRule::Adagrad => vec![Mix::AdaptiveWeight, Mix::Sum],
            UpdateRule::Arow => vec![Mix::Weight, Mix::Sum],
            UpdateRule::Sgd => vec![Mix::Weight],
        }
    }

    /// Whether the model has a shared block (the complete graph, two tasks or more).
    fn check_shared(&self) -> Result<()> {
        match self.tasks {
            TaskKernel::Complete { k, .. } if k >= 2 => Ok(()),
            _ => Err(invalid(
                "graph",
                "MTLinear shares state between tasks only on the complete graph (its shared block); on another \
                 graph its state is per connected component: shard by component",
            )),
        }
    }
}

impl Replica for MTLinear {
    fn shared_layout(&self) -> Result<SharedLayout> {
        self.check_shared()?;
        let p = &self.params;
        Ok(SharedLayout {
            kind: "mt_linear".into(),
            settings: format!(
                "rule={:?} hash_bits={:?} n_features={} fit_intercept={} graph={:?}",
                p.rule,
                p.hash_bits,
                self.n_features,
                p.fit_intercept,
                self.tasks_signature()
            ),
            space: self.shared_space(),
            columns: self.shared_columns(),
            single: true,
            scalars: vec![Mix::Sum; 3],
        })
    }

    fn track_shared(&mut self) -> Result<()> {
        self.check_shared()?;
        let dirty = Dirty::new(self.shared_space())?;
        self.tracker = Some(Box::new(SharedTracker {
            dirty,
            cells: Vec::new(),
            stats: self.stats[0],
        }));
        Ok(())
    }

    fn shared_changes(&self) -> Result<SharedChanges> {
        let layout = self.shared_layout()?;
        let tracker = self.tracker.as_ref().ok_or_else(not_tracking)?;
        let nc = layout.columns.len();
        let mut cells = tracker.cells.clone();
        cells.sort_unstable_by_key(|c| c.0);
        let mut positions = Vec::with_capacity(cells.len());
        let (mut base, mut now) = (
            Vec::with_capacity(cells.len() * nc),
            Vec::with_capacity(cells.len() * nc),
        );
        for &(pos, before) in &cells {
            let after = self.shared_cell(pos);
            if cell_differs(&before, &after, nc) {
                positions.push(pos);
                base.extend_from_slice(&before[..nc]);
                now.extend_from_slice(&after[..nc]);
            }
        }
        let counters = |s: &ComponentStats| vec![s.n_examples, s.n_updates, s.sum_norm_x];
        Ok(SharedChanges {
            layout,
            positions,
            base: Values::Single(base),
            now: Values::Single(now),
            scalar_base: counters(&tracker.stats),
            scalar_now: counters(&self.stats[0]),
        })
    }

    fn apply_shared(&mut self, update: &SharedUpdate) -> Result<()> {
        let layout = self.shared_layout()?;
        if update.layout != layout {
            return Err(invalid(
                "update",
                format!(
                    "a shared-state update of another model ({}: {}) for this MTLinear ({})",
                    update.layout.kind, update.layout.settings, layout.settings
                ),
            ));
        }
        if self.journal.active {
            return Err(Error::State(
                "MTLinear: shared state applied inside a journaled call".into(),
            ));
        }
        let tracker = self.tracker.as_ref().ok_or_else(not_tracking)?;
        let nc = layout.columns.len();
        // Phase one: every new cell, computed and checked before anything is written.
        let mut before: Vec<(u64, store::Cell)> = tracker.cells.clone();
        before.sort_unstable_by_key(|c| c.0);
        let mut cells = Vec::with_capacity(update.positions.len());
        let mut at = 0;
        for (i, &pos) in update.positions.iter().enumerate() {
            while at < before.len() && before[at].0 < pos {
                at += 1;
            }
            let now = self.shared_cell(pos);
            let base = (at < before.len() && before[at].0 == pos).then(|| before[at].1);
            let changed_here = base.is_some_and(|b| cell_differs(&b, &now, nc));
            let mut cell = now;
            for c in 0..nc {
                let mine_base = f64::from(base.unwrap_or(now)[c]);
                let v = update.value(false, i, c, mine_base, f64::from(now[c]), changed_here);
                // Every value fits f32; the statistics and scales stay nonnegative.
                if v.is_nan() || v.abs() >= f64::from(f32::MAX) || (c > 0 && v < 0.0) {
                    return Err(Error::Numerical(format!(
                        "MTLinear: a shared cell would take the value {v}; the shared state is left as it was"
                    )));
                }
                cell[c] = v as f32;
            }
            cells.push((pos, cell));
        }
        let counters = [
            self.stats[0].n_examples,
            self.stats[0].n_updates,
            self.stats[0].sum_norm_x,
        ];
        let base_counters = [
            tracker.stats.n_examples,
            tracker.stats.n_updates,
            tracker.stats.sum_norm_x,
        ];
        let mut stats = [0.0; 3];
        for c in 0..3 {
            let changed_here = counters[c].to_bits() != base_counters[c].to_bits();
            stats[c] = update.value(true, c, 0, base_counters[c], counters[c], changed_here);
        }
        if !stats.iter().all(|v| v.is_finite() && *v >= 0.0) {
            return Err(Error::Numerical(format!(
                "MTLinear: shared counters would be {stats:?}"
            )));
        }
        // Phase two: room for the cells (on failure nothing has changed), then the writes.
        self.write_shared_cells(&cells)?;
        self.stats[0] = ComponentStats {
            n_examples: stats[0],
            n_updates: stats[1],
            sum_norm_x: stats[2],
        };
        let tracker = self.tracker.as_mut().expect("checked above");
        let marked: Vec<u64> = tracker.cells.iter().map(|c| c.0).collect();
        tracker.dirty.clear(marked.into_iter());
        tracker.cells.clear();
        tracker.stats = self.stats[0];
        Ok(())
    }

    fn merge_replicas(parts: &[&Self], maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<Self> {
        Self::merge_complete(parts, maps, n_tasks)
    }
}

/// Whether the first `nc` values of two cells differ in any bit.
fn cell_differs(a: &store::Cell, b: &store::Cell, nc: usize) -> bool {
    a[..nc].iter().zip(&b[..nc]).any(|(x, y)| x.to_bits() != y.to_bits())
}

impl MTLinear {
    /// A short description of the task kernel for the layout (its kind and the factor's values,
    /// not its size, which replicas do not share).
    fn tasks_signature(&self) -> String {
        match self.tasks {
            TaskKernel::Complete { diag, off, .. } => format!("complete({diag}, {off})"),
            TaskKernel::Disconnected { scale, .. } => format!("disconnected({scale})"),
            TaskKernel::Dense { .. } => "dense".into(),
        }
    }

    /// Writes shared cells `(position, values)`, allocating what they need first (the table, the
    /// dense shared block, the sparse records: on `Err` nothing has changed).
    fn write_shared_cells(&mut self, cells: &[(u64, store::Cell)]) -> Result<()> {
        let stride = self.params.rule.stride();
        let width = self.n_features + usize::from(self.params.fit_intercept);
        match &mut self.store {
            Store::Hashed { bits, table } => {
                if table.is_none() && !cells.is_empty() {
                    let n = 1usize << *bits;
                    *table =
                        Some(Need::new("hash_bits", *bits as usize, "MTLinear's weight table").zeroed(&[n, stride])?);
                }
                if let Some(t) = table.as_mut() {
                    for &(pos, cell) in cells {
                        let at = pos as usize * stride;
                        t[at..at + stride].copy_from_slice(&cell[..stride]);
                    }
                }
            }
            store @ Store::Dense { .. } => {
                if store.dense_block(SHARED).is_none() && !cells.is_empty() {
                    let block = Need::new("n_features", width, "an MTLinear weight block").zeroed(&[width, stride])?;
                    *store.dense_slot(SHARED) = Some(block);
                }
                if let Some(b) = store.dense_block_mut(SHARED) {
                    for &(pos, cell) in cells {
                        let at = pos as usize * stride;
                        b[at..at + stride].copy_from_slice(&cell[..stride]);
                    }
                }
            }
            Store::Sparse(sparse) => {
                let before = sparse.len();
                let mut offsets = Vec::with_capacity(cells.len());
                for &(pos, _) in cells {
                    let at = match sparse.find(SHARED, pos as u32) {
                        Some(r) => r * stride,
                        None => match sparse.insert(SHARED, pos as u32) {
                            Ok(at) => at,
                            Err(e) => {
                                while sparse.len() > before {
                                    sparse.pop();
                                }
                                return Err(e);
                            }
                        },
                    };
                    offsets.push(at);
                }
                let data = sparse.cells_mut();
                for (&(_, cell), at) in cells.iter().zip(offsets) {
                    data[at..at + stride].copy_from_slice(&cell[..stride]);
                }
            }
        }
        Ok(())
    }
}

impl MTLinear {
    /// Calls `f(block, key, values)` for every cell holding a nonzero value (exact cells only).
    fn for_each_cell(&self, mut f: impl FnMut(u32, u32, &[f32]) -> Result<()>) -> Result<()> {
        let stride = self.params.rule.stride();
        match &self.store {
            Store::Hashed { .. } => Err(hashed_merge()),
            Store::Dense { .. } => self.store.for_each_dense_cell(stride, f),
            Store::Sparse(cells) => {
                for (&(r, key), cell) in cells.keys().iter().zip(cells.cells().chunks_exact(stride)) {
                    f(r, key, cell)?;
                }
                Ok(())
            }
        }
    }

    /// Writes the values of cell `(block, key)` (exact cells), allocating it.
    fn put_cell(&mut self, block: u32, key: u32, cell: &[f32]) -> Result<()> {
        let stride = self.params.rule.stride();
        let width = self.n_features + usize::from(self.params.fit_intercept);
        let at = key as usize * stride;
        match &mut self.store {
            Store::Hashed { .. } => return Err(hashed_merge()),
            store @ Store::Dense { .. } => {
                if store.dense_block(block).is_none() {
                    let data = Need::new("n_features", width, "an MTLinear weight block").zeroed(&[width, stride])?;
                    *store.dense_slot(block) = Some(data);
                }
                let data = store.dense_block_mut(block).expect("allocated above");
                data[at..at + stride].copy_from_slice(cell);
            }
            Store::Sparse(sparse) => {
                let at = match sparse.find(block, key) {
                    Some(r) => r * stride,
                    None => sparse.insert(block, key)?,
                };
                sparse.cells_mut()[at..at + stride].copy_from_slice(cell);
            }
        }
        Ok(())
    }

    /// The shared block's nonzero cells, by key, as bits (to compare replicas).
    fn shared_bits(&self) -> Result<Vec<(u32, [u32; 3])>> {
        let mut out = Vec::new();
        self.for_each_cell(|r, key, cell| {
            if r == SHARED {
                let mut bits = [0u32; 3];
                bits.iter_mut().zip(cell).for_each(|(b, v)| *b = v.to_bits());
                out.push((key, bits));
            }
            Ok(())
        })?;
        out.sort_unstable();
        Ok(out)
    }
}

fn hashed_merge() -> Error {
    invalid(
        "hash_bits",
        "replicas of a hashed MTLinear cannot merge into one model: a task block's slots in the table depend on its \
         task number, which differs between a replica and the merged model, and the table mixes the task blocks with \
         the shared block; merge replicas with exact cells (hash_bits=None), or keep the replicas (a checkpoint)",
    )
}

impl MTLinear {
    /// [`Replica::merge_replicas`] for MTLinear (exact cells, the complete graph).
    fn merge_complete(parts: &[&Self], maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<Self> {
        check_maps(parts.len(), maps, n_tasks)?;
        let first = parts[0];
        let layout = first.shared_layout()?;
        if first.params.hash_bits.is_some() {
            return Err(hashed_merge());
        }
        let shared = first.shared_bits()?;
        for p in parts {
            if p.shared_layout()? != layout {
                return Err(invalid("parts", "replicas of different models"));
            }
            if p.shared_bits()? != shared || p.stats[0] != first.stats[0] {
                return Err(not_in_step("shared blocks"));
            }
        }
        let TaskKernel::Complete { diag, off, .. } = first.tasks else {
            unreachable!("checked by shared_layout")
        };
        let tasks = TaskKernel::Complete { k: n_tasks, diag, off };
        let mut merged = MTLinear::build(&first.params, &GraphSetting::new(&tasks, first.n_features))?;
        let mut taken = Need::new("n_tasks", n_tasks, "the merged tasks").filled(&[n_tasks], false)?;
        for (p, map) in parts.iter().zip(maps) {
            // The merged task of every block with weights, each taken by one replica only.
            let mut has = vec![false; p.n_tasks];
            p.for_each_cell(|r, _, _| {
                if r != SHARED {
                    has[r as usize] = true;
                }
                Ok(())
            })?;
            for (r, _) in has.iter().enumerate().filter(|(_, &h)| h) {
                let t =
                    map.get(r).copied().flatten().ok_or_else(|| {
                        invalid("maps", format!("task {r} of a replica has weights but no merged task"))
                    })?;
                if std::mem::replace(&mut taken[t], true) {
                    return Err(invalid("maps", format!("two replicas hold weights of merged task {t}")));
                }
            }
            let is_first = std::ptr::eq(*p, first);
            p.for_each_cell(|r, key, cell| match r {
                SHARED if is_first => merged.put_cell(SHARED, key, cell),
                SHARED => Ok(()),
                _ => merged.put_cell(map[r as usize].expect("checked above") as u32, key, cell),
            })?;
        }
        merged.stats[0] = first.stats[0];
        merged.n_updates = parts.iter().map(|p| p.n_updates).sum();
        Ok(merged)
    }
}
