//! Grant files: a JSON array of grant wire objects (what `labctl grant
//! --append-to` writes and `--grants` reads), or a single grant object
//! (what `labctl grant` prints).
//!
//! Each grant is read as strictly as the service reads a carriage's grants:
//! exactly the six members, each within its grammar.

use std::path::Path;

use base64::Engine as _;
use lab_coord_auth::{Grant, GrantKind, Principal};
use serde_json::Value;

use crate::failure::Failure;
use crate::output;

/// The largest integer a grant carries: `2^53 - 1`.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

const MEMBERS: [&str; 6] = [
    "principal",
    "kind",
    "path",
    "valid_until",
    "issuer",
    "signature",
];

/// Reads one grant wire object; `at` names it in errors.
pub fn parse_grant(value: &Value, at: &str) -> Result<Grant, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("{at} is not a JSON object"))?;
    if let Some(name) = object.keys().find(|name| !MEMBERS.contains(&name.as_str())) {
        return Err(format!("{at} has an unknown member {name:?}"));
    }
    let member = |name: &str| {
        object
            .get(name)
            .ok_or_else(|| format!("{at} lacks the member {name:?}"))
    };
    let text = |name: &str| {
        member(name)?
            .as_str()
            .ok_or_else(|| format!("{at}.{name} is not a string"))
    };
    let principal = |name: &str| {
        let value = text(name)?;
        Principal::parse(value)
            .ok_or_else(|| format!("{at}.{name} is not ed25519: and 64 lowercase hex digits"))
    };
    let kind = GrantKind::parse(text("kind")?)
        .ok_or_else(|| format!("{at}.kind is not read, publish, declare or provision"))?;
    let path = member("path")?
        .as_array()
        .and_then(|labels| {
            labels
                .iter()
                .map(|label| label.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| format!("{at}.path is not an array of strings"))?;
    let valid_until = member("valid_until")?
        .as_u64()
        .filter(|n| *n <= MAX_SAFE_INTEGER)
        .ok_or_else(|| format!("{at}.valid_until is not an integer in 0..=2^53-1"))?;
    let signature_text = text("signature")?;
    let engine = base64::engine::general_purpose::STANDARD;
    let signature = engine
        .decode(signature_text)
        .ok()
        .filter(|bytes| engine.encode(bytes) == signature_text)
        .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok())
        .ok_or_else(|| format!("{at}.signature is not canonical base64 of 64 bytes"))?;
    Ok(Grant {
        principal: principal("principal")?,
        kind,
        path,
        valid_until,
        issuer: principal("issuer")?,
        signature,
    })
}

/// Reads a grant file's text: an array of grants or one grant.
pub fn parse_grants(bytes: &[u8]) -> Result<Vec<Grant>, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|err| format!("not JSON: {err}"))?;
    match &value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| parse_grant(item, &format!("grant {index}")))
            .collect(),
        Value::Object(_) => Ok(vec![parse_grant(&value, "the grant")?]),
        _ => Err("is neither a grant nor an array of grants".into()),
    }
}

/// Loads the grant file at `path`.
pub fn load(path: &Path) -> Result<Vec<Grant>, Failure> {
    let bytes = std::fs::read(path).map_err(|err| Failure::reading(path, err))?;
    parse_grants(&bytes)
        .map_err(|why| Failure::Data(format!("grant file {}: {why}", path.display())))
}

/// Loads every file of `paths`, in order, dropping repeated grants.
pub fn load_all(paths: &[impl AsRef<Path>]) -> Result<Vec<Grant>, Failure> {
    let mut grants = Vec::new();
    for path in paths {
        add_new(&mut grants, load(path.as_ref())?);
    }
    Ok(grants)
}

/// Appends to `list` the grants of `more` it does not hold yet.
pub fn add_new(list: &mut Vec<Grant>, more: impl IntoIterator<Item = Grant>) {
    for grant in more {
        if !list.contains(&grant) {
            list.push(grant);
        }
    }
}

/// The file text of `grants`: a pretty JSON array and a newline.
pub fn to_text(grants: &[Grant]) -> String {
    let array = Value::Array(grants.iter().map(Grant::to_json).collect());
    let mut text = serde_json::to_string_pretty(&array).expect("grants serialize");
    text.push('\n');
    text
}

/// Adds `grants` to the array file at `path` (created when absent),
/// keeping the grants it holds; the file is replaced atomically.
pub fn append(path: &Path, grants: &[Grant]) -> Result<(), Failure> {
    let mut all = match std::fs::read(path) {
        Ok(bytes) => parse_grants(&bytes)
            .map_err(|why| Failure::Data(format!("grant file {}: {why}", path.display())))?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(err) => return Err(Failure::reading(path, err)),
    };
    add_new(&mut all, grants.iter().cloned());
    output::write_file(path, to_text(&all).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_auth::{issue_grant, GrantFields, SigningKey};
    use serde_json::json;

    fn sample() -> Grant {
        let root = SigningKey::from_bytes(&[1; 32]);
        issue_grant(
            &root,
            "lab",
            GrantFields {
                principal: Principal::of(&SigningKey::from_bytes(&[3; 32])),
                kind: GrantKind::Publish,
                path: vec!["projects".into(), "a b".into()],
                valid_until: 1_800_000_000,
            },
            None,
        )
        .unwrap()
    }

    #[test]
    fn wire_object_round_trips() {
        let grant = sample();
        assert_eq!(parse_grant(&grant.to_json(), "g").unwrap(), grant);
        let text = to_text(&[grant.clone(), grant.clone()]);
        assert_eq!(
            parse_grants(text.as_bytes()).unwrap(),
            [grant.clone(), grant.clone()]
        );
        let one = serde_json::to_vec(&grant.to_json()).unwrap();
        assert_eq!(parse_grants(&one).unwrap(), [grant]);
    }

    #[test]
    fn malformed_grants_refused() {
        let good = sample().to_json();
        let mut cases = Vec::new();
        for name in MEMBERS {
            let mut missing = good.clone();
            missing.as_object_mut().unwrap().remove(name);
            cases.push((missing, "lacks"));
        }
        let mut extra = good.clone();
        extra["derives_from"] = Value::Null;
        cases.push((extra, "unknown member"));
        for (name, value, why) in [
            ("kind", json!("write"), "kind"),
            ("principal", json!("ed25519:AB"), "principal"),
            ("issuer", json!(7), "issuer"),
            ("path", json!("a/b"), "path"),
            ("path", json!([1]), "path"),
            ("valid_until", json!(-1), "valid_until"),
            ("valid_until", json!(1u64 << 53), "valid_until"),
            ("valid_until", json!(1.5), "valid_until"),
            ("signature", json!("AAAA"), "signature"),
        ] {
            let mut bad = good.clone();
            bad[name] = value;
            cases.push((bad, why));
        }
        // Non-canonical base64: the last character's unused bits set.
        let mut bad = good.clone();
        let sig = bad["signature"].as_str().unwrap().to_owned();
        // 64 bytes end in one byte: two characters and `==`; the second
        // character's low four bits are unused.
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut chars: Vec<char> = sig.chars().collect();
        let at = chars.len() - 3;
        let index = alphabet.find(chars[at]).unwrap() ^ 1;
        chars[at] = alphabet.as_bytes()[index] as char;
        bad["signature"] = json!(chars.into_iter().collect::<String>());
        cases.push((bad, "signature"));
        for (value, why) in cases {
            let err = parse_grant(&value, "g").unwrap_err();
            assert!(err.contains(why), "{err} (wanted {why})");
        }
        assert!(parse_grants(b"7").is_err());
        assert!(parse_grants(b"[").is_err());
    }
}
