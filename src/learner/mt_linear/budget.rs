//! MTLinear's byte budget over users (`max_bytes`, docs/lifecycle.md): exact own cells for the
//! most recently active users, the least recently active evicted when a new cell would not fit,
//! their weights folded into an optional hashed tail table (`tail_bits`) that they read from
//! then on.
//!
//! The resident users (tasks with own cells) form a doubly linked list in order of last
//! activity, so a touch, an admission and an eviction are O(1); an eviction costs the evicted
//! user's cells, each created once, so the cost per call stays flat as users churn. Every
//! change is journaled with the call, and undone in reverse order on rollback: records removed
//! (with their values), the list's moves, the tail's cells and the fold flags.

use serde::{Deserialize, Serialize};

use super::store::{slot_of, Cell, SparseCells, ABSENT, SHARED};
use super::*;
use crate::state::check_finite;

#[cfg(test)]
mod tests;

/// No record, no task.
pub(super) const NONE: u32 = u32::MAX;

/// Bytes per user the budget sets aside: its place in the list (8), its tail flag (1), its
/// chain's head and length (8), and on the disconnected graph its counters (24).
const USER_BYTES: usize = 17;
const USER_COUNTER_BYTES: usize = 24;

/// Bytes the budget sets aside for everything but the records, for `n_tasks` users: their
/// state at nine eighths of their number (it grows an eighth at a time), the tail, the complete
/// graph's counters and the smallest index (64).
pub fn reserved_bytes(params: &MTLinearParams, n_tasks: usize, disconnected: bool) -> usize {
    let users = n_tasks + n_tasks / 8;
    let per_user = USER_BYTES + if disconnected { USER_COUNTER_BYTES } else { 0 };
    let counters = if disconnected { 0 } else { USER_COUNTER_BYTES };
    let tail = params.tail_bits.map_or(0, |b| 4usize << b);
    users.saturating_mul(per_user).saturating_add(tail + counters + 64)
}

/// Bytes per record: key (8), cell (4 per statistic), chain links (8), index (16: the index
/// is a power of two at least twice as long as the records).
pub fn record_bytes(params: &MTLinearParams) -> usize {
    32 + 4 * params.rule.stride()
}

/// The most own and shared cells a budget `max_bytes` holds for `n_tasks` users: what is left
/// after [`reserved_bytes`], in [`record_bytes`] each. The rule of the budget: before an
/// update creates `c` cells, the least recently active users (the updated one excepted) are
/// evicted while the cells would pass this limit; after users are added, while the cells pass
/// it. `memory_bytes` then never exceeds `max_bytes`.
pub fn record_limit(params: &MTLinearParams, n_tasks: usize, disconnected: bool) -> usize {
    let max = params
        .max_bytes
        .map_or(usize::MAX, |m| m.min(usize::MAX as u64) as usize);
    max.saturating_sub(reserved_bytes(params, n_tasks, disconnected)) / record_bytes(params)
}

/// Each own block's records, chained: per record its neighbours `[prev, next]` in its block's
/// chain (none for the shared block), per own block its first record and its number of records.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chains {
    pub(super) links: Vec<[u32; 2]>,
    pub(super) heads: Vec<u32>,
    pub(super) counts: Vec<u32>,
    /// Records of the shared block (not chained; counted so that an update need not scan).
    pub(super) shared: usize,
}

impl Chains {
    pub(super) fn memory_bytes(&self) -> usize {
        self.links.capacity() * 8 + self.heads.capacity() * 4 + self.counts.capacity() * 4
    }

    /// Room for `n` records' links.
    pub(super) fn reserve(&mut self, n: usize) -> Result<()> {
        let more = n.saturating_sub(self.links.len());
        Need::new("max_bytes", n, "MTLinear's record chains").reserve(&mut self.links, more)
    }
}

impl SparseCells {
    /// Chains the records of every own block (of `n_own` tasks), once: O(records).
    pub(super) fn enable_chains(&mut self, n_own: usize) -> Result<()> {
        if self.chains.is_some() {
            return Ok(());
        }
        let need = Need::new("n_tasks", n_own, "MTLinear's record chains");
        let chains = Chains {
            links: need.filled(&[self.keys.len()], [NONE, NONE])?,
            heads: need.filled(&[n_own], NONE)?,
            counts: need.filled(&[n_own], 0u32)?,
            shared: 0,
        };
        self.chains = Some(chains);
        (0..self.keys.len()).for_each(|r| self.link(r));
        Ok(())
    }

    /// Chains for `n_own` tasks (more own blocks); on `Err` nothing changed.
    pub(super) fn grow_chains(&mut self, n_own: usize) -> Result<()> {
        let Some(chains) = &mut self.chains else {
            return Ok(());
        };
        let need = Need::new("n_tasks", n_own, "MTLinear's record chains");
        grow_in_steps(&need, &mut chains.heads, n_own)?;
        grow_in_steps(&need, &mut chains.counts, n_own)?;
        chains.heads.resize(n_own.max(chains.heads.len()), NONE);
        chains.counts.resize(n_own.max(chains.counts.len()), 0);
        Ok(())
    }

    /// Chains for `n_own` tasks (a rollback of added tasks).
    pub(super) fn truncate_chains(&mut self, n_own: usize) {
        if let Some(chains) = &mut self.chains {
            chains.heads.truncate(n_own);
            chains.counts.truncate(n_own);
        }
    }

    /// Puts record `r` (with its link slot) first in its block's chain.
    pub(super) fn link(&mut self, r: usize) {
        let block = self.keys[r].0;
        let chains = self.chains.as_mut().expect("chained");
        if chains.links.len() <= r {
            chains.links.resize(r + 1, [NONE, NONE]);
        }
        if block == SHARED {
            chains.links[r] = [NONE, NONE];
            chains.shared += 1;
            return;
        }
        let b = block as usize;
        let head = chains.heads[b];
        chains.links[r] = [NONE, head];
        if head != NONE {
            chains.links[head as usize][0] = r as u32;
        }
        chains.heads[b] = r as u32;
        chains.counts[b] += 1;
    }

    /// Takes record `r` out of its block's chain.
    pub(super) fn unlink(&mut self, r: usize) {
        let block = self.keys[r].0;
        let chains = self.chains.as_mut().expect("chained");
        if block == SHARED {
            chains.shared -= 1;
            return;
        }
        let [prev, next] = chains.links[r];
        match prev {
            NONE => chains.heads[block as usize] = next,
            p => chains.links[p as usize][1] = next,
        }
        if next != NONE {
            chains.links[next as usize][0] = prev;
        }
        chains.links[r] = [NONE, NONE];
        chains.counts[block as usize] -= 1;
    }

    /// The number of records of the shared block.
    pub(super) fn shared_len(&self) -> usize {
        self.chains.as_ref().map_or(0, |c| c.shared)
    }

    /// The number of records of own block `block`.
    pub(super) fn block_len(&self, block: usize) -> usize {
        self.chains.as_ref().map_or(0, |c| c.counts[block] as usize)
    }

    /// The records of own block `block`, highest first (an order that depends on the records
    /// alone, not on the chain's).
    pub(super) fn block_records(&self, block: usize) -> Vec<usize> {
        let chains = self.chains.as_ref().expect("chained");
        let mut out = Vec::with_capacity(chains.counts[block] as usize);
        let mut r = chains.heads[block];
        while r != NONE {
            out.push(r as usize);
            r = chains.links[r as usize][1];
        }
        out.sort_unstable_by(|a, b| b.cmp(a));
        out
    }

    /// Renames record `from` (the last) to `to` (a hole): its key, cell, chain and index entry.
    fn move_record(&mut self, from: usize, to: usize) {
        let stride = self.stride;
        let pos = self.index_position(from);
        self.index[pos] = to as u32 + 1;
        self.keys[to] = self.keys[from];
        self.cells.copy_within(from * stride..(from + 1) * stride, to * stride);
        let block = self.keys[to].0;
        let chains = self.chains.as_mut().expect("chained");
        let [prev, next] = chains.links[from];
        chains.links[to] = [prev, next];
        if block != SHARED {
            match prev {
                NONE => chains.heads[block as usize] = to as u32,
                p => chains.links[p as usize][1] = to as u32,
            }
            if next != NONE {
                chains.links[next as usize][0] = to as u32;
            }
        }
    }

    /// Removes record `r`, the last record taking its place; returns its block, key and cell.
    /// The freed room is zeroed.
    pub(super) fn swap_remove(&mut self, r: usize) -> (u32, u32, Cell) {
        let stride = self.stride;
        let (block, key) = self.keys[r];
        let mut cell = [0.0f32; 3];
        cell[..stride].copy_from_slice(&self.cells[r * stride..(r + 1) * stride]);
        self.unlink(r);
        self.delete_index_entry(self.index_position(r));
        let last = self.keys.len() - 1;
        if r != last {
            self.move_record(last, r);
        }
        self.cells[last * stride..].fill(0.0);
        self.keys.pop();
        self.cells.truncate(last * stride);
        self.chains.as_mut().expect("chained").links.pop();
        (block, key, cell)
    }

    /// Room for the records an undo of `log` (read backwards) puts back at most, exactly (a
    /// budgeted model counts its capacity: the undo must not double it).
    pub(super) fn reserve_for_undo(&mut self, log: &[(super::store::CellAt, Cell)]) {
        use super::store::CellAt;
        let (mut len, mut most) = (self.keys.len(), self.keys.len());
        for (at, _) in log.iter().rev() {
            match at {
                CellAt::Inserted => len -= 1,
                CellAt::Removed { .. } => {
                    len += 1;
                    most = most.max(len);
                }
                _ => {}
            }
        }
        let more = most - self.keys.len();
        if more == 0 {
            return;
        }
        self.keys.reserve_exact(more);
        self.cells.reserve_exact(more * self.stride);
        if let Some(chains) = &mut self.chains {
            chains.links.reserve_exact(most - chains.links.len());
        }
    }

    /// Undoes [`Self::swap_remove`] of record `r` (the records as right after it): the record
    /// at `r` goes back to the end, and `(block, key, cell)` back to `r`. No allocation (the
    /// room was there before the removal).
    pub(super) fn unremove(&mut self, r: usize, block: u32, key: u32, cell: &Cell) {
        let stride = self.stride;
        let n = self.keys.len();
        self.keys.push((block, key));
        self.cells.resize((n + 1) * stride, 0.0);
        self.chains.as_mut().expect("chained").links.push([NONE, NONE]);
        if r != n {
            self.move_record(r, n);
            self.keys[r] = (block, key);
        }
        self.cells[r * stride..(r + 1) * stride].copy_from_slice(&cell[..stride]);
        self.enter_index(r, block, key);
        self.link(r);
    }
}

/// Room in `v` for `n` entries, grown by at least an eighth at a time (the per-user state grows
/// one user at a time, and counts its capacity against the budget: no doubling).
fn grow_in_steps<T>(need: &Need, v: &mut Vec<T>, n: usize) -> Result<()> {
    let len = v.len();
    if v.capacity() >= n {
        return Ok(());
    }
    need.reserve_exact(v, n.saturating_sub(len).max(len / 8))
}

/// The resident users in order of last activity and the hashed tail, as saved: the list as a
/// vector, least recently active first (the links and the chains are derived on restore).
#[derive(Serialize, Deserialize)]
struct SavedBudget {
    lru: Vec<u32>,
    folded: Vec<bool>,
    tail: Vec<f32>,
    n_evicted: u64,
}

/// The state of the user budget (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SavedBudget", into = "SavedBudget")]
pub(crate) struct UserBudget {
    /// Per task, its neighbours `[less, more recent]` in the list of resident users.
    pub(super) order: Vec<[u32; 2]>,
    /// The least and the most recently active resident user.
    pub(super) oldest: u32,
    pub(super) newest: u32,
    /// Per task, whether its evicted weights were folded into the tail (it reads the tail).
    pub(super) folded: Vec<bool>,
    /// The tail table's weights (`2^tail_bits`; empty without a tail).
    pub(super) tail: Vec<f32>,
    pub(super) n_evicted: u64,
}

impl From<UserBudget> for SavedBudget {
    fn from(b: UserBudget) -> Self {
        let lru = b.residents();
        SavedBudget {
            lru,
            folded: b.folded,
            tail: b.tail,
            n_evicted: b.n_evicted,
        }
    }
}

impl TryFrom<SavedBudget> for UserBudget {
    type Error = String;

    fn try_from(s: SavedBudget) -> std::result::Result<Self, String> {
        let k = s.folded.len();
        let mut b = UserBudget {
            order: vec![[NONE, NONE]; k],
            oldest: NONE,
            newest: NONE,
            folded: s.folded,
            tail: s.tail,
            n_evicted: s.n_evicted,
        };
        let mut seen = vec![false; k];
        for &t in &s.lru {
            if (t as usize) >= k || std::mem::replace(&mut seen[t as usize], true) {
                return Err("the user budget's list of resident users is not a list of distinct tasks".into());
            }
            b.push_newest(t);
        }
        Ok(b)
    }
}

impl UserBudget {
    /// An empty budget over `n_tasks` users with a tail of `2^tail_bits` weights.
    pub(super) fn new(n_tasks: usize, tail_bits: Option<u32>) -> Result<Self> {
        let need = Need::new("n_tasks", n_tasks, "MTLinear's per-user budget state");
        let tail = match tail_bits {
            Some(bits) => {
                Need::new("tail_bits", bits as usize, "MTLinear's tail table").filled(&[1 << bits], 0.0f32)?
            }
            None => Vec::new(),
        };
        Ok(UserBudget {
            order: need.filled(&[n_tasks], [NONE, NONE])?,
            oldest: NONE,
            newest: NONE,
            folded: need.filled(&[n_tasks], false)?,
            tail,
            n_evicted: 0,
        })
    }

    /// The resident users, least recently active first.
    pub(super) fn residents(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut t = self.oldest;
        while t != NONE {
            out.push(t);
            t = self.order[t as usize][1];
        }
        out
    }

    /// Bytes held: the per-user links and flags, and the tail.
    pub(super) fn memory_bytes(&self) -> usize {
        self.order.capacity() * 8 + self.folded.capacity() + self.tail.capacity() * 4
    }

    pub(super) fn is_listed(&self, t: u32) -> bool {
        self.order[t as usize] != [NONE, NONE] || self.oldest == t
    }

    /// Appends resident user `t` as the most recent.
    pub(super) fn push_newest(&mut self, t: u32) {
        self.order[t as usize] = [self.newest, NONE];
        match self.newest {
            NONE => self.oldest = t,
            n => self.order[n as usize][1] = t,
        }
        self.newest = t;
    }

    /// Puts `t` back after `after` (`NONE`: first), the undo of a move or a removal.
    pub(super) fn insert_after(&mut self, t: u32, after: u32) {
        let next = match after {
            NONE => self.oldest,
            a => self.order[a as usize][1],
        };
        self.order[t as usize] = [after, next];
        match after {
            NONE => self.oldest = t,
            a => self.order[a as usize][1] = t,
        }
        match next {
            NONE => self.newest = t,
            n => self.order[n as usize][0] = t,
        }
    }

    /// Takes `t` out of the list; returns its predecessor (for the undo).
    pub(super) fn unlink(&mut self, t: u32) -> u32 {
        let [prev, next] = self.order[t as usize];
        match prev {
            NONE => self.oldest = next,
            p => self.order[p as usize][1] = next,
        }
        match next {
            NONE => self.newest = prev,
            n => self.order[n as usize][0] = prev,
        }
        self.order[t as usize] = [NONE, NONE];
        prev
    }

    /// More users (`n_tasks` in all); on `Err` nothing changed.
    pub(super) fn grow(&mut self, n_tasks: usize) -> Result<()> {
        let need = Need::new("n_tasks", n_tasks, "MTLinear's per-user budget state");
        grow_in_steps(&need, &mut self.order, n_tasks)?;
        grow_in_steps(&need, &mut self.folded, n_tasks)?;
        self.order.resize(n_tasks.max(self.order.len()), [NONE, NONE]);
        self.folded.resize(n_tasks.max(self.folded.len()), false);
        Ok(())
    }

    /// Whether `task` reads the tail.
    pub(super) fn reads_tail(&self, task: usize) -> bool {
        !self.tail.is_empty() && self.folded.get(task) == Some(&true)
    }

    /// The tail's contribution `Σ_j x̃_j t[h(j, task)]` for a user that reads it.
    pub(super) fn tail_sum(&self, entries: &[(usize, f64)], task: usize) -> f64 {
        if !self.reads_tail(task) {
            return 0.0;
        }
        let n = self.tail.len();
        entries
            .iter()
            .map(|&(key, v)| v * f64::from(self.tail[slot_of(key as u64, task as u32, n)]))
            .sum()
    }
}

/// One change of the budget's state, as a journal keeps it for the undo.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BudgetOp {
    /// A resident user became the most recent; it followed `after` before.
    Touched { task: u32, after: u32 },
    /// A user became resident (the most recent).
    Admitted { task: u32 },
    /// A user was evicted from after `after` (or forgotten); it read the tail or not before.
    Evicted { task: u32, after: u32, folded: bool },
    /// A tail weight before a fold wrote it.
    Tail { slot: u32, old: f32 },
}

impl MTLinear {
    /// The budget's state (under `max_bytes`).
    fn budget_mut(&mut self) -> &mut UserBudget {
        self.budget.as_mut().expect("under max_bytes")
    }

    /// The sparse cells (the layout under `max_bytes`), chained.
    fn chained_cells(&mut self) -> Result<&mut SparseCells> {
        let n = self.n_tasks;
        let Store::Sparse(cells) = &mut self.store else {
            return Err(Error::State("MTLinear's user budget needs the sparse layout".into()));
        };
        cells.enable_chains(n)?;
        Ok(cells)
    }

    fn log_budget(&mut self, op: BudgetOp) {
        if self.journal.logging() {
            self.journal.budget.push(op);
        }
    }

    /// Room in the journal for `n` more budget changes (before anything is changed).
    fn reserve_budget_log(&mut self, n: usize) -> Result<()> {
        if !self.journal.logging() {
            return Ok(());
        }
        let j = &mut self.journal.budget;
        Need::new("rows", j.len() + n, "MTLinear's undo journal").reserve(j, n)
    }

    /// Marks `task` as the most recently active user, if it is resident.
    pub(super) fn touch_user(&mut self, task: usize) -> Result<()> {
        if self.budget.is_none() {
            return Ok(());
        }
        self.reserve_budget_log(1)?;
        let t = task as u32;
        let b = self.budget_mut();
        if !b.is_listed(t) || b.newest == t {
            return Ok(());
        }
        let after = b.unlink(t);
        b.push_newest(t);
        self.log_budget(BudgetOp::Touched { task: t, after });
        Ok(())
    }

    /// The record limit of `n_tasks` users ([`record_limit`]) for this model's parameters.
    pub(super) fn limit_for(&self, n_tasks: usize) -> usize {
        let disconnected = matches!(self.tasks, TaskKernel::Disconnected { .. });
        record_limit(&self.params, n_tasks, disconnected)
    }

    /// Makes the records' storage hold `n` records (at most the limit), growing its buffers by
    /// half at a time but never beyond the limit; false if `n` exceeds the limit.
    fn room_for(&mut self, n: usize) -> Result<bool> {
        let limit = self.limit_for(self.n_tasks);
        if n > limit {
            return Ok(false);
        }
        let Store::Sparse(cells) = &mut self.store else {
            return Ok(false);
        };
        let cap = cells.keys.capacity().min(cells.cells.capacity() / cells.stride);
        let chains_cap = cells.chains.as_ref().map_or(0, |c| c.links.capacity());
        if n <= cap.min(chains_cap) && 2 * n <= cells.index.len() {
            return Ok(true);
        }
        let target = n.max(cap + cap / 2).max(64).min(limit);
        let need = Need::new("max_bytes", target, "MTLinear's sparse weights");
        let stride = cells.stride;
        let (keys, values) = (cells.keys.len(), cells.cells.len());
        need.reserve_exact(&mut cells.keys, target - keys)?;
        need.reserve_exact(&mut cells.cells, target * stride - values)?;
        if let Some(chains) = &mut cells.chains {
            let links = chains.links.len();
            need.reserve_exact(&mut chains.links, target - links)?;
        }
        if 2 * n > cells.index.len() {
            cells.rebuild_index(n)?;
        }
        Ok(true)
    }

    /// Evicts the least recently active users but `task` until `needed` new records fit; on
    /// `Err` (they cannot fit even with every other user evicted) nothing changed. Returns
    /// whether records moved (the gathered slots must then be found again).
    pub(super) fn make_room(&mut self, task: usize, needed: usize) -> Result<bool> {
        if self.budget.is_none() || needed == 0 {
            return Ok(false);
        }
        let own = self.chained_cells()?.block_len(task);
        let Store::Sparse(cells) = &self.store else {
            unreachable!("chained above")
        };
        let shared = cells.shared_len();
        let limit = self.limit_for(self.n_tasks);
        if shared + own + needed > limit {
            return Err(invalid(
                "max_bytes",
                format!(
                    "{} bytes hold {limit} cells for {} users: not this example's {needed} new cells next to the \
                     shared block's and the user's own ({} cells); raise max_bytes",
                    self.params.max_bytes.unwrap_or(0),
                    self.n_tasks,
                    shared + own
                ),
            ));
        }
        let mut moved = false;
        while !self.room_for(self.store_len() + needed)? {
            let b = self.budget.as_ref().expect("budget");
            let victim = match b.oldest {
                t if t as usize == task => b.order[t as usize][1],
                t => t,
            };
            if victim == NONE {
                break; // unreachable after the check above
            }
            self.evict(victim as usize)?;
            moved = true;
        }
        Ok(moved)
    }

    fn store_len(&self) -> usize {
        match &self.store {
            Store::Sparse(cells) => cells.len(),
            _ => 0,
        }
    }

    /// Admits `task` as a resident user (its first own cell), the most recent.
    pub(super) fn admit(&mut self, task: usize) -> Result<()> {
        self.reserve_budget_log(1)?;
        let t = task as u32;
        let b = self.budget_mut();
        if b.is_listed(t) {
            return Ok(());
        }
        b.push_newest(t);
        self.log_budget(BudgetOp::Admitted { task: t });
        Ok(())
    }

    /// Removes user `task`'s own cells, folding their weights into the tail (if there is one,
    /// and `fold`), and takes it off the list. O(its cells).
    pub(super) fn evict_cells(&mut self, task: usize, fold: bool) -> Result<()> {
        let records = self.chained_cells()?.block_records(task);
        let has_tail = self.budget.as_ref().is_some_and(|b| !b.tail.is_empty());
        let fold = fold && has_tail && !records.is_empty();
        self.reserve_budget_log(1 + if fold { records.len() } else { 0 })?;
        if self.journal.logging() {
            self.journal.reserve_cells(records.len())?;
        }
        let t = task as u32;
        let Store::Sparse(cells) = &mut self.store else {
            unreachable!("chained above")
        };
        let b = self.budget.as_mut().expect("budget");
        if fold {
            let n = b.tail.len();
            // The fold visits the cells in record order (highest first), whatever the chain's.
            for &r in &records {
                let (_, key) = cells.keys[r];
                let slot = slot_of(u64::from(key), t, n);
                let w = cells.cells[r * cells.stride];
                if self.journal.logging() {
                    self.journal.budget.push(BudgetOp::Tail {
                        slot: slot as u32,
                        old: b.tail[slot],
                    });
                }
                b.tail[slot] += w;
            }
        }
        for &r in &records {
            let (block, key, cell) = cells.swap_remove(r);
            if self.journal.logging() {
                self.journal.cells.push((CellAt::Removed { r, block, key }, cell));
            }
        }
        if b.is_listed(t) {
            let after = b.unlink(t);
            let folded = b.folded[task];
            b.folded[task] = folded || fold;
            if self.journal.logging() {
                self.journal.budget.push(BudgetOp::Evicted { task: t, after, folded });
            }
        }
        Ok(())
    }

    /// Evicts user `task` (the least recently active): its cells folded into the tail.
    fn evict(&mut self, task: usize) -> Result<()> {
        self.evict_cells(task, true)?;
        self.budget_mut().n_evicted += 1;
        Ok(())
    }

    /// Undoes one budget change (in reverse order of the changes).
    pub(super) fn undo_budget(&mut self, op: BudgetOp) {
        let Some(b) = self.budget.as_mut() else { return };
        match op {
            BudgetOp::Touched { task, after } => {
                b.unlink(task);
                b.insert_after(task, after);
            }
            BudgetOp::Admitted { task } => {
                b.unlink(task);
            }
            BudgetOp::Evicted { task, after, folded } => {
                b.insert_after(task, after);
                b.folded[task as usize] = folded;
            }
            BudgetOp::Tail { slot, old } => b.tail[slot as usize] = old,
        }
    }

    /// `task`'s own factor entry `B[task, task]` (the weight of its own block and tail).
    fn own_factor(&self, task: usize) -> f64 {
        self.terms(task)
            .iter()
            .find(|&&(r, _)| r != SHARED)
            .map_or(0.0, |&(_, b)| b)
    }

    /// The tail's part of `task`'s score for the entries gathered (0 without a tail).
    pub(super) fn tail_offset(&self, task: usize) -> f64 {
        match &self.budget {
            Some(b) if b.reads_tail(task) => self.own_factor(task) * b.tail_sum(&self.entries, task),
            _ => 0.0,
        }
    }

    /// The tail's part of `task`'s score for row `x`, summed as [`Self::tail_offset`] sums the
    /// gathered entries (nonzero features in order, then the intercept).
    pub(super) fn tail_score(&self, x: &Row, task: usize) -> f64 {
        let Some(b) = self.budget.as_ref().filter(|b| b.reads_tail(task)) else {
            return 0.0;
        };
        let n = b.tail.len();
        let weight = |key: usize| f64::from(b.tail[slot_of(key as u64, task as u32, n)]);
        let mut s = 0.0;
        x.for_each(|j, v| {
            if v != 0.0 {
                s += v * weight(j);
            }
        });
        if self.params.fit_intercept {
            s += weight(self.n_features);
        }
        self.own_factor(task) * s
    }

    /// Under a budget: the record log reserved, the update, then the user touched.
    pub(super) fn learn_gathered(&mut self, task: usize, y: f64, score: f64) -> Result<()> {
        if self.budget.is_none() {
            return self.apply_update(task, y, score);
        }
        self.reserve_budget_log(1)?;
        self.apply_update(task, y, score)?;
        self.touch_user(task)
    }

    /// Before the writes of an update of `task` under a budget: room for the cells it creates
    /// (evicting users), the gathered slots found again if records moved, `task` admitted.
    pub(super) fn prepare_writes(&mut self, task: usize, terms: &[(u32, f64)]) -> Result<()> {
        if self.budget.is_none() {
            return Ok(());
        }
        let m = self.entries.len();
        let slots = &self.pad.slot[..m * terms.len()];
        let needed = slots.iter().filter(|&&s| s == ABSENT).count();
        self.chained_cells()?;
        if needed == 0 {
            return Ok(());
        }
        self.journal.reserve_cells(needed)?;
        if self.make_room(task, needed)? {
            let Store::Sparse(cells) = &self.store else {
                unreachable!("chained above")
            };
            for (term, &(r, _)) in terms.iter().enumerate() {
                for (i, &(key, _)) in self.entries.iter().enumerate() {
                    let at = &mut self.pad.slot[term * m + i];
                    if *at != ABSENT {
                        *at = cells.offset(r, key as u32);
                    }
                }
            }
        }
        let own = terms.iter().position(|&(r, _)| r as usize == task);
        if own.is_some_and(|t| self.pad.slot[t * m..(t + 1) * m].contains(&ABSENT)) {
            self.admit(task)?;
        }
        Ok(())
    }

    /// Refuses a budget that the per-user state alone would fill ([`reserved_bytes`]).
    pub(super) fn check_budget_fits(&self) -> Result<()> {
        let disconnected = matches!(self.tasks, TaskKernel::Disconnected { .. });
        let reserved = reserved_bytes(&self.params, self.n_tasks, disconnected);
        match self.params.max_bytes {
            Some(max) if reserved as u64 >= max => Err(invalid(
                "max_bytes",
                format!(
                    "{max} bytes cannot hold the state of {} users ({reserved} bytes) and any weight: raise max_bytes",
                    self.n_tasks
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Room for `n_tasks` users' state within the budget: evicts the least recently active
    /// users and shrinks the records' storage when the per-user state grows into it. On `Err`
    /// (too many users for the budget) the per-user state is as before.
    pub(super) fn grow_budget(&mut self, n_tasks: usize) -> Result<()> {
        let Some(b) = self.budget.as_mut() else {
            return Ok(());
        };
        let old = b.order.len();
        b.grow(n_tasks)?;
        if let Err(e) = self.chained_cells().and_then(|c| c.grow_chains(n_tasks)) {
            self.truncate_budget(old, self.n_evicted_users());
            return Err(e);
        }
        let limit = self.limit_for(n_tasks);
        let Store::Sparse(cells) = &self.store else {
            unreachable!("chained above")
        };
        let shared = cells.shared_len();
        let disconnected = matches!(self.tasks, TaskKernel::Disconnected { .. });
        let reserved = reserved_bytes(&self.params, n_tasks, disconnected) as u64;
        if shared > limit || self.params.max_bytes.is_some_and(|m| reserved >= m) {
            self.truncate_budget(old, self.n_evicted_users());
            return Err(invalid(
                "max_bytes",
                format!(
                    "{} bytes cannot hold the state of {n_tasks} users next to the shared block: raise max_bytes",
                    self.params.max_bytes.unwrap_or(0)
                ),
            ));
        }
        // Users past the limit leave, least recently active first; the storage shrinks (by a
        // sixteenth more than needed, so that it does not shrink again at every new user).
        while self.store_len() > limit {
            let oldest = self.budget.as_ref().map_or(NONE, |b| b.oldest);
            if oldest == NONE {
                break;
            }
            self.evict(oldest as usize)?;
        }
        let Store::Sparse(cells) = &mut self.store else {
            unreachable!("chained above")
        };
        if cells.keys.capacity() > limit {
            let len = cells.len();
            let to = len.max(limit - limit / 16);
            let stride = cells.stride;
            cells.keys.shrink_to(to);
            cells.cells.shrink_to(to * stride);
            if let Some(chains) = &mut cells.chains {
                chains.links.shrink_to(to);
            }
        }
        // The index of a larger limit's records, beyond what this limit sets aside for it.
        if cells.index.len() > (2 * limit.max(8)).next_power_of_two() {
            let len = cells.len();
            cells.rebuild_index(len)?;
        }
        Ok(())
    }

    /// The per-user state back to `n_tasks` users and `n_evicted` evictions (a rollback).
    pub(super) fn truncate_budget(&mut self, n_tasks: usize, n_evicted: u64) {
        if let Some(b) = self.budget.as_mut() {
            b.order.truncate(n_tasks);
            b.folded.truncate(n_tasks);
            b.n_evicted = n_evicted;
        }
        if let Store::Sparse(cells) = &mut self.store {
            cells.truncate_chains(n_tasks);
        }
        if self.budget.is_some() {
            // The eighth of slack the per-user state grows by is the formula's for n_tasks.
            let keep = n_tasks + n_tasks / 8;
            if let Some(b) = self.budget.as_mut() {
                b.order.shrink_to(keep);
                b.folded.shrink_to(keep);
            }
            self.stats.shrink_to(keep.max(1));
            if let Store::Sparse(cells) = &mut self.store {
                if let Some(c) = &mut cells.chains {
                    c.heads.shrink_to(keep);
                    c.counts.shrink_to(keep);
                }
            }
        }
    }

    /// Forgets users under a budget: their cells removed (not folded), their place in the list
    /// and their tail reads gone. O(their cells).
    pub(super) fn forget_users(&mut self, tasks: &[usize]) -> Result<()> {
        for &t in tasks {
            self.evict_cells(t, false)?;
            self.budget_mut().folded[t] = false;
        }
        Ok(())
    }

    /// A restored budget: present exactly under `max_bytes`, on a closed-form graph; per-user
    /// state for every task; a tail of `2^tail_bits` finite weights; the resident users exactly
    /// the tasks with own cells; within the budget.
    pub(super) fn check_budget_state(&self) -> Result<()> {
        let Some(b) = &self.budget else {
            return ensure(self.params.max_bytes.is_none(), || {
                "a user budget without its state".into()
            });
        };
        ensure(!matches!(self.tasks, TaskKernel::Dense { .. }), || {
            "a user budget on a general task graph".into()
        })?;
        check_len("the budget's per-user links", b.order.len(), self.n_tasks)?;
        check_len("the budget's per-user flags", b.folded.len(), self.n_tasks)?;
        let tail = self.params.tail_bits.map_or(0, |bits| 1usize << bits);
        check_len("the budget's tail", b.tail.len(), tail)?;
        check_finite(
            "the budget's tail",
            &b.tail.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        )?;
        let Store::Sparse(cells) = &self.store else {
            return Err(Error::State("a user budget needs the sparse layout".into()));
        };
        let mut owns = vec![false; self.n_tasks];
        for &(r, _) in cells.keys() {
            if r != SHARED {
                owns[r as usize] = true;
            }
        }
        let mut listed = vec![false; self.n_tasks];
        b.residents().iter().for_each(|&t| listed[t as usize] = true);
        ensure(owns == listed, || {
            "the budget's resident users are not the users with own cells".into()
        })?;
        let max = self.params.max_bytes.unwrap_or(u64::MAX);
        ensure(self.memory_bytes() as u64 <= max, || {
            format!(
                "the model holds {} bytes, over its max_bytes {max}",
                self.memory_bytes()
            )
        })
    }

    /// Users evicted so far (0 without a budget).
    pub fn n_evicted_users(&self) -> u64 {
        self.budget.as_ref().map_or(0, |b| b.n_evicted)
    }

    /// Resident users (with exact own cells; all users with cells without a budget).
    pub fn n_resident_users(&self) -> usize {
        match &self.budget {
            Some(b) => b.residents().len(),
            None => 0,
        }
    }
}
