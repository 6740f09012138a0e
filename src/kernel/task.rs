//! Task relations (ALGORITHMS.md §2.3): graph -> Laplacian -> interaction matrix A = I + L ->
//! task kernel T = A^{-1}, plus the user-supplied variants. Everything downstream reads only T.
//!
//! The complete and the disconnected graph keep their closed forms (T = (I + 11ᵀ)/(k+1) and
//! T = I), so a task kernel over 100,000 tasks costs O(1) memory.

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::linalg::{cholesky_inverse, spd_inverse_in_place, sym_eigen, SymMatrix};

/// The task kernel T (k x k, symmetric positive definite): how much an example of task j counts
/// for task i. Build it from a graph ([`TaskKernel::complete`], [`TaskKernel::disconnected`],
/// [`TaskKernel::from_edges`]) or a matrix ([`TaskKernel::from_interaction`] and kin); the
/// constructors validate, so prefer them to building a variant by hand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TaskKernel {
    /// `T = scale * I`: no task shares anything.
    Disconnected {
        /// Number of tasks.
        k: usize,
        /// The diagonal value (> 0).
        scale: f64,
    },
    /// `T = (diag - off) I + off 11ᵀ`: every pair of tasks equally related.
    Complete {
        /// Number of tasks.
        k: usize,
        /// `T_ii`.
        diag: f64,
        /// `T_ij` for `i != j`.
        off: f64,
    },
    /// A general symmetric PSD `T` (row-major) and the connected component of each task.
    Dense {
        /// Number of tasks.
        k: usize,
        /// `T`, row-major, `k * k` values.
        t: Vec<f64>,
        /// The connected component of each task (tasks in different components never interact).
        components: Vec<u32>,
    },
}

fn check_k(k: usize) -> Result<()> {
    if k == 0 {
        return Err(Error::InvalidTaskRelation("the number of tasks must be >= 1".into()));
    }
    Ok(())
}

impl TaskKernel {
    /// T = I.
    pub fn disconnected(k: usize) -> Result<Self> {
        check_k(k)?;
        Ok(Self::Disconnected { k, scale: 1.0 })
    }

    /// T = (I + L_C)^{-1} = (I + 11ᵀ)/(k+1) for the complete graph.
    pub fn complete(k: usize) -> Result<Self> {
        check_k(k)?;
        let kp1 = (k + 1) as f64;
        Ok(Self::Complete {
            k,
            diag: 2.0 / kp1,
            off: 1.0 / kp1,
        })
    }

    /// The open-ended complete graph (DECISIONS.md, "open-ended task sets"): `T_ii = 1`,
    /// `T_ij = 1/2` for any number of tasks, the fixed-k complete kernel times (k+1)/2. Its
    /// entries do not depend on k, so adding a task ([`TaskKernel::grow`]) changes no existing
    /// value; it is the shared + own feature map `(x/√2, e_i ⊗ x/√2)` (VW's `-q st`).
    pub fn complete_open(k: usize) -> Result<Self> {
        check_k(k)?;
        Ok(Self::Complete { k, diag: 1.0, off: 0.5 })
    }

    /// T = (I + L_G)^{-1} for an undirected graph given by weighted edges `(i, j, w)`, w >= 0.
    ///
    /// I + L is block diagonal by connected component, so T is factored component by component
    /// (the time is Σ c³/2 multiply-adds over the component sizes c: a graph of isolated pairs is
    /// linear in k), each by a blocked Cholesky inverse (`src/linalg/spd_inverse.rs`: the speed of a
    /// BLAS at the same SIMD level). The memory (the k x k result and two c x c buffers for the
    /// largest component) is checked against what is available before anything is allocated,
    /// and the interrupt hook is polled between block steps ([`crate::interrupt`]).
    pub fn from_edges(k: usize, edges: &[(usize, usize, f64)]) -> Result<Self> {
        Self::by_component(k, edges, 1.0, |a, _| {
            let n = a.n;
            (0..n).for_each(|i| a.data[i * n + i] += 1.0);
            spd_inverse(a)?
                .then_some(())
                .ok_or_else(|| Error::Numerical("I + L is not positive definite".into()))
        })
    }

    /// T = L_G^+, the Moore-Penrose pseudo-inverse of the Laplacian (not recommended, §2.3:
    /// it forces the scores of each component to sum to zero, and isolated tasks score 0).
    /// Computed per connected component as [`TaskKernel::from_edges`]: on a connected component
    /// of c tasks, L's null space is the constant vector, so `L^+ = (L + s J/c)^{-1} - J/(c s)`
    /// (J = 11ᵀ, any s > 0; s = the mean non-zero eigenvalue, trace(L)/(c - 1), keeps the two
    /// terms on one scale), one blocked Cholesky inverse. The eigendecomposition the contract
    /// names (eigenvalues below 1e-12 λmax count as zero) gives the same matrix unless
    /// λ2 < 1e-12 λmax; that is ruled out by `trace(L^+) 2 max_degree < 1e12` (as
    /// 1/λ2 <= trace(L^+) and λmax <= 2 max_degree), and only a component failing that test (or
    /// the factorisation) is eigendecomposed.
    pub fn laplacian_pinv(k: usize, edges: &[(usize, usize, f64)]) -> Result<Self> {
        Self::by_component(k, edges, 0.0, |lap, edges| {
            let c = lap.n;
            let trace: f64 = (0..c).map(|i| lap.data[i * c + i]).sum();
            let max_degree = (0..c).map(|i| lap.data[i * c + i]).fold(0.0f64, f64::max);
            let s = trace / (c - 1) as f64;
            let shift = s / c as f64;
            lap.data.iter_mut().for_each(|v| *v += shift);
            if spd_inverse(lap)? {
                let back = 1.0 / (c as f64 * s);
                lap.data.iter_mut().for_each(|v| *v -= back);
                let trace_pinv: f64 = (0..c).map(|i| lap.data[i * c + i]).sum();
                if trace_pinv.is_finite() && trace_pinv * 2.0 * max_degree < 1e12 {
                    return Ok(());
                }
            }
            *lap = laplacian(
                c,
                edges,
                &Need::new("n_tasks", c, "the Laplacian of a connected component"),
            )?;
            pinv_by_eigen(lap)
        })
    }

    /// A dense kernel from a graph: `block` turns each connected component's Laplacian (of two
    /// or more tasks, in ascending task order; its edges in local numbers beside it) into its
    /// block of T in place; an isolated task
    /// gets `isolated` on the diagonal. Zero entries elsewhere.
    fn by_component(
        k: usize,
        edges: &[(usize, usize, f64)],
        isolated: f64,
        mut block: impl FnMut(&mut SymMatrix, &[(usize, usize, f64)]) -> Result<()>,
    ) -> Result<Self> {
        check_edges(k, edges)?;
        let need = Need::new(
            "n_tasks",
            k,
            "the task kernel (n_tasks x n_tasks) and the factorisation of its largest connected component",
        );
        // The result alone, then with the largest component's Laplacian and its scratch, before
        // anything of size k (let alone k x k) is allocated.
        let square = |n: usize| (n as u128).saturating_mul(n as u128).saturating_mul(8);
        need.check_bytes(square(k))?;
        let components = components_from_edges(k, edges);
        let n_components = components.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_components];
        let mut local = vec![0usize; k];
        for (i, &c) in components.iter().enumerate() {
            local[i] = members[c as usize].len();
            members[c as usize].push(i);
        }
        let largest = members.iter().map(Vec::len).max().unwrap_or(0);
        need.check_bytes(square(k).saturating_add(square(largest).saturating_mul(2)))?;
        let mut component_edges: Vec<Vec<(usize, usize, f64)>> = vec![Vec::new(); n_components];
        for &(i, j, w) in edges.iter().filter(|e| e.2 > 0.0) {
            component_edges[components[i] as usize].push((local[i], local[j], w));
        }
        if n_components == 1 && k > 1 {
            // One component of every task: its block is T itself.
            let mut a = laplacian(k, &component_edges[0], &need)?;
            block(&mut a, &component_edges[0])?;
            return Ok(Self::Dense {
                k,
                t: a.data,
                components,
            });
        }
        let mut t = need.filled(&[k, k], 0.0f64)?;
        for (tasks, edges) in members.iter().zip(&component_edges) {
            interrupt::check()?;
            if tasks.len() == 1 {
                t[tasks[0] * k + tasks[0]] = isolated;
                continue;
            }
            let c = tasks.len();
            let mut b = laplacian(c, edges, &need)?;
            block(&mut b, edges)?;
            for (bi, &i) in tasks.iter().enumerate() {
                for (bj, &j) in tasks.iter().enumerate() {
                    t[i * k + j] = b.data[bi * c + bj];
                }
            }
        }
        Ok(Self::Dense { k, t, components })
    }

    /// T = A^{-1} for a user-given symmetric positive definite interaction matrix A.
    pub fn from_interaction(a: SymMatrix) -> Result<Self> {
        check_k(a.n)?;
        check_symmetric(&a, "interaction matrix")?;
        let components = components_from_pattern(&a);
        let t = cholesky_inverse(&a).ok_or_else(|| {
            Error::InvalidTaskRelation("the interaction matrix is not positive definite (Cholesky failed)".into())
        })?;
        Ok(Self::dense_with_components(t, components))
    }

    /// T = (I + M)^{-1} for a user-given symmetric PSD M.
    pub fn from_psd_plus_identity(m: SymMatrix) -> Result<Self> {
        check_k(m.n)?;
        check_symmetric(&m, "matrix M")?;
        check_psd(&m, "matrix M")?;
        let mut a = m;
        let n = a.n;
        (0..n).for_each(|i| a.data[i * n + i] += 1.0);
        Self::from_interaction(a)
    }

    /// A user-given symmetric PSD task kernel T.
    pub fn from_task_kernel(t: SymMatrix) -> Result<Self> {
        check_k(t.n)?;
        check_symmetric(&t, "task kernel")?;
        check_psd(&t, "task kernel")?;
        let components = components_from_pattern(&t);
        let mut t = t;
        crate::linalg::dense_symmetrize(&mut t);
        Ok(Self::dense_with_components(t, components))
    }

    fn dense_with_components(t: SymMatrix, components: Vec<u32>) -> Self {
        let k = t.n;
        let mut data = t.data;
        // Exact zeros across components: predictions skip other components entirely.
        for i in 0..k {
            for j in 0..k {
                if components[i] != components[j] {
                    data[i * k + j] = 0.0;
                }
            }
        }
        Self::Dense { k, t: data, components }
    }

    /// A restored task kernel: k >= 1, finite, symmetric PSD, and (dense) components numbered
    /// by their smallest task with exact zeros across them.
    pub(crate) fn check_state(&self) -> Result<()> {
        let state = |m: String| Error::State(format!("task kernel: {m}"));
        match self {
            Self::Disconnected { k, scale } => {
                check_k(*k).map_err(|e| state(e.to_string()))?;
                if !(scale.is_finite() && *scale > 0.0) {
                    return Err(state(format!("scale {scale} must be finite and > 0")));
                }
            }
            Self::Complete { k, diag, off } => {
                check_k(*k).map_err(|e| state(e.to_string()))?;
                // Eigenvalues diag - off (k - 1 times) and diag + (k - 1) off.
                let top = diag + (*k as f64 - 1.0) * off;
                let tol = 1e-12 * diag.abs().max(off.abs());
                let psd = (*k == 1 || diag - off >= -tol) && top >= -tol;
                if !(diag.is_finite() && off.is_finite() && *diag > 0.0 && psd) {
                    return Err(state(format!(
                        "diag {diag}, off {off} do not give a PSD task kernel with a positive diagonal"
                    )));
                }
            }
            Self::Dense { k, t, components } => {
                check_k(*k).map_err(|e| state(e.to_string()))?;
                let size = k.checked_mul(*k).ok_or_else(|| state(format!("{k} x {k} overflows")))?;
                if t.len() != size || components.len() != *k {
                    return Err(state(format!(
                        "{} entries and {} components for {k} tasks",
                        t.len(),
                        components.len()
                    )));
                }
                let mut next = 0u32;
                for &c in components {
                    if c > next {
                        return Err(state("components are not numbered by their smallest task".into()));
                    }
                    if c == next {
                        next += 1;
                    }
                }
                for i in 0..*k {
                    for j in 0..*k {
                        if components[i] != components[j] && t[i * k + j] != 0.0 {
                            return Err(state(format!("T[{i}, {j}] is nonzero across components")));
                        }
                    }
                }
                let m = SymMatrix { n: *k, data: t.clone() };
                check_symmetric(&m, "task kernel").map_err(|e| state(e.to_string()))?;
                // T is block diagonal by component: its spectrum is the union of the blocks'.
                for tasks in self.component_members() {
                    let c = tasks.len();
                    let block = tasks
                        .iter()
                        .flat_map(|&i| tasks.iter().map(move |&j| t[i * k + j]))
                        .collect();
                    check_psd(&SymMatrix { n: c, data: block }, "task kernel").map_err(|e| state(e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// The same relation up to the last bits of the arithmetic that built it (a restored model
    /// against one built from its hyper-parameters, possibly by another SIMD build).
    pub fn approx_eq(&self, other: &Self) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        match (self, other) {
            (Self::Disconnected { k, scale }, Self::Disconnected { k: k2, scale: s2 }) => k == k2 && close(*scale, *s2),
            (
                Self::Complete { k, diag, off },
                Self::Complete {
                    k: k2,
                    diag: d2,
                    off: o2,
                },
            ) => k == k2 && close(*diag, *d2) && close(*off, *o2),
            (
                Self::Dense { k, t, components },
                Self::Dense {
                    k: k2,
                    t: t2,
                    components: c2,
                },
            ) => k == k2 && components == c2 && t.len() == t2.len() && t.iter().zip(t2).all(|(a, b)| close(*a, *b)),
            _ => false,
        }
    }

    /// Adds `n` tasks, keeping every existing entry: the disconnected kernel gains `scale` on
    /// the new diagonal, the complete one keeps its `diag` and `off` (so a fixed-k complete
    /// kernel grown this way is not the complete kernel of the new size: only the k-independent
    /// [`TaskKernel::complete_open`] grows into itself). A general (dense) kernel cannot grow:
    /// its entries come from a graph whose new edges would change them. On `Err` nothing changed.
    pub fn grow(&mut self, n: usize) -> Result<()> {
        let grown = |k: usize| {
            k.checked_add(n)
                .filter(|&k| u32::try_from(k).is_ok())
                .ok_or_else(|| Error::InvalidParameter {
                    name: "n_tasks",
                    reason: format!("{k} + {n} tasks is too many"),
                })
        };
        match self {
            Self::Disconnected { k, .. } | Self::Complete { k, .. } => *k = grown(*k)?,
            Self::Dense { .. } => {
                return Err(Error::InvalidTaskRelation(
                    "a general task graph cannot grow in a fitted model: its task kernel (I + L)^-1 would change; \
                     only the 'disconnected' and the open-ended 'complete' graph (n_tasks=None) grow"
                        .into(),
                ))
            }
        }
        Ok(())
    }

    /// Removes the last `n` tasks (fewer than k), added by [`TaskKernel::grow`]: the closed
    /// forms keep every remaining entry, so this is the kernel as it was before that growth. A
    /// dense kernel does not grow, and is left unchanged.
    pub fn shrink(&mut self, n: usize) {
        if let Self::Disconnected { k, .. } | Self::Complete { k, .. } = self {
            debug_assert!(n < *k, "removing {n} of {k} tasks");
            *k -= n.min(*k - 1);
        }
    }

    /// Number of tasks k.
    pub fn n_tasks(&self) -> usize {
        match *self {
            Self::Disconnected { k, .. } | Self::Complete { k, .. } | Self::Dense { k, .. } => k,
        }
    }

    /// `T[i, j]`.
    #[inline]
    pub fn get(&self, i: usize, j: usize) -> f64 {
        match self {
            Self::Disconnected { scale, .. } => {
                if i == j {
                    *scale
                } else {
                    0.0
                }
            }
            Self::Complete { diag, off, .. } => {
                if i == j {
                    *diag
                } else {
                    *off
                }
            }
            Self::Dense { k, t, .. } => t[i * k + j],
        }
    }

    /// The connected component of task `i` (tasks in different components never interact).
    #[inline]
    pub fn component(&self, i: usize) -> usize {
        match self {
            Self::Disconnected { .. } => i,
            Self::Complete { .. } => 0,
            Self::Dense { components, .. } => components[i] as usize,
        }
    }

    /// Number of connected components of the task graph.
    pub fn n_components(&self) -> usize {
        match self {
            Self::Disconnected { k, .. } => *k,
            Self::Complete { .. } => 1,
            Self::Dense { components, .. } => components.iter().map(|&c| c as usize + 1).max().unwrap_or(0),
        }
    }

    /// The tasks of every component, in ascending task order.
    pub fn component_members(&self) -> Vec<Vec<usize>> {
        let mut members = vec![Vec::new(); self.n_components()];
        (0..self.n_tasks()).for_each(|i| members[self.component(i)].push(i));
        members
    }

    /// `max_i T_ii`.
    pub fn max_diag(&self) -> f64 {
        match self {
            Self::Disconnected { scale, .. } => *scale,
            Self::Complete { diag, .. } => *diag,
            Self::Dense { k, t, .. } => (0..*k).map(|i| t[i * k + i]).fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// c_G = R sqrt(max_i T_ii) (§2.5).
    pub fn c_g(&self, radius: f64) -> f64 {
        radius * self.max_diag().max(0.0).sqrt()
    }

    /// The task kernel multiplied by `c > 0` (same structure).
    pub fn scaled(&self, c: f64) -> Result<Self> {
        if !(c > 0.0 && c.is_finite()) {
            return Err(Error::InvalidTaskRelation(format!(
                "scale must be positive and finite, got {c}"
            )));
        }
        Ok(match self.clone() {
            Self::Disconnected { k, scale } => Self::Disconnected { k, scale: scale * c },
            Self::Complete { k, diag, off } => Self::Complete {
                k,
                diag: diag * c,
                off: off * c,
            },
            Self::Dense { k, t, components } => Self::Dense {
                k,
                t: t.into_iter().map(|v| v * c).collect(),
                components,
            },
        })
    }

    /// The full k x k matrix (row-major). Only call this when k is small enough.
    pub fn to_dense(&self) -> SymMatrix {
        let k = self.n_tasks();
        let mut data = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..k {
                data[i * k + j] = self.get(i, j);
            }
        }
        SymMatrix { n: k, data }
    }
}

fn check_edges(k: usize, edges: &[(usize, usize, f64)]) -> Result<()> {
    check_k(k)?;
    for &(i, j, w) in edges {
        if i >= k || j >= k {
            return Err(Error::InvalidTaskRelation(format!(
                "edge ({i}, {j}) names a task outside [0, {k})"
            )));
        }
        if i == j {
            return Err(Error::InvalidTaskRelation(format!("self loop on task {i}")));
        }
        if !(w >= 0.0 && w.is_finite()) {
            return Err(Error::InvalidTaskRelation(format!(
                "edge ({i}, {j}) has weight {w}; weights must be finite and >= 0"
            )));
        }
    }
    Ok(())
}

/// `A^{-1}` of a symmetric positive definite `A`, in place (`false`, with `a` overwritten, if it
/// is not): the blocked Cholesky inverse ([`spd_inverse_in_place`]), polling the interrupt hook
/// between block steps.
fn spd_inverse(a: &mut SymMatrix) -> Result<bool> {
    let n = a.n;
    // Fresh zero pages (huge pages for a large one: fewer TLB misses in the strided passes).
    let mut work = Need::new("n_tasks", n, "the factorisation's scratch (c x c)").zeroed::<f64>(&[n, n])?;
    spd_inverse_in_place(&mut a.data, &mut work, n)
}

/// `L^+` of a connected component's Laplacian in place by its eigendecomposition, eigenvalues
/// below 1e-12 λmax counted as zero (§2.3). O(c³) with a larger constant than a Cholesky, and
/// the hook is polled only between its stages: [`TaskKernel::laplacian_pinv`] comes here only
/// when λ2 may fall under that threshold.
fn pinv_by_eigen(lap: &mut SymMatrix) -> Result<()> {
    interrupt::check_now()?;
    let c = lap.n;
    let (values, vectors) = sym_eigen(lap);
    let lmax = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut t = Need::new("n_tasks", c, "the pseudo-inverse of a component's Laplacian").filled(&[c, c], 0.0f64)?;
    for (r, &lambda) in values.iter().enumerate() {
        interrupt::check_now()?;
        if lambda > 1e-12 * lmax && lambda > 0.0 {
            for i in 0..c {
                let vi = vectors.get(i, r) / lambda;
                for j in 0..c {
                    t[i * c + j] += vi * vectors.get(j, r);
                }
            }
        }
    }
    lap.data = t;
    crate::linalg::dense_symmetrize(lap);
    Ok(())
}

fn union_find_components(k: usize, mut linked: impl FnMut(&mut dyn FnMut(usize, usize))) -> Vec<u32> {
    let mut parent: Vec<usize> = (0..k).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    linked(&mut |a, b| {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    });
    // Number components by their smallest task, in task order.
    let mut label = vec![u32::MAX; k];
    let mut next = 0;
    (0..k)
        .map(|i| {
            let r = find(&mut parent, i);
            if label[r] == u32::MAX {
                label[r] = next;
                next += 1;
            }
            label[r]
        })
        .collect()
}

fn components_from_edges(k: usize, edges: &[(usize, usize, f64)]) -> Vec<u32> {
    union_find_components(k, |link| {
        edges.iter().filter(|e| e.2 > 0.0).for_each(|&(i, j, _)| link(i, j))
    })
}

fn components_from_pattern(m: &SymMatrix) -> Vec<u32> {
    let n = m.n;
    union_find_components(n, |link| {
        for i in 0..n {
            for j in 0..i {
                if m.get(i, j) != 0.0 || m.get(j, i) != 0.0 {
                    link(i, j);
                }
            }
        }
    })
}

fn check_symmetric(m: &SymMatrix, what: &str) -> Result<()> {
    if m.data.iter().any(|v| !v.is_finite()) {
        return Err(Error::InvalidTaskRelation(format!("the {what} has non-finite entries")));
    }
    let asym = m.asymmetry();
    if asym > 1e-10 * m.max_abs().max(1e-300) {
        return Err(Error::InvalidTaskRelation(format!(
            "the {what} is not symmetric (largest |M_ij - M_ji| = {asym:e})"
        )));
    }
    Ok(())
}

fn check_psd(m: &SymMatrix, what: &str) -> Result<()> {
    let (values, _) = sym_eigen(m);
    let lmin = values.first().copied().unwrap_or(0.0);
    let norm = values.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if lmin < -1e-10 * norm {
        return Err(Error::InvalidTaskRelation(format!(
            "the {what} is not positive semidefinite (smallest eigenvalue {lmin:e})"
        )));
    }
    Ok(())
}

/// The dense Laplacian `L = D - W` of `n` tasks joined by weighted `edges` (row-major `n x n`),
/// allocated fallibly.
fn laplacian(n: usize, edges: &[(usize, usize, f64)], need: &Need) -> Result<SymMatrix> {
    let mut lap = need.filled(&[n, n], 0.0f64)?;
    for &(i, j, w) in edges {
        lap[i * n + j] -= w;
        lap[j * n + i] -= w;
        lap[i * n + i] += w;
        lap[j * n + j] += w;
    }
    Ok(SymMatrix { n, data: lap })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lap(k: usize, edges: &[(usize, usize, f64)]) -> SymMatrix {
        laplacian(k, edges, &Need::new("n_tasks", k, "a test Laplacian")).unwrap()
    }

    #[test]
    fn closed_forms_match_the_general_construction() {
        let k = 5;
        let all: Vec<_> = (0..k).flat_map(|i| (i + 1..k).map(move |j| (i, j, 1.0))).collect();
        let general = TaskKernel::from_edges(k, &all).unwrap();
        let closed = TaskKernel::complete(k).unwrap();
        for i in 0..k {
            for j in 0..k {
                assert!((general.get(i, j) - closed.get(i, j)).abs() < 1e-14);
            }
        }
        let none = TaskKernel::from_edges(k, &[]).unwrap();
        let d = TaskKernel::disconnected(k).unwrap();
        for i in 0..k {
            for j in 0..k {
                assert!((none.get(i, j) - d.get(i, j)).abs() < 1e-15);
            }
        }
        assert!((closed.c_g(1.0) - (2.0 / 6.0f64).sqrt()).abs() < 1e-15);
        assert_eq!(d.c_g(1.0), 1.0);
    }

    #[test]
    fn rows_sum_to_one_and_components_separate() {
        let edges = [(0, 1, 1.0), (1, 2, 2.5), (3, 4, 0.5)];
        let t = TaskKernel::from_edges(6, &edges).unwrap();
        for i in 0..6 {
            let s: f64 = (0..6).map(|j| t.get(i, j)).sum();
            assert!((s - 1.0).abs() < 1e-13);
            for j in 0..6 {
                assert!(t.get(i, j) >= 0.0);
                if i != j {
                    assert!(t.get(i, i) > t.get(i, j));
                }
            }
        }
        assert_eq!(t.get(0, 3), 0.0);
        assert_eq!(t.get(5, 5), 1.0);
        assert_eq!(t.n_components(), 3);
        assert_eq!(t.component(2), t.component(0));
    }

    #[test]
    fn rejects_bad_relations() {
        assert!(TaskKernel::from_edges(3, &[(0, 0, 1.0)]).is_err());
        assert!(TaskKernel::from_edges(3, &[(0, 5, 1.0)]).is_err());
        assert!(TaskKernel::from_edges(3, &[(0, 1, -1.0)]).is_err());
        assert!(TaskKernel::from_interaction(SymMatrix::new(2, vec![1.0, 2.0, 2.0, 1.0]).unwrap()).is_err());
        assert!(TaskKernel::from_task_kernel(SymMatrix::new(2, vec![1.0, 0.5, 0.4, 1.0]).unwrap()).is_err());
        assert!(TaskKernel::from_task_kernel(SymMatrix::new(2, vec![1.0, 2.0, 2.0, 1.0]).unwrap()).is_err());
        assert!(TaskKernel::complete(0).is_err());
    }

    #[test]
    fn per_component_factoring_equals_the_whole_matrix_inverse() {
        let k = 9;
        let edges = [
            (0, 4, 1.0),
            (4, 7, 2.5),
            (7, 0, 0.3),
            (1, 2, 0.5),
            (5, 6, 0.0),
            (8, 3, 4.0),
            (3, 8, 1.0),
        ];
        let t = TaskKernel::from_edges(k, &edges).unwrap();
        let mut a = lap(k, &edges);
        (0..k).for_each(|i| a.data[i * k + i] += 1.0);
        let whole = cholesky_inverse(&a).unwrap();
        let pinv = TaskKernel::laplacian_pinv(k, &edges).unwrap();
        let (values, vectors) = sym_eigen(&lap(k, &edges));
        for i in 0..k {
            for j in 0..k {
                assert!((t.get(i, j) - whole.get(i, j)).abs() < 1e-13, "T[{i},{j}]");
                let lp: f64 = (0..k)
                    .filter(|&r| values[r] > 1e-9)
                    .map(|r| vectors.get(i, r) * vectors.get(j, r) / values[r])
                    .sum();
                assert!((pinv.get(i, j) - lp).abs() < 1e-12, "pinv[{i},{j}]");
            }
        }
        assert_eq!(t.n_components(), 5); // {0,4,7} {1,2} {3,8} {5} {6}: a zero weight links nothing
        t.check_state().unwrap();
        pinv.check_state().unwrap();
    }

    #[test]
    fn absurd_graph_sizes_are_memory_errors_not_aborts() {
        for k in [10_000_000usize, 1 << 32, usize::MAX] {
            let err = TaskKernel::from_edges(k, &[(0, 1, 1.0)]).unwrap_err();
            assert!(matches!(err, Error::Memory { .. }), "{k}: {err}");
            assert!(TaskKernel::laplacian_pinv(k, &[(0, 1, 1.0)]).is_err());
        }
    }

    #[test]
    fn a_stop_is_honoured_within_a_second_while_a_component_is_factored() {
        use std::cell::Cell;
        use std::rc::Rc;
        use std::time::{Duration, Instant};
        // 4e9 multiply-adds (seconds in this test build); the hook says stop after 100 ms.
        let k = 2000;
        let path: Vec<_> = (1..k).map(|i| (i - 1, i, 1.0)).collect();
        for pinv in [false, true] {
            let start = Instant::now();
            let fired = Rc::new(Cell::new(None));
            let seen = fired.clone();
            let hook = move || {
                let stop = start.elapsed() > Duration::from_millis(100);
                if stop && seen.get().is_none() {
                    seen.set(Some(Instant::now()));
                }
                stop
            };
            let result = interrupt::with_hook(Box::new(hook), || {
                if pinv {
                    TaskKernel::laplacian_pinv(k, &path)
                } else {
                    TaskKernel::from_edges(k, &path)
                }
            });
            assert!(
                matches!(result, Err(Error::Interrupted { .. })),
                "finished before the stop: make it longer"
            );
            let latency = fired.get().expect("the hook said stop").elapsed();
            assert!(
                latency < Duration::from_secs(1),
                "pinv {pinv}: stopped {latency:?} after the hook said so"
            );
        }
    }

    #[test]
    fn a_large_component_is_interruptible() {
        let k = 300;
        let path: Vec<_> = (1..k).map(|i| (i - 1, i, 1.0)).collect();
        let result = interrupt::with_hook_every(std::time::Duration::ZERO, Box::new(|| true), || {
            TaskKernel::from_edges(k, &path)
        });
        assert!(matches!(result, Err(Error::Interrupted { .. })));
        let result = interrupt::with_hook_every(std::time::Duration::ZERO, Box::new(|| true), || {
            TaskKernel::laplacian_pinv(k, &path)
        });
        assert!(matches!(result, Err(Error::Interrupted { .. })));
    }
}
