//! Coupled models' shared state through [`AnyLearner`] and [`Model`]
//! ([`crate::learner::shared`]): a model as one replica of a sharded model (recording, reporting
//! and applying its shared state), and replicas in step merged into one model.

use super::book::Book;
use super::tasks::Labels as TaskLabels;
use super::{AnyLearner, Fitted, LabelForm, Model, TaskRef};
use crate::error::{invalid, Error, Result};
use crate::learner::shared::{Replica, SharedChanges, SharedLayout, SharedUpdate};
use crate::learner::OnlineLearner;

fn no_shared_state(kind: &str) -> Error {
    invalid(
        "learner",
        format!(
            "{kind} does not keep its shared state in step across replicas (MTLinear on the complete graph, PA-Global \
             and CW-COL do)"
        ),
    )
}

impl AnyLearner {
    /// The learner as a replica of a coupled model: MTLinear, PA-Global (a
    /// [`crate::learner::PassiveAggressive`] with one global model) and CW-COL; `None` for the
    /// learners that do not keep a shared state in step.
    pub fn replica(&self) -> Option<&dyn Replica> {
        match self {
            AnyLearner::MTLinear(m) => Some(m),
            AnyLearner::PassiveAggressive(m) => Some(m),
            AnyLearner::CwCol(m) => Some(m),
            _ => None,
        }
    }

    /// [`AnyLearner::replica`], to change.
    pub fn replica_mut(&mut self) -> Option<&mut dyn Replica> {
        match self {
            AnyLearner::MTLinear(m) => Some(m),
            AnyLearner::PassiveAggressive(m) => Some(m),
            AnyLearner::CwCol(m) => Some(m),
            _ => None,
        }
    }

    fn as_replica(&self) -> Result<&dyn Replica> {
        self.replica().ok_or_else(|| no_shared_state(self.kind()))
    }

    fn as_replica_mut(&mut self) -> Result<&mut dyn Replica> {
        let kind = self.kind();
        self.replica_mut().ok_or_else(|| no_shared_state(kind))
    }

    /// The layout of the learner's shared state ([`Replica::shared_layout`]).
    pub fn shared_layout(&self) -> Result<SharedLayout> {
        self.as_replica()?.shared_layout()
    }

    /// Starts recording the changes to the shared state ([`Replica::track_shared`]).
    pub fn track_shared(&mut self) -> Result<()> {
        self.as_replica_mut()?.track_shared()
    }

    /// The changes to the shared state since the last sync ([`Replica::shared_changes`]).
    pub fn shared_changes(&self) -> Result<SharedChanges> {
        self.as_replica()?.shared_changes()
    }

    /// Brings the shared state in step ([`Replica::apply_shared`]).
    pub fn apply_shared(&mut self, update: &SharedUpdate) -> Result<()> {
        self.as_replica_mut()?.apply_shared(update)
    }

    /// Replicas in step merged into one learner of `n_tasks` tasks ([`Replica::merge_replicas`]).
    pub fn merge_replicas(parts: &[&AnyLearner], maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<AnyLearner> {
        macro_rules! merge {
            ($variant:ident) => {{
                let same: Option<Vec<_>> = parts
                    .iter()
                    .map(|p| match p {
                        AnyLearner::$variant(m) => Some(m),
                        _ => None,
                    })
                    .collect();
                let same = same.ok_or_else(|| invalid("parts", "replicas of different learners"))?;
                Ok(AnyLearner::$variant(Replica::merge_replicas(
                    &same, maps, n_tasks,
                )?))
            }};
        }
        match parts.first() {
            None => Err(invalid("parts", "no replica to merge")),
            Some(AnyLearner::MTLinear(_)) => merge!(MTLinear),
            Some(AnyLearner::PassiveAggressive(_)) => merge!(PassiveAggressive),
            Some(AnyLearner::CwCol(_)) => merge!(CwCol),
            Some(other) => Err(no_shared_state(other.kind())),
        }
    }
}

impl Model {
    fn fitted_learner(&self) -> Result<&AnyLearner> {
        self.learner()
            .ok_or_else(|| Error::State("the model has not learned a batch yet".into()))
    }

    /// Starts recording the changes to the learner's shared state: this model becomes a replica
    /// of a coupled model ([`crate::learner::shared`]). Not saved with the model.
    pub fn track_shared(&mut self) -> Result<()> {
        match &mut self.fitted {
            Some(f) => f.learner.track_shared(),
            None => Err(Error::State("the model has not learned a batch yet".into())),
        }
    }

    /// The changes to the shared state since the last sync.
    pub fn shared_changes(&self) -> Result<SharedChanges> {
        self.fitted_learner()?.shared_changes()
    }

    /// Brings the shared state in step with `update`; on `Err` the model is unchanged.
    pub fn apply_shared(&mut self, update: &SharedUpdate) -> Result<()> {
        match &mut self.fitted {
            Some(f) => f.learner.apply_shared(update),
            None => Err(Error::State("the model has not learned a batch yet".into())),
        }
    }

    /// Replicas of one coupled model, in step, merged into one model, written in `label_form`
    /// (`None`: the first replica's). Tasks named by labels (label mode) are the replicas'
    /// labels in order, replica by replica (each label held by one replica); numbered tasks
    /// (every replica holds all of them) keep their numbers, each task's state taken from the one
    /// replica that holds it. Counts add up. An error for replicas of different estimators, not
    /// in step, sharing a task, or of a learner whose task states cannot move
    /// ([`Replica::merge_replicas`]).
    pub fn merge_replicas(parts: &[Model], label_form: Option<LabelForm>) -> Result<Model> {
        let first = parts.first().ok_or_else(|| invalid("parts", "no replica to merge"))?;
        let mut fitted = Vec::with_capacity(parts.len());
        for p in parts {
            if p.estimator != first.estimator {
                return Err(invalid("parts", "replicas of different estimators"));
            }
            let f = p
                .fitted
                .as_ref()
                .ok_or_else(|| Error::State("a replica has not learned a batch yet".into()))?;
            fitted.push(f);
        }
        let label_mode = fitted[0].book.labels.is_some();
        if fitted.iter().any(|f| f.book.labels.is_some() != label_mode) {
            return Err(invalid("parts", "replicas that name their tasks differently"));
        }
        let (maps, n_tasks, labels, counts) = if label_mode {
            merged_labels(&first.estimator, &fitted)?
        } else {
            merged_indices(&fitted)?
        };
        let learners: Vec<&AnyLearner> = fitted.iter().map(|f| &f.learner).collect();
        let learner = AnyLearner::merge_replicas(&learners, &maps, n_tasks)?;
        let b0 = &fitted[0].book;
        let book = Book {
            n_features_in: b0.n_features_in,
            labels,
            counts,
            label_form: label_form.unwrap_or_else(|| b0.label_form.clone()),
            n_seen: fitted.iter().map(|f| f.book.n_seen).sum(),
            n_mistakes: fitted.iter().map(|f| f.book.n_mistakes).sum(),
            n_forgotten: fitted.iter().map(|f| f.book.n_forgotten).sum(),
            radius_warned: fitted.iter().any(|f| f.book.radius_warned),
            gamma_scale: b0.gamma_scale,
            feature_names_in: b0.feature_names_in.clone(),
        };
        if fitted.iter().any(|f| f.book.n_features_in != book.n_features_in) {
            return Err(invalid("parts", "replicas with different numbers of features"));
        }
        let mut model = Model::from_parts(first.estimator.clone(), learner, book)?;
        model.metadata = first.metadata.clone();
        Ok(model)
    }
}

impl Model {
    /// A replica of `estimator`'s model that has learned nothing, ready to record: a fresh
    /// learner over `n_features` features (its shared state empty, as every replica's before its
    /// first row) and no tasks (`label_mode`: tasks named by labels), no examples. Every shard of
    /// a coupled model starts from one, so that its first rows are recorded like any other.
    pub fn empty_replica(estimator: &super::Estimator, n_features: usize, label_mode: bool) -> Result<Model> {
        let n_tasks = match estimator.n_tasks() {
            Some(k) if !label_mode => usize::try_from(k).map_err(|_| invalid("n_tasks", "too large"))?,
            // a learner needs one task at least (the open complete graph keeps two)
            _ => estimator.engine_n_tasks(0).max(1),
        };
        let mut learner = estimator.build(n_tasks, n_features, false, None)?;
        learner.track_shared()?;
        let book = Book::new(n_tasks, n_features, label_mode.then(TaskLabels::default))?;
        Model::from_parts(estimator.clone(), learner, book)
    }
}

/// The shard of a task among `n_shards` (>= 1): MurmurHash3 (x86, 32-bit, seed 0) of the
/// label's UTF-8 bytes (an integer id: its decimal digits), reduced by multiply-shift. Stable
/// across processes, platforms and runs, so a label is learned by one shard wherever it arrives.
pub fn shard_of(id: TaskRef, n_shards: usize) -> usize {
    let h = match id {
        TaskRef::Str(s) => crate::hashing::murmur3_32(s.as_bytes(), 0),
        TaskRef::Int(i) => crate::hashing::murmur3_32(i.to_string().as_bytes(), 0),
    };
    ((u64::from(h) * n_shards as u64) >> 32) as usize
}

type Merged = (Vec<Vec<Option<usize>>>, usize, Option<TaskLabels>, Vec<u64>);

/// Label mode: the labels replica by replica; engine tasks past a replica's labels (the open
/// complete graph keeps two) must be empty and are dropped.
fn merged_labels(estimator: &super::Estimator, fitted: &[&Fitted]) -> Result<Merged> {
    let mut ids = Vec::new();
    let mut maps = Vec::with_capacity(fitted.len());
    for f in fitted {
        let labels = f.book.labels.as_ref().expect("label mode");
        let n = labels.len();
        let mut map = Vec::with_capacity(f.book.counts.len());
        for j in 0..f.book.counts.len() {
            if j < n {
                map.push(Some(ids.len() + j));
            } else if f.book.counts[j] != 0 {
                return Err(Error::State("a replica counts examples of an unnamed task".into()));
            } else {
                map.push(None);
            }
        }
        ids.extend(labels.iter());
        maps.push(map);
    }
    let n_labels = ids.len();
    let labels = TaskLabels::from_ids(ids).map_err(|_| invalid("parts", "two replicas hold the same task label"))?;
    let n_tasks = estimator.engine_n_tasks(n_labels);
    let mut counts = vec![0u64; n_tasks];
    for (f, map) in fitted.iter().zip(&maps) {
        for (j, t) in map.iter().enumerate() {
            if let Some(t) = t {
                counts[*t] = f.book.counts[j];
            }
        }
    }
    Ok((maps, n_tasks, Some(labels), counts))
}

/// Index mode: every replica holds all tasks; a task's state comes from the replica that has it.
fn merged_indices(fitted: &[&Fitted]) -> Result<Merged> {
    let k = fitted[0].book.counts.len();
    if fitted
        .iter()
        .any(|f| f.book.counts.len() != k || f.learner.n_tasks() != k)
    {
        return Err(invalid("parts", "replicas with different numbers of tasks"));
    }
    let mut counts = vec![0u64; k];
    for f in fitted {
        counts.iter_mut().zip(&f.book.counts).for_each(|(c, &n)| *c += n);
    }
    let maps = fitted.iter().map(|_| (0..k).map(Some).collect()).collect();
    Ok((maps, k, None, counts))
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
