//! Ed25519 keys in the deployment's text forms.
//!
//! - A principal (public key): `ed25519:` and 64 lowercase hex digits.
//! - A secret key file: `ed25519-secret:` and the 64 lowercase hex digits
//!   of the 32-byte seed, then a line feed; mode 0600.
//!
//! Invariant: a key file is created whole or not at all: it is written to a
//! temporary file in the same directory, fsynced, renamed into place, and
//! the directory fsynced; a crash leaves at most a stray temporary file.

use ed25519_dalek::{SigningKey, VerifyingKey};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const PRINCIPAL_PREFIX: &str = "ed25519:";
const SECRET_PREFIX: &str = "ed25519-secret:";

/// Why a key could not be read, parsed or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeyError {
    /// Not the expected text form.
    Malformed { what: String },
    /// The filesystem failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Malformed { what } => write!(f, "{what}"),
            KeyError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::Io { source, .. } => Some(source),
            KeyError::Malformed { .. } => None,
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// 32 bytes from 64 lowercase hex digits.
fn hex32(text: &str) -> Option<[u8; 32]> {
    let lowercase = text
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if text.len() != 64 || !lowercase {
        return None;
    }
    hex::decode(text).ok()?.try_into().ok()
}

/// Checks a principal's text form and that it names a point of the curve.
pub fn parse_principal(text: &str) -> Result<VerifyingKey, KeyError> {
    let malformed = || {
        KeyError::Malformed {
        what: format!("`{text}` is not `{PRINCIPAL_PREFIX}` and 64 lowercase hex digits of an Ed25519 public key"),
    }
    };
    let bytes = text
        .strip_prefix(PRINCIPAL_PREFIX)
        .and_then(hex32)
        .ok_or_else(malformed)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| malformed())
}

/// The principal naming `key`.
pub fn principal(key: &VerifyingKey) -> String {
    format!("{PRINCIPAL_PREFIX}{}", hex::encode(key.as_bytes()))
}

/// An Ed25519 secret key (its seed).
pub struct SecretKey(SigningKey);

impl SecretKey {
    /// A new key from the kernel's random source.
    pub fn generate() -> SecretKey {
        let mut seed = [0u8; 32];
        crate::blobstore::getrandom(&mut seed);
        SecretKey(SigningKey::from_bytes(&seed))
    }

    /// From a key file's text (the final line feed optional).
    pub fn parse(text: &str) -> Result<SecretKey, KeyError> {
        let line = text.strip_suffix('\n').unwrap_or(text);
        let seed = line
            .strip_prefix(SECRET_PREFIX)
            .and_then(hex32)
            .ok_or_else(|| KeyError::Malformed {
                what: format!(
                    "a secret key file holds `{SECRET_PREFIX}` and 64 lowercase hex digits"
                ),
            })?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    /// Reads a key file.
    pub fn read(path: &Path) -> Result<SecretKey, KeyError> {
        let text = fs::read_to_string(path).map_err(io_error(path))?;
        SecretKey::parse(&text).map_err(|e| KeyError::Malformed {
            what: format!("{}: {e}", path.display()),
        })
    }

    /// The key file's text.
    fn file_text(&self) -> String {
        format!("{SECRET_PREFIX}{}\n", self.seed_hex())
    }

    /// The seed as 64 lowercase hex digits.
    pub fn seed_hex(&self) -> String {
        hex::encode(self.0.to_bytes())
    }

    pub fn public(&self) -> VerifyingKey {
        self.0.verifying_key()
    }

    /// Writes the key to `path` (mode 0600), replacing nothing half-way:
    /// see the module's invariant.
    pub fn write(&self, path: &Path) -> Result<(), KeyError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        crate::durable::create_dir_all(dir).map_err(io_error(dir))?;
        let staging = dir.join(format!(
            ".{}.{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("key"),
            hex::encode(crate::blobstore::random_16())
        ));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&staging)?;
            file.write_all(self.file_text().as_bytes())?;
            file.sync_all()?;
            fs::rename(&staging, path)?;
            crate::durable::sync_dir(dir)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&staging);
        }
        written.map_err(io_error(path))
    }
}

/// The key in `path`, created there first when the file does not exist;
/// true when it was created.
pub fn read_or_create(path: &Path) -> Result<(SecretKey, bool), KeyError> {
    match fs::metadata(path) {
        Ok(_) => Ok((SecretKey::read(path)?, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = SecretKey::generate();
            key.write(path)?;
            Ok((key, true))
        }
        Err(e) => Err(io_error(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_created_key_reads_back_the_same_and_is_private() {
        let dir = std::env::temp_dir().join(format!(
            "keys-{}",
            hex::encode(crate::blobstore::random_16())
        ));
        let path = dir.join("coord/root.key");
        let (created, fresh) = read_or_create(&path).unwrap();
        assert!(fresh);
        let (read, fresh) = read_or_create(&path).unwrap();
        assert!(!fresh);
        assert_eq!(created.seed_hex(), read.seed_hex());
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("ed25519-secret:{}\n", created.seed_hex()));
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(fs::read_dir(dir.join("coord")).unwrap().count(), 1);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn principals_and_secrets_are_strict() {
        // RFC 8032, test 1.
        let secret = SecretKey::parse(
            "ed25519-secret:9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60\n",
        )
        .unwrap();
        let public = principal(&secret.public());
        assert_eq!(
            public,
            "ed25519:d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        assert!(parse_principal(&public).is_ok());
        for bad in [
            "ed25519:D75A980182B10AB7D54BFED3C964073A0EE172F3DAA62325AF021A68F707511A",
            "ed25519:d75a98",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        ] {
            assert!(parse_principal(bad).is_err(), "{bad}");
        }
        assert!(SecretKey::parse("ed25519-secret:00").is_err());
        assert!(SecretKey::parse(&format!("ed25519-secret:{}\n\n", "0".repeat(64))).is_err());
    }
}
