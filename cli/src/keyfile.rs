//! Key files: the text `ed25519-secret:` + 64 lowercase hex digits of the
//! 32-byte Ed25519 seed + a newline, readable by the owner only (mode
//! 0600). `labd` writes its development root key in the same format.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;

use lab_coord_auth::SigningKey;

use crate::failure::Failure;

/// The text that starts every key file.
pub const PREFIX: &str = "ed25519-secret:";

/// The file's text for `key`.
pub fn format(key: &SigningKey) -> String {
    format!("{PREFIX}{}\n", hex::encode(key.to_bytes()))
}

/// Reads a key file's text: exactly the prefix and 64 lowercase hex
/// digits, with one optional final newline.
pub fn parse(text: &str) -> Result<SigningKey, String> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let hex_part = line
        .strip_prefix(PREFIX)
        .ok_or_else(|| format!("does not start with {PREFIX:?}"))?;
    if hex_part.len() != 64
        || !hex_part
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!(
            "is not {PREFIX} followed by 64 lowercase hex digits and a newline"
        ));
    }
    let mut seed = [0u8; 32];
    hex::decode_to_slice(hex_part, &mut seed).map_err(|err| err.to_string())?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Loads the key file at `path`. A file others may read is used, with a
/// warning.
pub fn load(path: &Path) -> Result<SigningKey, Failure> {
    let text = std::fs::read_to_string(path).map_err(|err| Failure::reading(path, err))?;
    warn_if_shared(path);
    parse(&text).map_err(|why| Failure::Data(format!("key file {}: {why}", path.display())))
}

/// Writes a new key file at `path` (mode 0600), refusing to replace an
/// existing file.
pub fn create(path: &Path, key: &SigningKey) -> Result<(), Failure> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|err| {
        let text = if err.kind() == std::io::ErrorKind::AlreadyExists {
            format!("{} exists; a key file is never replaced", path.display())
        } else {
            format!("cannot create {}: {err}", path.display())
        };
        Failure::CantCreate(text)
    })?;
    file.write_all(format(key).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|err| Failure::Io(format!("cannot write {}: {err}", path.display())))
}

#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "labctl: warning: key file {} has mode {:o}; it should be 600",
                path.display(),
                mode & 0o777
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_auth::Principal;

    #[test]
    fn text_round_trips() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let text = format(&key);
        assert_eq!(text, format!("ed25519-secret:{}\n", "07".repeat(32)));
        let again = parse(&text).unwrap();
        assert_eq!(Principal::of(&again), Principal::of(&key));
        // The final newline is optional.
        assert!(parse(text.trim_end()).is_ok());
    }

    #[test]
    fn malformed_texts_refused() {
        for bad in [
            String::new(),
            "07".repeat(32),
            format!("ed25519-secret:{}\n", "0A".repeat(32)),
            format!("ed25519-secret:{}\n", "07".repeat(31)),
            format!("ed25519-secret:{}0\n", "07".repeat(32)),
            format!("ed25519-secret: {}\n", "07".repeat(32)),
            format!("ed25519-secret:{}\n\n", "07".repeat(32)),
            format!("ed25519-secret:{}\r\n", "07".repeat(32)),
            format!("ed25519:{}\n", "07".repeat(32)),
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn create_writes_0600_and_never_replaces() {
        let dir = std::env::temp_dir().join(format!("labctl-keyfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k.key");
        let key = SigningKey::from_bytes(&[9; 32]);
        create(&path, &key).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.to_bytes(), key.to_bytes());
        let err = create(&path, &SigningKey::from_bytes(&[1; 32])).unwrap_err();
        assert!(matches!(err, Failure::CantCreate(_)), "{err:?}");
        assert_eq!(load(&path).unwrap().to_bytes(), key.to_bytes());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
