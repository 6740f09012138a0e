//! The setting a class's learner is built for, whatever its family: the estimator knows the
//! family from the class table ([`super::Shape`]), the learner's [`Build`] impl names its
//! setting type, and [`Family::setting`] joins the two.
//!
//! [`Build`]: crate::learner::Build

use crate::error::{invalid, Result};
use crate::learner::{GraphSetting, KernelSetting, LinearSetting};

/// A learner's setting, of any family.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Family<'a> {
    Linear(LinearSetting),
    Graph(GraphSetting<'a>),
    Kernel(KernelSetting<'a>),
}

/// A setting type that can be read from a [`Family`].
pub(crate) trait FromFamily<'a>: Sized {
    fn from_family(family: &Family<'a>) -> Option<Self>;
}

impl<'a> FromFamily<'a> for LinearSetting {
    fn from_family(family: &Family<'a>) -> Option<Self> {
        match *family {
            Family::Linear(s) => Some(s),
            _ => None,
        }
    }
}

impl<'a> FromFamily<'a> for GraphSetting<'a> {
    fn from_family(family: &Family<'a>) -> Option<Self> {
        match *family {
            Family::Graph(s) => Some(s),
            _ => None,
        }
    }
}

impl<'a> FromFamily<'a> for KernelSetting<'a> {
    fn from_family(family: &Family<'a>) -> Option<Self> {
        match *family {
            Family::Kernel(s) => Some(s),
            _ => None,
        }
    }
}

impl<'a> Family<'a> {
    /// The setting of type `S`: the class table pairs each class with its learner's family.
    pub(crate) fn setting<S: FromFamily<'a>>(&self) -> Result<S> {
        S::from_family(self)
            .ok_or_else(|| invalid("learner", "the class table names the wrong family for this learner"))
    }
}
