//! The default hyper-parameters of every learner: the same values as the Python classes'
//! defaults (python/omtl/learners/), so a model built from Rust with `Default::default()` is the
//! model `omtl.X()` builds. tests/test_rust_defaults.py holds the two equal.
//!
//! The budget learners' `budget` has no default in the papers; 1000 is the package's.

use super::{
    BatchMtlParams, CwColParams, GlobalNorm, Loss, MTBPRJ2Params, MTFORGParams, MTLinearParams, MTRBPParams,
    OmtlParams, OmtrlParams, PaVariant, PassiveAggressiveParams, ProjectronParams, Regularizer, RelationUpdate,
    RomcoParams, RomcoTrigger, SvtRoute, Threshold, UpdateRule,
};

/// The default number of stored examples of the budget learners (MTRBP, MTFORG, the Projectrons).
pub const DEFAULT_BUDGET: usize = 1000;

impl Default for MTLinearParams {
    /// Python's `MTLinear()`: logistic loss, the normalized update at rate 0.5, an intercept, no
    /// hashing, and the complete graph's shared block at twice the rate (`shared_rate = 2`).
    fn default() -> Self {
        Self {
            loss: Loss::Logistic,
            rule: UpdateRule::Normalized,
            learning_rate: 0.5,
            fit_intercept: true,
            hash_bits: None,
            shared_rate: 2.0,
        }
    }
}

impl Default for MTRBPParams {
    /// Python's `MTRBP()`: a budget of [`DEFAULT_BUDGET`], seed 0.
    fn default() -> Self {
        Self {
            budget: DEFAULT_BUDGET,
            seed: 0,
        }
    }
}

impl Default for MTFORGParams {
    /// Python's `MTFORG()`: a budget of [`DEFAULT_BUDGET`], radius 1 (kernels bounded by one).
    fn default() -> Self {
        Self {
            budget: DEFAULT_BUDGET,
            radius: 1.0,
        }
    }
}

impl Default for ProjectronParams {
    /// Python's `MTBPRJ()`: a budget of [`DEFAULT_BUDGET`], η = 0.01 on the norm.
    fn default() -> Self {
        Self {
            budget: DEFAULT_BUDGET,
            eta: 0.01,
            threshold: Threshold::Norm,
        }
    }
}

impl Default for MTBPRJ2Params {
    /// Python's `MTBPRJ2()`: MTBPRJ's defaults, Algorithm 2's line 14 as corrected.
    fn default() -> Self {
        Self::from_shared(ProjectronParams::default(), false)
    }
}

impl Default for CwColParams {
    /// Python's `CWCOL()`: confidence 0.85, initial variance 1, ω = 0.5.
    fn default() -> Self {
        Self {
            confidence: 0.85,
            a: 1.0,
            omega: 0.5,
        }
    }
}

impl Default for OmtrlParams {
    /// Python's `OMTRL()`: the batch coupling, η = 1e-3, refreshed every 1000 examples.
    fn default() -> Self {
        Self {
            relation_update: RelationUpdate::Batch,
            eta: 1e-3,
            epoch: 1000,
        }
    }
}

impl Default for OmtlParams {
    /// Python's `OMTL()`: C = 1, the l∞ norm, the implicit update.
    fn default() -> Self {
        Self {
            c: 1.0,
            global_norm: GlobalNorm::LInf,
            explicit: false,
        }
    }
}

impl Default for BatchMtlParams {
    /// Python's `MTFL()` (the l2,1 penalty; `TRML()` is the same with [`Regularizer::Trace`]):
    /// ρ = 1e-2, retrained every 100 examples.
    fn default() -> Self {
        Self {
            regularizer: Regularizer::L21,
            rho: 1e-2,
            retrain_every: 100,
        }
    }
}

impl Default for RomcoParams {
    /// Python's `ROMCO()`: η1 = η2 = 0.1, λ1 = λ2 = 1e-4, updates on a positive loss, the SVT
    /// route chosen by size.
    fn default() -> Self {
        Self {
            eta1: 0.1,
            eta2: 0.1,
            lambda1: 1e-4,
            lambda2: 1e-4,
            update: RomcoTrigger::Loss,
            svt_route: SvtRoute::Auto,
        }
    }
}

impl Default for PassiveAggressiveParams {
    /// Python's `PAUnique()` (`PAGlobal()` is the same with `shared = true`): PA-I with C = 1.
    fn default() -> Self {
        Self {
            shared: false,
            c: 1.0,
            variant: PaVariant::Pa1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::ParamGuard;

    #[test]
    fn every_default_passes_its_check() {
        MTLinearParams::default().check().unwrap();
        MTRBPParams::default().check().unwrap();
        MTFORGParams::default().check().unwrap();
        ProjectronParams::default().check().unwrap();
        MTBPRJ2Params::default().check().unwrap();
        CwColParams::default().check().unwrap();
        OmtrlParams::default().check().unwrap();
        OmtlParams::default().check().unwrap();
        BatchMtlParams::default().check().unwrap();
        RomcoParams::default().check().unwrap();
        PassiveAggressiveParams::default().check().unwrap();
    }
}
