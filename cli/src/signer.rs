//! Who signs a command's calls: the key and grants of the common options
//! and the audience, loaded once; each call gets a fresh proof.

use lab_coord_auth::{sign_request, Carriage, Grant, Params, SigningKey, MAX_GRANTS};

use crate::endpoint::Endpoint;
use crate::failure::Failure;
use crate::{grant, grantfile, keyfile, random, Common};

pub struct Signer {
    key: SigningKey,
    grants: Vec<Grant>,
    audience: String,
}

impl Signer {
    /// The common key and grants; the audience is `--audience`, or else the
    /// endpoint's base URL.
    pub fn load(common: &Common, endpoint: &Endpoint) -> Result<Signer, Failure> {
        let audience = common
            .audience
            .clone()
            .unwrap_or_else(|| endpoint.base.clone());
        let key = keyfile::load(common.key_file()?)?;
        let grants = grantfile::load_all(&common.grant_files())?;
        if grants.len() > MAX_GRANTS {
            return Err(Failure::Data(format!(
                "the grant files hold {} distinct grants; a request carries at most {MAX_GRANTS}",
                grants.len()
            )));
        }
        Ok(Signer {
            key,
            grants,
            audience,
        })
    }

    /// The carriage of one call of `op` with `params` and a body whose
    /// digest is the SHA-256 of `digested`: a proof with a fresh nonce at
    /// the clock's time, and the grants.
    pub fn carriage(
        &self,
        op: &str,
        params: &Params,
        digested: &[u8],
    ) -> Result<Carriage, Failure> {
        let nonce = random::nonce()
            .map_err(|err| Failure::Io(format!("cannot read /dev/urandom: {err}")))?;
        let proof = sign_request(
            &self.key,
            op,
            params,
            digested,
            &nonce,
            grant::now(),
            &self.audience,
        )
        .map_err(|err| Failure::Usage(format!("cannot sign the request: {err}")))?;
        Ok(Carriage::new(proof, self.grants.clone()))
    }
}
