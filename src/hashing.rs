//! Feature hashing of named features: a name goes to a column of a fixed-width space, exactly
//! as scikit-learn's `FeatureHasher(input_type="dict", alternate_sign=False)` maps it
//! (MurmurHash3 x86 32-bit of the name's UTF-8 bytes, seed 0, `|h| mod n_columns`), so that a
//! model fed named features one event at a time, a batch hashed with `omtl.hash_features` and a
//! matrix made by scikit-learn agree column for column. A name never seen before still has a
//! column: nothing is dropped, distinct names may share one (a collision).
//!
//! Weinberger, Dasgupta, Langford, Smola & Attenberg, "Feature hashing for large scale multitask
//! learning" (ICML 2009).

use crate::error::{invalid, Result};

/// The default width of a hashed feature space: `2^18` columns (scikit-learn's and Vowpal
/// Wabbit's default).
pub const DEFAULT_HASHED_COLUMNS: usize = 1 << 18;

/// The widest hashed space: column indices are `|h|` of a signed 32-bit hash.
pub const MAX_HASHED_COLUMNS: usize = i32::MAX as usize;

/// MurmurHash3 (x86, 32-bit) of `data` with `seed` (Austin Appleby's reference algorithm, the
/// one scikit-learn's `murmurhash3_32` wraps).
pub fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// The column of feature `name` in a space of `n_columns` columns (`1 <= n_columns <=`
/// [`MAX_HASHED_COLUMNS`]), as scikit-learn's `FeatureHasher` computes it: `|h| mod n_columns`
/// for the signed hash `h`, with `|-2^31|` taken as `2^31` modulo `n_columns`.
#[inline]
pub fn feature_column(name: &[u8], n_columns: usize) -> usize {
    debug_assert!((1..=MAX_HASHED_COLUMNS).contains(&n_columns));
    let h = murmur3_32(name, 0) as i32;
    let n = n_columns as u64;
    if h == i32::MIN {
        // scikit-learn's expression for abs(-2^31) % n without overflow.
        ((i32::MAX as u64) - (n - 1)) % n
    } else {
        u64::from(h.unsigned_abs()) % n
    }
    .try_into()
    .expect("a column below n_columns fits usize")
}

/// What the keys of an event's features are: column numbers, or names hashed into columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Integer columns below the model's width.
    Columns,
    /// Names hashed into the model's `n_features` columns.
    Names,
}

/// One event's features gathered as a sparse row: `(name, value)` pairs hashed as
/// [`feature_column`] maps them (a categorical `name=value` pair is the feature `"name=value"`
/// with value 1, as scikit-learn's `FeatureHasher`), or `(column, value)` pairs; zeros skipped,
/// a repeated column summed. Keys of one event are all names or all columns.
#[derive(Debug, Clone, Default)]
pub struct RowBuilder {
    pairs: Vec<(u32, f64)>,
    name: Vec<u8>,
    keys: Option<Keys>,
}

impl RowBuilder {
    /// Starts a new row (the buffers are kept).
    pub fn clear(&mut self) {
        self.pairs.clear();
        self.keys = None;
    }

    fn key(&mut self, kind: Keys) -> Result<()> {
        match self.keys {
            Some(seen) if seen != kind => Err(invalid(
                "x",
                "x mixes int and str keys: use int columns or str feature names, not both",
            )),
            _ => {
                self.keys = Some(kind);
                Ok(())
            }
        }
    }

    fn value(value: f64) -> Result<f64> {
        if value.is_finite() {
            Ok(value)
        } else {
            Err(invalid("x", format!("x contains NaN or infinity ({value})")))
        }
    }

    /// A named feature with a number, hashed into `width` columns.
    pub fn named(&mut self, name: &[u8], value: f64, width: usize) -> Result<()> {
        self.key(Keys::Names)?;
        if Self::value(value)? != 0.0 {
            self.pairs.push((feature_column(name, width) as u32, value));
        }
        Ok(())
    }

    /// A categorical feature `name=value` (value 1), hashed into `width` columns.
    pub fn categorical(&mut self, name: &[u8], value: &[u8], width: usize) -> Result<()> {
        self.key(Keys::Names)?;
        self.name.clear();
        self.name.extend_from_slice(name);
        self.name.push(b'=');
        self.name.extend_from_slice(value);
        self.pairs.push((feature_column(&self.name, width) as u32, 1.0));
        Ok(())
    }

    /// Column `column` (below `width`) with a number.
    pub fn column(&mut self, column: i64, value: f64, width: usize) -> Result<()> {
        self.key(Keys::Columns)?;
        let col = u32::try_from(column)
            .ok()
            .filter(|&c| (c as usize) < width)
            .ok_or_else(|| {
                invalid(
                    "x",
                    format!("column {column} is out of range: columns must lie in [0, {width})"),
                )
            })?;
        if Self::value(value)? != 0.0 {
            self.pairs.push((col, value));
        }
        Ok(())
    }

    /// The keys seen (`None`: no feature yet).
    pub fn keys(&self) -> Option<Keys> {
        self.keys
    }

    /// The row's columns (sorted, distinct) and values, into `indices` and `values` (cleared
    /// first).
    pub fn finish(&mut self, indices: &mut Vec<u32>, values: &mut Vec<f64>) {
        self.pairs.sort_unstable_by_key(|p| p.0);
        indices.clear();
        values.clear();
        for &(c, v) in &self.pairs {
            if indices.last() == Some(&c) {
                *values.last_mut().expect("paired") += v;
            } else {
                indices.push(c);
                values.push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        // Values of scikit-learn's murmurhash3_32(..., positive=True) and the reference suite.
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_32(b"hello", 0), 613_153_351);
        assert_eq!(murmur3_32(b"b=x", 0), 1_267_745_986);
        assert_eq!(murmur3_32(b"Hello, world!", 1234), 0xfaf6_cdb3);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog", 0),
            0x2e4f_f723
        );
    }

    #[test]
    fn columns_match_scikit_learns_feature_hasher() {
        // FeatureHasher(n_features=2**18, input_type="dict", alternate_sign=False) on
        // {"hello": 2, "a": 1, "b": "x"} stores columns 260679, 17602 and 92594.
        let n = DEFAULT_HASHED_COLUMNS;
        let mut cols = [
            feature_column(b"hello", n),
            feature_column(b"a", n),
            feature_column(b"b=x", n),
        ];
        cols.sort_unstable();
        assert_eq!(cols, [17_602, 92_594, 260_679]);
        assert!((0..1000).all(|i| feature_column(format!("w{i}").as_bytes(), 7) < 7));
    }
}
