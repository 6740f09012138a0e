//! The per-event path of every native learner (`learn_one`, `decision_one`, `predict_one`) and
//! `hash_features`: one event's row, task and label are converted and validated here, the task
//! label looked up in (and appended to) the model's label map, and the counters updated in
//! place, so that one event costs a few dictionary operations besides the learner's own work.
//!
//! The state read and written is the estimator's own (`n_seen_`, `n_mistakes_`,
//! its task set `_tasks` (`omtl._tasks.TaskSet`: `labels`, `index`, `counts`), `_label_form` in
//! its `__dict__`), the state
//! the batch path, pickling and model files use: an event leaves it exactly as `learn` on a
//! one-row batch would. Everything that can fail is checked before the engine is called, and the
//! bookkeeping is written only after it succeeded, all under the model's lock
//! (`OnlineClassifier._model_lock`). A model the fast path does not cover (not fitted yet, a
//! reference core, a learner with a hook before its updates) goes to the Python methods
//! `_learn_one_slow` / `_decision_one_slow`, which run the batch path on one row.

use numpy::{IntoPyArray, PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use super::learners::NativeLearner;
use crate::data::Rows;
use crate::hashing::{feature_column, DEFAULT_HASHED_COLUMNS, MAX_HASHED_COLUMNS};

/// One event's row, owned: dense values, or sorted duplicate-free `(column, value)` pairs.
pub(super) enum EventRow {
    Dense(Vec<f64>),
    Sparse { indices: Vec<u32>, values: Vec<f64> },
}

impl EventRow {
    fn rows<'a>(&'a self, indptr: &'a [i64; 2], n_cols: usize) -> Rows<'a> {
        match self {
            EventRow::Dense(v) => Rows::dense(v, 1, n_cols),
            EventRow::Sparse { indices, values } => Rows::Csr {
                indptr,
                indices,
                data: values,
                n_cols,
            },
        }
    }

    fn nnz(&self) -> i64 {
        match self {
            EventRow::Dense(v) => v.len() as i64,
            EventRow::Sparse { indices, .. } => indices.len() as i64,
        }
    }
}

/// `[numpy.integer, numpy.floating, numpy.bool_]`, looked up once.
fn numpy_scalar_types(py: Python<'_>) -> PyResult<&[Py<PyType>; 3]> {
    static TYPES: PyOnceLock<[Py<PyType>; 3]> = PyOnceLock::new();
    TYPES.get_or_try_init(py, || -> PyResult<[Py<PyType>; 3]> {
        let np = py.import("numpy")?;
        let get = |name: &str| -> PyResult<Py<PyType>> { Ok(np.getattr(name)?.cast_into::<PyType>()?.unbind()) };
        Ok([get("integer")?, get("floating")?, get("bool_")?])
    })
}

/// Whether `v`'s type derives from `ty` (its MRO, without the `__instancecheck__` call of
/// `isinstance`: NumPy's scalar types are plain classes, not ABCs with virtual subclasses).
fn derives_from(v: &Bound<'_, PyAny>, ty: &Py<PyType>) -> bool {
    // SAFETY: both pointers are live objects (the GIL is held); `ty` is a type object.
    unsafe { pyo3::ffi::PyObject_TypeCheck(v.as_ptr(), ty.as_ptr().cast::<pyo3::ffi::PyTypeObject>()) != 0 }
}

pub(super) fn is_numpy_bool(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(derives_from(v, &numpy_scalar_types(v.py())?[2]))
}

fn is_numpy_integer(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(derives_from(v, &numpy_scalar_types(v.py())?[0]))
}

/// A NumPy integer, floating or bool scalar.
fn is_numpy_number(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(numpy_scalar_types(v.py())?.iter().any(|ty| derives_from(v, ty)))
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A feature value: a real number (Python int, float or bool, a NumPy integer, float or bool
/// scalar), finite. Strings, `Decimal`, complex numbers and the like are refused (`TypeError`),
/// NaN and infinity are a `ValueError`.
fn number(v: &Bound<'_, PyAny>) -> PyResult<f64> {
    let x = if v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>() || is_numpy_number(v)? {
        v.extract::<f64>()
            .map_err(|_| PyValueError::new_err(format!("x holds a number too large for a float: {v}")))?
    } else {
        return Err(PyTypeError::new_err(format!(
            "x values must be real numbers (int, float, bool or a NumPy number), got {}",
            type_name(v)
        )));
    };
    if !x.is_finite() {
        return Err(PyValueError::new_err("x contains NaN or infinity"));
    }
    Ok(x)
}

/// Checks the width of the column space of dict rows (the learners' `n_features`).
fn check_width(width: &Bound<'_, PyAny>) -> PyResult<usize> {
    let ok = width.is_instance_of::<PyInt>() && !width.is_instance_of::<PyBool>() || is_numpy_integer(width)?;
    let w = if ok { width.extract::<i64>().ok() } else { None };
    match w {
        Some(w) if w >= 1 && w as u64 <= MAX_HASHED_COLUMNS as u64 => Ok(w as usize),
        _ => Err(PyValueError::new_err(format!(
            "n_features (the column space of dict rows) must be an integer in [1, 2**31 - 1], got {width}"
        ))),
    }
}

/// What kind of keys a dict row has.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    Columns,
    Names,
}

/// The sorted `(column, value)` pairs of a dict row: int keys are columns below `int_width`;
/// str (or bytes) keys are names hashed into `name_width` columns as scikit-learn's
/// `FeatureHasher(input_type="dict", alternate_sign=False)` does (a str value `v` of name `f` is
/// the name `f=v` with value 1; zero values are skipped; repeated columns are summed).
/// `names_only`: int keys are refused (`hash_features`).
fn dict_pairs(
    d: &Bound<'_, PyDict>,
    int_width: usize,
    name_width: usize,
    names_only: bool,
    skip: Option<&Bound<'_, PyAny>>,
    pairs: &mut Vec<(u32, f64)>,
) -> PyResult<Option<Keys>> {
    pairs.clear();
    let mut keys = None;
    let mut name_buf: Vec<u8> = Vec::new();
    for (k, v) in d.iter() {
        if let Some(skip) = skip {
            if k.is(skip) || k.eq(skip)? {
                continue; // the task key of a River example
            }
        }
        let kind = if k.is_instance_of::<PyString>() || k.is_instance_of::<PyBytes>() {
            Keys::Names
        } else if !names_only && (k.is_instance_of::<PyInt>() && !k.is_instance_of::<PyBool>() || is_numpy_integer(&k)?)
        {
            Keys::Columns
        } else if names_only {
            return Err(PyTypeError::new_err(format!(
                "feature names must be strings, got {}",
                type_name(&k)
            )));
        } else {
            return Err(PyTypeError::new_err(format!(
                "dict keys must be int columns or str feature names, got {}",
                type_name(&k)
            )));
        };
        match keys {
            None => keys = Some(kind),
            Some(seen) if seen != kind => {
                return Err(PyValueError::new_err(
                    "x mixes int and str keys: use int columns or str feature names, not both",
                ))
            }
            _ => {}
        }
        match kind {
            Keys::Columns => {
                let col = k
                    .extract::<i64>()
                    .ok()
                    .filter(|&c| c >= 0 && (c as u64) < int_width as u64);
                let Some(col) = col else {
                    return Err(PyValueError::new_err(format!(
                        "column {k} is out of range: columns must lie in [0, {int_width})"
                    )));
                };
                if v.is_instance_of::<PyString>() {
                    return Err(PyTypeError::new_err(
                        "x values must be real numbers (a str value needs a str feature name)",
                    ));
                }
                let value = number(&v)?;
                if value != 0.0 {
                    pairs.push((col as u32, value));
                }
            }
            Keys::Names => {
                // A str name as UTF-8 (borrowed where the Python build allows, abi3 copies).
                let text;
                let name: &[u8] = if let Ok(s) = k.cast::<PyString>() {
                    text = s.to_cow()?;
                    text.as_bytes()
                } else {
                    k.cast::<PyBytes>()?.as_bytes()
                };
                let (bytes, value): (&[u8], f64) = if let Ok(s) = v.cast::<PyString>() {
                    name_buf.clear();
                    name_buf.extend_from_slice(name);
                    name_buf.push(b'=');
                    name_buf.extend_from_slice(s.to_cow()?.as_bytes());
                    (&name_buf, 1.0)
                } else {
                    (name, number(&v)?)
                };
                if value != 0.0 {
                    pairs.push((feature_column(bytes, name_width) as u32, value));
                }
            }
        }
    }
    pairs.sort_unstable_by_key(|p| p.0);
    pairs.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    Ok(keys)
}

/// One event's `x` as a row and its width: a 1-D array or sequence of numbers (its length is the
/// width, which must be `fitted`'s when the model has one), or a dict (int columns below the
/// fitted width, else below `dict_width`; str names hashed into `dict_width` columns).
pub(super) fn convert_row(
    x: &Bound<'_, PyAny>,
    fitted: Option<usize>,
    dict_width: usize,
    skip: Option<&Bound<'_, PyAny>>,
) -> PyResult<(EventRow, usize)> {
    let py = x.py();
    if let Ok(d) = x.cast::<PyDict>() {
        let mut pairs = Vec::with_capacity(d.len());
        let keys = dict_pairs(d, fitted.unwrap_or(dict_width), dict_width, false, skip, &mut pairs)?;
        let width = match (keys, fitted) {
            (Some(Keys::Names), Some(w)) if w != dict_width => {
                return Err(PyValueError::new_err(format!(
                    "x has str feature names, hashed into n_features={dict_width} columns, but the model has \
                     {w} features: build the model with n_features={w}, or feed it rows of {w} numbers"
                )))
            }
            (Some(Keys::Names), _) => dict_width,
            _ => fitted.unwrap_or(dict_width),
        };
        let (indices, values) = pairs.into_iter().unzip();
        return Ok((EventRow::Sparse { indices, values }, width));
    }
    let values: Vec<f64> = if let Ok(a) = x.cast::<PyArray1<f64>>() {
        // SAFETY: the GIL is held and no Python code runs while the values are copied.
        match unsafe { a.as_slice() } {
            Ok(s) => s.to_vec(),
            // a strided row (a column of a 2-D array, a row of a Fortran-ordered one)
            Err(_) => a.readonly().as_array().iter().copied().collect(),
        }
    } else if let Ok(a) = x.cast::<PyUntypedArray>() {
        if a.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "x must be one row (1-D), got an array of shape {:?}; learn a batch with learn/partial_fit",
                a.shape()
            )));
        }
        match a.dtype().kind() {
            b'b' | b'i' | b'u' | b'f' => {
                let converted = a.call_method1(intern!(py, "astype"), ("float64",))?;
                return convert_row(&converted, fitted, dict_width, skip);
            }
            b'c' => {
                return Err(PyValueError::new_err(
                    "Complex data not supported: x must hold real numbers",
                ))
            }
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "x must hold real numbers, got dtype {}",
                    a.dtype().str()?
                )))
            }
        }
    } else if x.is_instance_of::<PyList>() || x.is_instance_of::<PyTuple>() {
        let mut out = Vec::with_capacity(x.len()?);
        for v in x.try_iter()? {
            out.push(number(&v?)?);
        }
        out
    } else if x.is_instance_of::<PyString>() || x.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "x must be a row of numbers or a dict, got a string",
        ));
    } else if x.hasattr(intern!(py, "__array__"))? {
        let converted = py.import("numpy")?.call_method1("asarray", (x,))?;
        return convert_row(&converted, fitted, dict_width, skip);
    } else {
        return Err(PyTypeError::new_err(format!(
            "x must be a 1-D array or sequence of numbers, or a dict of int columns or str feature names, got {}",
            type_name(x)
        )));
    };
    if values.iter().any(|v| !v.is_finite()) {
        return Err(PyValueError::new_err("x contains NaN or infinity"));
    }
    if values.is_empty() {
        return Err(PyValueError::new_err(
            "x has 0 features, while a minimum of 1 is required",
        ));
    }
    match fitted {
        Some(w) if w != values.len() => Err(PyValueError::new_err(format!(
            "x has {} features, but the model is expecting {w} features as input",
            values.len()
        ))),
        _ => {
            let n = values.len();
            Ok((EventRow::Dense(values), n))
        }
    }
}

/// The model's lock, held until drop.
pub(super) struct Locked<'py>(Bound<'py, PyAny>);

impl<'py> Locked<'py> {
    pub(super) fn acquire(model: &Bound<'py, PyAny>, dict: &Bound<'py, PyDict>) -> PyResult<Self> {
        let py = model.py();
        let lock = match dict.get_item(intern!(py, "_lock"))? {
            Some(lock) => lock,
            None => model.call_method0(intern!(py, "_model_lock"))?,
        };
        lock.call_method0(intern!(py, "acquire"))?;
        Ok(Locked(lock))
    }
}

/// The model's `__dict__` and its lock, held until the [`Locked`] is dropped: the opening of
/// every call that reads or changes a fitted model.
pub(super) fn locked_dict<'py>(model: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyDict>, Locked<'py>)> {
    let dict = model_dict(model)?;
    let lock = Locked::acquire(model, &dict)?;
    Ok((dict, lock))
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = self.0.call_method0(intern!(self.0.py(), "release"));
    }
}

pub(super) fn required<'py>(dict: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    dict.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("this model lacks its fitted attribute {key}")))
}

/// The estimator's state the fast path reads: `None` when the model is not for the fast path.
pub(super) struct Fitted<'py> {
    pub(super) learner: Bound<'py, NativeLearner>,
    pub(super) n_features_in: usize,
    /// The model's task set (`_tasks`, an `omtl._tasks.TaskSet`): `labels`, `index`, `counts`.
    pub(super) tasks: Bound<'py, PyAny>,
    pub(super) n_engine_tasks: usize,
}

/// The width of the column space of dict rows (the learner's `n_features`), checked only when a
/// dict arrives: rows of numbers do not use it.
fn dict_width(dict: &Bound<'_, PyDict>, x: &Bound<'_, PyAny>) -> PyResult<usize> {
    if !x.is_instance_of::<PyDict>() {
        return Ok(DEFAULT_HASHED_COLUMNS);
    }
    match dict.get_item(intern!(dict.py(), "n_features"))? {
        Some(w) => check_width(&w),
        None => Ok(DEFAULT_HASHED_COLUMNS),
    }
}

pub(super) fn fitted<'py>(model: &Bound<'py, PyAny>, dict: &Bound<'py, PyDict>) -> PyResult<Option<Fitted<'py>>> {
    let py = model.py();
    let Some(core) = dict.get_item(intern!(py, "_core"))?.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    let Ok(learner) = core.getattr(intern!(py, "_learner")) else {
        return Ok(None); // a reference core
    };
    let Ok(learner) = learner.cast_into::<NativeLearner>() else {
        return Ok(None);
    };
    if !model.getattr(intern!(py, "_events_native"))?.is_truthy()? {
        return Ok(None);
    }
    let n_features_in = required(dict, intern!(py, "n_features_in_"))?.extract::<usize>()?;
    let tasks = required(dict, intern!(py, "_tasks"))?;
    let n_engine_tasks = tasks.getattr(intern!(py, "counts"))?.len()?;
    Ok(Some(Fitted {
        learner,
        n_features_in,
        tasks,
        n_engine_tasks,
    }))
}

fn grow_hint(py: Python<'_>) -> String {
    py.import("omtl._tasks")
        .and_then(|m| m.getattr("GROW_HINT"))
        .and_then(|h| h.extract::<String>())
        .unwrap_or_default()
}

/// An event's task: its engine index, the label it adds (label mode) and the engine tasks to add.
struct TaskOf<'py> {
    index: i64,
    new_label: Option<Bound<'py, PyAny>>,
    n_new: usize,
}

fn task_of<'py>(
    model: &Bound<'py, PyAny>,
    dict: &Bound<'py, PyDict>,
    state: &Fitted<'py>,
    task: &Bound<'py, PyAny>,
) -> PyResult<TaskOf<'py>> {
    let py = model.py();
    let k = state.n_engine_tasks;
    let labels = Some(state.tasks.getattr(intern!(py, "labels"))?).filter(|l| !l.is_none());
    if let Some(labels) = labels {
        let labels = labels.cast_into::<PyList>()?;
        let index = state.tasks.getattr(intern!(py, "index"))?.cast_into::<PyDict>()?;
        if task.is_none() {
            return Err(PyTypeError::new_err("task is required: pass the event's task label"));
        }
        if task.is_instance_of::<PyBool>() || is_numpy_bool(task)? {
            return Err(PyTypeError::new_err(
                "a task label cannot be a bool (True == 1 would make it task 1's label)",
            ));
        }
        if let Some(i) = index.get_item(task)? {
            return Ok(TaskOf {
                index: i.extract()?,
                new_label: None,
                n_new: 0,
            });
        }
        // A label never seen: checked (and unwrapped from NumPy) as the batch path checks it.
        let plain = py
            .import(intern!(py, "omtl._tasks"))?
            .call_method1(intern!(py, "check_label"), (task,))?;
        // A forgotten label's task, if any is free, else the next one (omtl._tasks.TaskSet).
        let free = state.tasks.getattr(intern!(py, "free"))?.cast_into::<PyList>()?;
        let place = match free.len() {
            0 => labels.len(),
            _ => free.get_item(0)?.extract()?,
        };
        let m = labels.len() + usize::from(free.is_empty());
        let capacity = dict.get_item(intern!(py, "n_tasks"))?.filter(|n| !n.is_none());
        if let Some(capacity) = capacity {
            let capacity: usize = capacity.extract()?;
            if m > capacity {
                return Err(PyValueError::new_err(format!(
                    "unknown task {task} at row 0: this model has a fixed set of n_tasks={capacity} tasks, all \
                     taken by other labels; {}",
                    grow_hint(py)
                )));
            }
        }
        return Ok(TaskOf {
            index: place as i64,
            new_label: Some(plain),
            n_new: m.saturating_sub(k),
        });
    }
    if task.is_none() {
        if k == 1 {
            return Ok(TaskOf {
                index: 0,
                new_label: None,
                n_new: 0,
            });
        }
        return Err(PyTypeError::new_err(format!(
            "task is required: pass the event's task id in [0, {k}) (optional only when n_tasks=1)"
        )));
    }
    let integral = if task.is_instance_of::<PyBool>() {
        None
    } else if task.is_instance_of::<PyInt>() {
        Some(task.extract::<i128>().unwrap_or(i128::MAX))
    } else if is_numpy_bool(task)? {
        None
    } else if is_numpy_integer(task)? {
        Some(task.extract::<i128>().unwrap_or(i128::MAX))
    } else if task.is_instance_of::<PyFloat>() {
        let v = task.extract::<f64>()?;
        (v.is_finite() && v == v.round()).then_some(v as i128)
    } else {
        None
    };
    let Some(id) = integral else {
        return Err(PyTypeError::new_err(format!(
            "this model's tasks are integer ids in [0, {k}) (it was fitted with integer ids), got {}",
            task.repr()?
        )));
    };
    if id < 0 || id >= k as i128 {
        return Err(PyValueError::new_err(format!(
            "unknown task id {task} at row 0: task ids must lie in [0, {k}); {}",
            grow_hint(py)
        )));
    }
    Ok(TaskOf {
        index: id as i64,
        new_label: None,
        n_new: 0,
    })
}

/// An event's label as ±1, and the label form to record (`None`: the model's stays). A lone 1
/// keeps a model's -1/+1 or 0/1 form (it is valid in both).
fn label_of<'py>(y: &Bound<'py, PyAny>, form: &Bound<'py, PyAny>) -> PyResult<(f64, Option<&'static str>)> {
    if let Ok(pair) = form.cast::<PyTuple>() {
        if y.eq(pair.get_item(1)?)? {
            return Ok((1.0, None));
        }
        if y.eq(pair.get_item(0)?)? {
            return Ok((-1.0, None));
        }
        return Err(PyValueError::new_err(format!(
            "label {} at row 0 is not one of this model's classes [{}, {}]",
            y.repr()?,
            pair.get_item(0)?.repr()?,
            pair.get_item(1)?.repr()?
        )));
    }
    if y.is_none() {
        return Err(PyValueError::new_err(
            "this learner requires y to be passed, but the target y is None",
        ));
    }
    if y.is_instance_of::<PyBool>() || is_numpy_bool(y)? {
        return Ok((if y.is_truthy()? { 1.0 } else { -1.0 }, Some("bool")));
    }
    if !(y.is_instance_of::<PyInt>() || y.is_instance_of::<PyFloat>() || is_numpy_number(y)?) {
        return Err(PyTypeError::new_err(format!(
            "labels must be -1/+1, 0/1 or bool (the classes this model learned), got {}",
            type_name(y)
        )));
    }
    let v = y.extract::<f64>().unwrap_or(f64::NAN);
    if !v.is_finite() {
        return Err(PyValueError::new_err("y contains NaN or infinity"));
    }
    let current = form.cast::<PyString>()?.to_cow()?;
    match v {
        1.0 if current == "pm1" || current == "01" => Ok((1.0, None)),
        1.0 => Ok((1.0, Some("pm1"))),
        -1.0 => Ok((-1.0, Some("pm1"))),
        0.0 => Ok((-1.0, Some("01"))),
        _ => Err(PyValueError::new_err(format!(
            "label {} at row 0 is not allowed: this model learned labels -1/+1, 0/1 or bool",
            y.repr()?
        ))),
    }
}

/// A ±1 prediction written in a label form.
fn in_form<'py>(py: Python<'py>, positive: bool, form: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(pair) = form.cast::<PyTuple>() {
        return pair.get_item(usize::from(positive));
    }
    Ok(match &*form.cast::<PyString>()?.to_cow()? {
        "bool" => PyBool::new(py, positive).to_owned().into_any(),
        "01" => i64::from(positive).into_pyobject(py)?.into_any(),
        _ => (if positive { 1i64 } else { -1 }).into_pyobject(py)?.into_any(),
    })
}

pub(super) fn model_dict<'py>(model: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    Ok(model.getattr(intern!(model.py(), "__dict__"))?.cast_into::<PyDict>()?)
}

/// `learn_one` of a learner (see `OnlineClassifier.learn_one`): the prediction made before the
/// update, in the form of `y`.
#[pyfunction]
#[pyo3(signature = (model, x, y, task, skip=None))]
pub fn learn_event<'py>(
    model: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    task: &Bound<'py, PyAny>,
    skip: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = model.py();
    let (dict, _lock) = locked_dict(model)?;
    let Some(state) = fitted(model, &dict)? else {
        return model.call_method1(intern!(py, "_learn_one_slow"), (x, y, task, skip));
    };
    let (row, width) = convert_row(x, Some(state.n_features_in), dict_width(&dict, x)?, skip.as_ref())?;
    let task = task_of(model, &dict, &state, task)?;
    let form = required(&dict, intern!(py, "_label_form"))?;
    let (y_pm1, new_form) = label_of(y, &form)?;
    if task.n_new > 0 {
        // Room for the new task's count before the engine changes (no allocation after it).
        state.tasks.call_method1(intern!(py, "reserve"), (task.n_new,))?;
    }
    let indptr = [0, row.nnz()];
    let rows = row.rows(&indptr, width);
    let score = state
        .learner
        .get()
        .event_learn(py, &rows, task.index, y_pm1, task.n_new)?;
    // The bookkeeping of the learned event.
    if let Some(label) = task.new_label {
        state
            .tasks
            .call_method1(intern!(py, "add_labels"), (PyList::new(py, [label])?,))?;
    }
    if task.n_new > 0 {
        state.tasks.call_method1(intern!(py, "grow"), (task.n_new,))?;
    }
    let seen = state.tasks.getattr(intern!(py, "counts"))?;
    match seen.cast::<PyArray1<i64>>() {
        // SAFETY: the GIL is held; the index is below the length (checked above).
        Ok(counts) if (task.index as usize) < counts.len() => unsafe {
            *counts.uget_mut([task.index as usize]) += 1;
        },
        _ => {
            let slot = seen.get_item(task.index)?;
            seen.set_item(task.index, slot.add(1)?)?;
        }
    }
    let n_seen = required(&dict, intern!(py, "n_seen_"))?;
    dict.set_item(intern!(py, "n_seen_"), n_seen.add(1)?)?;
    let positive = score >= 0.0;
    if (if positive { 1.0 } else { -1.0 }) != y_pm1 {
        let n_mistakes = required(&dict, intern!(py, "n_mistakes_"))?;
        dict.set_item(intern!(py, "n_mistakes_"), n_mistakes.add(1)?)?;
    }
    let form = match new_form {
        Some(f) => {
            let f = PyString::new(py, f);
            dict.set_item(intern!(py, "_label_form"), &f)?;
            f.into_any()
        }
        None => form,
    };
    in_form(py, positive, &form)
}

/// `decision_one` of a learner: the score of one event, the model unchanged.
#[pyfunction]
#[pyo3(signature = (model, x, task, skip=None))]
pub fn decision_event(
    model: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    task: &Bound<'_, PyAny>,
    skip: Option<Bound<'_, PyAny>>,
) -> PyResult<f64> {
    let py = model.py();
    let (dict, _lock) = locked_dict(model)?;
    let Some(state) = fitted(model, &dict)? else {
        return model
            .call_method1(intern!(py, "_decision_one_slow"), (x, task, skip))?
            .extract();
    };
    let (row, width) = convert_row(x, Some(state.n_features_in), dict_width(&dict, x)?, skip.as_ref())?;
    let task = task_of(model, &dict, &state, task)?;
    let indptr = [0, row.nnz()];
    state
        .learner
        .get()
        .event_decision(py, &row.rows(&indptr, width), task.index, task.n_new)
}

/// `predict_one` of a learner: the sign of `decision_one` in the model's label form.
#[pyfunction]
#[pyo3(signature = (model, x, task, skip=None))]
pub fn predict_event<'py>(
    model: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    task: &Bound<'py, PyAny>,
    skip: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = model.py();
    let (dict, _lock) = locked_dict(model)?;
    let score = decision_event(model, x, task, skip)?;
    match dict.get_item(intern!(py, "_label_form"))? {
        Some(form) => in_form(py, score >= 0.0, &form),
        None => in_form(py, score >= 0.0, PyString::new(py, "pm1").as_any()),
    }
}

/// One event's row as NumPy data, for the batch path on one row: `("dense", values)` or
/// `("csr", indices, values, width)`.
#[pyfunction]
#[pyo3(signature = (x, fitted, dict_width, skip=None))]
pub fn event_row<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    fitted: Option<usize>,
    dict_width: &Bound<'py, PyAny>,
    skip: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (row, width) = convert_row(x, fitted, check_width(dict_width)?, skip.as_ref())?;
    match row {
        EventRow::Dense(v) => PyTuple::new(
            py,
            [PyString::new(py, "dense").into_any(), v.into_pyarray(py).into_any()],
        ),
        EventRow::Sparse { indices, values } => PyTuple::new(
            py,
            [
                PyString::new(py, "csr").into_any(),
                indices.into_pyarray(py).into_any(),
                values.into_pyarray(py).into_any(),
                width.into_pyobject(py)?.into_any(),
            ],
        ),
    }
}

/// The CSR parts `(indptr, indices, data)` of dicts of str feature names hashed into
/// `n_features` columns, as scikit-learn's `FeatureHasher(n_features, input_type="dict",
/// alternate_sign=False)` makes them (indices sorted, repeated columns summed).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn hash_dicts<'py>(
    py: Python<'py>,
    dicts: &Bound<'py, PyAny>,
    n_features: &Bound<'py, PyAny>,
) -> PyResult<(
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<f64>>,
)> {
    let width = check_width(n_features)?;
    let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
    let mut pairs = Vec::new();
    for (row, d) in dicts.try_iter()?.enumerate() {
        let d = d?;
        let d = match d.cast_into::<PyDict>() {
            Ok(d) => d,
            Err(e) => {
                let d = e.into_inner();
                if !d.hasattr(intern!(py, "items"))? {
                    return Err(PyTypeError::new_err(format!(
                        "row {row} is a {}, not a dict of feature names",
                        type_name(&d)
                    )));
                }
                PyDict::from_sequence(&d.call_method0(intern!(py, "items"))?)?
            }
        };
        dict_pairs(&d, width, width, true, None, &mut pairs)?;
        indices.extend(pairs.iter().map(|p| p.0 as i32));
        data.extend(pairs.iter().map(|p| p.1));
        indptr.push(indices.len() as i64);
    }
    Ok((indptr.into_pyarray(py), indices.into_pyarray(py), data.into_pyarray(py)))
}
