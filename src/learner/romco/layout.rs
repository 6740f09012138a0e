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
    n_tasks: usize,
    n_features: usize,
    /// η1, η2, λ1, λ2, the trigger and the route, in that order.
    params: RomcoParams,
    /// U dense column-major, or W of `U = W Π` (row-major), or empty (thin SVD).
    u: Cow<'a, [f64]>,
    /// Π and Π⁻¹ of `U = W Π`; empty otherwise.
    u_right: Cow<'a, [f64]>,
    u_right_inv: Cow<'a, [f64]>,
    resync_work: u64,
    /// U as a thin SVD (route (c)).
    brand: Option<Cow<'a, ThinSvd>>,
    v: Cow<'a, [f64]>,
    v_scale: Cow<'a, [f64]>,
    v_sq_norm: Cow<'a, [f64]>,
    gram: Cow<'a, [f64]>,
    /// [`GramSide::ColumnFactors`].
    gram_stale: bool,
    u_live: Cow<'a, [bool]>,
    qr_pending: bool,
    svt_vectors: Cow<'a, [f64]>,
    svt_mu: Cow<'a, [f64]>,
    rank: Option<usize>,
    n_updates: u64,
    n_seen: u64,
    svt_counts: SvtCounts,
    /// [`GramSide::Rows`], with its factors in `row_vectors` and `row_mu`.
    gram_unknown: bool,
    row_vectors: Cow<'a, [f64]>,
    row_mu: Cow<'a, [f64]>,
    n_row_svt: u64,
    n_folds: u64,
}

impl Serialize for Romco {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let empty = || Cow::Borrowed(&[][..]);
        let (u, u_right, u_right_inv, brand) = match &self.u {
            UForm::Dense(u) => (Cow::Borrowed(&u[..]), empty(), empty(), None),
            UForm::RightFactored { w, pi, pi_inv } => (
                Cow::Borrowed(&w[..]),
                Cow::Borrowed(&pi[..]),
                Cow::Borrowed(&pi_inv[..]),
                None,
            ),
            UForm::ThinSvd(f) => (empty(), empty(), empty(), Some(Cow::Borrowed(f))),
        };
        let (gram_stale, gram_unknown, row_vectors, row_mu) = match &self.gram_side {
            GramSide::Columns => (false, false, empty(), empty()),
            GramSide::ColumnFactors => (true, false, empty(), empty()),
            GramSide::Rows { vectors, mu } => (false, true, Cow::Borrowed(&vectors[..]), Cow::Borrowed(&mu[..])),
        };
        RomcoLayout {
            n_tasks: self.n_tasks,
            n_features: self.n_features,
            params: self.params,
            u,
            u_right,
            u_right_inv,
            resync_work: self.resync_work,
            brand,
            v: Cow::Borrowed(&self.v),
            v_scale: Cow::Borrowed(&self.v_scale),
            v_sq_norm: Cow::Borrowed(&self.v_sq_norm),
            gram: Cow::Borrowed(&self.gram),
            gram_stale,
            u_live: Cow::Borrowed(&self.u_live),
            qr_pending: self.qr_pending,
            svt_vectors: Cow::Borrowed(&self.svt_vectors),
            svt_mu: Cow::Borrowed(&self.svt_mu),
            rank: self.rank,
            n_updates: self.n_updates,
            n_seen: self.n_seen,
            svt_counts: self.svt_counts,
            gram_unknown,
            row_vectors,
            row_mu,
            n_row_svt: self.n_row_svt,
            n_folds: self.n_folds,
        }
        .serialize(serializer)
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
