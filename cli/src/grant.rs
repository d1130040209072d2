//! `labctl grant`: signs a grant, root-issued or delegated from a parent
//! grant the signing key holds, and optionally adds it (with the parent's
//! chain) to a grant file.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{ArgGroup, Args};
use lab_coord_auth::{issue_grant, Grant, GrantFields, GrantKind, Principal, MAX_CHAIN_DEPTH};

use crate::failure::Failure;
use crate::{grantfile, keyfile, Common};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("expiry").required(true).args(["valid_until", "valid_for"])))]
pub struct GrantArgs {
    /// Who receives the grant: `ed25519:` and 64 lowercase hex digits.
    #[arg(long, value_name = "PRINCIPAL", value_parser = parse_principal)]
    pub to: Principal,

    /// What the grant permits.
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    pub kind: GrantKind,

    /// One label of the granted subtree, repeated in order; none grants the
    /// whole world.
    #[arg(long = "path", value_name = "LABEL", allow_hyphen_values = true)]
    pub path: Vec<String>,

    /// Expiry as Unix seconds: the grant holds while now < UNIX.
    #[arg(long, value_name = "UNIX")]
    pub valid_until: Option<u64>,

    /// Expiry from now: 3600s, 30m, 24h or 7d (a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub valid_for: Option<u64>,

    /// Delegate: a grant file holding a grant of the signing key that the
    /// new grant attenuates (and that grant's own chain).
    #[arg(long, value_name = "GRANT_FILE")]
    pub parent: Option<PathBuf>,

    /// Also add the grant, and with --parent the parent's chain, to this
    /// JSON array file (created when absent): a file `--grants` reads.
    #[arg(long, value_name = "FILE")]
    pub append_to: Option<PathBuf>,
}

fn parse_principal(text: &str) -> Result<Principal, String> {
    Principal::parse(text)
        .ok_or_else(|| "a principal is ed25519: followed by 64 lowercase hex digits".into())
}

fn parse_kind(text: &str) -> Result<GrantKind, String> {
    GrantKind::parse(text).ok_or_else(|| "one of read, publish, declare, provision".into())
}

/// Parses `3600s`, `30m`, `24h`, `7d` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let unit_seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit is one of s, m, h, d")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_seconds))
        .ok_or_else(|| format!("{text:?} is not a duration like 3600s, 30m, 24h"))
}

/// The clock, in Unix seconds.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

pub fn run(args: GrantArgs, common: &Common) -> Result<(), Failure> {
    if args.path.iter().any(String::is_empty) {
        return Err(Failure::Usage("a grant's path labels are not empty".into()));
    }
    let key = keyfile::load(common.key_file()?)?;
    let world = common.world.as_str();
    let signer = Principal::of(&key);
    let valid_until = match (args.valid_until, args.valid_for) {
        (Some(at), _) => at,
        (None, Some(seconds)) => now().saturating_add(seconds),
        (None, None) => unreachable!("clap requires one of them"),
    };
    if valid_until <= now() {
        eprintln!("labctl: warning: the grant expires at {valid_until}, which has passed");
    }
    let fields = GrantFields {
        principal: args.to,
        kind: args.kind,
        path: args.path,
        valid_until,
    };

    let mut chain = Vec::new();
    let grant = match &args.parent {
        None => issue_grant(&key, world, fields, None)
            .map_err(|err| Failure::Usage(format!("cannot sign the grant: {err}")))?,
        Some(parent_file) => {
            let held = grantfile::load(parent_file)?;
            let parent = choose_parent(&held, &signer, &fields).ok_or_else(|| {
                Failure::Usage(format!(
                    "no grant in {} is held by the signing key {signer}; \
                     a delegation is signed by its parent's holder",
                    parent_file.display()
                ))
            })?;
            let grant = issue_grant(&key, world, fields, Some(parent)).map_err(|err| {
                Failure::Usage(format!(
                    "cannot delegate: {err}; the parent grants {} on {:?} until {}",
                    parent.kind, parent.path, parent.valid_until
                ))
            })?;
            let (ancestors, complete) = ancestors(parent, &held, world);
            if !complete {
                eprintln!(
                    "labctl: warning: {} does not hold the parent's whole chain up to a \
                     root-issued grant of world {:?}; the holder needs every link",
                    parent_file.display(),
                    world
                );
            } else if ancestors.len() + 2 > MAX_CHAIN_DEPTH {
                eprintln!(
                    "labctl: warning: the new grant is link {} of its chain; only {} count",
                    ancestors.len() + 2,
                    MAX_CHAIN_DEPTH
                );
            }
            chain = ancestors;
            chain.push(parent.clone());
            grant
        }
    };

    let text = serde_json::to_string_pretty(&grant.to_json()).expect("a grant serializes");
    println!("{text}");
    if let Some(file) = &args.append_to {
        chain.push(grant);
        grantfile::append(file, &chain)?;
    }
    Ok(())
}

/// The grant of `held` to delegate from: one held by `signer` that the new
/// grant attenuates, else the first one held by `signer` (so that signing
/// refuses with the reason), else none.
fn choose_parent<'a>(
    held: &'a [Grant],
    signer: &Principal,
    fields: &GrantFields,
) -> Option<&'a Grant> {
    let probe = Grant {
        principal: fields.principal,
        kind: fields.kind,
        path: fields.path.clone(),
        valid_until: fields.valid_until,
        issuer: *signer,
        signature: [0; 64],
    };
    let mine = || held.iter().filter(|grant| grant.principal == *signer);
    mine()
        .find(|grant| probe.attenuates(grant))
        .or_else(|| mine().next())
}

/// The chain above `grant` among `held`, root-first, found by signature:
/// a grant's parent is the grant it attenuates whose digest its signature
/// names. `complete` when the top of the chain is signed as issued from
/// nothing (by a root) in `world`.
pub fn ancestors(grant: &Grant, held: &[Grant], world: &str) -> (Vec<Grant>, bool) {
    let mut chain: Vec<Grant> = Vec::new();
    let mut current = grant;
    let mut complete = false;
    for _ in 0..MAX_CHAIN_DEPTH {
        if current.signature_verifies(world, None) {
            complete = true;
            break;
        }
        let parent = held.iter().find(|candidate| {
            current.attenuates(candidate)
                && !chain.contains(candidate)
                && current.signature_verifies(world, Some(&candidate.digest()))
        });
        match parent {
            Some(parent) => {
                chain.push(parent.clone());
                current = parent;
            }
            None => break,
        }
    }
    chain.reverse();
    (chain, complete)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_auth::{valid_grants, SigningKey};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn fields(to: u8, kind: GrantKind, path: &[&str], valid_until: u64) -> GrantFields {
        GrantFields {
            principal: Principal::of(&key(to)),
            kind,
            path: path.iter().map(|s| s.to_string()).collect(),
            valid_until,
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("3600s"), Ok(3600));
        assert_eq!(parse_duration("3600"), Ok(3600));
        assert_eq!(parse_duration("30m"), Ok(1800));
        assert_eq!(parse_duration("24h"), Ok(86_400));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        for bad in ["", "h", "1.5h", "-1h", "1w", "1 h", "99999999999999999999s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn chain_is_found_by_signature() {
        let root = issue_grant(
            &key(1),
            "lab",
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        let middle = issue_grant(
            &key(2),
            "lab",
            fields(3, GrantKind::Read, &["p", "q"], 90),
            Some(&root),
        )
        .unwrap();
        let unrelated =
            issue_grant(&key(1), "lab", fields(2, GrantKind::Read, &[], 100), None).unwrap();
        let held = vec![middle.clone(), unrelated.clone(), root.clone()];
        assert_eq!(ancestors(&middle, &held, "lab"), (vec![root.clone()], true));
        assert_eq!(ancestors(&root, &held, "lab"), (vec![], true));
        // Without the root grant, or in another world, it is incomplete.
        assert_eq!(
            ancestors(&middle, &[middle.clone(), unrelated], "lab"),
            (vec![], false)
        );
        assert!(!ancestors(&middle, &held, "other").1);

        let chain = [root.clone(), middle.clone()];
        assert_eq!(
            valid_grants(&chain, "lab", &Principal::of(&key(1)), 50),
            [true, true]
        );
    }

    #[test]
    fn parent_is_the_covering_grant_of_the_signer() {
        let wide = issue_grant(
            &key(1),
            "lab",
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        let publish = issue_grant(
            &key(1),
            "lab",
            fields(2, GrantKind::Publish, &["p"], 100),
            None,
        )
        .unwrap();
        let other = issue_grant(
            &key(1),
            "lab",
            fields(4, GrantKind::Publish, &[], 100),
            None,
        )
        .unwrap();
        let held = [other, wide, publish.clone()];
        let signer = Principal::of(&key(2));
        let want = fields(3, GrantKind::Publish, &["p", "x"], 50);
        assert_eq!(choose_parent(&held, &signer, &want), Some(&publish));
        // Nothing covers it: the first held grant, and signing refuses.
        let wider = fields(3, GrantKind::Publish, &[], 50);
        let parent = choose_parent(&held, &signer, &wider).unwrap();
        assert!(issue_grant(&key(2), "lab", wider, Some(parent)).is_err());
        assert_eq!(choose_parent(&held, &Principal::of(&key(9)), &want), None);
    }
}
