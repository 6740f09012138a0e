//! Hyper-parameter values as JSON: read with the type each parameter has (the messages of
//! `python/omtl/_constraints.py`), and parsed from `--param name=value` text.

use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// A default value in the class table (JSON, as a constant).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    /// `null` (Python's `None`).
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A real number.
    Float(f64),
    /// A string (an option's name).
    Str(&'static str),
}

impl Default {
    /// The value as JSON.
    pub fn to_json(self) -> Value {
        match self {
            Default::Null => Value::Null,
            Default::Bool(b) => Value::Bool(b),
            Default::Int(i) => Value::from(i),
            Default::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
            Default::Str(s) => Value::from(s),
        }
    }
}

fn fail(name: &'static str, what: &str, value: &Value) -> Error {
    Error::InvalidParameter {
        name,
        reason: format!("{name} must be {what}, got {value}"),
    }
}

/// An estimator's hyper-parameters, complete (every parameter of its class), read by type.
#[derive(Debug, Clone, Copy)]
pub struct Params<'a>(pub &'a Map<String, Value>);

impl<'a> Params<'a> {
    fn get(&self, name: &'static str) -> &'a Value {
        self.0.get(name).unwrap_or(&Value::Null)
    }

    /// A real number (an integer or a float, not a bool); its range is the engine's to check.
    pub fn number(&self, name: &'static str) -> Result<f64> {
        let v = self.get(name);
        v.as_f64().ok_or_else(|| fail(name, "a real number", v))
    }

    /// An integer in `[low, high]` (an integral float is read as one).
    pub fn integer(&self, name: &'static str, low: i128, high: i128) -> Result<i128> {
        let v = self.get(name);
        let int = match v {
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 1e30)
                        .map(|f| f as i128)
                }),
            _ => None,
        };
        match int {
            Some(i) if (low..=high).contains(&i) => Ok(i),
            _ => Err(fail(name, &format!("an integer in [{low}, {high}]"), v)),
        }
    }

    /// `None` or an integer in `[low, high]`.
    pub fn optional_integer(&self, name: &'static str, low: i128, high: i128) -> Result<Option<i128>> {
        match self.get(name) {
            Value::Null => Ok(None),
            _ => self.integer(name, low, high).map(Some),
        }
    }

    /// A boolean.
    pub fn boolean(&self, name: &'static str) -> Result<bool> {
        let v = self.get(name);
        v.as_bool().ok_or_else(|| fail(name, "a bool", v))
    }

    /// The name of an option (a string), parsed by the option type's own `parse`.
    pub fn name<T>(&self, name: &'static str, parse: fn(&str) -> Result<T>) -> Result<T> {
        let v = self.get(name);
        match v.as_str() {
            Some(s) => parse(s),
            None => Err(fail(name, "the name of an option (a str)", v)),
        }
    }

    /// The value as given (a string, a number, null, a task graph object).
    pub fn raw(&self, name: &'static str) -> &'a Value {
        self.get(name)
    }
}

/// A `--param` value from its text, as the command line reads it: `true`/`false`, `none`/`null`,
/// an integer, a real number, else the text itself (an option's name). The class then checks its
/// type.
pub fn parse_text(text: &str) -> Value {
    let t = text.trim();
    match t.to_ascii_lowercase().as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "none" | "null" => return Value::Null,
        _ => {}
    }
    if let Ok(i) = t.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = t.parse::<f64>() {
        if let Some(n) = Number::from_f64(f) {
            return Value::Number(n);
        }
    }
    Value::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_by_type() {
        let map: Map<String, Value> =
            serde_json::from_str(r#"{"a": 3, "b": 2.0, "c": true, "d": "norm", "e": null, "f": "x"}"#).unwrap();
        let p = Params(&map);
        assert_eq!(p.number("a").unwrap(), 3.0);
        assert_eq!(p.integer("b", 0, 10).unwrap(), 2);
        assert!(p.integer("a", 4, 10).is_err());
        assert!(p.number("c").is_err());
        assert!(p.boolean("c").unwrap());
        assert_eq!(p.optional_integer("e", 0, 1).unwrap(), None);
        assert_eq!(p.name("d", |s| Ok(s.len())).unwrap(), 4);
        assert!(p.name::<()>("a", |_| Ok(())).is_err());
        assert_eq!(parse_text("1e3"), Value::from(1000.0));
        assert_eq!(parse_text("12"), Value::from(12));
        assert_eq!(parse_text("None"), Value::Null);
        assert_eq!(parse_text("hinge"), Value::from("hinge"));
    }
}
