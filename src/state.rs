//! Saving and restoring a model's state safely: a serialised state is untrusted input.
//!
//! [`encode`] writes the bincode layout the crate has always used (fixed-width little-endian
//! integers, a `u64` length before every sequence). [`decode`] reads it back with a byte limit
//! equal to the payload's length, so no sequence can claim more memory than the payload holds,
//! and then runs the type's [`CheckState::check_state`], which checks every invariant the
//! learner's code relies on (lengths consistent with the sizes, indices in range, budgets
//! respected, finite floats, counters consistent, parameters valid). A decoded state that fails
//! the check is dropped: it can never be used. Failures are [`Error::State`].

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// A restored state checks its own invariants.
pub trait CheckState {
    /// `Ok` iff the state is one the code can run on (sizes, indices, finiteness, counters).
    fn check_state(&self) -> Result<()>;

    /// After [`CheckState::check_state`] accepted a restored state: re-derives a cached quantity
    /// that the check accepts within a tolerance but that is further from its exact value than
    /// the learner's own rounding takes it, so that learning from the state keeps it a state the
    /// check (and so a save) accepts. A state the learner wrote is left as it is.
    fn rederive(&mut self) {}
}

fn options(limit: u64) -> impl Options {
    // Fixed-width integers: the layout `bincode::serialize` wrote before this module existed.
    bincode::DefaultOptions::new().with_fixint_encoding().with_limit(limit)
}

/// The serialised state.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    options(u64::MAX)
        .serialize(value)
        .map_err(|e| Error::State(format!("cannot serialise the model: {e}")))
}

/// A state from `bytes`, checked. Trailing bytes are an error.
pub fn decode<T: DeserializeOwned + CheckState>(bytes: &[u8]) -> Result<T> {
    let value: T = options(bytes.len() as u64)
        .deserialize(bytes)
        .map_err(|e| Error::State(format!("malformed state ({e})")))?;
    let mut value = value;
    value.check_state()?;
    value.rederive();
    Ok(value)
}

/// `Err(Error::State(..))` unless `ok`.
#[inline]
pub(crate) fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::State(what()))
    }
}

/// `len == expected`.
pub(crate) fn check_len(what: &str, len: usize, expected: usize) -> Result<()> {
    ensure(len == expected, || {
        format!("{what} has length {len}, expected {expected}")
    })
}

/// The largest magnitude a restored floating-point value may have: its square (a norm, a Gram
/// entry, a variance's precision) and its products with inputs of ordinary scale stay finite,
/// with room to spare. A model that learned its way there has diverged already; a value beyond
/// it is a tampered state that would score ±inf and turn the next update into NaN.
pub(crate) const MAX_MAGNITUDE: f64 = 1e150;

/// Every value finite and at most [`MAX_MAGNITUDE`] in magnitude.
pub(crate) fn check_finite(what: &str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| v.is_nan() || v.abs() > MAX_MAGNITUDE) {
        None => Ok(()),
        Some(i) if values[i].is_finite() => Err(Error::State(format!(
            "{what}[{i}] = {:e} is beyond the magnitude a model can hold ({MAX_MAGNITUDE:e})",
            values[i]
        ))),
        Some(i) => Err(Error::State(format!("{what}[{i}] = {} is not finite", values[i]))),
    }
}

/// The largest counter a restored state may hold: far beyond any stream, with room for the
/// code's increments never to overflow.
pub(crate) const MAX_COUNT: u64 = 1 << 62;

/// Every counter at most [`MAX_COUNT`].
pub(crate) fn check_counts(what: &str, counts: &[u64]) -> Result<()> {
    match counts.iter().position(|&c| c > MAX_COUNT) {
        None => Ok(()),
        Some(i) => Err(Error::State(format!(
            "{what}: counter {i} = {} is out of range",
            counts[i]
        ))),
    }
}

/// Stored examples: every task in `[0, n_tasks)` and every label -1 or +1. `example` and `label`
/// name one of them in the messages ("a stored example", "a stored label").
pub(crate) fn check_tasks_and_labels(
    tasks: &[u32],
    labels: &[f64],
    n_tasks: usize,
    example: &str,
    label: &str,
) -> Result<()> {
    ensure(tasks.iter().all(|&t| (t as usize) < n_tasks), || {
        format!("{example} names a task outside [0, {n_tasks})")
    })?;
    ensure(labels.iter().all(|&y| y == 1.0 || y == -1.0), || {
        format!("{label} is not -1 or +1")
    })
}

/// `a * b` without overflow (a size computed from restored fields).
pub(crate) fn checked_size(what: &str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| Error::State(format!("{what}: {a} x {b} overflows")))
}

/// Maps a constructor's parameter error to a state error.
pub(crate) fn param<T>(result: Result<T>) -> Result<T> {
    result.map_err(|e| Error::State(format!("invalid parameter in the state: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Serialize, serde::Deserialize, PartialEq)]
    struct Sized2 {
        values: Vec<f64>,
        n: usize,
    }

    impl CheckState for Sized2 {
        fn check_state(&self) -> Result<()> {
            check_len("values", self.values.len(), self.n)?;
            check_finite("values", &self.values)
        }
    }

    /// A valid two-value state and its bytes.
    fn two_values() -> (Sized2, Vec<u8>) {
        let v = Sized2 {
            values: vec![1.0, 2.0],
            n: 2,
        };
        let bytes = encode(&v).unwrap();
        (v, bytes)
    }

    #[test]
    fn round_trip_and_layout_of_bincode_serialize() {
        let (v, bytes) = two_values();
        assert_eq!(bytes, bincode::serialize(&v).unwrap());
        assert_eq!(decode::<Sized2>(&bytes).unwrap(), v);
    }

    #[test]
    fn rejects_lies_truncation_trailing_bytes_and_invalid_values() {
        let (_, bytes) = two_values();
        // A length field claiming 2^60 elements: the limit stops it before any allocation.
        let mut huge = bytes.clone();
        huge[..8].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(matches!(decode::<Sized2>(&huge), Err(Error::State(_))));
        assert!(decode::<Sized2>(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<Sized2>(&longer).is_err());
        let bad_n = encode(&Sized2 {
            values: vec![1.0],
            n: 2,
        })
        .unwrap();
        assert!(decode::<Sized2>(&bad_n).is_err());
        let nan = encode(&Sized2 {
            values: vec![f64::NAN],
            n: 1,
        })
        .unwrap();
        assert!(decode::<Sized2>(&nan).is_err());
    }
}

#[cfg(test)]
mod fuzz_tests;
