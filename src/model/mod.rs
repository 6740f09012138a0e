//! A fitted model, whole: [`Model`] holds the learner ([`AnyLearner`]) and its book (task
//! labels, per-task counts, label form, counters), learns and scores batches and single events
//! named by any task ids and labels, grows its tasks, and reads and writes the `.omtl` file
//! ([`crate::model_file`]). The Python estimators, the command line and the server all drive
//! one, so the rules of task ids and labels have one definition.
//!
//! ```
//! use omtl::data::Rows;
//! use omtl::model::{Estimator, Labels, Model, TaskRef, Tasks};
//!
//! let mut model = Model::new(Estimator::from_text("MTLinear", &[])?);
//! let x = [1.0, 0.0, 0.0, 1.0, 1.0, 0.5];
//! let rows = Rows::dense(&x, 3, 2);
//! let users = [TaskRef::Str("alice"), TaskRef::Str("bob"), TaskRef::Str("alice")];
//! let scores = model.learn(&rows, Tasks::Ids(&users), Labels::Strs(&["spam", "ham", "spam"]))?;
//! assert_eq!(scores[0], 0.0); // the first row meets an empty model
//! assert_eq!(model.book().unwrap().n_seen(), 3);
//! let saved = model.to_bytes()?;
//! let restored = Model::from_bytes(&saved)?;
//! assert_eq!(restored.decision(&rows, Tasks::Ids(&users))?, model.decision(&rows, Tasks::Ids(&users))?);
//! # Ok::<(), omtl::Error>(())
//! ```

mod any;
mod book;
pub mod estimator;
mod forget;
mod labels;
mod pending;
mod replica;
mod tasks;
mod width;

use std::collections::HashMap;

use serde_json::{Map, Value};

pub use any::{AnyLearner, KINDS, STATE_VERSION};
pub use book::Book;
pub use estimator::Estimator;
pub use forget::ForgetReport;
pub use labels::{read_label, read_labels, ClassLabel, Label, LabelForm, Labels, Predicted};
pub use pending::{PendingEvent, PendingInfo, PendingLimits, PendingRow, PendingStore, EVENT_OVERHEAD};
pub use replica::shard_of;
pub use tasks::{Labels as TaskLabels, TaskId, TaskRef, Tasks, GROW_HINT, MAX_LABEL_BYTES};

use crate::data::Rows;
use crate::error::{invalid, Error, Result};
use crate::learner::{self, OnlineLearner};

/// One event's features.
#[derive(Debug, Clone, Copy)]
pub enum EventRow<'a> {
    /// A dense row of the model's width.
    Dense(&'a [f64]),
    /// Integer columns (sorted, distinct; below the model's width) and their values.
    Columns {
        /// The columns.
        indices: &'a [u32],
        /// Their values.
        values: &'a [f64],
    },
    /// Named features hashed into the estimator's `n_features` columns (sorted, distinct;
    /// [`crate::hashing::RowBuilder`]) and their values.
    Named {
        /// The columns.
        indices: &'a [u32],
        /// Their values.
        values: &'a [f64],
    },
}

/// A batch to learn, with its options.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The rows.
    pub rows: &'a Rows<'a>,
    /// Their tasks.
    pub tasks: Tasks<'a>,
    /// Their labels.
    pub labels: Labels<'a>,
    /// Round ids (protocol P2, ALGORITHMS.md §1.2), one per row; `None`: protocol P1.
    pub rounds: Option<&'a [i64]>,
    /// The two classes (scikit-learn's `classes=`), for a first batch that shows only one.
    pub classes: Option<&'a LabelForm>,
}

impl<'a> Batch<'a> {
    /// A batch of rows, tasks and labels (protocol P1, classes from the labels).
    pub fn new(rows: &'a Rows<'a>, tasks: Tasks<'a>, labels: Labels<'a>) -> Self {
        Batch {
            rows,
            tasks,
            labels,
            rounds: None,
            classes: None,
        }
    }
}

/// The learner and book of a fitted model.
#[derive(Debug, Clone)]
struct Fitted {
    learner: AnyLearner,
    book: Book,
}

/// An estimator and, once it has learned, its learner and book. See the module documentation.
#[derive(Debug, Clone)]
pub struct Model {
    estimator: Estimator,
    fitted: Option<Fitted>,
    metadata: Option<Map<String, Value>>,
    /// Events scored and kept until their labels arrive ([`Model::remember`]).
    pending: PendingStore,
}

/// How a batch's tasks map to the engine's: one engine task per row, and the labels it adds.
struct TaskPlan<'a> {
    ids: Vec<i64>,
    /// New labels in order of first appearance, with the row of their first appearance.
    new: Vec<(TaskRef<'a>, usize)>,
    /// Engine tasks to add (a fitted model) or to build (a first batch).
    n_engine: usize,
    label_mode: bool,
}

impl Model {
    /// An unfitted model of `estimator`: it builds its learner on its first batch.
    pub fn new(estimator: Estimator) -> Self {
        Model {
            estimator,
            fitted: None,
            metadata: None,
            pending: PendingStore::default(),
        }
    }

    /// A model around a learner built in Rust that has learned nothing yet, described by the
    /// estimator that builds it ([`Estimator::describing`]: MTLinear, MTRBP, MTFORG).
    /// Tasks are numbered `0..n_tasks`, or, with `named` (or an open-ended task set), named by
    /// labels given on first use.
    pub fn from_learner(learner: AnyLearner, named: bool) -> Result<Self> {
        if learner.n_updates() > 0 {
            return Err(invalid(
                "learner",
                "Model::from_learner takes a learner that has learned nothing yet (its counts are not known)",
            ));
        }
        let estimator = Estimator::describing(&learner)?;
        let labels = (named || estimator.open_ended()).then(TaskLabels::default);
        let book = Book::new(learner.n_tasks(), learner.n_features(), labels)?;
        Ok(Model {
            estimator,
            fitted: Some(Fitted { learner, book }),
            metadata: None,
            pending: PendingStore::default(),
        })
    }

    /// A fitted model from its parts (a model file's), checked: the learner is the estimator's
    /// kind and the book agrees with it.
    pub fn from_parts(estimator: Estimator, learner: AnyLearner, book: Book) -> Result<Self> {
        estimator.check_learner(&learner)?;
        check_book(&book, &learner, estimator.open_ended())?;
        Ok(Model {
            estimator,
            fitted: Some(Fitted { learner, book }),
            metadata: None,
            pending: PendingStore::default(),
        })
    }

    /// The estimator (class and hyper-parameters).
    pub fn estimator(&self) -> &Estimator {
        &self.estimator
    }

    /// Whether the model has learned a batch (and so has a learner).
    pub fn is_fitted(&self) -> bool {
        self.fitted.is_some()
    }

    /// The learner (`None` before the first batch).
    pub fn learner(&self) -> Option<&AnyLearner> {
        self.fitted.as_ref().map(|f| &f.learner)
    }

    /// The book (`None` before the first batch).
    pub fn book(&self) -> Option<&Book> {
        self.fitted.as_ref().map(|f| &f.book)
    }

    /// The label form predictions are written in (-1/+1 before the first batch).
    pub fn label_form(&self) -> &LabelForm {
        const PM1: LabelForm = LabelForm::PlusMinusOne;
        self.book().map_or(&PM1, |b| &b.label_form)
    }

    /// The JSON object stored with the model in its file (never interpreted).
    pub fn metadata(&self) -> Option<&Map<String, Value>> {
        self.metadata.as_ref()
    }

    /// The stored JSON object, to change.
    pub fn metadata_mut(&mut self) -> &mut Option<Map<String, Value>> {
        &mut self.metadata
    }

    /// Records the column names of the data frame a first batch came from (one per feature).
    pub fn set_feature_names_in(&mut self, names: Option<Vec<String>>) -> Result<()> {
        let Some(fitted) = &mut self.fitted else {
            return Err(invalid("feature_names_in", "the model has not learned a batch yet"));
        };
        if names.as_ref().is_some_and(|n| n.len() != fitted.book.n_features_in) {
            return Err(invalid("feature_names_in", "one name per feature"));
        }
        fitted.book.feature_names_in = names;
        Ok(())
    }

    /// The engine task of a task id, if the model knows it.
    pub fn task_index(&self, id: TaskRef) -> Option<usize> {
        let book = self.book()?;
        match (&book.labels, id) {
            (Some(labels), id) => labels.get(id).map(|i| i as usize),
            (None, TaskRef::Int(i)) => usize::try_from(i).ok().filter(|&i| i < book.counts.len()),
            (None, TaskRef::Str(_)) => None,
        }
    }

    /// The memory the model holds: the learner's state (where it reports it), the book and the
    /// pending events.
    pub fn memory_bytes(&self) -> usize {
        self.pending.bytes()
            + self.fitted.as_ref().map_or(0, |f| {
                let learner = f
                    .learner
                    .diagnostics()
                    .iter()
                    .find(|(name, _)| *name == "memory_bytes")
                    .map_or(0.0, |(_, v)| *v);
                learner as usize + f.book.memory_bytes()
            })
    }

    // ---- tasks -------------------------------------------------------------------------------

    fn unknown_capacity(id: TaskRef, row: usize, capacity: usize) -> Error {
        invalid(
            "tasks",
            format!(
                "unknown task {id} at row {row}: this model has a fixed set of n_tasks={capacity} tasks, all taken by \
                 other labels; {GROW_HINT}"
            ),
        )
    }

    /// Maps a batch's task ids to engine tasks without changing anything.
    fn plan<'a>(&self, tasks: Tasks<'a>, n: usize) -> Result<TaskPlan<'a>> {
        if let Some(len) = tasks.given() {
            if len != n {
                return Err(Error::LengthMismatch {
                    rows: n,
                    what: "tasks",
                    len,
                });
            }
        }
        let label_mode = match self.book() {
            Some(book) => book.labels.is_some(),
            None => self.estimator.open_ended() || !tasks.all_integers(n),
        };
        if !label_mode {
            return self.plan_indices(tasks, n);
        }
        let empty = TaskLabels::default();
        let known = self.book().and_then(|b| b.labels.as_ref()).unwrap_or(&empty);
        let capacity = self.estimator.n_tasks().map(|k| k as usize);
        let base = known.len();
        // New labels take the free tasks first, lowest first, as `TaskLabels::push` does.
        let mut free = known.free();
        let mut appended = 0;
        let mut new: Vec<(TaskRef<'a>, usize)> = Vec::new();
        let mut fresh: HashMap<TaskRef<'a>, i64> = HashMap::new();
        let mut ids = Vec::new();
        crate::alloc::Need::new("rows", n, "the batch's task ids").reserve(&mut ids, n)?;
        let mut resolve = |id: TaskRef<'a>, row: usize| -> Result<i64> {
            if let Some(i) = known.get(id) {
                return Ok(i64::from(i));
            }
            if let Some(&i) = fresh.get(&id) {
                return Ok(i);
            }
            if let TaskRef::Str(s) = id {
                if s.len() > MAX_LABEL_BYTES {
                    return Err(invalid(
                        "tasks",
                        format!("a task label of {} bytes is longer than {MAX_LABEL_BYTES}", s.len()),
                    ));
                }
            }
            let i = match free.next() {
                Some(t) => i64::from(t),
                None => {
                    appended += 1;
                    (base + appended - 1) as i64
                }
            };
            if let Some(cap) = capacity {
                if i as usize >= cap {
                    return Err(Self::unknown_capacity(id, row, cap));
                }
            }
            new.push((id, row));
            fresh.insert(id, i);
            Ok(i)
        };
        match tasks {
            Tasks::Omitted => {
                return Err(invalid(
                    "tasks",
                    "tasks is required: pass one task label per row, or one label for all rows",
                ))
            }
            Tasks::All(id) => {
                let i = resolve(id, 0)?;
                ids.resize(n, i);
            }
            _ => {
                for r in 0..n {
                    ids.push(resolve(tasks.get(r).expect("given"), r)?);
                }
            }
        }
        let n_engine = match (self.book(), capacity) {
            (None, Some(cap)) => cap,
            (None, None) => self.estimator.engine_n_tasks(new.len()),
            (Some(_), Some(_)) => 0,
            (Some(book), None) => {
                let needed = self.estimator.engine_n_tasks(base + appended);
                needed.saturating_sub(book.counts.len())
            }
        };
        Ok(TaskPlan {
            ids,
            new,
            n_engine,
            label_mode,
        })
    }

    /// Index mode: integer ids in `[0, n_tasks)`.
    fn plan_indices<'a>(&self, tasks: Tasks<'a>, n: usize) -> Result<TaskPlan<'a>> {
        let k = match self.book() {
            Some(book) => book.counts.len(),
            None => self.estimator.n_tasks().expect("index mode has n_tasks") as usize,
        };
        let check = |id: TaskRef, row: usize| -> Result<i64> {
            match id {
                TaskRef::Int(i) if (0..k as i64).contains(&i) => Ok(i),
                TaskRef::Int(i) => Err(invalid(
                    "tasks",
                    format!("unknown task id {i} at row {row}: task ids must lie in [0, {k}); {GROW_HINT}"),
                )),
                TaskRef::Str(_) => Err(Error::WrongType {
                    name: "tasks",
                    reason: format!(
                        "this model's tasks are integer ids in [0, {k}) (it was fitted with integer ids), got {id}"
                    ),
                }),
            }
        };
        let ids = match tasks {
            Tasks::Omitted if k == 1 => vec![0; n],
            Tasks::Omitted => {
                return Err(invalid(
                    "tasks",
                    format!(
                        "tasks is required: pass the task id of every row, in [0, {k}) (optional only when n_tasks=1)"
                    ),
                ))
            }
            Tasks::All(id) => vec![check(id, 0)?; n],
            Tasks::Ints(ids) => {
                if let Some(r) = ids.iter().position(|&i| !(0..k as i64).contains(&i)) {
                    check(TaskRef::Int(ids[r]), r)?;
                }
                ids.to_vec()
            }
            Tasks::Ids(ids) => ids
                .iter()
                .enumerate()
                .map(|(r, &id)| check(id, r))
                .collect::<Result<_>>()?,
        };
        let n_engine = if self.book().is_some() { 0 } else { k };
        Ok(TaskPlan {
            ids,
            new: Vec::new(),
            n_engine,
            label_mode: false,
        })
    }

    // ---- learning ----------------------------------------------------------------------------

    /// Learns a batch online (each row predicted, then learned) and returns the pre-update
    /// scores. Atomic: on an error the model is exactly as it was; an interrupt
    /// ([`Error::Interrupted`]) keeps the rows learned before it, with their tasks and counts.
    pub fn learn(&mut self, rows: &Rows, tasks: Tasks, labels: Labels) -> Result<Vec<f64>> {
        self.learn_batch(Batch::new(rows, tasks, labels))
    }

    /// Protocol P2 (ALGORITHMS.md §1.2): consecutive rows with equal round ids form a round.
    pub fn learn_rounds(&mut self, rows: &Rows, tasks: Tasks, labels: Labels, rounds: &[i64]) -> Result<Vec<f64>> {
        self.learn_batch(Batch {
            rounds: Some(rounds),
            ..Batch::new(rows, tasks, labels)
        })
    }

    /// [`Model::learn`] with every option of a [`Batch`].
    pub fn learn_batch(&mut self, batch: Batch) -> Result<Vec<f64>> {
        let n = batch.rows.len();
        if batch.labels.len() != n {
            return Err(Error::LengthMismatch {
                rows: n,
                what: "y",
                len: batch.labels.len(),
            });
        }
        let current = batch
            .classes
            .filter(|c| matches!(c, LabelForm::Pair(..)))
            .or(self.book().map(|b| &b.label_form));
        let mut y = Vec::new();
        let form = read_labels(batch.labels, current, !self.is_fitted(), &mut y)?;
        self.learn_pm1(batch.rows, batch.tasks, &y, form, batch.rounds)
    }

    /// Learns rows whose labels are already ±1 (`y`), the model taking `form` after them.
    fn learn_pm1(
        &mut self,
        rows: &Rows,
        tasks: Tasks,
        y: &[f64],
        form: LabelForm,
        rounds: Option<&[i64]>,
    ) -> Result<Vec<f64>> {
        let plan = self.plan(tasks, rows.len())?;
        if rows.is_empty() {
            rows.validate()?;
            return Ok(Vec::new());
        }
        let Some(fitted) = self.fitted.as_mut() else {
            return self.learn_first(rows, &plan, y, form, rounds);
        };
        fitted.book.reserve(&plan.new, plan.n_engine)?;
        let warned = radius_warning(&fitted.learner, fitted.book.radius_warned, rows).is_some();
        let outcome = match rounds {
            Some(r) => learner::learn_rounds_grown(&mut fitted.learner, plan.n_engine, rows, &plan.ids, y, r),
            None => learner::learn_grown(&mut fitted.learner, plan.n_engine, rows, &plan.ids, y),
        };
        fitted.finish(&plan, y, form, warned, &outcome);
        outcome
    }

    /// The first batch: builds the learner (for the batch's width and data) and learns; the
    /// model stays unfitted unless a row was learned. An open-ended learner is built with its
    /// fewest tasks and grows by the batch's labels as a fitted model does, so that an interrupt
    /// keeps only the tasks of the rows learned.
    fn learn_first(
        &mut self,
        rows: &Rows,
        plan: &TaskPlan,
        y: &[f64],
        form: LabelForm,
        rounds: Option<&[i64]>,
    ) -> Result<Vec<f64>> {
        let gamma_scale = self.estimator.gamma_of(rows);
        let n_built = match self.estimator.n_tasks() {
            None => self.estimator.engine_n_tasks(0).clamp(1, plan.n_engine.max(1)),
            Some(_) => plan.n_engine,
        };
        let mut learner = self
            .estimator
            .build(n_built, rows.n_cols(), rows.is_sparse(), gamma_scale)?;
        let mut book = Book::new(
            learner.n_tasks(),
            rows.n_cols(),
            plan.label_mode.then(TaskLabels::default),
        )?;
        let n_new = plan.n_engine.saturating_sub(n_built);
        book.gamma_scale = gamma_scale;
        book.reserve(&plan.new, n_new)?;
        let warned = radius_warning(&learner, false, rows).is_some();
        let outcome = match rounds {
            Some(r) => learner::learn_rounds_grown(&mut learner, n_new, rows, &plan.ids, y, r),
            None => learner::learn_grown(&mut learner, n_new, rows, &plan.ids, y),
        };
        let mut fitted = Fitted { learner, book };
        if fitted.finish(plan, y, form, warned, &outcome) > 0 {
            self.fitted = Some(fitted);
        }
        outcome
    }

    /// Learns one event: its features, task (`None`: a model with one task) and label. Returns
    /// the score it had before the update; the prediction is its sign in [`Model::label_form`]
    /// as it is after the call (a lone 1 keeps a -1/+1 or 0/1 model's form). Atomic.
    pub fn learn_one(&mut self, x: EventRow, task: Option<TaskRef>, y: Label) -> Result<f64> {
        let (y, form) = read_label(y, self.book().map(|b| &b.label_form))?;
        let indptr = [0, event_nnz(&x)];
        let rows = self.event_rows(&x, &indptr)?;
        let tasks = task.map_or(Tasks::Omitted, Tasks::All);
        Ok(self.learn_pm1(&rows, tasks, &[y], form, None)?[0])
    }

    /// The score of one event (the model unchanged); 0 before the first batch. A label never
    /// seen scores as a new task with no examples.
    pub fn decision_one(&self, x: EventRow, task: Option<TaskRef>) -> Result<f64> {
        let indptr = [0, event_nnz(&x)];
        let rows = self.event_rows(&x, &indptr)?;
        Ok(self.decision(&rows, task.map_or(Tasks::Omitted, Tasks::All))?[0])
    }

    /// One event as a one-row batch, its width checked against the model's.
    fn event_rows<'a>(&self, x: &EventRow<'a>, indptr: &'a [i64; 2]) -> Result<Rows<'a>> {
        let fitted = self.book().map(|b| b.n_features_in);
        let dict_width = self.estimator.dict_width();
        Ok(match *x {
            EventRow::Dense(values) => {
                if values.is_empty() {
                    return Err(invalid("x", "x has 0 features, while a minimum of 1 is required"));
                }
                if let Some(w) = fitted.filter(|&w| w != values.len()) {
                    return Err(Error::FeatureMismatch {
                        expected: w,
                        got: values.len(),
                    });
                }
                Rows::dense(values, 1, values.len())
            }
            EventRow::Columns { indices, values } => Rows::Csr {
                indptr,
                indices,
                data: values,
                n_cols: fitted.unwrap_or(dict_width),
            },
            EventRow::Named { indices, values } => {
                if let Some(w) = fitted.filter(|&w| w != dict_width) {
                    return Err(invalid(
                        "x",
                        format!(
                            "x has str feature names, hashed into n_features={dict_width} columns, but the model has {w} \
                             features: build the model with n_features={w}, or feed it rows of {w} numbers"
                        ),
                    ));
                }
                Rows::Csr {
                    indptr,
                    indices,
                    data: values,
                    n_cols: dict_width,
                }
            }
        })
    }

    // ---- scoring -----------------------------------------------------------------------------

    /// The scores of a batch (the model unchanged); zeros before the first batch. Labels never
    /// seen score as new tasks with no examples (where the model can add them).
    pub fn decision(&self, rows: &Rows, tasks: Tasks) -> Result<Vec<f64>> {
        let plan = self.plan(tasks, rows.len())?;
        match &self.fitted {
            None => {
                rows.validate()?;
                Ok(vec![0.0; rows.len()])
            }
            Some(_) if rows.is_empty() => Ok(Vec::new()),
            Some(f) => learner::decision_grown(&f.learner, plan.n_engine, rows, &plan.ids),
        }
    }

    /// The predicted labels of a batch in the model's label form.
    pub fn predict(&self, rows: &Rows, tasks: Tasks) -> Result<Vec<Predicted<'_>>> {
        let form = self.label_form();
        Ok(self
            .decision(rows, tasks)?
            .into_iter()
            .map(|s| form.predicted(s >= 0.0))
            .collect())
    }

    /// A warning to give before learning `rows` (MTFORG: a row with `K'(x, x) > R²`, once per
    /// model); the caller gives it first, so that a warning turned into an error changes nothing.
    pub fn warning(&self, rows: &Rows) -> Result<Option<String>> {
        match &self.fitted {
            Some(f) => Ok(radius_warning(&f.learner, f.book.radius_warned, rows)),
            None if self.estimator.class().kind == "mt_forg" && !rows.is_empty() => {
                let gamma = self.estimator.gamma_of(rows);
                let learner = self.estimator.build(1, rows.n_cols(), rows.is_sparse(), gamma)?;
                Ok(radius_warning(&learner, false, rows))
            }
            None => Ok(None),
        }
    }

    // ---- tasks -------------------------------------------------------------------------------

    /// Adds tasks with no examples to a fitted model: new distinct labels (label mode), or the
    /// next integer ids `n_tasks, n_tasks + 1, ...`. Where the learner and graph can grow (an
    /// open-ended complete graph, the disconnected graph); atomic.
    pub fn add_tasks(&mut self, ids: &[TaskRef]) -> Result<()> {
        let est = &self.estimator;
        let Some(fitted) = &mut self.fitted else {
            return Err(invalid(
                "tasks",
                "add_tasks grows a fitted model; before fitting, set n_tasks (or n_tasks=None for tasks that keep arriving)",
            ));
        };
        if ids.is_empty() {
            return Ok(());
        }
        let k = fitted.book.counts.len();
        let n_new = match &fitted.book.labels {
            Some(labels) => {
                let distinct: std::collections::HashSet<_> = ids.iter().collect();
                if distinct.len() != ids.len() || ids.iter().any(|&id| labels.get(id).is_some()) {
                    return Err(invalid("tasks", "add_tasks: the labels must be new and distinct"));
                }
                let m = labels.len() + ids.len().saturating_sub(labels.free().count());
                match est.n_tasks() {
                    None => est.engine_n_tasks(m).saturating_sub(k),
                    Some(_) => m.saturating_sub(k),
                }
            }
            None => {
                let next: Vec<TaskRef> = (k..k + ids.len()).map(|i| TaskRef::Int(i as i64)).collect();
                if ids != next.as_slice() {
                    return Err(invalid(
                        "tasks",
                        format!(
                            "add_tasks: a model with integer task ids grows by the next ids {k}, {}, ...",
                            k + 1
                        ),
                    ));
                }
                ids.len()
            }
        };
        if n_new > 0 && est.n_tasks().is_some() && est.class().shape != estimator::Shape::Linear {
            let graph = est.params().get("graph").and_then(Value::as_str);
            if graph != Some("disconnected") && est.class().shape != estimator::Shape::DisconnectedKernel {
                return Err(invalid(
                    "tasks",
                    "a fitted model on a fixed task graph cannot grow: its task kernel depends on the number of tasks; \
                     build the model with n_tasks=None for the open-ended complete graph, or use the disconnected graph",
                ));
            }
        }
        if !est.class().grows {
            return Err(invalid(
                "tasks",
                format!("{} cannot add tasks to a fitted model", est.class().name),
            ));
        }
        let new: Vec<(TaskRef, usize)> = ids.iter().map(|&id| (id, 0)).collect();
        fitted.book.reserve(&new, n_new)?;
        if n_new > 0 {
            fitted.learner.add_tasks(n_new)?;
        }
        fitted.book.counts.resize(fitted.learner.n_tasks(), 0);
        if let Some(labels) = &mut fitted.book.labels {
            for &id in ids {
                labels.push(id).expect("checked new and reserved");
            }
        }
        if let Some(n) = est.n_tasks() {
            let grown = n + n_new as u64;
            self.estimator = est.with_n_tasks(grown)?;
        }
        Ok(())
    }
}

fn event_nnz(x: &EventRow) -> i64 {
    match x {
        EventRow::Dense(v) => v.len() as i64,
        EventRow::Columns { indices, .. } | EventRow::Named { indices, .. } => indices.len() as i64,
    }
}

/// MTFORG's warning for rows beyond its radius, unless it was given already.
fn radius_warning(learner: &AnyLearner, warned: bool, rows: &Rows) -> Option<String> {
    let AnyLearner::MTFORG(m) = learner else {
        return None;
    };
    if warned || rows.validate().is_err() || !(0..rows.len()).any(|t| m.exceeds_radius(&rows.row(t))) {
        return None;
    }
    let r = m.radius();
    Some(format!(
        "an instance has K'(x, x) > radius^2 = {}: the damage bound of MTFORG assumes K'(x, x) <= R^2; raise `radius` \
         or normalise the kernel",
        r * r
    ))
}

impl Book {
    /// Room for `new` labels and `n_engine` more engine tasks, so that committing a learned
    /// batch does not allocate (a failure here changes nothing).
    fn reserve(&mut self, new: &[(TaskRef, usize)], n_engine: usize) -> Result<()> {
        crate::alloc::Need::new("n_tasks", self.counts.len() + n_engine, "the per-task example counts")
            .reserve(&mut self.counts, n_engine)?;
        if let Some(labels) = &mut self.labels {
            let text = new
                .iter()
                .map(|(id, _)| match id {
                    TaskRef::Str(s) => s.len(),
                    TaskRef::Int(_) => 0,
                })
                .sum();
            labels.reserve(new.len(), text)?;
        }
        Ok(())
    }
}

impl Fitted {
    /// The book of a learning call's `outcome`: the rows learned (all of them, or those before
    /// an interrupt), the labels they brought, the engine's new tasks, the counts and the form.
    /// Returns the number of rows learned (0 for an error, which changed nothing).
    fn finish(
        &mut self,
        plan: &TaskPlan,
        y: &[f64],
        form: LabelForm,
        warned: bool,
        outcome: &Result<Vec<f64>>,
    ) -> usize {
        let scores = match outcome {
            Ok(scores) | Err(Error::Interrupted { scores }) => scores,
            Err(_) => return 0,
        };
        let done = scores.len();
        let book = &mut self.book;
        book.counts.resize(self.learner.n_tasks(), 0);
        if let Some(labels) = &mut book.labels {
            for &(id, first_row) in plan.new.iter().take_while(|(_, first)| *first < done) {
                debug_assert!(first_row < done);
                labels.push(id).expect("checked new and reserved");
            }
        }
        let mut mistakes = 0;
        for ((&task, &label), &score) in plan.ids.iter().zip(&y[..done]).zip(scores) {
            book.counts[task as usize] += 1;
            mistakes += u64::from(learner::predict_sign(score) != label);
        }
        book.n_seen += done as u64;
        book.n_mistakes += mistakes;
        if done > 0 {
            book.label_form = form;
            book.radius_warned |= warned;
        }
        done
    }
}

/// Checks a book against its learner: the sizes, the counters, the labels (distinct, at most
/// one per engine task, present for an open-ended model).
pub fn check_book(book: &Book, learner: &AnyLearner, open_ended: bool) -> Result<()> {
    let fail = |m: String| Error::ModelFile(m);
    let (n_tasks, d) = (learner.n_tasks(), learner.n_features());
    if book.counts.len() != n_tasks {
        return Err(fail("seen_per_task must hold one count per task".into()));
    }
    if book.n_features_in != d {
        return Err(fail(format!(
            "the engine has {d} features, the estimator {}",
            book.n_features_in
        )));
    }
    let total: u128 = book.counts.iter().map(|&c| u128::from(c)).sum();
    if total + u128::from(book.n_forgotten) != u128::from(book.n_seen) || book.n_mistakes > book.n_seen {
        return Err(fail(format!(
            "the counts disagree: {} seen, {} mistakes, per task {total}, {} forgotten",
            book.n_seen, book.n_mistakes, book.n_forgotten
        )));
    }
    if let Some(labels) = &book.labels {
        if labels
            .free()
            .any(|t| book.counts.get(t as usize).is_some_and(|&c| c > 0))
        {
            return Err(fail("a free task has examples".into()));
        }
    }
    if learner.n_updates() > book.n_seen || learner.n_active() as u64 > book.n_seen {
        return Err(fail(format!(
            "the engine made {} updates and holds {} elements after {} examples",
            learner.n_updates(),
            learner.n_active(),
            book.n_seen
        )));
    }
    match &book.labels {
        Some(labels) if labels.len() > n_tasks => Err(fail(
            "the task labels are not distinct labels of at most n_tasks tasks".into(),
        )),
        None if open_ended => Err(fail(
            "an open-ended model (n_tasks=None) without its task labels".into(),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod grow_tests;
#[cfg(test)]
mod tests;
