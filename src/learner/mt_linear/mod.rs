//! MTLinear: online linear learning on the task-graph feature map with normalized adaptive,
//! importance-invariant updates (docs/mt_linear.md; ALGORITHMS.md-style formulas there).
//!
//! The multitask kernel with a linear base kernel is the feature map `φ(x, i) = b_i ⊗ x̃`, where
//! `BᵀB = T` (the task kernel) and `x̃ = (x, 1)` carries an intercept. So task `i` scores
//! `f_i(x) = Σ_r B[r, i] <w_r, x̃>` over weight blocks `w_r`. The factor is a closed form for the
//! disconnected graph (one block per task) and the complete graph (a shared block and one block per
//! task: VW's `-q st`), and the per-component symmetric square root `T_c^{1/2}` for a general `T`.
//! An example touches only the blocks of its task's component.
//!
//! Update rule (Ross, Mineiro & Langford, "Normalized online learning", UAI 2013; Karampatziakis &
//! Langford, "Online importance weight aware updates", UAI 2011), per coordinate `j` of `φ` with
//! value `u_j`, on an example with loss > 0 and derivative `g = ∂ℓ/∂p`:
//! `G_j += g² u_j²`, `N_j = max(N_j, |u_j|)` (rescaling `w_j` by `N_old/N_new` when it grows),
//! rate `r_j = 1/(√G_j N_j)`, multiplier `μ = √(n / Σ_t Σ_j u_j²/N_j²)` (per component),
//! sensitivity `h = μ Σ_j u_j² r_j`; the step `s` makes the prediction follow the gradient flow of
//! the loss for "time" `η` (a closed form per loss), and `w_j += s μ u_j r_j`.
//! `update="adagrad"` drops `N` and `μ`; `update="sgd"` uses `r_j = 1/√t`. `update="arow"` is
//! diagonal AROW (Crammer, Kulesza & Dredze 2009): variance `Σ_j = 1/(1 + η D_j)`, `D_j += u_j²`,
//! and the loss's proximal step along `Σ u` ([`Loss::proximal_step`]). `shared_rate = ρ` multiplies
//! the rates (AROW: the variances) of the complete graph's shared block, under every rule (M.8).
//!
//! Storage ([`store`]): with `hash_bits = b` one table of `2^b` cells shared by every block,
//! each (block, feature) hashed into it with the block as seed, so colliding coordinates share a
//! weight and its statistics. Without
//! hashing every coordinate has its own cell: dense blocks for a narrow feature space, a sparse
//! map of the (block, feature) pairs touched for a wide one. An undo journal
//! ([`store::Journal`]) makes a batch atomic at the cost of the cells it writes.
//!
//! The state is single precision (as VW's table), the arithmetic double (docs/mt_linear.md, M.5).

use serde::{Deserialize, Serialize};

mod budget;
mod check;
mod forget;
mod lanes;
mod loss;
mod shared;
mod store;
mod update;
mod width;

use lanes::*;
#[cfg(test)]
use loss::{logistic_margin_gain, sigmoid};
pub use loss::{Loss, UpdateRule};

pub use store::{slot_of, DENSE_MAX_WIDTH};

use store::{dense_fits, CellAt, Journal, SparseCells, Store, ABSENT, INTERCEPT_KEY, SHARED};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::{Scratch, TaskKernel};
use crate::learner::spec::check_positive;
use crate::learner::{Build, Checked, GraphSetting, OnlineLearner, ParamGuard};
use crate::linalg::{sym_sqrt, SymMatrix};
use crate::simd::{fma_builds, LaneMath};
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState, MAX_MAGNITUDE};

/// The largest `hash_bits`: 2^31 slots per block is already 16 GiB of weights.
pub const MAX_HASH_BITS: u32 = 31;

/// Counters of one connected component of the task graph (the normalizer and SGD clock are kept
/// per component, so that tasks in different components never interact).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct ComponentStats {
    /// Examples seen (the SGD clock `t`).
    n_examples: f64,
    /// Examples that updated (`n` in the multiplier `μ`).
    n_updates: f64,
    /// Σ over updating examples of Σ_j u_j²/N_j².
    sum_norm_x: f64,
}

learner_params! {
    /// Hyper-parameters of [`MTLinear`], validated by [`ParamGuard::check`]; `Default` gives
    /// Python's `MTLinear()`.
    pub struct MTLinearParams {
        /// The loss. Default [`Loss::Logistic`].
        pub loss: Loss,
        /// The update rule (Python's `update`). Default [`UpdateRule::Normalized`].
        #[cfg_attr(feature = "python", pyo3(item("update")))]
        pub rule: UpdateRule,
        /// The step size η (> 0; AROW: `r = 1/η`). Default 0.5.
        pub learning_rate: f64,
        /// Learn an intercept per block (the feature `x̃ = (x, 1)`). Default `true`.
        pub fit_intercept: bool,
        /// Hash every (block, feature) into one table of `2^hash_bits` cells (in
        /// `[1, MAX_HASH_BITS]`); `None` gives every coordinate its own cell. Default `None`.
        pub hash_bits: Option<u32>,
        /// `ρ`: the factor on the rates of the complete graph's shared block (docs/mt_linear.md,
        /// M.8); graphs without a shared block ignore it. Default 2 (1 is Vowpal Wabbit's `-q st`).
        pub shared_rate: f64,
        /// A byte budget over users (docs/lifecycle.md): exact own cells for the most recently
        /// active users, the least recently active evicted when a new cell would not fit, so
        /// that `memory_bytes` never exceeds it. Without hashing, on the disconnected or
        /// complete graph. Default `None` (no budget).
        #[cfg_attr(feature = "python", pyo3(default))]
        pub max_bytes: Option<u64>,
        /// With `max_bytes`: a table of `2^tail_bits` weights into which evicted users' weights
        /// are folded (hashed by user and feature) and which they read from then on. Default
        /// `None` (evicted users fall back to the shared block).
        #[cfg_attr(feature = "python", pyo3(default))]
        pub tail_bits: Option<u32>,
    }

    fn check(&self) -> Result<()> {
        check_positive("learning_rate", self.learning_rate)?;
        check_positive("shared_rate", self.shared_rate)?;
        if let Some(b) = self.hash_bits {
            if !(1..=MAX_HASH_BITS).contains(&b) {
                return Err(invalid(
                    "hash_bits",
                    format!("must be in [1, {MAX_HASH_BITS}], got {b}"),
                ));
            }
        }
        if self.max_bytes.is_some() && self.hash_bits.is_some() {
            return Err(invalid(
                "max_bytes",
                "bounds exact per-user cells; with hash_bits the memory is the table's already (a hashed tail for \
                 evicted users is tail_bits)",
            ));
        }
        match self.tail_bits {
            Some(_) if self.max_bytes.is_none() => Err(invalid(
                "tail_bits",
                "is the hashed tail of a user budget: set max_bytes too",
            )),
            Some(b) if !(1..=MAX_HASH_BITS).contains(&b) => Err(invalid(
                "tail_bits",
                format!("must be in [1, {MAX_HASH_BITS}], got {b}"),
            )),
            _ => Ok(()),
        }
    }
}

impl MTLinearParams {
    /// The same parameters with the shared block's rate factor `ρ = shared_rate` (checked).
    pub fn with_shared_rate(self, shared_rate: f64) -> Result<Self> {
        Ok(Self { shared_rate, ..self }.check()?.into_inner())
    }
}

/// MTLinear: online linear learning on the task graph's feature map `φ(x, i) = b_i ⊗ (x, 1)`
/// with normalized adaptive updates (docs/mt_linear.md). The fast linear learner; any task
/// graph, dense or sparse rows, optional feature hashing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MTLinear {
    n_tasks: usize,
    n_features: usize,
    params: MTLinearParams,
    /// The task kernel the factor follows (closed forms: computed from it per example).
    tasks: TaskKernel,
    /// A general task kernel only: per task, the blocks it reads and writes with their factor
    /// entries `(r, B[r, i])`, B[r, i] ≠ 0, and its component (empty for the closed forms, whose
    /// entries are computed: nothing is stored per task).
    terms: Vec<Vec<(u32, f64)>>,
    component: Vec<u32>,
    /// Per connected component (one for the complete graph, one per task when disconnected).
    stats: Vec<ComponentStats>,
    store: Store,
    n_updates: u64,
    /// The user budget's state (under `max_bytes`).
    budget: Option<budget::UserBudget>,
    /// Undo log of the batch in progress ([`OnlineLearner::journal_begin`]).
    #[serde(skip)]
    journal: Journal,
    /// Per-coordinate rates of the update in progress (phase one to phase two).
    #[serde(skip)]
    rates: Vec<f64>,
    /// The nonzero entries `(key, value)` of the example being learnt.
    #[serde(skip)]
    entries: Vec<(usize, f64)>,
    /// Per coordinate of the update in progress: u and the slot's G and N before it.
    #[serde(skip)]
    pad: Scratchpad,
    /// The factor entries of the update in progress.
    #[serde(skip)]
    term_buf: Vec<(u32, f64)>,
    /// A replica's record of its shared cells written since its last sync
    /// ([`crate::learner::shared`]); none unless recording.
    #[serde(skip)]
    tracker: Option<Box<shared::SharedTracker>>,
}

/// The factor entries `(block, B[block, task])` of one task: computed for the closed forms, or
/// the stored list of a general task kernel.
enum Terms<'a> {
    Closed([(u32, f64); 2], usize),
    Stored(&'a [(u32, f64)]),
}

impl std::ops::Deref for Terms<'_> {
    type Target = [(u32, f64)];

    fn deref(&self) -> &[(u32, f64)] {
        match self {
            Terms::Closed(t, n) => &t[..*n],
            Terms::Stored(t) => t,
        }
    }
}

/// A general task kernel's factor `B = T_c^{1/2}` per component, as per-task lists
/// `(block, B[block, task])` (exact zeros skipped); block ids are task indices.
fn dense_factor_terms(tasks: &TaskKernel) -> Vec<Vec<(u32, f64)>> {
    let TaskKernel::Dense { k, ref t, .. } = *tasks else {
        return Vec::new(); // the closed forms are computed per example (`MTLinear::terms`)
    };
    let mut terms = vec![Vec::new(); k];
    for members in tasks.component_members() {
        let m = members.len();
        let mut sub = vec![0.0; m * m];
        for (a, &i) in members.iter().enumerate() {
            for (b, &j) in members.iter().enumerate() {
                sub[a * m + b] = t[i * k + j];
            }
        }
        let root = sym_sqrt(&SymMatrix { n: m, data: sub });
        for (b, &i) in members.iter().enumerate() {
            terms[i] = members
                .iter()
                .enumerate()
                .map(|(a, &s)| (s as u32, root.get(a, b)))
                .filter(|&(_, c)| c != 0.0)
                .collect();
        }
    }
    terms
}

impl MTLinear {
    /// The hyper-parameters.
    pub fn params(&self) -> &MTLinearParams {
        &self.params
    }

    /// The task kernel the factor follows.
    pub fn task_kernel(&self) -> &TaskKernel {
        &self.tasks
    }
}

impl Build for MTLinear {
    type Params = MTLinearParams;
    type Setting<'a> = GraphSetting<'a>;

    fn from_checked(params: &Checked<MTLinearParams>, setting: &GraphSetting) -> Result<Self> {
        let (tasks, n_features, params) = (setting.task_kernel, setting.n_features, **params);
        let n_tasks = tasks.n_tasks();
        // Keys are u32 in the sparse map (the intercept's is n_features): feature indices are u32.
        if n_features >= u32::MAX as usize {
            return Err(invalid(
                "n_features",
                format!("MTLinear takes feature indices below 2^32 - 1, got n_features = {n_features}"),
            ));
        }
        let width = n_features + usize::from(params.fit_intercept);
        let dense_t = matches!(tasks, TaskKernel::Dense { .. });
        // Per task: a dense block slot; a general T's factor terms and component.
        let per_task = 16 + if dense_t { 24 + 4 } else { 0 };
        Need::new("n_tasks", n_tasks, "MTLinear's per-task state").count::<u8>(&[n_tasks + 1, per_task])?;
        let component = if dense_t {
            (0..n_tasks).map(|i| tasks.component(i) as u32).collect()
        } else {
            Vec::new()
        };
        let n_blocks = match *tasks {
            TaskKernel::Complete { k, .. } if k >= 2 => k + 1,
            _ => n_tasks,
        };
        let (store, budget) = match params.max_bytes {
            None => (
                Store::new(params.hash_bits, width, params.rule.stride(), n_tasks, n_blocks)?,
                None,
            ),
            Some(_) => {
                if dense_t {
                    return Err(invalid(
                        "max_bytes",
                        "a user budget needs the disconnected or complete graph (a general graph's blocks are not one user's)",
                    ));
                }
                let mut cells = SparseCells::new(params.rule.stride());
                cells.enable_chains(n_tasks)?;
                (
                    Store::Sparse(cells),
                    Some(budget::UserBudget::new(n_tasks, params.tail_bits)?),
                )
            }
        };
        let model = Self {
            n_tasks,
            n_features,
            params,
            tasks: tasks.clone(),
            terms: dense_factor_terms(tasks),
            component,
            stats: vec![ComponentStats::default(); tasks.n_components()],
            store,
            n_updates: 0,
            budget,
            journal: Journal::default(),
            rates: Vec::new(),
            entries: Vec::new(),
            pad: Scratchpad::default(),
            term_buf: Vec::new(),
            tracker: None,
        };
        model.check_budget_fits()?;
        Ok(model)
    }
}

impl MTLinear {
    /// `task`'s factor entries `(block, B[block, task])`, B ≠ 0 (M.1): the disconnected graph's
    /// own block; the complete graph's own block then the shared one ([`SHARED`]); one block for
    /// the one-task complete graph; a general kernel's stored list.
    #[inline]
    fn terms(&self, task: usize) -> Terms<'_> {
        let mut out = [(0u32, 0.0f64); 2];
        let mut n = 0;
        let mut push = |r: u32, b: f64| {
            if b != 0.0 {
                out[n] = (r, b);
                n += 1;
            }
        };
        match self.tasks {
            TaskKernel::Disconnected { scale, .. } => push(task as u32, scale.sqrt()),
            // k = 1: T is 1 x 1, one block (the shared/per-task split would duplicate every feature).
            TaskKernel::Complete { k: 1, diag, .. } => push(0, diag.sqrt()),
            TaskKernel::Complete { diag, off, .. } => {
                push(task as u32, (diag - off).max(0.0).sqrt());
                push(SHARED, off.max(0.0).sqrt());
            }
            TaskKernel::Dense { .. } => return Terms::Stored(&self.terms[task]),
        }
        Terms::Closed(out, n)
    }

    /// The component whose counters `task` uses.
    #[inline]
    fn component_of(&self, task: usize) -> usize {
        match self.tasks {
            TaskKernel::Complete { .. } => 0,
            TaskKernel::Disconnected { .. } => task,
            TaskKernel::Dense { .. } => self.component[task] as usize,
        }
    }

    /// The position of the complete graph's shared block among `task`'s terms, the block whose
    /// rates `shared_rate` multiplies (M.8); None for every other graph.
    fn shared_term(&self, task: usize) -> Option<usize> {
        self.terms(task).iter().position(|&(r, _)| r == SHARED)
    }

    /// Cells per block as the user sees them: `2^hash_bits` (one table shared by every block)
    /// or `n_features (+1)`.
    pub fn width(&self) -> usize {
        match self.store {
            Store::Hashed { bits, .. } => 1 << bits,
            _ => self.n_features + usize::from(self.params.fit_intercept),
        }
    }

    /// Number of weight blocks (rows of the factor B: one per task, plus a shared block for the
    /// complete graph).
    pub fn n_blocks(&self) -> usize {
        match self.tasks {
            TaskKernel::Complete { k, .. } if k >= 2 => k + 1,
            _ => self.n_tasks,
        }
    }

    /// Bytes allocated for the model's state: the cells (table, dense blocks, or sparse records
    /// with their index), the per-component counters and a general kernel's factor.
    pub fn memory_bytes(&self) -> usize {
        let stride = self.params.rule.stride();
        let terms: usize = self.terms.iter().map(|t| 24 + t.capacity() * 16).sum();
        self.store.memory_bytes(stride)
            + self.stats.capacity() * std::mem::size_of::<ComponentStats>()
            + self.component.capacity() * 4
            + terms
            + self.budget.as_ref().map_or(0, budget::UserBudget::memory_bytes)
            + self.tracker.as_ref().map_or(0, |t| t.memory_bytes())
    }

    /// All blocks as a `n_blocks x width` row-major matrix (own blocks by task, then the complete
    /// graph's shared block; zeros where nothing was written). None under hashing (the blocks
    /// share one table: [`Self::table_weights`]) or when larger than `max_values`.
    pub fn block_weights(&self, max_values: usize) -> Option<Vec<f64>> {
        let (n_blocks, width) = (self.n_blocks(), self.width());
        if n_blocks.checked_mul(width).is_none_or(|n| n > max_values) {
            return None;
        }
        let mut out = vec![0.0; n_blocks * width];
        let id = |row: usize| {
            if row == self.n_tasks && n_blocks > self.n_tasks {
                SHARED
            } else {
                row as u32
            }
        };
        let stride = self.params.rule.stride();
        match &self.store {
            Store::Hashed { .. } => return None,
            Store::Dense { .. } => {
                for (row, chunk) in out.chunks_mut(width).enumerate() {
                    if let Some(data) = self.store.dense_block(id(row)) {
                        chunk
                            .iter_mut()
                            .zip(data.iter().step_by(stride))
                            .for_each(|(o, &w)| *o = f64::from(w));
                    }
                }
            }
            Store::Sparse(cells) => {
                for (&(r, key), cell) in cells.keys().iter().zip(cells.cells().chunks_exact(stride)) {
                    let row = if r == SHARED { self.n_tasks } else { r as usize };
                    out[row * width + key as usize] = f64::from(cell[0]);
                }
            }
        }
        Some(out)
    }
}

impl MTLinear {
    /// The weights of the hashed table (empty before the first update or without hashing).
    pub fn table_weights(&self) -> Vec<f64> {
        match &self.store {
            Store::Hashed { table: Some(t), .. } => t
                .iter()
                .step_by(self.params.rule.stride())
                .map(|&w| f64::from(w))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl OnlineLearner for MTLinear {
    shape_fields!(grows);

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        let s: f64 = self.terms(task).iter().map(|&(r, b)| b * self.block_score(&x, r)).sum();
        if self.budget.is_some() {
            return s + self.tail_score(&x, task);
        }
        s
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.gather(&x, task);
        self.learn_gathered(task, y, score)
    }

    /// Starts loading the cells of the next example's coordinates (each a cache miss on a large
    /// table) while this one is learnt.
    fn prefetch(&self, x: Row, task: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let stride = self.params.rule.stride();
            let Row::Sparse { indices, values } = x else {
                return; // dense rows: few features, their slots stay in cache
            };
            // The row's values, which the gather reads first (its indices are read just below).
            for chunk in values.chunks(8) {
                // SAFETY: a prefetch is a hint on a valid address; it never faults.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(chunk.as_ptr().cast()) };
            }
            let cell_hint = |data: &[f32], at: usize| {
                if let Some(cell) = data.get(at..at + stride) {
                    // SAFETY: prefetches are hints on valid addresses; they never fault. A cell
                    // that straddles two cache lines gets both.
                    unsafe {
                        _mm_prefetch::<_MM_HINT_T0>(cell.as_ptr().cast());
                        _mm_prefetch::<_MM_HINT_T0>(cell[stride - 1..].as_ptr().cast());
                    }
                }
            };
            for &(r, _) in self.terms(task).iter() {
                let (loc, Some(data)) = self.block_view(r) else {
                    continue;
                };
                for &j in indices {
                    match loc {
                        Loc::Direct => cell_hint(data, j as usize * stride),
                        Loc::Hashed(n) => cell_hint(data, slot_of(u64::from(j), r, n) * stride),
                        Loc::Sparse(_) => return, // the probe is the cost; nothing to hint cheaply
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (x, task);
    }

    /// Score and update share one gathering pass over the example's slots.
    fn learn_one(&mut self, x: Row, task: usize, y: f64, _scratch: &mut Scratch) -> Result<f64> {
        let score = self.gather(&x, task);
        self.learn_gathered(task, y, score)?;
        Ok(score)
    }

    linear_counters!();

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        let (layout, n_cells) = match &self.store {
            Store::Dense { own, shared, .. } => {
                let blocks = own.iter().chain(std::iter::once(shared)).flatten().count();
                (0.0, blocks * self.width())
            }
            Store::Sparse(cells) => (1.0, cells.len()),
            Store::Hashed { table, .. } => (2.0, table.as_ref().map_or(0, |_| self.width())),
        };
        vec![
            ("memory_bytes", self.memory_bytes() as f64),
            ("n_blocks", self.n_blocks() as f64),
            ("n_cells", n_cells as f64),
            ("block_width", self.width() as f64),
            ("storage", layout),
            ("n_evicted_users", self.n_evicted_users() as f64),
            ("n_resident_users", self.n_resident_users() as f64),
        ]
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        let mut out = Vec::new();
        // A dense picture of the blocks only where it is small (2^24 values, 128 MB).
        if let Some(w) = self.block_weights(1 << 24) {
            out.push(("block_weights", vec![self.n_blocks(), self.width()], w));
        }
        if let Store::Hashed { table: Some(_), .. } = self.store {
            out.push(("table_weights", vec![self.width()], self.table_weights()));
        }
        out
    }

    fn journal_begin(&mut self) -> bool {
        let n_evicted = self.n_evicted_users();
        let j = &mut self.journal;
        j.clear();
        j.active = true;
        j.n_updates = self.n_updates;
        j.n_tasks = self.n_tasks;
        j.n_stats = self.stats.len();
        j.sparse_len = match &self.store {
            Store::Sparse(cells) => cells.len(),
            _ => 0,
        };
        j.n_own = match &self.store {
            Store::Dense { own, .. } => own.len(),
            _ => 0,
        };
        j.n_evicted = n_evicted;
        true
    }

    fn journal_commit(&mut self) {
        self.journal.clear();
    }

    /// Undoes everything since [`OnlineLearner::journal_begin`]: the cells in reverse order of
    /// their writes, then what was allocated or added, then the counters. Its cost is the
    /// journal's length.
    fn journal_rollback(&mut self) {
        let mut j = std::mem::take(&mut self.journal);
        if !j.active {
            self.journal = j;
            return;
        }
        if let Some(start) = j.snapshot.take() {
            *self = *start;
            j.clear();
            self.journal = j;
            return;
        }
        let stride = self.params.rule.stride();
        let mut cells = &j.cells[..];
        if let Some(old) = j.old_store.take() {
            // Tasks added by the call made the layout sparse: the dense store comes back, and only
            // the writes logged before the conversion concern it.
            self.store = old;
            cells = &j.cells[..j.cells_at_convert];
        }
        if let Store::Sparse(sparse) = &mut self.store {
            sparse.reserve_for_undo(cells);
        }
        for &(at, cell) in cells.iter().rev() {
            match (&mut self.store, at) {
                (Store::Sparse(cells), CellAt::Inserted) => {
                    cells.pop();
                    continue;
                }
                (Store::Sparse(cells), CellAt::Removed { r, block, key }) => {
                    cells.unremove(r, block, key, &cell);
                    continue;
                }
                _ => {}
            }
            let data: &mut [f32] = match (&mut self.store, at) {
                (Store::Hashed { table: Some(t), .. }, CellAt::Flat(_)) => t,
                (Store::Sparse(cells), CellAt::Flat(_)) => cells.cells_mut(),
                (store @ Store::Dense { .. }, CellAt::Block(r, _)) => match store.dense_block_mut(r) {
                    Some(b) => b,
                    None => continue,
                },
                _ => continue,
            };
            if let CellAt::Flat(offset) | CellAt::Block(_, offset) = at {
                data[offset..offset + stride].copy_from_slice(&cell[..stride]);
            }
        }
        match &mut self.store {
            Store::Hashed { table, .. } if j.new_table => *table = None,
            Store::Sparse(cells) => {
                while cells.len() > j.sparse_len {
                    cells.pop();
                }
            }
            store @ Store::Dense { .. } => {
                for &r in &j.new_blocks {
                    *store.dense_slot(r) = None;
                }
                if let Store::Dense { own, .. } = store {
                    own.truncate(j.n_own);
                }
            }
            _ => {}
        }
        for &(c, [n_examples, n_updates, sum_norm_x]) in j.stats.iter().rev() {
            if let Some(st) = self.stats.get_mut(c) {
                *st = ComponentStats {
                    n_examples,
                    n_updates,
                    sum_norm_x,
                };
            }
        }
        self.stats.truncate(j.n_stats);
        for &op in j.budget.iter().rev() {
            self.undo_budget(op);
        }
        self.truncate_budget(j.n_tasks, j.n_evicted);
        if let Some(tasks) = j.tasks.take() {
            self.tasks = tasks;
        }
        self.n_tasks = j.n_tasks;
        self.n_updates = j.n_updates;
        j.clear();
        self.journal = j;
    }

    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        self.forget(tasks)
    }

    fn scores_new_tasks(&self) -> bool {
        // A new task scores with empty own blocks: the shared block alone on the open complete
        // graph (k >= 2), nothing when disconnected. A one-task complete graph changes its factor
        // when it grows.
        match self.tasks {
            TaskKernel::Disconnected { .. } => true,
            TaskKernel::Complete { k, .. } => k >= 2,
            TaskKernel::Dense { .. } => false,
        }
    }
}

impl MTLinear {
    /// Adds `n` tasks (open-ended task sets) in place, in O(n) amortised: the disconnected graph
    /// gets `n` new components (counters); the complete graph's new tasks join its component,
    /// with own blocks not yet written, while the shared block keeps its id (and hash seed), so
    /// nothing learned changes (M.1). Refused, leaving the model unchanged: a complete graph with
    /// k = 1 whose single block holds weights (M.1 uses one block for k = 1, which does not split
    /// into shared and own). Journaled when a batch is.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        let (k, new_k) = (self.n_tasks, tasks.n_tasks());
        let complete = matches!(tasks, TaskKernel::Complete { .. });
        if complete && k == 1 && self.n_updates > 0 && self.has_cells() {
            return Err(invalid(
                "n_tasks",
                "MTLinear cannot add tasks to this fitted model: a one-task complete graph keeps one block, \
                 which does not split into shared and own blocks",
            ));
        }
        let need = Need::new("n_tasks", new_k, "MTLinear's per-task state");
        if !complete {
            if self.budget.is_some() {
                // The budget counts these at nine eighths of the users: grown an eighth at a time.
                let (len, cap) = (self.stats.len(), self.stats.capacity());
                if cap < len + n {
                    need.reserve_exact(&mut self.stats, n.max(len / 8))?;
                }
            } else {
                need.reserve(&mut self.stats, n)?;
            }
        }
        let stride = self.params.rule.stride();
        let width = self.n_features + usize::from(self.params.fit_intercept);
        let new_blocks = if complete && new_k >= 2 { new_k + 1 } else { new_k };
        let sparse = match &self.store {
            // Too many tasks for dense blocks of this width: the cells move to the sparse map
            // (once; the dense store is kept until the journal ends).
            Store::Dense { .. } if !dense_fits(width, stride, new_blocks) => Some(self.store.to_sparse(stride)?),
            _ => None,
        };
        if let (None, Store::Dense { own, .. }) = (&sparse, &mut self.store) {
            need.reserve(own, n)?;
        }
        self.grow_budget(new_k)?;
        // Nothing below fails.
        if self.journal.logging() && self.journal.tasks.is_none() {
            self.journal.tasks = Some(self.tasks.clone());
        }
        if !complete {
            self.stats.resize(self.stats.len() + n, ComponentStats::default());
        }
        if let Some(cells) = sparse {
            let dense = std::mem::replace(&mut self.store, Store::Sparse(cells));
            if self.journal.logging() {
                self.journal.old_store = Some(dense);
                self.journal.cells_at_convert = self.journal.cells.len();
                self.journal.sparse_len = 0; // every sparse cell is new: dropped with the store
            }
        }
        if let Store::Dense { own, .. } = &mut self.store {
            own.resize_with(own.len() + n, || None);
        }
        self.n_tasks = new_k;
        self.tasks = tasks;
        Ok(())
    }

    /// Undoes [`MTLinear::grow_tasks`] of the last `n` tasks, which hold no example: their
    /// counters, block slots and budget state go, and a store that is sparse only because of
    /// them comes back dense (the layout a model of this many tasks has: [`dense_fits`]). A
    /// complete graph that holds weights keeps at least two tasks (its one-task form is a
    /// single block, see `grow_tasks`).
    fn shrink_tasks(&mut self, n: usize) {
        let complete = matches!(self.tasks, TaskKernel::Complete { .. });
        let floor = if complete && self.has_cells() { 2 } else { 1 };
        let new_k = (self.n_tasks - n).max(floor.min(self.n_tasks));
        let n = self.n_tasks - new_k;
        if n == 0 {
            return;
        }
        self.tasks.shrink(n);
        self.n_tasks = new_k;
        if !complete {
            debug_assert!(self.stats[new_k..].iter().all(|s| s.n_examples == 0.0));
            self.stats.truncate(new_k);
        }
        if let Store::Dense { own, .. } = &mut self.store {
            debug_assert!(own[new_k..].iter().all(Option::is_none));
            own.truncate(new_k);
        }
        if self.budget.is_some() {
            self.truncate_budget(new_k, self.n_evicted_users());
            return;
        }
        let (width, stride) = (self.width(), self.params.rule.stride());
        if let Store::Sparse(cells) = &self.store {
            if dense_fits(width, stride, self.n_blocks()) {
                // On a failed allocation the sparse layout stays: the same weights.
                if let Ok(dense) = Store::dense_from(cells, width, new_k) {
                    self.store = dense;
                }
            }
        }
    }

    /// Whether any cell was written.
    fn has_cells(&self) -> bool {
        match &self.store {
            Store::Hashed { table, .. } => table.is_some(),
            Store::Dense { own, shared, .. } => own.iter().chain(std::iter::once(shared)).any(Option::is_some),
            Store::Sparse(cells) => cells.len() > 0,
        }
    }
}

#[cfg(test)]
mod tests;
