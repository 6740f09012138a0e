//! The active (support) set of a kernel learner: stored instances with their task, original
//! label, insertion time and coefficient, in insertion order (ALGORITHMS.md §4 common rules).

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::error::Result;
use crate::kernel::{BaseKernel, Query, RowStore, Scratch, TaskKernel};
use crate::state::{check_finite, check_len, check_tasks_and_labels, ensure};

/// The stored examples of a kernel learner (its support set), read through the learner (e.g.
/// `MTRBP::active_set`). An element lives in a *slot* (storage position, changed by removals);
/// its *position* is its rank in insertion order ([`ActiveSet::slot_at`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveSet {
    rows: RowStore,
    /// Per slot: task id, original label (±1), insertion time, coefficient β.
    tasks: Vec<u32>,
    labels: Vec<f64>,
    times: Vec<u64>,
    beta: Vec<f64>,
    /// Slots in insertion order: position p of the active set lives in slot `order[p]`.
    order: Vec<u32>,
}

impl ActiveSet {
    pub(crate) fn new(n_features: usize, sparse: bool) -> Self {
        Self {
            rows: RowStore::new(n_features, sparse),
            tasks: Vec::new(),
            labels: Vec::new(),
            times: Vec::new(),
            beta: Vec::new(),
            order: Vec::new(),
        }
    }

    /// A restored active set of a learner over `n_tasks` tasks and `n_features` features: the
    /// rows (see [`RowStore`]), one task id in range, label ±1, finite coefficient and insertion
    /// time per slot, and `order` a permutation of the slots with increasing insertion times.
    /// Returns the largest insertion time (0 when empty), for the owner's counter checks.
    pub(crate) fn check_state(&self, kernel: &BaseKernel, n_tasks: usize, n_features: usize) -> Result<u64> {
        self.rows.check_state(kernel, n_features)?;
        let n = self.rows.len();
        for (what, len) in [
            ("active-set tasks", self.tasks.len()),
            ("active-set labels", self.labels.len()),
            ("active-set times", self.times.len()),
            ("active-set coefficients", self.beta.len()),
            ("active-set order", self.order.len()),
        ] {
            check_len(what, len, n)?;
        }
        check_tasks_and_labels(
            &self.tasks,
            &self.labels,
            n_tasks,
            "an active-set element",
            "an active-set label",
        )?;
        check_finite("active-set coefficients", &self.beta)?;
        let mut seen = vec![false; n];
        let mut last_time = 0u64;
        for &slot in &self.order {
            let slot = slot as usize;
            ensure(slot < n && !seen[slot], || {
                "the active set's insertion order is not a permutation of its slots".into()
            })?;
            seen[slot] = true;
            let t = self.times[slot];
            ensure(t > last_time, || {
                "the active set's insertion times do not increase along its order".into()
            })?;
            last_time = t;
        }
        Ok(last_time)
    }

    /// Number of stored examples.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no example is stored.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The stored instances, by slot.
    pub fn rows(&self) -> &RowStore {
        &self.rows
    }

    /// Appends an element at the end of the insertion order; returns its slot.
    pub(crate) fn push(
        &mut self,
        row: Row,
        task: usize,
        label: f64,
        time: u64,
        beta: f64,
        kernel: &BaseKernel,
    ) -> usize {
        let slot = self.rows.push(row, kernel);
        self.tasks.push(task as u32);
        self.labels.push(label);
        self.times.push(time);
        self.beta.push(beta);
        self.order.push(slot as u32);
        slot
    }

    /// The slot of the element at insertion-order position `position`.
    pub fn slot_at(&self, position: usize) -> usize {
        self.order[position] as usize
    }

    /// Slots in insertion order.
    pub fn slots_in_order(&self) -> impl Iterator<Item = usize> + '_ {
        self.order.iter().map(|&s| s as usize)
    }

    /// Removes the element at insertion-order `position`; later elements move up by one.
    pub(crate) fn remove_at(&mut self, position: usize) {
        let slot = self.order.remove(position) as usize;
        if let Some(moved) = self.rows.swap_remove(slot) {
            // The last slot now lives in `slot`: repoint its order entry.
            if let Some(p) = self.order.iter().position(|&s| s as usize == moved) {
                self.order[p] = slot as u32;
            }
        }
        self.tasks.swap_remove(slot);
        self.labels.swap_remove(slot);
        self.times.swap_remove(slot);
        self.beta.swap_remove(slot);
    }

    /// Per slot, whether its element stays when the tasks `forget` are forgotten (`None`: no
    /// element of theirs is stored).
    pub(crate) fn keep_mask(&self, forget: &[usize]) -> Option<Vec<bool>> {
        let forget: std::collections::HashSet<u32> = forget.iter().map(|&t| t as u32).collect();
        let keep: Vec<bool> = self.tasks.iter().map(|t| !forget.contains(t)).collect();
        keep.contains(&false).then_some(keep)
    }

    /// Keeps the slots with `keep[slot]` ([`Self::keep_mask`]), their insertion order and the
    /// slots' relative order (so sums over slots run in the order they would have had without
    /// the removed elements); the freed room is zeroed. Returns the number removed.
    /// O(stored values).
    pub(crate) fn retain_slots(&mut self, keep: &[bool]) -> usize {
        // New slot numbers of the kept slots.
        let mut renamed = vec![u32::MAX; keep.len()];
        let mut next = 0u32;
        for (slot, &k) in keep.iter().enumerate() {
            if k {
                renamed[slot] = next;
                next += 1;
            }
        }
        self.rows.retain(keep);
        retain_flagged(&mut self.labels, keep);
        retain_flagged(&mut self.beta, keep);
        retain_flagged(&mut self.tasks, keep);
        retain_flagged(&mut self.times, keep);
        self.order.retain(|&s| keep[s as usize]);
        self.order.iter_mut().for_each(|s| *s = renamed[*s as usize]);
        keep.len() - next as usize
    }

    /// Removes every element of the tasks `forget` ([`Self::retain_slots`]); returns the number
    /// removed.
    pub(crate) fn remove_tasks(&mut self, forget: &[usize]) -> usize {
        self.keep_mask(forget).map_or(0, |keep| self.retain_slots(&keep))
    }

    /// The task of the example in `slot`.
    pub fn task(&self, slot: usize) -> usize {
        self.tasks[slot] as usize
    }

    /// The original label (±1) of the example in `slot`.
    pub fn label(&self, slot: usize) -> f64 {
        self.labels[slot]
    }

    /// When the example in `slot` was inserted (the learner's update counter at the time).
    pub fn time(&self, slot: usize) -> u64 {
        self.times[slot]
    }

    /// The coefficient β of the example in `slot` (its weight in the kernel expansion).
    pub fn beta(&self, slot: usize) -> f64 {
        self.beta[slot]
    }

    /// Coefficients by slot (for loops over all slots).
    pub fn betas(&self) -> &[f64] {
        &self.beta
    }

    /// Task ids by slot.
    pub fn task_ids(&self) -> &[u32] {
        &self.tasks
    }

    pub(crate) fn beta_mut(&mut self) -> &mut [f64] {
        &mut self.beta
    }

    /// `sum_j beta_j T[i_j, task] K'(x_j, x)` over the elements in `task`'s component, by the
    /// kernel-sum machinery (`kernel_sum::weighted_score`, without an inverted
    /// index).
    pub fn score(&self, kernel: &BaseKernel, tasks: &TaskKernel, q: &Query, task: usize, scratch: &mut Scratch) -> f64 {
        let no_index = crate::kernel::SparseIndex::new(false);
        crate::kernel::kernel_sum::weighted_score(self, &no_index, kernel, tasks, q, task, scratch)
    }

    /// The multitask kernel values `T[i_j, task] K'(x_j, x)` for every slot (0 across components).
    pub fn multitask_kernel_row(
        &self,
        kernel: &BaseKernel,
        tasks: &TaskKernel,
        q: &Query,
        task: usize,
        scratch: &mut Scratch,
    ) -> Vec<f64> {
        let component = tasks.component(task);
        let mut out = vec![0.0; self.len()];
        if crate::kernel::kernel_sum::dense_kernel_row(&self.rows, kernel, q, &mut out) {
            for (slot, v) in out.iter_mut().enumerate() {
                let owner = self.tasks[slot] as usize;
                *v = if tasks.component(owner) == component {
                    tasks.get(owner, task) * *v
                } else {
                    0.0
                };
            }
            return out;
        }
        self.rows.for_each_kernel(
            kernel,
            q,
            scratch,
            |slot| tasks.component(self.tasks[slot] as usize) == component,
            |slot, kv| out[slot] = tasks.get(self.tasks[slot] as usize, task) * kv,
        );
        out
    }

    /// Multiplies every coefficient by `factor`.
    pub(crate) fn scale_betas(&mut self, factor: f64) {
        self.beta.iter_mut().for_each(|b| *b *= factor);
    }
}

/// Keeps the entries `i` of `v` with `keep[i]`, in order.
pub(crate) fn retain_flagged<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}
