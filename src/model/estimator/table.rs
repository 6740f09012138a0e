//! The estimator classes: each class's name, the learner kind it builds, its hyper-parameters
//! with their defaults (in the order of the Python constructor), and how those parameters
//! become the learner's `XParams`. This is the one declaration of the classes: the model file's
//! class list, the command line's `--learner` names, the server and the Python package's names
//! all read it (`omtl._native.ESTIMATORS`; `tests/test_registry.py` holds the Python classes'
//! signatures to it).

use super::family::Family;
use super::values::{Default as D, Params};
use crate::error::Result;
use crate::learner::{
    BatchMtl, BatchMtlParams, Build, CwCol, CwColParams, GlobalNorm, Loss, MTBPRJ2Params, MTFORGParams, MTLinear,
    MTLinearParams, MTPerceptron, MTRBPParams, NoParams, Omtl, OmtlParams, Omtrl, OmtrlParams, PaVariant, ParamGuard,
    PassiveAggressive, PassiveAggressiveParams, ProjectronParams, Regularizer, RelationUpdate, Romco, RomcoParams,
    RomcoTrigger, SvtRoute, Threshold, UpdateRule, MTBPRJ, MTBPRJ2, MTFORG, MTRBP,
};
use crate::model::AnyLearner;

/// Which task relation and base kernel a class's learner is built over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A linear learner over `n_tasks` tasks (no task graph, no base kernel).
    Linear,
    /// A learner over the task graph `graph` (MTLinear).
    Graph,
    /// A kernel learner over the task graph `graph` and a base kernel.
    GraphKernel,
    /// A kernel learner over the disconnected graph (one kernel Perceptron per task).
    DisconnectedKernel,
}

/// One estimator class.
#[derive(Clone, Copy)]
pub struct Class {
    /// The class name (Python's, the model file's, `--learner`'s).
    pub name: &'static str,
    /// The learner kind it builds ([`crate::model::KINDS`]).
    pub kind: &'static str,
    /// Its hyper-parameters and their defaults, in the constructor's order.
    pub params: &'static [(&'static str, D)],
    /// Whether a fitted model of this class can add tasks (an open-ended `n_tasks = None`).
    pub grows: bool,
    /// Its task relation and base kernel.
    pub shape: Shape,
    /// Reads and checks the learner's parameters from the class's.
    pub(super) check: fn(Params) -> Result<()>,
    /// Builds the learner for a setting.
    pub(super) build: fn(Params, &Family) -> Result<AnyLearner>,
}

impl std::fmt::Debug for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Class")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish()
    }
}

impl PartialEq for Class {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// The column space of dict rows (hashed feature names): scikit-learn's and VW's 2^18.
const N_FEATURES: (&str, D) = ("n_features", D::Int(1 << 18));
const N_TASKS: (&str, D) = ("n_tasks", D::Null);
const GRAPH: (&str, D) = ("graph", D::Str("complete"));
const BUDGET: (&str, D) = ("budget", D::Int(1000));
const ETA: (&str, D) = ("eta", D::Float(0.01));
const THRESHOLD: (&str, D) = ("threshold_on", D::Str("norm"));
// The base kernel's parameters (scikit-learn SVC's names): the budget learners default to rbf,
// the unbounded Perceptrons to linear (DECISIONS.md, "Default kernels").
const RBF: (&str, D) = ("kernel", D::Str("rbf"));
const LINEAR: (&str, D) = ("kernel", D::Str("linear"));
const GAMMA: (&str, D) = ("gamma", D::Null);
const DEGREE: (&str, D) = ("degree", D::Int(2));
const COEF0: (&str, D) = ("coef0", D::Float(1.0));
const NORMALIZE: (&str, D) = ("normalize", D::Bool(false));

/// `check` and `build` of a class from the function that reads its learner's parameters.
macro_rules! class_fns {
    ($learner:ty, $read:expr) => {
        (
            |p: Params| -> Result<()> { ParamGuard::check_ref(&$read(p)?) },
            |p: Params, family: &Family| -> Result<AnyLearner> {
                let setting = family.setting::<<$learner as Build>::Setting<'_>>()?;
                Ok(AnyLearner::from(<$learner as Build>::build(&$read(p)?, &setting)?))
            },
        )
    };
}

/// A budget: a non-negative integer (the engine asks for at least 1).
fn budget(p: Params) -> Result<usize> {
    Ok(p.integer("budget", 0, 1 << 62)? as usize)
}

fn projectron(p: Params) -> Result<ProjectronParams> {
    Ok(ProjectronParams {
        budget: budget(p)?,
        eta: p.number("eta")?,
        threshold: p.name("threshold_on", Threshold::parse)?,
    })
}

fn mtbprj2(p: Params) -> Result<MTBPRJ2Params> {
    Ok(MTBPRJ2Params::from_shared(
        projectron(p)?,
        p.boolean("alg2_literal_line14")?,
    ))
}

fn mt_linear(p: Params) -> Result<MTLinearParams> {
    Ok(MTLinearParams {
        loss: p.name("loss", Loss::parse)?,
        rule: p.name("update", UpdateRule::parse)?,
        learning_rate: p.number("learning_rate")?,
        fit_intercept: p.boolean("fit_intercept")?,
        hash_bits: p.optional_integer("hash_bits", 0, u32::MAX.into())?.map(|b| b as u32),
        shared_rate: p.number("shared_rate")?,
    })
}

fn mt_rbp(p: Params) -> Result<MTRBPParams> {
    Ok(MTRBPParams {
        budget: budget(p)?,
        seed: p.integer("seed", 0, u64::MAX.into())? as u64,
    })
}

fn mt_forg(p: Params) -> Result<MTFORGParams> {
    Ok(MTFORGParams {
        budget: budget(p)?,
        radius: p.number("radius")?,
    })
}

fn cw_col(p: Params) -> Result<CwColParams> {
    Ok(CwColParams {
        confidence: p.number("confidence")?,
        a: p.number("a")?,
        omega: p.number("omega")?,
    })
}

fn omtl(p: Params) -> Result<OmtlParams> {
    Ok(OmtlParams {
        c: p.number("C")?,
        global_norm: p.name("global_norm", GlobalNorm::parse)?,
        explicit: p.boolean("explicit")?,
    })
}

/// OMTRL's default epoch (`epoch=None`): the coupling refreshed every 1,000 examples.
const OMTRL_DEFAULT_EPOCH: u64 = 1000;

fn omtrl(p: Params) -> Result<OmtrlParams> {
    Ok(OmtrlParams {
        relation_update: p.name("relation_update", RelationUpdate::parse)?,
        eta: p.number("eta")?,
        epoch: p
            .optional_integer("epoch", 0, i64::MAX.into())?
            .map_or(OMTRL_DEFAULT_EPOCH, |e| e as u64),
    })
}

fn pa(p: Params, shared: bool) -> Result<PassiveAggressiveParams> {
    Ok(PassiveAggressiveParams {
        shared,
        c: p.number("C")?,
        variant: p.name("variant", PaVariant::parse)?,
    })
}

fn batch(p: Params, regularizer: Regularizer) -> Result<BatchMtlParams> {
    Ok(BatchMtlParams {
        regularizer,
        rho: p.number("rho")?,
        retrain_every: p.integer("retrain_every", 0, i64::MAX.into())? as u64,
    })
}

fn romco(p: Params) -> Result<RomcoParams> {
    Ok(RomcoParams {
        eta1: p.number("eta1")?,
        eta2: p.number("eta2")?,
        lambda1: p.number("lambda1")?,
        lambda2: p.number("lambda2")?,
        update: p.name("update", RomcoTrigger::parse)?,
        svt_route: SvtRoute::Auto,
    })
}

fn no_params(_: Params) -> Result<NoParams> {
    Ok(NoParams)
}

macro_rules! class {
    ($name:literal, $kind:literal, $grows:expr, $shape:ident, $learner:ty, $read:expr, $params:expr) => {{
        let (check, build) = class_fns!($learner, $read);
        Class {
            name: $name,
            kind: $kind,
            params: $params,
            grows: $grows,
            shape: Shape::$shape,
            check,
            build,
        }
    }};
}

// Each class's hyper-parameters, in its Python constructor's order.
const CWCOL: &[(&str, D)] = &[
    N_TASKS,
    ("confidence", D::Float(0.85)),
    ("a", D::Float(1.0)),
    ("omega", D::Float(0.5)),
    N_FEATURES,
];
const KERNEL_PERCEPTRON: &[(&str, D)] = &[N_TASKS, LINEAR, GAMMA, DEGREE, COEF0, NORMALIZE, N_FEATURES];
const MTBPRJ_PARAMS: &[(&str, D)] = &[
    N_TASKS, BUDGET, ETA, GRAPH, RBF, GAMMA, DEGREE, COEF0, NORMALIZE, THRESHOLD, N_FEATURES,
];
const MTBPRJ2_PARAMS: &[(&str, D)] = &[
    N_TASKS,
    BUDGET,
    ETA,
    GRAPH,
    RBF,
    GAMMA,
    DEGREE,
    COEF0,
    NORMALIZE,
    THRESHOLD,
    ("alg2_literal_line14", D::Bool(false)),
    N_FEATURES,
];
const BATCH: &[(&str, D)] = &[
    N_TASKS,
    ("rho", D::Float(0.01)),
    ("retrain_every", D::Int(100)),
    N_FEATURES,
];
const MTFORG_PARAMS: &[(&str, D)] = &[
    N_TASKS,
    BUDGET,
    GRAPH,
    RBF,
    GAMMA,
    DEGREE,
    COEF0,
    NORMALIZE,
    ("radius", D::Float(1.0)),
    N_FEATURES,
];
const MTLINEAR: &[(&str, D)] = &[
    N_TASKS,
    GRAPH,
    ("loss", D::Str("logistic")),
    ("update", D::Str("normalized")),
    ("learning_rate", D::Float(0.5)),
    ("fit_intercept", D::Bool(true)),
    ("hash_bits", D::Null),
    ("shared_rate", D::Float(2.0)),
    N_FEATURES,
];
const MTPERCEPTRON: &[(&str, D)] = &[N_TASKS, GRAPH, LINEAR, GAMMA, DEGREE, COEF0, NORMALIZE, N_FEATURES];
const MTRBP_PARAMS: &[(&str, D)] = &[
    N_TASKS,
    BUDGET,
    GRAPH,
    RBF,
    GAMMA,
    DEGREE,
    COEF0,
    NORMALIZE,
    ("seed", D::Int(0)),
    N_FEATURES,
];
const OMTL: &[(&str, D)] = &[
    N_TASKS,
    ("C", D::Float(1.0)),
    ("global_norm", D::Str("linf")),
    ("explicit", D::Bool(false)),
    N_FEATURES,
];
const OMTRL: &[(&str, D)] = &[
    N_TASKS,
    ("relation_update", D::Str("batch")),
    ("eta", D::Float(1e-3)),
    ("epoch", D::Null),
    N_FEATURES,
];
const PA: &[(&str, D)] = &[N_TASKS, ("C", D::Float(1.0)), ("variant", D::Str("pa1")), N_FEATURES];
const ROMCO: &[(&str, D)] = &[
    N_TASKS,
    ("eta1", D::Float(0.1)),
    ("eta2", D::Float(0.1)),
    ("lambda1", D::Float(1e-4)),
    ("lambda2", D::Float(1e-4)),
    ("update", D::Str("loss")),
    N_FEATURES,
];

/// Every estimator class, sorted by name.
#[rustfmt::skip]
pub fn classes() -> &'static [Class] {
    static CLASSES: std::sync::OnceLock<Vec<Class>> = std::sync::OnceLock::new();
    CLASSES.get_or_init(|| {
        vec![
            class!("CWCOL", "cw_col", true, Linear, CwCol, cw_col, CWCOL),
            class!("KernelPerceptron", "mt_perceptron", true, DisconnectedKernel, MTPerceptron, no_params, KERNEL_PERCEPTRON),
            class!("MTBPRJ", "mtbprj", true, GraphKernel, MTBPRJ, projectron, MTBPRJ_PARAMS),
            class!("MTBPRJ2", "mtbprj2", true, GraphKernel, MTBPRJ2, mtbprj2, MTBPRJ2_PARAMS),
            class!("MTFL", "batch_mtl", false, Linear, BatchMtl, |p| batch(p, Regularizer::L21), BATCH),
            class!("MTFORG", "mt_forg", true, GraphKernel, MTFORG, mt_forg, MTFORG_PARAMS),
            class!("MTLinear", "mt_linear", true, Graph, MTLinear, mt_linear, MTLINEAR),
            class!("MTPerceptron", "mt_perceptron", true, GraphKernel, MTPerceptron, no_params, MTPERCEPTRON),
            class!("MTRBP", "mt_rbp", true, GraphKernel, MTRBP, mt_rbp, MTRBP_PARAMS),
            class!("OMTL", "omtl", true, Linear, Omtl, omtl, OMTL),
            class!("OMTRL", "omtrl", false, Linear, Omtrl, omtrl, OMTRL),
            class!("PAGlobal", "passive_aggressive", true, Linear, PassiveAggressive, |p| pa(p, true), PA),
            class!("PAUnique", "passive_aggressive", true, Linear, PassiveAggressive, |p| pa(p, false), PA),
            class!("ROMCO", "romco", false, Linear, Romco, romco, ROMCO),
            class!("TRML", "batch_mtl", false, Linear, BatchMtl, |p| batch(p, Regularizer::Trace), BATCH),
        ]
    })
}

/// Other names of classes (the papers call MTBPRJ and MTBPRJ2 also MTPRJ and MTPRJ2): alias,
/// class.
pub const ALIASES: &[(&str, &str)] = &[("MTPRJ", "MTBPRJ"), ("MTPRJ2", "MTBPRJ2")];

/// The class named `name` (a class name or an alias; case-insensitive when `loose`).
pub fn find(name: &str, loose: bool) -> Option<&'static Class> {
    let same = |a: &str| if loose { a.eq_ignore_ascii_case(name) } else { a == name };
    let name = ALIASES
        .iter()
        .find(|(alias, _)| same(alias))
        .map_or(name, |(_, class)| *class);
    let same = |a: &str| if loose { a.eq_ignore_ascii_case(name) } else { a == name };
    classes().iter().find(|c| same(c.name))
}
