//! Copy-on-write undo for learners that keep one value per task (a weight vector, a per-task
//! model): the first write to a slot during a journaled call saves its old value, so a rollback
//! costs the slots the call touched, not the number of tasks (see
//! [`OnlineLearner::journal_begin`](super::OnlineLearner::journal_begin)).

use std::collections::HashSet;

use crate::alloc::Need;
use crate::error::Result;

/// The saved slots of a journaled call, the slot count at its start, and the learner's counters
/// then (`counts`, the learner's to fill and restore). Not part of the model: two journals are
/// always equal, and it is never serialised.
#[derive(Debug, Clone, Default)]
pub struct SlotJournal<T> {
    active: bool,
    len: usize,
    saved: Vec<(usize, T)>,
    seen: HashSet<usize>,
    pub counts: [u64; 4],
    /// The learner's one shared value (a global model or block) before its first write.
    shared: Option<T>,
    shared_saved: bool,
    /// The task kernel at the start (closed forms only: a constant-size value).
    pub kernel: Option<crate::kernel::TaskKernel>,
}

impl<T> PartialEq for SlotJournal<T> {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// A value whose copy may be refused for lack of memory.
pub trait TryCopy: Sized {
    fn try_copy(&self) -> Result<Self>;
}

/// A copy of `values`, allocated fallibly.
pub fn try_copy_slice(values: &[f64]) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    Need::new("n_features", values.len(), "a saved weight vector").reserve_exact(&mut v, values.len())?;
    v.extend_from_slice(values);
    Ok(v)
}

impl TryCopy for Vec<f64> {
    fn try_copy(&self) -> Result<Self> {
        try_copy_slice(self)
    }
}

impl<T: TryCopy> TryCopy for Option<T> {
    fn try_copy(&self) -> Result<Self> {
        self.as_ref().map(T::try_copy).transpose()
    }
}

impl<T: TryCopy> SlotJournal<T> {
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Starts journaling `len` slots (their count now).
    pub fn begin(&mut self, len: usize) {
        self.commit();
        self.active = true;
        self.len = len;
    }

    /// Before writing slot `i`: saves its value (`copy()`) on the first write of the call (a slot
    /// added during the call is dropped on rollback and needs no copy). On `Err` nothing has
    /// changed.
    pub fn touch_with(&mut self, i: usize, copy: impl FnOnce() -> Result<T>) -> Result<()> {
        if !self.active || i >= self.len || self.seen.contains(&i) {
            return Ok(());
        }
        let old = copy()?;
        Need::new("rows", self.saved.len() + 1, "an undo journal").reserve(&mut self.saved, 1)?;
        self.seen.insert(i);
        self.saved.push((i, old));
        Ok(())
    }

    /// [`Self::touch_with`] for slots held in a vector.
    pub fn touch(&mut self, slots: &[T], i: usize) -> Result<()> {
        self.touch_with(i, || slots[i].try_copy())
    }

    /// Before writing the shared value: saves it (`copy()`) on the first write of the call.
    pub fn touch_shared(&mut self, copy: impl FnOnce() -> Result<T>) -> Result<()> {
        if self.active && !self.shared_saved {
            self.shared = Some(copy()?);
            self.shared_saved = true;
        }
        Ok(())
    }

    /// Ends the journal, keeping the changes.
    pub fn commit(&mut self) {
        self.active = false;
        self.saved.clear();
        self.seen.clear();
        self.shared = None;
        self.shared_saved = false;
        self.kernel = None;
    }

    /// Ends the journal: hands every saved slot to `restore` and returns the saved shared value
    /// (None when it was not written).
    pub fn rollback_with(&mut self, mut restore: impl FnMut(usize, T)) -> Option<T> {
        for (i, old) in self.saved.drain(..) {
            restore(i, old);
        }
        let shared = self.shared.take();
        self.commit();
        shared
    }

    /// Ends the journal, restoring the saved slots and the slot count of `slots`; returns the
    /// saved shared value.
    pub fn rollback(&mut self, slots: &mut Vec<T>) -> Option<T> {
        if !self.active {
            return None;
        }
        slots.truncate(self.len);
        self.rollback_with(|i, old| slots[i] = old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollback_restores_touched_and_added_slots() {
        let mut slots: Vec<Option<Vec<f64>>> = vec![None, Some(vec![1.0, 2.0]), None];
        let before = slots.clone();
        let mut j = SlotJournal::default();
        j.begin(slots.len());
        j.touch(&slots, 1).unwrap();
        slots[1].as_mut().unwrap()[0] = 9.0;
        j.touch(&slots, 1).unwrap(); // the second write keeps the first saved value
        slots[1].as_mut().unwrap()[1] = 9.0;
        j.touch(&slots, 0).unwrap();
        slots[0] = Some(vec![3.0, 3.0]);
        slots.push(Some(vec![4.0, 4.0]));
        j.touch(&slots, 3).unwrap(); // added during the call: not saved
        j.rollback(&mut slots);
        assert_eq!(slots, before);
        assert!(!j.is_active());
        // Without a journal, touching is free and nothing is kept.
        j.touch(&slots, 1).unwrap();
        assert!(j.saved.is_empty());
    }
}
