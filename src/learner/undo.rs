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

impl TryCopy for Vec<f64> {
    fn try_copy(&self) -> Result<Self> {
        let mut v = Vec::new();
        Need::new("n_features", self.len(), "a saved weight vector").reserve_exact(&mut v, self.len())?;
        v.extend_from_slice(self);
        Ok(v)
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

    /// Starts journaling `slots` (their count now).
    pub fn begin(&mut self, len: usize) {
        self.saved.clear();
        self.seen.clear();
        self.active = true;
        self.len = len;
    }

    /// Before writing `slots[i]`: saves its value on the first write of the call (a slot added
    /// during the call is dropped on rollback and needs no copy). On `Err` nothing has changed.
    pub fn touch(&mut self, slots: &[T], i: usize) -> Result<()> {
        if !self.active || i >= self.len || self.seen.contains(&i) {
            return Ok(());
        }
        let old = slots[i].try_copy()?;
        Need::new("rows", self.saved.len() + 1, "an undo journal").reserve(&mut self.saved, 1)?;
        self.seen.insert(i);
        self.saved.push((i, old));
        Ok(())
    }

    /// Ends the journal, keeping the changes.
    pub fn commit(&mut self) {
        self.active = false;
        self.saved.clear();
        self.seen.clear();
    }

    /// Ends the journal, restoring the saved slots and the slot count.
    pub fn rollback(&mut self, slots: &mut Vec<T>) {
        if !self.active {
            return;
        }
        slots.truncate(self.len);
        for (i, old) in self.saved.drain(..) {
            slots[i] = old;
        }
        self.commit();
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
