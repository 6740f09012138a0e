//! Checked allocation: every buffer whose size comes from a hyper-parameter or a model state is
//! sized with checked arithmetic, compared with a sanity cap and reserved fallibly, so that an
//! absurd size becomes an [`Error::Memory`] naming the parameter (a `ValueError` in Python)
//! instead of an abort ("memory allocation of … bytes failed") or the out-of-memory killer.
//!
//! The cap is the memory the machine has available now (`MemAvailable` of `/proc/meminfo`, read
//! afresh for any request over 64 MiB; 1 TiB where it is unknown): a buffer larger than that
//! cannot be filled, and with overcommit a `try_reserve` of it would still succeed and the
//! process be killed by the out-of-memory killer when the buffer is touched (a 24 GB request on
//! a 25 GB machine with 20 GB free did exactly that against a `MemTotal` cap).

mod pages;

pub use pages::ZeroedBuf;

use crate::error::{Error, Result};

/// Used when the physical memory cannot be read.
const FALLBACK_CAP: u64 = 1 << 40;

/// Requests up to this size are never compared with the available memory (no system call).
const SMALL: u128 = 64 << 20;

/// The largest single allocation we attempt now, in bytes.
pub fn cap_bytes() -> u64 {
    meminfo("MemAvailable:")
        .or_else(|| meminfo("MemTotal:"))
        .unwrap_or(FALLBACK_CAP)
}

fn meminfo(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Human-readable byte count ("240 GB").
pub fn format_bytes(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["bytes", "kB", "MB", "GB", "TB", "PB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else if value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// What a request is for: the parameter that sized it (`name=value`) and the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Need<'a> {
    pub name: &'static str,
    pub value: u128,
    pub what: &'a str,
}

impl<'a> Need<'a> {
    pub fn new(name: &'static str, value: usize, what: &'a str) -> Self {
        Self {
            name,
            value: value as u128,
            what,
        }
    }

    fn error(&self, bytes: u128, reason: String) -> Error {
        Error::Memory {
            name: self.name,
            value: self.value,
            bytes: format_bytes(bytes),
            what: self.what.to_string(),
            reason,
        }
    }

    /// The element count `factors[0] * factors[1] * …` of `T`s, checked against overflow and
    /// against the cap.
    pub fn count<T>(&self, factors: &[usize]) -> Result<usize> {
        let elems = factors.iter().try_fold(1u128, |acc, &f| acc.checked_mul(f as u128));
        let elem_size = std::mem::size_of::<T>().max(1) as u128;
        let Some(bytes) = elems.and_then(|n| n.checked_mul(elem_size)) else {
            return Err(self.error(u128::MAX, "the size overflows".into()));
        };
        self.check_bytes(bytes)?;
        Ok(elems.unwrap_or(0) as usize)
    }

    /// Fails when `bytes` exceed the cap (or the address space).
    pub fn check_bytes(&self, bytes: u128) -> Result<()> {
        if bytes <= SMALL {
            return Ok(());
        }
        let cap = cap_bytes() as u128;
        if bytes > cap || bytes > isize::MAX as u128 {
            return Err(self.error(
                bytes,
                format!("more than this machine's available memory ({})", format_bytes(cap)),
            ));
        }
        Ok(())
    }

    /// A vector of `n = Π factors` copies of `value`, allocated fallibly.
    pub fn filled<T: Clone>(&self, factors: &[usize], value: T) -> Result<Vec<T>> {
        let n = self.count::<T>(factors)?;
        let mut v = Vec::new();
        self.reserve_exact(&mut v, n)?;
        v.resize(n, value);
        Ok(v)
    }

    /// A buffer of `n = Π factors` zeros, allocated fallibly without writing the zeros (fresh
    /// pages, huge pages for a large one: [`ZeroedBuf`]).
    pub fn zeroed<T: Zeroable>(&self, factors: &[usize]) -> Result<ZeroedBuf<T>> {
        let n = self.count::<T>(factors)?;
        ZeroedBuf::zeros(n).ok_or_else(|| {
            let bytes = n as u128 * std::mem::size_of::<T>() as u128;
            self.error(bytes, "the allocation failed".into())
        })
    }

    /// Reserves room for `additional` more elements of `v` (amortised growth, as `push`),
    /// fallibly and against the cap.
    pub fn reserve<T>(&self, v: &mut Vec<T>, additional: usize) -> Result<()> {
        if v.capacity() - v.len() >= additional {
            return Ok(());
        }
        let total = v.len() as u128 + additional as u128;
        let bytes = total.saturating_mul(std::mem::size_of::<T>().max(1) as u128);
        self.check_bytes(bytes)?;
        v.try_reserve(additional)
            .map_err(|e| self.error(bytes, format!("the allocation failed ({e})")))
    }

    /// Appends `n` empty slots (`None`) to `v`, fallibly and against the cap: the per-task slots
    /// of a learner that gains `n` tasks. On `Err`, `v` is unchanged.
    pub fn append_empty<T>(&self, v: &mut Vec<Option<T>>, n: usize) -> Result<()> {
        self.reserve(v, n)?;
        v.extend((0..n).map(|_| None));
        Ok(())
    }

    /// Like [`Need::reserve`] but to the exact size (for buffers that do not grow again).
    pub fn reserve_exact<T>(&self, v: &mut Vec<T>, additional: usize) -> Result<()> {
        let total = v.len() as u128 + additional as u128;
        let bytes = total.saturating_mul(std::mem::size_of::<T>().max(1) as u128);
        self.check_bytes(bytes)?;
        v.try_reserve_exact(additional)
            .map_err(|e| self.error(bytes, format!("the allocation failed ({e})")))
    }
}

/// Types whose all-zero bit pattern is the value zero (what [`Need::zeroed`] hands out).
///
/// # Safety
/// All-zero bytes must be a valid value of the type.
pub unsafe trait Zeroable: Copy {}

// SAFETY: all-zero bytes are +0.0 and 0.
unsafe impl Zeroable for f32 {}
// SAFETY: as above.
unsafe impl Zeroable for f64 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_sizes_are_errors_naming_the_parameter_and_the_memory() {
        let need = Need::new("n_tasks", 10_000_000_000, "per-task weight blocks");
        let err = need.filled::<Option<Vec<f64>>>(&[10_000_000_000], None).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("n_tasks=10000000000"), "{msg}");
        assert!(msg.contains("240 GB"), "{msg}");
        assert!(msg.contains("per-task weight blocks"), "{msg}");
        let err = need.count::<f64>(&[usize::MAX, usize::MAX, 3]).unwrap_err();
        assert!(err.to_string().contains("overflows"), "{err}");
        let err = need.count::<f64>(&[usize::MAX, 3]).unwrap_err();
        assert!(
            err.to_string().contains("more than this machine's available memory"),
            "{err}"
        );
    }

    #[test]
    fn reasonable_sizes_allocate() {
        let need = Need::new("budget", 10, "the Gram matrix");
        let v = need.filled(&[10, 11], 0.5f64).unwrap();
        assert_eq!(v.len(), 110);
        assert!(v.iter().all(|&x| x == 0.5));
        let z = need.zeroed::<f32>(&[10, 3]).unwrap();
        assert_eq!(z.len(), 30);
        assert!(z.iter().all(|&x| x.to_bits() == 0));
        assert!(need.zeroed::<f64>(&[0, 3]).unwrap().is_empty());
        assert!(need.zeroed::<f64>(&[usize::MAX, 3]).is_err());
        let mut w: Vec<u8> = Vec::new();
        need.reserve(&mut w, 1000).unwrap();
        assert!(w.capacity() >= 1000);
    }

    #[test]
    fn byte_counts_read_well() {
        assert_eq!(format_bytes(999), "999 bytes");
        assert_eq!(format_bytes(240_000_000_000), "240 GB");
        assert_eq!(format_bytes(80_000_000_000), "80.0 GB");
    }
}
