//! Any native learner as one value: [`AnyLearner`], an enum with a variant per learner of
//! `learner_table!` (src/learner/mod.rs), and its versioned state bytes.
//!
//! `AnyLearner` implements [`OnlineLearner`] by delegating every method (the provided ones too,
//! so a learner's own base kernel, joint rounds and lookahead are kept), so the batch functions
//! ([`learn`](crate::learner::learn), [`decision`](crate::learner::decision), …) take it like
//! any learner. It is what a model file ([`crate::model_file`]) and the Python binding hold.
//!
//! ```
//! use omtl::data::Rows;
//! use omtl::kernel::TaskKernel;
//! use omtl::learner::{decision, learn, Build, GraphSetting, MTLinear, MTLinearParams};
//! use omtl::model::AnyLearner;
//!
//! let mut model = AnyLearner::from(MTLinear::build(&MTLinearParams::default(), &GraphSetting::new(&TaskKernel::complete(2)?, 2))?);
//! let x = [1.0, 0.0, 0.0, 1.0];
//! let rows = Rows::Dense { data: &x, n_rows: 2, n_cols: 2 };
//! learn(&mut model, &rows, &[0, 1], &[1.0, -1.0])?;
//! let restored = AnyLearner::from_bytes(&model.to_bytes()?)?;
//! assert_eq!(restored.kind(), "mt_linear");
//! assert_eq!(decision(&restored, &rows, &[0, 1])?, decision(&model, &rows, &[0, 1])?);
//! # Ok::<(), omtl::Error>(())
//! ```

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::error::{Error, Result};
use crate::kernel::{BaseKernel, Scratch};
use crate::learner::{learner_table, Ahead, Event, OnlineLearner, Round};
use crate::state::{self, CheckState};

/// The layout version of [`AnyLearner::to_bytes`]. Bumped whenever the serialised layout of a
/// learner changes (2: ROMCO keeps the eigenvalues of C after the last thresholding; 3: the
/// Projectrons' drift-probe count, OMTRL's "coupling is fresh" flag, and MTLinear, stored in
/// single precision; 4: ROMCO's row-side Gram route for wide U holds the eigendecomposition of
/// `D = UUᵀ`, its factored tall U holds `Π` and `Π⁻¹` of `U = W Π`; 5: MTLinear's parameters
/// hold `shared_rate`; 6: MTLinear's cells in one of three layouts, a hashed table, dense blocks
/// or a sparse map, and no stored factor entries for the closed-form task graphs).
pub const STATE_VERSION: u32 = 6;

/// Implements, for every `OnlineLearner` method listed, a forwarding method that matches on the
/// variant and calls the learner's own (static dispatch, no defaults of the trait).
macro_rules! forward_methods {
    ($variants:tt; $(fn $method:ident(&$($self_mut:ident)+ $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?;)*) => {
        $(forward_methods!(@one $variants; $method; ($($self_mut)+); ($($arg: $ty),*); ($($arg),*); ($($ret)?));)*
    };
    (@one [$($variant:ident)*]; $method:ident; (self); ($($arg:ident: $ty:ty),*); $call:tt; ($($ret:ty)?)) => {
        fn $method(&self $(, $arg: $ty)*) $(-> $ret)? {
            match self {
                $(AnyLearner::$variant(m) => m.$method $call,)*
            }
        }
    };
    (@one [$($variant:ident)*]; $method:ident; (mut self); ($($arg:ident: $ty:ty),*); $call:tt; ($($ret:ty)?)) => {
        fn $method(&mut self $(, $arg: $ty)*) $(-> $ret)? {
            match self {
                $(AnyLearner::$variant(m) => m.$method $call,)*
            }
        }
    };
}

/// [`AnyLearner`] and everything that matches on its variants, from [`learner_table!`].
macro_rules! any_learner {
    ($($kind:literal => $variant:ident($ty:ident, $params:ident);)*) => {
        /// A native learner of any kind: one variant per learner, in the order of
        /// `learner_table!` (src/learner/mod.rs), which is the serialised layout (pickles and model files keep
        /// loading because variants are only ever appended).
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[allow(clippy::upper_case_acronyms)] // the papers' algorithm names
        pub enum AnyLearner {
            $(
                #[doc = concat!("The `", $kind, "` learner, [`crate::learner::", stringify!($ty), "`].")]
                $variant(crate::learner::$ty),
            )*
        }

        /// Every learner kind (the names [`AnyLearner::kind`] gives), in the table's order.
        pub const KINDS: &[&str] = &[$($kind),*];

        impl AnyLearner {
            /// The name of the learner's algorithm (one of [`KINDS`]).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(AnyLearner::$variant(_) => $kind,)*
                }
            }

            /// Same algorithm and hyper-parameters as `other` (not the same fitted state).
            pub fn same_settings(&self, other: &AnyLearner) -> bool {
                match (self, other) {
                    $((AnyLearner::$variant(a), AnyLearner::$variant(b)) => a.same_settings(b),)*
                    _ => false,
                }
            }
        }

        $(
            impl From<crate::learner::$ty> for AnyLearner {
                fn from(learner: crate::learner::$ty) -> Self {
                    AnyLearner::$variant(learner)
                }
            }
        )*

        impl CheckState for AnyLearner {
            fn check_state(&self) -> Result<()> {
                match self {
                    $(AnyLearner::$variant(m) => m.check_state(),)*
                }
            }
        }

        // Every method delegates, the provided ones included: a default here would silently
        // replace the learner's own (its base kernel for the row checks, its joint rounds).
        impl OnlineLearner for AnyLearner {
            forward_methods! {
                [$($variant)*];
                fn n_tasks(&self) -> usize;
                fn n_features(&self) -> usize;
                fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64;
                fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()>;
                fn prefetch(&self, x: Row, task: usize);
                fn lookahead(&self) -> usize;
                fn score_ahead(&self, rows: &[Row], tasks: &[usize], out: &mut [f64], scratch: &mut Scratch);
                fn update_ahead(&mut self, event: Event, ahead: &mut Ahead, scratch: &mut Scratch) -> Result<bool>;
                fn learn_one(&mut self, x: Row, task: usize, y: f64, scratch: &mut Scratch) -> Result<f64>;
                fn learn_round(&mut self, round: Round, scores: &mut [f64], scratch: &mut Scratch) -> Result<()>;
                fn score_round(&self, round: Round, scores: &mut [f64], scratch: &mut Scratch);
                fn base_kernel(&self) -> Option<&BaseKernel>;
                fn joint_rounds(&self) -> bool;
                fn n_updates(&self) -> u64;
                fn n_active(&self) -> usize;
                fn diagnostics(&self) -> Vec<(&'static str, f64)>;
                fn add_tasks(&mut self, n: usize) -> Result<()>;
                fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)>;
                fn rebuild_caches(&mut self);
                fn journal_begin(&mut self) -> bool;
                fn journal_commit(&mut self);
                fn journal_rollback(&mut self);
                fn scores_new_tasks(&self) -> bool;
            }
        }
    };
}

learner_table!(any_learner);

/// The serialised state: the layout version, then the learner (the `(u32, AnyLearner)` tuple
/// earlier versions wrote, byte for byte).
#[derive(Serialize, Deserialize)]
struct VersionedState<L> {
    version: u32,
    learner: L,
}

impl CheckState for VersionedState<AnyLearner> {
    fn check_state(&self) -> Result<()> {
        self.learner.check_state()
    }
}

impl AnyLearner {
    /// The learner's state: [`STATE_VERSION`], then the learner (bincode, [`crate::state`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        state::encode(&VersionedState {
            version: STATE_VERSION,
            learner: self,
        })
    }

    /// A learner from untrusted state bytes: the version read first (an older layout gets a clear
    /// message rather than a layout error), then decoded within the bytes' size and checked
    /// invariant by invariant ([`CheckState`]). Errors are [`Error::State`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let head: [u8; 4] = bytes
            .get(..4)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| Error::State(format!("a state needs at least 4 bytes, got {}", bytes.len())))?;
        let version = u32::from_le_bytes(head);
        if version != STATE_VERSION {
            return Err(Error::State(format!(
                "the model state has layout version {version}, this omtl reads version {STATE_VERSION}"
            )));
        }
        Ok(state::decode::<VersionedState<AnyLearner>>(bytes)?.learner)
    }
}

#[cfg(test)]
mod tests {
    /// The names of the `fn`s declared in `text` between `start` and the end of its block.
    fn fn_names(text: &str, start: &str) -> Vec<String> {
        let body = &text[text.find(start).expect("the block")..];
        let mut depth = 0usize;
        let mut end = body.len();
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let mut names: Vec<String> = body[..end]
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("fn "))
            .map(|l| l[3..].split(['(', '<']).next().unwrap_or("").to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn any_learner_forwards_every_method_of_the_trait() {
        // A method left out would silently run the trait's default for every learner.
        let declared = fn_names(include_str!("../learner/mod.rs"), "pub trait OnlineLearner {");
        let forwarded = fn_names(include_str!("any.rs"), "forward_methods! {");
        assert!(declared.len() > 10, "{declared:?}");
        assert_eq!(declared, forwarded);
    }
}
