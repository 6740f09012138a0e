//! A fitted model's width (its number of features), widened where the learner's storage allows
//! it: MTLinear keeps no per-feature state for a feature it has not seen, so a stream whose
//! largest feature index is not known in advance widens the model as larger indices arrive.
//! Every other learner keeps the width its first batch gave it.

use super::{AnyLearner, Model};
use crate::error::{Error, Result};

impl Model {
    /// Whether the fitted model (or, unfitted, the model its estimator builds) can widen its
    /// feature space ([`Model::grow_features`]).
    pub fn grows_features(&self) -> bool {
        match self.learner() {
            Some(learner) => matches!(learner, AnyLearner::MTLinear(_)),
            None => self.estimator.class().kind == "mt_linear",
        }
    }

    /// Widens a fitted model to `n_features` features (at least its current number); a model
    /// that has not learned yet takes its width from its first batch, so nothing changes.
    /// Atomic. A learner that keeps its width refuses with [`Error::FeatureMismatch`] (naming
    /// its width and the one asked for).
    pub fn grow_features(&mut self, n_features: usize) -> Result<()> {
        let Some(fitted) = &mut self.fitted else {
            return Ok(());
        };
        let width = fitted.book.n_features_in;
        if n_features == width {
            return Ok(());
        }
        match &mut fitted.learner {
            AnyLearner::MTLinear(m) if n_features > width => m.grow_features(n_features)?,
            _ => {
                return Err(Error::FeatureMismatch {
                    expected: width,
                    got: n_features,
                })
            }
        }
        fitted.book.n_features_in = n_features;
        fitted.book.feature_names_in = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::data::Rows;
    use crate::model::{Estimator, Labels, Model, TaskRef, Tasks};

    #[test]
    fn mtlinear_widens_and_predicts_as_a_model_built_wide() {
        let users = [TaskRef::Str("a"), TaskRef::Str("b")];
        let narrow = [1.0, 0.0, 0.5, 1.0];
        let wide = [1.0, 0.0, 2.0, 0.5, 1.0, -1.0];
        let mut grown = Model::new(Estimator::from_text("MTLinear", &[]).unwrap());
        let mut built = Model::new(Estimator::from_text("MTLinear", &[]).unwrap());
        assert!(grown.grows_features());
        grown
            .learn(&Rows::dense(&narrow, 2, 2), Tasks::Ids(&users), Labels::Ints(&[1, -1]))
            .unwrap();
        let padded = [1.0, 0.0, 0.0, 0.5, 1.0, 0.0];
        built
            .learn(&Rows::dense(&padded, 2, 3), Tasks::Ids(&users), Labels::Ints(&[1, -1]))
            .unwrap();
        grown.grow_features(3).unwrap();
        assert_eq!(grown.book().unwrap().n_features_in(), 3);
        let rows = Rows::dense(&wide, 2, 3);
        assert_eq!(
            grown.learn(&rows, Tasks::Ids(&users), Labels::Ints(&[1, 1])).unwrap(),
            built.learn(&rows, Tasks::Ids(&users), Labels::Ints(&[1, 1])).unwrap()
        );
        assert_eq!(grown.to_bytes().unwrap(), built.to_bytes().unwrap());
        assert!(grown.grow_features(2).is_err());

        let mut fixed = Model::new(Estimator::from_text("MTPerceptron", &[("n_tasks", "2")]).unwrap());
        assert!(!fixed.grows_features());
        fixed
            .learn(
                &Rows::dense(&narrow, 2, 2),
                Tasks::Ints(&[0, 1]),
                Labels::Ints(&[1, -1]),
            )
            .unwrap();
        let before = fixed.to_bytes().unwrap();
        let err = fixed.grow_features(3).unwrap_err().to_string();
        assert!(err.contains('2') && err.contains('3'), "{err}");
        assert_eq!(fixed.to_bytes().unwrap(), before);
    }
}
