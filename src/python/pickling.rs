//! The serialised state of a native learner (pickles and `omtl.save` model files): a layout
//! version, then the learner. Python reads the version from `omtl._native.STATE_VERSION`.

use serde::{Deserialize, Serialize};

use super::registry::AnyLearner;
use crate::error::Error;
use crate::state::{self, CheckState};

/// Bumped whenever the serialised layout of a learner changes (2: ROMCO keeps the eigenvalues of
/// C after the last thresholding; 3: the Projectrons' drift-probe count, OMTRL's "coupling is
/// fresh" flag, and MTLinear, stored in single precision; 4: ROMCO's row-side Gram route for
/// wide U holds the eigendecomposition of `D = UUᵀ`, its factored tall U holds `Π` and `Π⁻¹`
/// of `U = W Π`; 5: MTLinear's parameters hold `shared_rate`; 6: MTLinear's cells in one of
/// three layouts, a hashed table, dense blocks or a sparse map, and no stored factor entries for
/// the closed-form task graphs).
pub const STATE_VERSION: u32 = 6;

/// The serialised state: the layout version, then the learner (the `(u32, AnyLearner)` tuple
/// earlier versions wrote, byte for byte).
#[derive(Serialize, Deserialize)]
struct VersionedState<L> {
    version: u32,
    learner: L,
}

impl CheckState for VersionedState<AnyLearner> {
    fn check_state(&self) -> crate::Result<()> {
        self.learner.check_state()
    }
}

/// The versioned bytes of a learner.
pub(super) fn encode_state(learner: &AnyLearner) -> crate::Result<Vec<u8>> {
    state::encode(&VersionedState {
        version: STATE_VERSION,
        learner,
    })
}

/// Decodes and checks a state; the version is read first so that an old state gets a clear
/// message rather than a layout error.
pub(super) fn decode_state(state: &[u8]) -> crate::Result<AnyLearner> {
    let head: [u8; 4] = state
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Error::State(format!("a state needs at least 4 bytes, got {}", state.len())))?;
    let version = u32::from_le_bytes(head);
    if version != STATE_VERSION {
        return Err(Error::State(format!(
            "the model state has layout version {version}, this omtl reads version {STATE_VERSION}"
        )));
    }
    Ok(state::decode::<VersionedState<AnyLearner>>(state)?.learner)
}
