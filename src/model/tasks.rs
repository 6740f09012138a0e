//! Task ids and a fitted model's task book: which label is which engine task, and how many
//! examples each task has seen.
//!
//! A model names its tasks in one of two ways, fixed by its first batch:
//!
//! - **index** mode: a fixed number of tasks `n_tasks` and integer ids; id `i` is engine task `i`;
//! - **label** mode (an open-ended model, `n_tasks = None`, or ids that are not all integers):
//!   labels (64-bit integers and strings) take the engine tasks `0, 1, ...` in the order they
//!   first appear.
//!
//! Labels are interned: each string is stored once, in one text buffer, and found through a hash
//! table of task numbers (std's `RandomState`, keyed per process, so that labels chosen by a
//! remote client cannot degrade the table). A million labels of ten bytes take about 30 MB.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use hashbrown::HashTable;

use crate::alloc::Need;
use crate::error::{invalid, Error, Result};

/// A task id as a model stores it: a 64-bit integer or a string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskId {
    /// An integer id (a task number, or an integer label).
    Int(i64),
    /// A string label.
    Str(Arc<str>),
}

/// A borrowed task id: what a call names a task by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskRef<'a> {
    /// An integer id.
    Int(i64),
    /// A string label.
    Str(&'a str),
}

impl TaskId {
    /// The id borrowed.
    pub fn as_ref(&self) -> TaskRef<'_> {
        match self {
            TaskId::Int(i) => TaskRef::Int(*i),
            TaskId::Str(s) => TaskRef::Str(s),
        }
    }
}

impl TaskRef<'_> {
    /// The id owned.
    pub fn to_owned(self) -> TaskId {
        match self {
            TaskRef::Int(i) => TaskId::Int(i),
            TaskRef::Str(s) => TaskId::Str(s.into()),
        }
    }
}

impl std::fmt::Display for TaskRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskRef::Int(i) => write!(f, "{i}"),
            TaskRef::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_ref().fmt(f)
    }
}

impl From<i64> for TaskId {
    fn from(id: i64) -> Self {
        TaskId::Int(id)
    }
}

impl From<&str> for TaskId {
    fn from(id: &str) -> Self {
        TaskId::Str(id.into())
    }
}

impl From<String> for TaskId {
    fn from(id: String) -> Self {
        TaskId::Str(id.into())
    }
}

impl<'a> From<&'a str> for TaskRef<'a> {
    fn from(id: &'a str) -> Self {
        TaskRef::Str(id)
    }
}

impl From<i64> for TaskRef<'_> {
    fn from(id: i64) -> Self {
        TaskRef::Int(id)
    }
}

/// The tasks of a batch: none (a model with one task), one for every row, or one per row.
#[derive(Debug, Clone, Copy)]
pub enum Tasks<'a> {
    /// No task given: allowed when the model has exactly one task.
    Omitted,
    /// One task for every row.
    All(TaskRef<'a>),
    /// Integer ids, one per row.
    Ints(&'a [i64]),
    /// Ids of any kind, one per row.
    Ids(&'a [TaskRef<'a>]),
}

impl<'a> Tasks<'a> {
    /// The id of row `r` (`None` when omitted).
    pub fn get(&self, r: usize) -> Option<TaskRef<'a>> {
        match *self {
            Tasks::Omitted => None,
            Tasks::All(t) => Some(t),
            Tasks::Ints(ids) => Some(TaskRef::Int(ids[r])),
            Tasks::Ids(ids) => Some(ids[r]),
        }
    }

    /// The number of ids given (`None`: one for every row).
    pub fn given(&self) -> Option<usize> {
        match self {
            Tasks::Omitted | Tasks::All(_) => None,
            Tasks::Ints(ids) => Some(ids.len()),
            Tasks::Ids(ids) => Some(ids.len()),
        }
    }

    /// Whether every id is an integer (what decides index mode on a first batch).
    pub fn all_integers(&self, n_rows: usize) -> bool {
        match self {
            Tasks::Omitted => true,
            Tasks::All(t) => matches!(t, TaskRef::Int(_)),
            Tasks::Ints(_) => true,
            Tasks::Ids(ids) => ids.iter().take(n_rows).all(|t| matches!(t, TaskRef::Int(_))),
        }
    }
}

/// One interned label: an integer, or a span of the text buffer; or a task whose label was
/// forgotten, free for the next new label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Int(i64),
    Str { start: usize, len: u32 },
    Free,
}

/// Task labels interned in order of first appearance: label `i` names engine task `i`. A
/// forgotten label leaves its task free ([`Labels::forget`]); new labels take the free tasks
/// first, lowest first, then the next tasks (DECISIONS.md, "Forgetting tasks").
#[derive(Clone, Default)]
pub struct Labels {
    slots: Vec<Slot>,
    text: String,
    table: HashTable<u32>,
    hasher: RandomState,
    free: std::collections::BTreeSet<u32>,
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.slots().map(|(_, id)| id)).finish()
    }
}

impl PartialEq for Labels {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.slots().eq(other.slots())
    }
}

/// The longest label string (bytes): a label is an id, not a document.
pub const MAX_LABEL_BYTES: usize = 1 << 16;

impl Labels {
    /// The labels `ids`, in order (distinct; checked).
    pub fn from_ids<'a>(ids: impl IntoIterator<Item = TaskRef<'a>>) -> Result<Self> {
        let mut labels = Labels::default();
        for id in ids {
            if labels.get(id).is_some() {
                return Err(invalid("tasks", format!("task label {id} appears twice")));
            }
            labels.push(id)?;
        }
        Ok(labels)
    }

    /// The labels `live` in the tasks that are not `free`, in order (a model file's labels and
    /// free tasks; checked: distinct labels, distinct free tasks below the number of tasks).
    pub fn from_slots<'a>(live: impl IntoIterator<Item = TaskRef<'a>>, free: &[u64]) -> Result<Self> {
        let live: Vec<TaskRef> = live.into_iter().collect();
        let n = live.len() + free.len();
        let free: std::collections::BTreeSet<u32> = free
            .iter()
            .map(|&t| u32::try_from(t).ok().filter(|&t| (t as usize) < n))
            .collect::<Option<_>>()
            .ok_or_else(|| invalid("tasks", format!("the free tasks must lie in [0, {n})")))?;
        if free.len() + live.len() != n {
            return Err(invalid("tasks", "a free task is named twice"));
        }
        let mut labels = Labels::default();
        let mut ids = live.into_iter();
        for t in 0..n as u32 {
            if free.contains(&t) {
                labels.slots.push(Slot::Free);
                continue;
            }
            let id = ids.next().expect("n counts them");
            if labels.get(id).is_some() {
                return Err(invalid("tasks", format!("task label {id} appears twice")));
            }
            labels.push(id)?;
        }
        labels.free = free;
        Ok(labels)
    }

    /// The number of tasks named: the labels and the free tasks.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there is no label and no free task.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The number of labels (free tasks excluded).
    pub fn n_labels(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The free tasks (their labels forgotten), lowest first: the tasks the next new labels take.
    pub fn free(&self) -> impl Iterator<Item = u32> + '_ {
        self.free.iter().copied()
    }

    fn slot_ref(&self, slot: Slot) -> Option<TaskRef<'_>> {
        match slot {
            Slot::Int(i) => Some(TaskRef::Int(i)),
            Slot::Str { start, len } => Some(TaskRef::Str(&self.text[start..start + len as usize])),
            Slot::Free => None,
        }
    }

    /// The label of task `i` (`i < len()`); `None` for a free task.
    pub fn label(&self, i: usize) -> Option<TaskRef<'_>> {
        self.slot_ref(self.slots[i])
    }

    /// The labels in task order (free tasks skipped).
    pub fn iter(&self) -> impl Iterator<Item = TaskRef<'_>> + '_ {
        self.slots.iter().filter_map(|&s| self.slot_ref(s))
    }

    /// Every task in order with its label, `None` for a free one.
    pub fn slots(&self) -> impl Iterator<Item = (u32, Option<TaskRef<'_>>)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as u32, self.slot_ref(s)))
    }

    /// The task of `id`, if the label is known.
    #[inline]
    pub fn get(&self, id: TaskRef) -> Option<u32> {
        let hash = self.hasher.hash_one(id);
        self.table
            .find(hash, |&i| self.slot_ref(self.slots[i as usize]) == Some(id))
            .copied()
    }

    /// Forgets the label of task `i` (a label, not a free task): the task becomes free, its
    /// text is overwritten with zeros, and the label is unknown from now on.
    pub fn forget(&mut self, i: u32) {
        let Some(id) = self.label(i as usize) else {
            return;
        };
        let hash = self.hasher.hash_one(id);
        if let Ok(entry) = self.table.find_entry(hash, |&j| j == i) {
            entry.remove();
        }
        if let Slot::Str { start, len } = self.slots[i as usize] {
            self.text
                .replace_range(start..start + len as usize, &"\0".repeat(len as usize));
        }
        self.slots[i as usize] = Slot::Free;
        self.free.insert(i);
    }

    /// Room for `n` more labels holding `text` more bytes, reserved so that [`Labels::push`]
    /// does not allocate (a failure here changes nothing).
    pub fn reserve(&mut self, n: usize, text: usize) -> Result<()> {
        Need::new("tasks", self.slots.len() + n, "task labels").reserve(&mut self.slots, n)?;
        try_reserve_text(&mut self.text, text)?;
        let hasher = &self.hasher;
        let (slots, buf) = (&self.slots, &self.text);
        self.table
            .try_reserve(n, |i| hasher.hash_one(slot_of(slots, buf, i)))
            .map_err(|_| too_many(self.slots.len() + n))
    }

    /// Adds a new label (not known: the caller checked) as the lowest free task, or else the
    /// next task. Returns its task.
    pub fn push(&mut self, id: TaskRef) -> Result<u32> {
        let reused = self.free.first().copied();
        let i = match reused {
            Some(i) => i,
            None => u32::try_from(self.slots.len()).map_err(|_| too_many(self.slots.len() + 1))?,
        };
        let slot = match id {
            TaskRef::Int(v) => Slot::Int(v),
            TaskRef::Str(s) => {
                if s.len() > MAX_LABEL_BYTES {
                    return Err(invalid(
                        "tasks",
                        format!("a task label of {} bytes is longer than {MAX_LABEL_BYTES}", s.len()),
                    ));
                }
                let start = self.text.len();
                self.text.push_str(s);
                Slot::Str {
                    start,
                    len: s.len() as u32,
                }
            }
        };
        match reused {
            Some(i) => {
                self.free.remove(&i);
                self.slots[i as usize] = slot;
            }
            None => self.slots.push(slot),
        }
        let hash = self.hasher.hash_one(id);
        let (hasher, slots, text) = (&self.hasher, &self.slots, &self.text);
        self.table
            .insert_unique(hash, i, |j| hasher.hash_one(slot_of(slots, text, j)));
        Ok(i)
    }

    /// Removes the labels from task `len` on (those of a batch that was not learned).
    pub fn truncate(&mut self, len: usize) {
        while self.slots.len() > len {
            let i = self.slots.len() - 1;
            if let Some(id) = self.slot_ref(self.slots[i]) {
                let hash = self.hasher.hash_one(id);
                if let Ok(entry) = self.table.find_entry(hash, |&j| j as usize == i) {
                    entry.remove();
                }
            }
            if let Slot::Str { start, .. } = self.slots[i] {
                self.text.truncate(start);
            }
            self.free.remove(&(i as u32));
            self.slots.pop();
        }
    }

    /// Bytes held (labels, text, table, free tasks).
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.text.capacity()
            + self.table.capacity() * 5
            + self.free.len() * 8
    }
}

fn slot_of<'a>(slots: &[Slot], text: &'a str, i: &u32) -> TaskRef<'a> {
    match slots[*i as usize] {
        Slot::Int(v) => TaskRef::Int(v),
        Slot::Str { start, len } => TaskRef::Str(&text[start..start + len as usize]),
        Slot::Free => unreachable!("a free task is not in the label table"),
    }
}

fn try_reserve_text(text: &mut String, n: usize) -> Result<()> {
    text.try_reserve(n).map_err(|_| Error::Memory {
        name: "tasks",
        value: n as u128,
        bytes: format!("{n} bytes"),
        what: "task label text".into(),
        reason: "the allocator refused".into(),
    })
}

fn too_many(n: usize) -> Error {
    invalid("tasks", format!("{n} task labels are too many"))
}

/// The words that end an unknown-task error: how to have tasks that keep arriving.
pub const GROW_HINT: &str = "for tasks that keep arriving build the model with n_tasks=None (graph 'complete' or \
     'disconnected'), or grow a fitted model with model.add_tasks(labels) where the learner supports it \
     (TaskGraph.add_tasks(n) gives a larger graph for a new model)";

/// Hash `id` as the label table does (for tests of the table).
#[cfg(test)]
fn hash_of(labels: &Labels, id: impl Hash) -> u64 {
    labels.hasher.hash_one(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_intern_in_first_seen_order_and_truncate_back() {
        let mut labels = Labels::default();
        assert_eq!(labels.push(TaskRef::Str("alice")).unwrap(), 0);
        assert_eq!(labels.push(TaskRef::Int(7)).unwrap(), 1);
        assert_eq!(labels.push(TaskRef::Str("bob")).unwrap(), 2);
        assert_eq!(labels.get(TaskRef::Str("bob")), Some(2));
        assert_eq!(labels.get(TaskRef::Int(7)), Some(1));
        assert_eq!(labels.get(TaskRef::Str("7")), None);
        labels.truncate(1);
        assert_eq!(labels.len(), 1);
        assert_eq!(labels.get(TaskRef::Str("bob")), None);
        assert_eq!(labels.get(TaskRef::Int(7)), None);
        assert_eq!(labels.push(TaskRef::Str("carol")).unwrap(), 1);
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [TaskRef::Str("alice"), TaskRef::Str("carol")]
        );
        assert_eq!(hash_of(&labels, TaskRef::Int(1)), hash_of(&labels, TaskRef::Int(1)));
    }

    #[test]
    fn many_labels_stay_findable_and_compact() {
        let mut labels = Labels::default();
        labels.reserve(100_000, 1_000_000).unwrap();
        for i in 0..100_000 {
            labels.push(TaskRef::Str(&format!("user{i}"))).unwrap();
        }
        assert!((0..100_000)
            .step_by(997)
            .all(|i| labels.get(TaskRef::Str(&format!("user{i}"))) == Some(i)));
        assert!(labels.memory_bytes() < 100_000 * 40, "{}", labels.memory_bytes());
        assert!(Labels::from_ids([TaskRef::Int(1), TaskRef::Int(1)]).is_err());
    }
}
