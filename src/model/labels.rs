//! Class labels: the forms a binary model's labels come in (ALGORITHMS.md §0, DECISIONS.md
//! "Label forms"), reading them as ±1, and writing ±1 predictions back in the model's form.
//!
//! Besides -1/+1, 0/1 and bool, any two labels (two strings, {1, 2}, ...) are a form: the pair
//! `(negative, positive)`, sorted as scikit-learn sorts `classes_` (the larger is positive). A
//! model keeps the form of the last labels it learned; a model with a pair keeps its pair, and
//! a batch whose labels are all 1 keeps a -1/+1 or 0/1 model's form (1 is valid in both).

use std::cmp::Ordering;

use serde_json::Number;

use crate::error::{Error, Result};

/// One class label of a pair: a string or a number (never a boolean: booleans are the
/// [`LabelForm::Bool`] form).
#[derive(Debug, Clone, PartialEq)]
pub enum ClassLabel {
    /// A number (an integer or a finite float, as the training labels were).
    Number(Number),
    /// A string.
    Str(String),
}

/// How a model's training labels looked, and so what `predict` returns: the two classes.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum LabelForm {
    /// −1 and +1 (`"pm1"`).
    #[default]
    PlusMinusOne,
    /// 0 and 1 (`"01"`).
    ZeroOne,
    /// false and true (`"bool"`).
    Bool,
    /// Two other labels, `(negative, positive)`: both strings or both numbers, distinct.
    Pair(ClassLabel, ClassLabel),
}

/// One label as a caller gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Label<'a> {
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(&'a str),
}

/// The labels of a batch, one per row, all of one type.
#[derive(Debug, Clone, Copy)]
pub enum Labels<'a> {
    /// Integers.
    Ints(&'a [i64]),
    /// Floating-point numbers (±1 already, for a caller that has them so).
    Floats(&'a [f64]),
    /// Booleans.
    Bools(&'a [bool]),
    /// Strings.
    Strs(&'a [&'a str]),
}

impl Labels<'_> {
    /// The number of labels.
    pub fn len(&self) -> usize {
        match self {
            Labels::Ints(v) => v.len(),
            Labels::Floats(v) => v.len(),
            Labels::Bools(v) => v.len(),
            Labels::Strs(v) => v.len(),
        }
    }

    /// Whether there is no label.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, r: usize) -> Label<'_> {
        match self {
            Labels::Ints(v) => Label::Int(v[r]),
            Labels::Floats(v) => Label::Float(v[r]),
            Labels::Bools(v) => Label::Bool(v[r]),
            Labels::Strs(v) => Label::Str(v[r]),
        }
    }
}

/// A label's type as a message names it.
fn type_error(reason: impl Into<String>) -> Error {
    Error::WrongType {
        name: "y",
        reason: reason.into(),
    }
}

fn value_error(reason: impl Into<String>) -> Error {
    Error::InvalidParameter {
        name: "y",
        reason: reason.into(),
    }
}

impl ClassLabel {
    /// Whether `label` is this class (numbers compare by value, strings by text).
    pub fn matches(&self, label: Label) -> bool {
        match (self, label) {
            (ClassLabel::Str(s), Label::Str(l)) => s == l,
            (ClassLabel::Number(n), Label::Int(i)) => n.as_f64() == Some(i as f64),
            (ClassLabel::Number(n), Label::Float(f)) => n.as_f64() == Some(f),
            _ => false,
        }
    }

    fn of(label: Label) -> Option<ClassLabel> {
        match label {
            Label::Int(i) => Some(ClassLabel::Number(i.into())),
            Label::Float(f) => Number::from_f64(f).map(ClassLabel::Number),
            Label::Str(s) => Some(ClassLabel::Str(s.to_owned())),
            Label::Bool(_) => None,
        }
    }
}

impl std::fmt::Display for ClassLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClassLabel::Number(n) => write!(f, "{n}"),
            ClassLabel::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl std::fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Int(i) => write!(f, "{i}"),
            Label::Float(v) => write!(f, "{v:?}"),
            Label::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Label::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A predicted label in a model's form.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicted<'a> {
    /// -1/+1 or 0/1.
    Int(i64),
    /// false/true.
    Bool(bool),
    /// One of the model's pair of classes.
    Class(&'a ClassLabel),
}

impl LabelForm {
    /// A ±1 prediction (`positive`: the score was >= 0) in this form.
    pub fn predicted(&self, positive: bool) -> Predicted<'_> {
        match self {
            LabelForm::PlusMinusOne => Predicted::Int(if positive { 1 } else { -1 }),
            LabelForm::ZeroOne => Predicted::Int(i64::from(positive)),
            LabelForm::Bool => Predicted::Bool(positive),
            LabelForm::Pair(neg, pos) => Predicted::Class(if positive { pos } else { neg }),
        }
    }

    /// The two classes, negative first.
    pub fn classes(&self) -> [Predicted<'_>; 2] {
        [self.predicted(false), self.predicted(true)]
    }

    /// A pair of classes given by a caller (scikit-learn's `classes=`): `None` when the two are
    /// a standard form (-1/+1, 0/1, false/true), else the sorted pair.
    pub fn from_classes(classes: [Label; 2]) -> Result<LabelForm> {
        let [a, b] = classes;
        let standard = |x: Label, y: Label| {
            let (Some(x), Some(y)) = (numeric(x), numeric(y)) else {
                return false;
            };
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            (lo, hi) == (-1.0, 1.0) || (lo, hi) == (0.0, 1.0)
        };
        if let (Label::Bool(x), Label::Bool(y)) = (a, b) {
            if x != y {
                return Ok(LabelForm::Bool);
            }
        }
        if standard(a, b) {
            return Ok(if numeric(a).unwrap().min(numeric(b).unwrap()) == 0.0 {
                LabelForm::ZeroOne
            } else {
                LabelForm::PlusMinusOne
            });
        }
        let (Some(x), Some(y)) = (ClassLabel::of(a), ClassLabel::of(b)) else {
            return Err(type_error("classes must be numbers or strings"));
        };
        match compare(&x, &y) {
            Some(Ordering::Less) => Ok(LabelForm::Pair(x, y)),
            Some(Ordering::Greater) => Ok(LabelForm::Pair(y, x)),
            Some(Ordering::Equal) => Err(value_error(format!("classes must hold two labels, got [{x}, {y}]"))),
            None => Err(type_error("classes must be two numbers or two strings")),
        }
    }
}

fn numeric(label: Label) -> Option<f64> {
    match label {
        Label::Int(i) => Some(i as f64),
        Label::Float(f) => Some(f),
        _ => None,
    }
}

/// The order of two class labels of one kind (numbers by value, strings by code point).
fn compare(a: &ClassLabel, b: &ClassLabel) -> Option<Ordering> {
    match (a, b) {
        (ClassLabel::Number(x), ClassLabel::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (ClassLabel::Str(x), ClassLabel::Str(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// The labels of a batch as ±1 (`y`, appended to `out`), and the form they give the model.
///
/// `current` is the model's form (`None` before its first batch): a pair binds every label to
/// it; `first` allows a batch to set up a new pair from its labels (a model's first batch; a
/// single distinct label cannot, it does not say which is positive). `classes` (scikit-learn's
/// `partial_fit(classes=...)`) gives the pair explicitly.
pub fn read_labels(labels: Labels, current: Option<&LabelForm>, first: bool, out: &mut Vec<f64>) -> Result<LabelForm> {
    let n = labels.len();
    out.reserve(n);
    if let Some(form @ LabelForm::Pair(neg, pos)) = current {
        for r in 0..n {
            let l = labels.get(r);
            if pos.matches(l) {
                out.push(1.0);
            } else if neg.matches(l) {
                out.push(-1.0);
            } else {
                return Err(value_error(format!(
                    "label {l} at row {r} is not one of this model's classes [{neg}, {pos}]"
                )));
            }
        }
        return Ok(form.clone());
    }
    match labels {
        Labels::Bools(v) => {
            out.extend(v.iter().map(|&b| if b { 1.0 } else { -1.0 }));
            Ok(LabelForm::Bool)
        }
        Labels::Strs(v) if first => new_pair(labels, v.len(), out),
        Labels::Strs(_) => Err(type_error(
            "labels must be -1/+1, 0/1 or bool (the classes this model learned), got strings",
        )),
        Labels::Ints(_) | Labels::Floats(_) => {
            let value = |r: usize| numeric(labels.get(r)).expect("numbers");
            if let Some(r) = (0..n).find(|&r| !value(r).is_finite()) {
                return Err(value_error(format!("y contains NaN or infinity (row {r})")));
            }
            let (mut pm1, mut zero_one, mut all_one) = (true, true, true);
            for r in 0..n {
                let v = value(r);
                pm1 &= v == 1.0 || v == -1.0;
                zero_one &= v == 1.0 || v == 0.0;
                all_one &= v == 1.0;
            }
            if all_one && matches!(current, Some(LabelForm::ZeroOne)) {
                out.extend(std::iter::repeat_n(1.0, n));
                return Ok(LabelForm::ZeroOne);
            }
            if pm1 {
                out.extend((0..n).map(value));
                return Ok(LabelForm::PlusMinusOne);
            }
            if zero_one {
                out.extend((0..n).map(|r| if value(r) == 1.0 { 1.0 } else { -1.0 }));
                return Ok(LabelForm::ZeroOne);
            }
            let bad = (0..n)
                .find(|&r| {
                    let v = value(r);
                    !(v == 1.0 || v == -1.0 || v == 0.0)
                })
                .unwrap_or(0);
            let shown = labels.get(bad);
            let why = if bad == 0 && (0..n).all(|r| [1.0, -1.0, 0.0].contains(&value(r))) {
                return Err(value_error("labels mix -1 with 0: use -1/+1, 0/1 or bool"));
            } else if (0..n).any(|r| value(r) != value(r).round()) {
                "continuous values are not class labels; "
            } else if distinct_numbers(&labels) > 2 {
                "Only binary classification is supported. "
            } else if first {
                return new_pair(labels, n, out);
            } else {
                "this model learned labels -1/+1, 0/1 or bool: "
            };
            Err(value_error(format!(
                "label {shown} at row {bad} is not allowed: {why}labels must be -1/+1, 0/1 or bool"
            )))
        }
    }
}

fn distinct_numbers(labels: &Labels) -> usize {
    let mut seen: Vec<f64> = Vec::new();
    for r in 0..labels.len() {
        let v = numeric(labels.get(r)).unwrap_or(f64::NAN);
        if !seen.contains(&v) {
            seen.push(v);
            if seen.len() > 2 {
                break;
            }
        }
    }
    seen.len()
}

/// A first batch's labels as a new pair (exactly two distinct labels; the larger positive).
fn new_pair(labels: Labels, n: usize, out: &mut Vec<f64>) -> Result<LabelForm> {
    let mut classes: Vec<ClassLabel> = Vec::with_capacity(2);
    for r in 0..n {
        let c = ClassLabel::of(labels.get(r)).ok_or_else(|| type_error("labels must be numbers or strings"))?;
        if !classes.contains(&c) {
            classes.push(c);
            if classes.len() > 2 {
                let shown: Vec<String> = classes.iter().map(ToString::to_string).collect();
                return Err(value_error(format!(
                    "labels [{}] are not allowed: Only binary classification is supported.",
                    shown.join(", ")
                )));
            }
        }
    }
    if classes.len() < 2 {
        let shown = classes.first().map_or("none".into(), ToString::to_string);
        return Err(value_error(format!(
            "the labels are all {shown}, which does not say which class is positive: pass classes=[negative, \
             positive] to this first partial_fit (or use labels -1/+1, 0/1 or bool)"
        )));
    }
    let (mut neg, mut pos) = (classes[0].clone(), classes[1].clone());
    if compare(&neg, &pos) == Some(Ordering::Greater) {
        std::mem::swap(&mut neg, &mut pos);
    }
    for r in 0..n {
        out.push(if pos.matches(labels.get(r)) { 1.0 } else { -1.0 });
    }
    Ok(LabelForm::Pair(neg, pos))
}

/// One event's label as ±1, and the form the model takes after learning it: as a one-row batch,
/// except that a lone 1 keeps a model's -1/+1 or 0/1 form (it is valid in both).
pub fn read_label(label: Label, current: Option<&LabelForm>) -> Result<(f64, LabelForm)> {
    let mut y = Vec::with_capacity(1);
    let first = current.is_none();
    let form = match label {
        Label::Int(i) => read_labels(Labels::Ints(&[i]), current, first, &mut y)?,
        Label::Float(f) => read_labels(Labels::Floats(&[f]), current, first, &mut y)?,
        Label::Bool(b) => read_labels(Labels::Bools(&[b]), current, first, &mut y)?,
        Label::Str(s) => read_labels(Labels::Strs(&[s]), current, first, &mut y)?,
    };
    let keeps = y[0] == 1.0
        && !matches!(label, Label::Bool(_))
        && matches!(current, Some(LabelForm::PlusMinusOne | LabelForm::ZeroOne));
    Ok((
        y[0],
        if keeps {
            current.cloned().expect("checked")
        } else {
            form
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(labels: Labels, current: Option<&LabelForm>, first: bool) -> Result<(Vec<f64>, LabelForm)> {
        let mut y = Vec::new();
        read_labels(labels, current, first, &mut y).map(|f| (y, f))
    }

    #[test]
    fn standard_forms_read_as_pm1() {
        assert_eq!(
            read(Labels::Ints(&[1, -1]), None, true).unwrap(),
            (vec![1.0, -1.0], LabelForm::PlusMinusOne)
        );
        assert_eq!(
            read(Labels::Ints(&[0, 1]), None, true).unwrap(),
            (vec![-1.0, 1.0], LabelForm::ZeroOne)
        );
        assert_eq!(
            read(Labels::Bools(&[true, false]), None, true).unwrap().1,
            LabelForm::Bool
        );
        // All ones: -1/+1 on a first batch, the 0/1 form kept by a 0/1 model.
        assert_eq!(
            read(Labels::Ints(&[1, 1]), None, true).unwrap().1,
            LabelForm::PlusMinusOne
        );
        assert_eq!(
            read(Labels::Ints(&[1]), Some(&LabelForm::ZeroOne), false).unwrap().1,
            LabelForm::ZeroOne
        );
        assert!(read(Labels::Ints(&[-1, 0]), None, true).is_err());
        assert!(read(Labels::Floats(&[0.5, 1.0]), None, true).is_err());
        assert!(read(Labels::Floats(&[f64::NAN]), None, true).is_err());
    }

    #[test]
    fn pairs_are_sorted_bound_and_need_two_labels() {
        let (y, form) = read(Labels::Strs(&["spam", "ham", "spam"]), None, true).unwrap();
        assert_eq!(y, [1.0, -1.0, 1.0]);
        assert_eq!(
            form,
            LabelForm::Pair(ClassLabel::Str("ham".into()), ClassLabel::Str("spam".into()))
        );
        assert_eq!(read(Labels::Strs(&["ham"]), Some(&form), false).unwrap().0, [-1.0]);
        assert!(read(Labels::Strs(&["eggs"]), Some(&form), false).is_err());
        assert!(read(Labels::Strs(&["ham", "ham"]), None, true).is_err());
        assert!(matches!(
            read(Labels::Strs(&["a"]), Some(&LabelForm::PlusMinusOne), false),
            Err(Error::WrongType { .. })
        ));
        let (y, form) = read(Labels::Ints(&[2, 1, 2]), None, true).unwrap();
        assert_eq!(y, [1.0, -1.0, 1.0]);
        assert!(matches!(
            form,
            LabelForm::Pair(ClassLabel::Number(_), ClassLabel::Number(_))
        ));
        assert!(read(Labels::Ints(&[2, 1, 3]), None, true).is_err());
        assert!(read(Labels::Ints(&[2, 1]), Some(&LabelForm::PlusMinusOne), false).is_err());
    }

    #[test]
    fn an_event_keeps_a_standard_form_on_a_lone_one() {
        assert_eq!(
            read_label(Label::Int(1), Some(&LabelForm::ZeroOne)).unwrap(),
            (1.0, LabelForm::ZeroOne)
        );
        assert_eq!(
            read_label(Label::Int(0), Some(&LabelForm::PlusMinusOne)).unwrap(),
            (-1.0, LabelForm::ZeroOne)
        );
        assert_eq!(
            read_label(Label::Bool(true), Some(&LabelForm::ZeroOne)).unwrap().1,
            LabelForm::Bool
        );
        assert!(read_label(Label::Str("spam"), None).is_err()); // one label names no pair
        assert_eq!(
            LabelForm::from_classes([Label::Str("b"), Label::Str("a")])
                .unwrap()
                .predicted(true),
            Predicted::Class(&ClassLabel::Str("b".into()))
        );
        assert_eq!(
            LabelForm::from_classes([Label::Int(1), Label::Int(0)]).unwrap(),
            LabelForm::ZeroOne
        );
    }
}
