//! `lab:platform/crypto`: signature checks in native code, by the same
//! library (and so the same strict rules) a guest would run itself.

use super::RequestState;
use crate::bindings::crypto::{self, Ed25519Outcome};
use lab_coord_auth::{check_strict, Principal, SignatureOutcome};
use wasmtime::Result;

impl crypto::Host for RequestState {
    async fn verify_ed25519_strict(
        &mut self,
        public_key: Vec<u8>,
        message: Vec<u8>,
        signature: Vec<u8>,
    ) -> Result<Ed25519Outcome> {
        let Ok(key) = <[u8; 32]>::try_from(public_key) else {
            return Ok(Ed25519Outcome::KeyNotAdmissible);
        };
        let Ok(signature) = <[u8; 64]>::try_from(signature) else {
            return Ok(Ed25519Outcome::BadSignature);
        };
        let outcome = match &self.verified {
            Some(verified) => verified.check(&key, &message, &signature),
            None => check_strict(&Principal::from_bytes(key), &message, &signature),
        };
        Ok(match outcome {
            SignatureOutcome::Valid => Ed25519Outcome::Valid,
            SignatureOutcome::KeyNotAdmissible => Ed25519Outcome::KeyNotAdmissible,
            SignatureOutcome::BadSignature => Ed25519Outcome::BadSignature,
        })
    }
}
