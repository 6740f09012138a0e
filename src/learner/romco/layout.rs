//! The saved state of [`Romco`]: U's form ([`UForm`]) and the Gram side ([`GramSide`]) are
//! written as the flat fields of [`RomcoLayout`] (U or W, Π, Π⁻¹, the thin SVD, and the two
//! flags and row-side factors of the Gram), the layout the state format has always had, so that
//! saved states load unchanged. Saving borrows the model's arrays; loading maps each consistent
//! combination of the flat fields to one form and refuses the others.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::*;

/// The fields of a saved ROMCO state, in their order. Saving borrows (`Cow::Borrowed`), loading
/// owns; both give the same bytes as the owned vectors.
#[derive(Serialize, Deserialize)]
pub(super) struct RomcoLayout<'a> {
    pub(super) n_tasks: usize,
    pub(super) n_features: usize,
    /// η1, η2, λ1, λ2, the trigger and the route, in that order.
    pub(super) params: RomcoParams,
    /// U dense column-major, or W of `U = W Π` (row-major), or empty (thin SVD).
    pub(super) u: Cow<'a, [f64]>,
    /// Π and Π⁻¹ of `U = W Π`; empty otherwise.
    pub(super) u_right: Cow<'a, [f64]>,
    pub(super) u_right_inv: Cow<'a, [f64]>,
    pub(super) resync_work: u64,
    /// U as a thin SVD (route (c)).
    pub(super) brand: Option<Cow<'a, ThinSvd>>,
    pub(super) v: Cow<'a, [f64]>,
    pub(super) v_scale: Cow<'a, [f64]>,
    pub(super) v_sq_norm: Cow<'a, [f64]>,
    pub(super) gram: Cow<'a, [f64]>,
    /// [`GramSide::ColumnFactors`].
    pub(super) gram_stale: bool,
    pub(super) u_live: Cow<'a, [bool]>,
    pub(super) qr_pending: bool,
    pub(super) svt_vectors: Cow<'a, [f64]>,
    pub(super) svt_mu: Cow<'a, [f64]>,
    pub(super) rank: Option<usize>,
    pub(super) n_updates: u64,
    pub(super) n_seen: u64,
    pub(super) svt_counts: SvtCounts,
    /// [`GramSide::Rows`], with its factors in `row_vectors` and `row_mu`.
    pub(super) gram_unknown: bool,
    pub(super) row_vectors: Cow<'a, [f64]>,
    pub(super) row_mu: Cow<'a, [f64]>,
    pub(super) n_row_svt: u64,
    pub(super) n_folds: u64,
}

impl Serialize for Romco {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        RomcoLayout::from(self).serialize(serializer)
    }
}

impl<'a> From<&'a Romco> for RomcoLayout<'a> {
    /// The flat fields of `m`, borrowed.
    fn from(m: &'a Romco) -> Self {
        let empty = || Cow::Borrowed(&[][..]);
        let (u, u_right, u_right_inv, brand) = match &m.u {
            UForm::Dense(u) => (Cow::Borrowed(&u[..]), empty(), empty(), None),
            UForm::RightFactored { w, pi, pi_inv } => (
                Cow::Borrowed(&w[..]),
                Cow::Borrowed(&pi[..]),
                Cow::Borrowed(&pi_inv[..]),
                None,
            ),
            UForm::ThinSvd(f) => (empty(), empty(), empty(), Some(Cow::Borrowed(f))),
        };
        let (gram_stale, gram_unknown, row_vectors, row_mu) = match &m.gram_side {
            GramSide::Columns => (false, false, empty(), empty()),
            GramSide::ColumnFactors => (true, false, empty(), empty()),
            GramSide::Rows { vectors, mu } => (false, true, Cow::Borrowed(&vectors[..]), Cow::Borrowed(&mu[..])),
        };
        RomcoLayout {
            n_tasks: m.n_tasks,
            n_features: m.n_features,
            params: m.params,
            u,
            u_right,
            u_right_inv,
            resync_work: m.resync_work,
            brand,
            v: Cow::Borrowed(&m.v),
            v_scale: Cow::Borrowed(&m.v_scale),
            v_sq_norm: Cow::Borrowed(&m.v_sq_norm),
            gram: Cow::Borrowed(&m.gram),
            gram_stale,
            u_live: Cow::Borrowed(&m.u_live),
            qr_pending: m.qr_pending,
            svt_vectors: Cow::Borrowed(&m.svt_vectors),
            svt_mu: Cow::Borrowed(&m.svt_mu),
            rank: m.rank,
            n_updates: m.n_updates,
            n_seen: m.n_seen,
            svt_counts: m.svt_counts,
            gram_unknown,
            row_vectors,
            row_mu,
            n_row_svt: m.n_row_svt,
            n_folds: m.n_folds,
        }
    }
}

impl<'de> Deserialize<'de> for Romco {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let saved = RomcoLayout::deserialize(deserializer)?;
        Romco::try_from(saved).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<RomcoLayout<'_>> for Romco {
    type Error = String;

    /// The form of U and the Gram side the flat fields describe; a combination no model writes
    /// is refused. What remains (lengths against d and k, finiteness, the caches) is
    /// [`CheckState::check_state`]'s.
    fn try_from(saved: RomcoLayout<'_>) -> std::result::Result<Self, String> {
        let thin_svd = saved.brand.is_some();
        let u = match (saved.brand, saved.u_right.is_empty(), saved.u_right_inv.is_empty()) {
            (None, true, true) => UForm::Dense(saved.u.into_owned()),
            (None, false, false) => UForm::RightFactored {
                w: saved.u.into_owned(),
                pi: saved.u_right.into_owned(),
                pi_inv: saved.u_right_inv.into_owned(),
            },
            (Some(f), true, true) if saved.u.is_empty() => UForm::ThinSvd(f.into_owned()),
            (Some(_), true, true) => {
                return Err(format!("U (held factored) has length {}, expected 0", saved.u.len()));
            }
            _ => {
                return Err(format!(
                    "U's right factor has {} entries, its inverse {}{}",
                    saved.u_right.len(),
                    saved.u_right_inv.len(),
                    if thin_svd { ", beside a thin SVD" } else { "" }
                ))
            }
        };
        let gram_side = match (saved.gram_stale, saved.gram_unknown) {
            (false, true) => GramSide::Rows {
                vectors: saved.row_vectors.into_owned(),
                mu: saved.row_mu.into_owned(),
            },
            (stale, false) if saved.row_vectors.is_empty() && saved.row_mu.is_empty() => {
                if stale {
                    GramSide::ColumnFactors
                } else {
                    GramSide::Columns
                }
            }
            (_, false) => {
                return Err(format!(
                    "{} row-side eigenvalues with {} vector entries while C is held",
                    saved.row_mu.len(),
                    saved.row_vectors.len()
                ))
            }
            (true, true) => return Err("C is marked stale while the row side holds U's Gram".into()),
        };
        Ok(Romco {
            n_tasks: saved.n_tasks,
            n_features: saved.n_features,
            params: saved.params,
            u,
            resync_work: saved.resync_work,
            v: saved.v.into_owned(),
            v_scale: saved.v_scale.into_owned(),
            v_sq_norm: saved.v_sq_norm.into_owned(),
            gram: saved.gram.into_owned(),
            gram_side,
            u_live: saved.u_live.into_owned(),
            qr_pending: saved.qr_pending,
            svt_vectors: saved.svt_vectors.into_owned(),
            svt_mu: saved.svt_mu.into_owned(),
            rank: saved.rank,
            n_updates: saved.n_updates,
            n_seen: saved.n_seen,
            svt_counts: saved.svt_counts,
            n_row_svt: saved.n_row_svt,
            n_folds: saved.n_folds,
            scratch: Box::default(),
        })
    }
}
