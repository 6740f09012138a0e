//! MTBPRJ-2 (Alg. 2): projection in the base-kernel space, one weight per (task, dictionary element)
//! in per-component blocks.

use std::collections::{BTreeSet, HashMap};

use super::*;

/// The weights of one connected component: `|c|` task rows, row stride `cap` (one column per
/// dictionary slot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Block {
    pub(super) members: Vec<u32>,
    pub(super) w: Vec<f64>,
}

/// Which blocks may hold a nonzero weight in a dictionary column, so that a budget step visits
/// those blocks only (with the disconnected graph there is a block per user). A block's weights
/// are nonzero only in the columns its own tasks inserted until a projection or a fold spreads
/// them, at time `t`, over every column inserted at or before `t`. The index keeps each spread
/// block's last such time. Derived data: not saved, and rebuilt on a restored model's first
/// update with every block spread "now" (a superset, exact again once the dictionary turns over).
#[derive(Debug, Default)]
pub(super) struct SpreadIndex {
    ready: bool,
    by_time: BTreeSet<(u64, u32)>,
    since: HashMap<u32, u64>,
    /// Blocks visited by budget steps (what the tests count).
    #[cfg(test)]
    pub(super) visited: u64,
}

#[cfg(test)]
thread_local! {
    /// Copies of a model's index on this thread (a copy of the model copies it): what the tests
    /// count to see that adding a task does not copy the model.
    pub(super) static INDEX_COPIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Clone for SpreadIndex {
    fn clone(&self) -> Self {
        #[cfg(test)]
        INDEX_COPIES.with(|c| c.set(c.get() + 1));
        SpreadIndex {
            ready: self.ready,
            by_time: self.by_time.clone(),
            since: self.since.clone(),
            #[cfg(test)]
            visited: self.visited,
        }
    }
}

impl PartialEq for SpreadIndex {
    fn eq(&self, _other: &Self) -> bool {
        true // derived from the weights: two models with equal weights are equal
    }
}

impl SpreadIndex {
    /// Block `c` spread at `time`.
    fn mark(&mut self, c: u32, time: u64) {
        if let Some(old) = self.since.insert(c, time) {
            self.by_time.remove(&(old, c));
        }
        self.by_time.insert((time, c));
    }

    /// The blocks spread at or after `time` (possibly nonzero in a column inserted then).
    fn since(&self, time: u64) -> impl Iterator<Item = u32> + '_ {
        self.by_time.range((time, 0)..).map(|&(_, c)| c)
    }
}

/// MTBPRJ-2 (Cavallanti & Cesa-Bianchi, Alg. 2; §4.5): the budget Projectron projecting in the
/// base-kernel space, one weight per (task, dictionary element). Built with [`Build::build`]
/// from [`MTBPRJ2Params`], a task kernel and a base kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTBPRJ2 {
    pub(super) kernel: BaseKernel,
    pub(super) tasks: TaskKernel,
    pub(super) n_features: usize,
    pub(super) params: ProjectronParams,
    pub(super) literal_line14: bool,
    /// Dictionary instances with their task and insertion time (the β column is unused).
    pub(super) dict: ActiveSet,
    pub(super) gram: InverseGram,
    /// One optional block per component, and each task's row within its block.
    pub(super) blocks: Vec<Option<Block>>,
    /// Tasks of every component, ascending (so allocating a block costs O(|c|), not O(k)).
    pub(super) members: Vec<Vec<u32>>,
    /// Components with an allocated block, in allocation order.
    pub(super) allocated: Vec<u32>,
    pub(super) local: Vec<u32>,
    /// Column stride of every block.
    pub(super) cap: usize,
    pub(super) counters: Counters,
    #[serde(skip)]
    pub(super) spread: SpreadIndex,
}

impl Build for MTBPRJ2 {
    type Params = MTBPRJ2Params;
    type Setting<'a> = KernelSetting<'a>;

    fn from_checked(all: &Checked<MTBPRJ2Params>, setting: &KernelSetting) -> Result<Self> {
        let (params, literal_line14) = (all.shared(), all.alg2_literal_line14);
        let (tasks, kernel) = (setting.task_kernel.clone(), setting.kernel);
        let (n_features, sparse) = (setting.n_features, setting.sparse);
        // Per task: its member entry (usize), its local index (u32) and its share of the block
        // slots; checked before the tables are built.
        let k = tasks.n_tasks();
        Need::new(
            "n_tasks",
            k,
            "MTBPRJ2's per-task tables (members, local indices, block slots)",
        )
        .count::<u64>(&[k, 4])?;
        let members = tasks.component_members();
        let mut local = Need::new("n_tasks", k, "MTBPRJ2's local task indices").filled(&[k], 0u32)?;
        for m in &members {
            for (p, &i) in m.iter().enumerate() {
                local[i] = p as u32;
            }
        }
        Ok(Self {
            kernel,
            tasks,
            n_features,
            params,
            literal_line14,
            dict: ActiveSet::new(n_features, sparse),
            gram: InverseGram::new(params.budget.saturating_add(1)),
            blocks: vec![None; members.len()],
            members: members.iter().map(|m| m.iter().map(|&i| i as u32).collect()).collect(),
            allocated: Vec::new(),
            local,
            cap: 0,
            counters: Counters::default(),
            spread: SpreadIndex {
                ready: true,
                ..SpreadIndex::default()
            },
        })
    }
}

impl MTBPRJ2 {
    /// The dictionary: the stored instances with their task and insertion time (its
    /// coefficients are unused; the weights are per task).
    pub fn dictionary(&self) -> &ActiveSet {
        &self.dict
    }

    /// Number of weights held in allocated blocks (`Σ_c |c| ×` dictionary size).
    pub fn n_weights(&self) -> usize {
        self.allocated
            .iter()
            .filter_map(|&c| self.blocks[c as usize].as_ref())
            .map(|b| b.members.len())
            .sum::<usize>()
            * self.dict.len()
    }

    /// `W[task, slot]` (0 for an unallocated block).
    pub fn weight(&self, task: usize, slot: usize) -> f64 {
        match &self.blocks[self.tasks.component(task)] {
            Some(b) => b.w[self.local[task] as usize * self.cap + slot],
            None => 0.0,
        }
    }

    pub(super) fn block_need(&self) -> Need<'static> {
        Need::new(
            "budget",
            self.params.budget,
            "MTBPRJ2's task weights (|component| x budget floats)",
        )
    }

    /// Makes room for `size` dictionary columns in every block (all blocks are allocated first,
    /// so a failure leaves the model unchanged).
    pub(super) fn grow_to(&mut self, size: usize) -> Result<()> {
        if size <= self.cap {
            return Ok(());
        }
        let cap = (self.cap * 2)
            .max(16)
            .min(self.params.budget.saturating_add(1))
            .max(size);
        let (old, n) = (self.cap, self.dict.len());
        let need = self.block_need();
        let total: usize = self.blocks.iter().flatten().map(|b| b.members.len()).sum();
        need.count::<f64>(&[total, cap])?;
        let mut fresh = Vec::with_capacity(self.allocated.len());
        for b in self.blocks.iter().flatten() {
            fresh.push(need.filled(&[b.members.len(), cap], 0.0)?);
        }
        for (b, mut w) in self.blocks.iter_mut().flatten().zip(fresh) {
            // (grows once per doubling: O(k) over the options is fine here)
            let rows = b.members.len();
            for l in 0..rows {
                w[l * cap..l * cap + n].copy_from_slice(&b.w[l * old..l * old + n]);
            }
            b.w = w;
        }
        self.cap = cap;
        Ok(())
    }

    /// A restored model's index: every allocated block spread at `now`, and the column past the
    /// dictionary zero in every block (a budget step leaves it to the next insertion, which
    /// writes only its own block's). O(weights), once.
    fn ensure_spread_index(&mut self, now: u64) {
        if self.spread.ready {
            return;
        }
        let (n, cap) = (self.dict.len(), self.cap);
        for &c in &self.allocated {
            if let Some(b) = self.blocks[c as usize].as_mut() {
                if n < cap {
                    (0..b.members.len()).for_each(|l| b.w[l * cap + n] = 0.0);
                }
                self.spread.mark(c, now);
            }
        }
        self.spread.ready = true;
    }

    pub(super) fn ensure_block(&mut self, component: usize) -> Result<()> {
        if self.blocks[component].is_none() {
            let members = self.members[component].clone();
            let w = self.block_need().filled(&[members.len(), self.cap], 0.0)?;
            self.blocks[component] = Some(Block { members, w });
            self.allocated.push(component as u32);
        }
        Ok(())
    }

    /// The element a budget step removes (`r`, slot order) and the fold coefficients
    /// `gamma_j = -Q'_jr / Q'_rr` of the enlarged set (`gamma_r = 0`; the new element last).
    pub(super) fn plan_replace(&self, alpha: &[f64], d2: f64) -> (usize, Vec<f64>) {
        let (cap, n) = (self.cap, self.dict.len());
        // ‖d_j‖ = ‖W_{:,j}‖₂ / sqrt(Q'_jj) over the old elements (rows streamed).
        let mut norm2 = vec![0.0; n];
        for &c in &self.allocated {
            if let Some(b) = &self.blocks[c as usize] {
                for l in 0..b.members.len() {
                    let row = &b.w[l * cap..l * cap + n];
                    norm2.iter_mut().zip(row).for_each(|(s, w)| *s += w * w);
                }
            }
        }
        let gram = &self.gram;
        let r = argmin_oldest(&self.dict, |j| {
            removal_score(norm2[j].sqrt(), gram.tentative_diag(alpha, d2, j))
        });
        let mut col = Vec::with_capacity(n + 1);
        self.gram.tentative_column(alpha, d2, r, &mut col);
        let qrr = col[r];
        let gamma = col
            .iter()
            .enumerate()
            .map(|(j, &c)| if j == r { 0.0 } else { -c / qrr })
            .collect();
        (r, gamma)
    }

    /// Whether the weights a step writes stay finite (checked before the first write).
    pub(super) fn check_step(
        &self,
        step: &Step,
        comp: usize,
        task: usize,
        y: f64,
        alpha: &[f64],
        plan: Option<&(usize, Vec<f64>)>,
    ) -> Result<()> {
        let (cap, n) = (self.cap, self.dict.len());
        match step {
            Step::Project => {
                if let Some(b) = &self.blocks[comp] {
                    for (l, &m) in b.members.iter().enumerate() {
                        let c = y * self.tasks.get(m as usize, task);
                        let row = &b.w[l * cap..l * cap + n];
                        check_step_finite(row.iter().zip(alpha).map(|(w, a)| w + c * a), "projection")?;
                    }
                }
            }
            Step::Insert => {}
            Step::Replace => {
                let Some((r, gamma)) = plan else {
                    return Ok(());
                };
                let r = *r;
                let elem_task: Vec<usize> = (0..n).map(|j| self.dict.task(j)).chain([task]).collect();
                for &c in &self.allocated {
                    let Some(b) = &self.blocks[c as usize] else { continue };
                    for (l, &m) in b.members.iter().enumerate() {
                        let row = &b.w[l * cap..l * cap + n];
                        let wr = row[r];
                        let t = |j: usize| {
                            if self.literal_line14 {
                                self.tasks.get(m as usize, elem_task[j])
                            } else {
                                1.0
                            }
                        };
                        check_step_finite(
                            row.iter().enumerate().map(|(j, w)| w + gamma[j] * wr * t(j)),
                            "fold of the removed element",
                        )?;
                        // The new column, y T[l, i] (or 0), folded the same way.
                        let wn = if c as usize == comp {
                            y * self.tasks.get(m as usize, task)
                        } else {
                            0.0
                        };
                        check_step_finite([wn + gamma[n] * wr * t(n)], "fold of the removed element")?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl MTBPRJ2 {
    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.params == other.params && self.literal_line14 == other.literal_line14
    }
}

impl CheckState for MTBPRJ2 {
    fn check_state(&self) -> Result<()> {
        check_settings(&self.kernel, &self.tasks, self.n_features, &self.params)?;
        let k = self.tasks.n_tasks();
        let last = self.dict.check_state(&self.kernel, k, self.n_features)?;
        let n = self.dict.len();
        let budget = self.params.budget;
        ensure(n <= budget, || {
            format!("{n} dictionary elements exceed the budget {budget}")
        })?;
        self.gram.check_state(n, budget.saturating_add(1))?;
        self.counters.check_state(n, last)?;
        // The component layout is the task kernel's (lengths first: they bound k and the
        // number of components by the payload before anything is allocated from them).
        check_len("MTBPRJ-2 local task rows", self.local.len(), k)?;
        check_len("MTBPRJ-2 components", self.members.len(), self.tasks.n_components())?;
        let members: Vec<Vec<u32>> = self
            .tasks
            .component_members()
            .iter()
            .map(|m| m.iter().map(|&i| i as u32).collect())
            .collect();
        ensure(self.members == members, || {
            "MTBPRJ-2's component members differ from the task kernel's".into()
        })?;
        for m in &members {
            for (p, &i) in m.iter().enumerate() {
                ensure(self.local[i as usize] as usize == p, || {
                    format!("MTBPRJ-2 local row of task {i} is wrong")
                })?;
            }
        }
        check_len("MTBPRJ-2 blocks", self.blocks.len(), members.len())?;
        ensure(n <= self.cap && self.cap <= budget.saturating_add(1), || {
            format!("MTBPRJ-2 column stride {} is not within [{n}, budget + 1]", self.cap)
        })?;
        // `allocated` lists exactly the components with a block, each once.
        let mut listed = vec![false; members.len()];
        for &c in &self.allocated {
            let c = c as usize;
            ensure(c < members.len() && !listed[c], || {
                "MTBPRJ-2's allocated blocks are not distinct components".into()
            })?;
            listed[c] = true;
        }
        for (c, block) in self.blocks.iter().enumerate() {
            ensure(block.is_some() == listed[c], || {
                format!("MTBPRJ-2 block {c} and the allocation list disagree")
            })?;
            if let Some(b) = block {
                ensure(b.members == members[c], || {
                    format!("MTBPRJ-2 block {c} has the wrong tasks")
                })?;
                check_len(
                    "MTBPRJ-2 block weights",
                    b.w.len(),
                    checked_size("block", b.members.len(), self.cap)?,
                )?;
                check_finite("MTBPRJ-2 block weights", &b.w)?;
            }
        }
        Ok(())
    }
}

impl OnlineLearner for MTBPRJ2 {
    kernel_shape!(grows);

    fn rebuild_caches(&mut self) {
        self.gram.force_rebuild();
    }

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        if task >= self.local.len() {
            return 0.0; // a task about to be added: its component has no block yet
        }
        let Some(block) = &self.blocks[self.tasks.component(task)] else {
            return 0.0;
        };
        let start = self.local[task] as usize * self.cap;
        let w = &block.w[start..start + self.dict.len()];
        let q = Query::new(x, &self.kernel);
        if let Some(f) = dense_coef_sum(self.dict.rows(), &self.kernel, &q, w) {
            return f;
        }
        let mut f = 0.0;
        self.dict
            .rows()
            .for_each_kernel(&self.kernel, &q, scratch, |_| true, |slot, kv| f += w[slot] * kv);
        f
    }

    /// Everything is computed and checked (finiteness, memory) before the first write.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()> {
        if !is_update_mistake(y, score) {
            self.counters.n_seen += 1;
            return Ok(());
        }
        let q = Query::new(x, &self.kernel);
        let n = self.dict.len();
        let mut kz = vec![0.0; n];
        if !dense_kernel_row(self.dict.rows(), &self.kernel, &q, &mut kz) {
            self.dict
                .rows()
                .for_each_kernel(&self.kernel, &q, scratch, |_| true, |slot, kv| kz[slot] = kv);
        }
        let kappa = self.kernel.self_value(q.sq_norm);
        let mut alpha = Vec::with_capacity(n);
        let d2 = self.gram.project(&kz, kappa, &mut alpha);
        let step = decide(&self.gram, &self.params, kappa, d2, &alpha, n)?;
        let comp = self.tasks.component(task);
        let time = self.counters.n_seen + 1;
        let mut plan = matches!(step, Step::Replace).then(|| self.plan_replace(&alpha, d2));
        self.check_step(&step, comp, task, y, &alpha, plan.as_ref())?;
        if !matches!(step, Step::Project) {
            self.gram.reserve(n + 1, self.params.budget)?;
            self.grow_to(n + 1)?;
        }
        self.ensure_block(comp)?;
        self.ensure_spread_index(time);
        self.counters.n_seen += 1;
        self.counters.n_updates += 1;
        let cap = self.cap;
        let tasks = &self.tasks;
        match step {
            Step::Project => {
                self.counters.n_projections += 1;
                if let Some(b) = self.blocks[comp].as_mut() {
                    for (l, &m) in b.members.iter().enumerate() {
                        let c = y * tasks.get(m as usize, task);
                        b.w[l * cap..l * cap + n]
                            .iter_mut()
                            .zip(&alpha)
                            .for_each(|(w, a)| *w += c * a);
                    }
                }
                self.spread.mark(comp as u32, time);
            }
            Step::Insert | Step::Replace => {
                self.counters.n_insertions += 1;
                // The new column n: y T[l, i] in the block of i; every other block's column n
                // is already 0 (no block holds a weight past the dictionary).
                if let Some(b) = self.blocks[comp].as_mut() {
                    for (l, &m) in b.members.iter().enumerate() {
                        b.w[l * cap + n] = y * tasks.get(m as usize, task);
                    }
                }
                if matches!(step, Step::Insert) {
                    self.dict.push(x, task, y, time, 0.0, &self.kernel);
                    self.gram.append(&kz, kappa, &alpha, d2);
                } else {
                    self.counters.n_evictions += 1;
                    let (r, gamma) = plan.take().expect("planned for a budget step");
                    // Tasks of the dictionary elements 0..n (slot order) and of the new one.
                    let elem_task: Vec<usize> =
                        (0..n).map(|j| self.dict.task(j)).chain(std::iter::once(task)).collect();
                    let literal = self.literal_line14;
                    // The blocks that may hold a weight in column r or n: the new element's, the
                    // one that inserted r, and those spread since r was inserted. Every other
                    // block is 0 in both columns, and a fold and swap would leave it unchanged.
                    let mut visit: Vec<u32> = self.spread.since(self.dict.time(r)).collect();
                    visit.extend([comp as u32, tasks.component(elem_task[r]) as u32]);
                    visit.sort_unstable();
                    visit.dedup();
                    #[cfg(test)]
                    {
                        self.spread.visited += visit.len() as u64;
                    }
                    for c in visit {
                        let Some(b) = self.blocks[c as usize].as_mut() else {
                            continue;
                        };
                        let mut folded = false;
                        for (l, &m) in b.members.iter().enumerate() {
                            let row = &mut b.w[l * cap..l * cap + n + 1];
                            let wr = row[r];
                            if wr != 0.0 {
                                folded = true;
                                for (j, w) in row.iter_mut().enumerate() {
                                    if literal {
                                        *w += gamma[j] * wr * tasks.get(m as usize, elem_task[j]);
                                    } else {
                                        *w += gamma[j] * wr;
                                    }
                                }
                            }
                            // Swap-remove column r: the new element moves into r.
                            row[r] = row[n];
                            row[n] = 0.0;
                        }
                        if folded {
                            self.spread.mark(c, time);
                        }
                    }
                    self.dict.push(x, task, y, time, 0.0, &self.kernel);
                    let pos = position_of(&self.dict, r);
                    self.dict.remove_at(pos);
                    self.gram.append_and_remove(&kz, kappa, &alpha, d2, r);
                }
            }
        }
        Ok(())
    }

    active_set_counters!(counters.n_updates, dict);

    /// On the disconnected graph a new task is a new component without a block: it scores 0.
    fn scores_new_tasks(&self) -> bool {
        matches!(self.tasks, TaskKernel::Disconnected { .. })
    }

    fn undoes_added_tasks(&self) -> bool {
        true
    }

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        let mut d = diagnostics(&self.counters, &self.gram);
        d.push(("n_weights", self.n_weights() as f64));
        d.push(("n_allocated_blocks", self.allocated.len() as f64));
        d
    }

    /// Removes the dictionary elements the tasks inserted (their rows), with their rows and
    /// columns of the inverse Gram matrix and their weight columns in every task's row, and
    /// zeroes the tasks' own weight rows. The dictionary is shared in the base-kernel space, so
    /// the other tasks' weights keep what the projections onto the tasks' elements gave them,
    /// less those columns.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.tasks.n_tasks())?;
        let n = self.dict.len();
        let keep = self.dict.keep_mask(tasks);
        let forget: std::collections::HashSet<usize> = tasks.iter().copied().collect();
        let cap = self.cap;
        for &c in &self.allocated {
            let Some(b) = self.blocks[c as usize].as_mut() else {
                continue;
            };
            for (l, &m) in b.members.iter().enumerate() {
                let row = &mut b.w[l * cap..l * cap + n];
                if forget.contains(&(m as usize)) {
                    row.fill(0.0);
                } else if let Some(keep) = &keep {
                    let mut next = 0;
                    for j in 0..n {
                        if keep[j] {
                            row[next] = row[j];
                            next += 1;
                        }
                    }
                    row[next..].fill(0.0);
                }
            }
        }
        let Some(keep) = keep else {
            return Ok(0);
        };
        self.gram.remove_positions(&keep);
        let removed = self.dict.retain_slots(&keep);
        self.counters.n_forgotten += removed as u64;
        Ok(removed)
    }
}

impl MTBPRJ2 {
    /// Adds `n` tasks. Disconnected graph: each new task is a new component with no block yet.
    /// A connected component holds one weight row per member, and a new member's row would be
    /// the sum of all past updates weighted by its task kernel entries, which the block does not
    /// keep: a complete graph grows only while its block is unallocated (no update yet).
    /// Atomic: on `Err` the model is unchanged.
    pub(super) fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        let (k, new_k) = (self.tasks.n_tasks(), tasks.n_tasks());
        let need = Need::new("n_tasks", new_k, "MTBPRJ2's per-task tables");
        match tasks {
            TaskKernel::Disconnected { .. } => {
                need.reserve(&mut self.members, n)?;
                need.reserve(&mut self.blocks, n)?;
                need.reserve(&mut self.local, n)?;
                self.members.extend((k..new_k).map(|i| vec![i as u32]));
                self.blocks.extend((0..n).map(|_| None));
                self.local.extend((0..n).map(|_| 0));
            }
            _ => {
                if self.blocks.iter().any(Option::is_some) {
                    return Err(Error::InvalidParameter {
                        name: "n_tasks",
                        reason: "MTBPRJ2 cannot add a task to a connected task graph once it has updated \
                                 (the new task's weight row is not kept); MTBPRJ grows on any closed-form graph"
                            .into(),
                    });
                }
                // The complete graph: one component; the new members join it at the end.
                need.reserve(&mut self.local, n)?;
                need.reserve(&mut self.members[0], n)?;
                self.local.extend((k..new_k).map(|i| i as u32));
                self.members[0].extend((k..new_k).map(|i| i as u32));
            }
        }
        self.tasks = tasks;
        Ok(())
    }

    /// Undoes [`MTBPRJ2::grow_tasks`] of the last `n` tasks, which hold no example (their
    /// events failed, or were not reached before an interrupt): O(n).
    fn shrink_tasks(&mut self, n: usize) {
        let k = self.tasks.n_tasks() - n;
        match &mut self.tasks {
            TaskKernel::Disconnected { k: size, .. } => {
                *size = k;
                let kept = self.members.len() - n;
                for c in kept..self.members.len() {
                    if self.blocks[c].take().is_some() {
                        self.allocated.retain(|&a| a as usize != c);
                        if let Some(t) = self.spread.since.remove(&(c as u32)) {
                            self.spread.by_time.remove(&(t, c as u32));
                        }
                    }
                }
                self.members.truncate(kept);
                self.blocks.truncate(kept);
            }
            TaskKernel::Complete { k: size, .. } => {
                *size = k;
                self.members[0].truncate(k);
            }
            TaskKernel::Dense { .. } => unreachable!("a dense task kernel does not grow"),
        }
        self.local.truncate(k);
    }
}
