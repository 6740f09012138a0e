//! The sparse path of the kernel sums: an inverted index from feature to (slot, value)
//! postings, so a score costs the number of (stored row, query) feature matches.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::kernel::{ActiveSet, BaseKernel, Query, TaskKernel};

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

#[derive(Debug, Clone, Default)]
pub(super) struct Posting {
    slots: Vec<u32>,
    values: Vec<f64>,
}

/// Active-set size from which a sparse store keeps an inverted index. Below it, keeping the
/// index up to date on every eviction costs more than the gathers it saves (measured on
/// text-like rows, where the most frequent terms occur in every row).
pub const INDEX_FROM: usize = 256;

/// Feature -> (slot, value) of every stored sparse row with that feature. A cache of the active
/// set's rows, built once the set reaches `from` elements and maintained from then on; not
/// serialised (rebuilt at the first update after unpickling; until then scores take the gather
/// path, which gives the same numbers) and ignored by `==`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SparseIndex {
    /// Whether the rows are stored sparse (else the index stays empty).
    enabled: bool,
    /// Build the index once the active set has this many elements.
    from: usize,
    #[serde(skip)]
    postings: HashMap<u32, Posting, BuildHasherDefault<FeatureHasher>>,
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
            postings: HashMap::default(),
            built: false,
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
        self.built = true;
        for slot in 0..set.len() {
            self.add(set, slot);
        }
    }

    /// Records the row at `slot` (call after pushing it).
    pub fn add(&mut self, set: &ActiveSet, slot: usize) {
        if !self.built {
            return;
        }
        if let Row::Sparse { indices, values } = set.rows().row(slot) {
            for (&j, &v) in indices.iter().zip(values) {
                let p = self.postings.entry(j).or_default();
                p.slots.push(slot as u32);
                p.values.push(v);
            }
        }
    }

    /// Forgets the row at `slot` and renames the last slot `last` to `slot`, mirroring the
    /// swap-remove [`ActiveSet::remove_at`] is about to do (call before it).
    pub fn remove(&mut self, set: &ActiveSet, slot: usize) {
        if !self.built {
            return;
        }
        let last = set.len() - 1;
        if let Row::Sparse { indices, .. } = set.rows().row(slot) {
            for j in indices {
                if let Some(p) = self.postings.get_mut(j) {
                    if let Some(pos) = p.slots.iter().position(|&s| s as usize == slot) {
                        p.slots.swap_remove(pos);
                        p.values.swap_remove(pos);
                    }
                    if p.slots.is_empty() {
                        self.postings.remove(j);
                    }
                }
            }
        }
        if last != slot {
            if let Row::Sparse { indices, .. } = set.rows().row(last) {
                for j in indices {
                    if let Some(p) = self.postings.get_mut(j) {
                        if let Some(pos) = p.slots.iter().position(|&s| s as usize == last) {
                            p.slots[pos] = slot as u32;
                        }
                    }
                }
            }
        }
    }

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
    ) -> f64 {
        let mut dots = vec![0.0f64; set.len()];
        for (j, &v) in indices.iter().zip(values) {
            if let Some(p) = self.postings.get(j) {
                for (&s, &w) in p.slots.iter().zip(&p.values) {
                    dots[s as usize] += w * v;
                }
            }
        }
        let component = tasks.component(task);
        let rows = set.rows();
        let mut total = 0.0;
        for (slot, &dot) in dots.iter().enumerate() {
            let owner = set.task(slot);
            if tasks.component(owner) != component {
                continue;
            }
            let sq = rows.sq_norm(slot);
            let kv = kernel.from_dot(dot, sq, q.sq_norm, kernel.raw_self(sq), q.self_raw);
            total += set.beta(slot) * tasks.get(owner, task) * kv;
        }
        total
    }
}
