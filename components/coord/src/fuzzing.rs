//! Entry points for fuzz targets.
//!
//! Each function takes arbitrary bytes, runs the service's network-facing
//! decoders on them and checks what must hold of their answers. It panics
//! only when an invariant is broken, so a fuzz target is a few one-line
//! calls. Everything here is a pure function: none of it reaches the host.
//!
//! - [`check_params`]: [`params::parse`] for every operation of the table,
//!   then [`request::decode`] of what it accepts.
//! - [`check_requests`]: [`request::decode`] of a body for every operation.
//! - [`check_facts`]: [`facts::decode`] of journal fact bytes.
//! - [`check_fact_json`]: [`Fact::from_json`] of a JSON member.
//! - [`check_cursor`]: [`cursor::open`] of a cursor, and sealed cursors
//!   changed in one byte.

use crate::cursor;
use crate::facts::{self, Fact, FactError, Predicate};
use crate::layout;
use crate::params::{self, Query, MAX_LIMIT, MAX_POSITION};
use crate::refusal::{Refusal, REFUSALS};
use crate::request::{self, Decoded, MAX_OPERATION_ID};
use crate::table::{BodyKind, Operation, ParamKind, OPERATIONS};
use lab_coord_auth::ParamValue;
use serde_json::Value as Json;

/// The key cursors are sealed with here.
pub const CURSOR_KEY: [u8; 32] = [7; 32];
/// The export scope cursors are sealed for here.
pub const CURSOR_SCOPE: &str = "spc_0123456789abcdef0123456789abcdef";
/// Another scope, for which no cursor of [`CURSOR_SCOPE`] opens.
const OTHER_SCOPE: &str = "spc_fedcba9876543210fedcba9876543210";

/// Checks what holds of every refusal: its code is a row of [`REFUSALS`]
/// and its status is that row's (413 for an oversized body, which answers
/// with the `invalid` code), and it has a message.
pub fn check_refusal(refusal: &Refusal) {
    let code = refusal.code();
    let Some(&(_, status, _)) = REFUSALS.iter().find(|(name, _, _)| *name == code) else {
        panic!("{refusal:?}: code `{code}` is not in the refusal table");
    };
    let expected = match refusal {
        Refusal::BodyTooLarge => 413,
        _ => status,
    };
    assert_eq!(refusal.status(), expected, "{refusal:?}");
    assert!(!refusal.message().is_empty(), "{refusal:?}");
    if let Some(details) = refusal.details() {
        assert!(details.is_object(), "{refusal:?}");
    }
}

/// Runs [`params::parse`] on `data` (if UTF-8) as the raw query string of
/// every operation. A refusal is `invalid`. An accepted query names only
/// the operation's parameters, each of its kind, has every required one,
/// keeps integers within ±(2^53 - 1) and path labels in their grammar;
/// what then passes [`params::check_domains`] keeps integers in their
/// domains. Its string grammars checked, it is handed to
/// [`request::decode`] with an empty body, as [`check_decoded`] describes.
pub fn check_params(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for op in OPERATIONS {
        match params::parse(op, Some(text)) {
            Ok(query) => {
                check_query(op, &query);
                match request::check_query(&query) {
                    Ok(()) => check_decoded(op, request::decode(op, &[])),
                    Err(refusal) => assert_eq!(refusal.code(), "invalid", "{}", op.name),
                }
            }
            Err(refusal) => {
                check_refusal(&refusal);
                assert_eq!(refusal.code(), "invalid", "{}: {refusal:?}", op.name);
            }
        }
    }
}

fn check_query(op: &Operation, query: &Query) {
    for (name, value) in query.signed.iter() {
        let Some(&(_, kind, _)) = op.params.iter().find(|(n, _, _)| *n == name) else {
            panic!("{}: accepted unknown parameter `{name}`", op.name);
        };
        match (kind, value) {
            (ParamKind::Str, ParamValue::String(s)) => assert!(!s.is_empty()),
            (ParamKind::Int, ParamValue::Int(n)) => {
                let bound = MAX_POSITION as i64;
                assert!((-bound..=bound).contains(n), "{name}={n}");
            }
            (ParamKind::Strings, ParamValue::Strings(labels)) => {
                assert_eq!(labels, &query.path);
                for label in labels {
                    assert!(params::check_label(label).is_ok(), "label {label:?}");
                }
            }
            _ => panic!("{}: `{name}` accepted as {value:?}", op.name),
        }
    }
    for (name, kind, required) in op.params {
        if *required {
            match kind {
                ParamKind::Strings => assert!(query.has_path, "{}: no {name}", op.name),
                _ => assert!(query.signed.get(name).is_some(), "{}: no {name}", op.name),
            }
        }
    }
    assert_eq!(query.has_path, !query.path.is_empty());
    // The domain rules, a second stage (after the proof).
    if let Err(refusal) = params::check_domains(query) {
        check_refusal(&refusal);
        assert_eq!(refusal.code(), "invalid", "{}: {refusal:?}", op.name);
        return;
    }
    for (name, value) in query.signed.iter() {
        if let ParamValue::Int(n) = value {
            assert!(*n >= 0, "{name}={n} passed the domain rules");
        }
    }
    assert!((1..=MAX_LIMIT).contains(&query.limit()));
    assert_ne!(query.int("position"), Some(0));
    if let (Some(after), Some(through)) = (query.int("after"), query.int("through")) {
        assert!(after <= through);
    }
}

/// Runs [`request::decode`] on `data` as the body of every operation, with
/// no query parameters. See [`check_decoded`].
pub fn check_requests(data: &[u8]) {
    for op in OPERATIONS {
        check_decoded(op, request::decode(op, data));
    }
}

/// What holds of one answer of [`request::decode`] for `op`:
///
/// - a refusal is `invalid` or `structural` (or, for `declare`,
///   `invalid_record` or `limit_exceeded` of its statement; for `compose`,
///   `query` and `apply`, `limit_exceeded` of a decoded bound: the
///   selections of a view, a query's cursor, an application's input
///   roles);
/// - a query operation decodes to [`Decoded::Query`], a JSON one to its
///   own request, whose operation ID, labels and cutoff are in grammar.
pub fn check_decoded(op: &Operation, decoded: Result<Decoded, Refusal>) {
    let decoded = match decoded {
        Err(refusal) => {
            check_refusal(&refusal);
            // A statement's semantic faults and its bounds are judged as it
            // is decoded.
            let statement = op.name == "declare"
                && matches!(refusal.code(), "invalid_record" | "limit_exceeded");
            let bound = matches!(op.name, "compose" | "query" | "apply")
                && refusal.code() == "limit_exceeded";
            assert!(
                statement || bound || matches!(refusal.code(), "invalid" | "structural"),
                "{}: {refusal:?}",
                op.name
            );
            return;
        }
        Ok(decoded) => decoded,
    };
    if let Decoded::Query = decoded {
        assert_ne!(
            op.body,
            BodyKind::Json,
            "{}: a body decoded as a query",
            op.name
        );
        return;
    }
    assert_eq!(op.body, BodyKind::Json, "{}: {decoded:?}", op.name);
    let label = |label: &str| assert!(params::check_label(label).is_ok(), "{label:?}");
    let user_label = |label: &str| assert!(layout::check_user_label("label", label).is_ok());
    let cutoff = |cutoff: Option<u64>| assert!(cutoff.is_none_or(|c| c <= MAX_POSITION));
    let (name, operation_id) = match &decoded {
        Decoded::Publish(r) => {
            r.path.iter().for_each(|l| label(l));
            assert!(layout::check_user_labels(&r.path).is_ok());
            assert!(request::is_profile(&r.profile), "{:?}", r.profile);
            cutoff(r.expected_cutoff);
            ("publish", &r.operation_id)
        }
        Decoded::CreateArtifact(r) => {
            // Its layout position is checked after authorization.
            r.path.iter().for_each(|l| label(l));
            assert!(layout::check_user_labels(&r.path).is_ok());
            ("create_artifact", &r.operation_id)
        }
        Decoded::CreateProject(r) => {
            user_label(&r.label);
            ("create_project", &r.operation_id)
        }
        Decoded::CreateCampaign(r) => {
            user_label(&r.label);
            label(&r.project);
            ("create_campaign", &r.operation_id)
        }
        Decoded::ProvisionWorker(r) => {
            label(&r.project);
            user_label(&r.worker);
            assert!(r.principal.verifying_key().is_some());
            r.permissions
                .iter()
                .flat_map(|p| &p.path)
                .for_each(|l| label(l));
            assert!(r.valid_until <= MAX_POSITION);
            ("provision_worker", &r.operation_id)
        }
        Decoded::RetireWorker(r) => {
            label(&r.project);
            label(&r.worker);
            cutoff(r.expected_cutoff);
            ("retire_worker", &r.operation_id)
        }
        Decoded::Assign(r) => {
            label(&r.campaign);
            user_label(&r.assignment);
            label(&r.worker);
            r.outputs.iter().flatten().for_each(|l| label(l));
            for input in &r.inputs {
                let json = input.to_json();
                assert_eq!(facts::EntryRef::from_json(&json).as_ref(), Ok(input));
            }
            cutoff(r.expected_cutoff);
            ("assign", &r.operation_id)
        }
        Decoded::Declare(r) => {
            r.artifact.iter().for_each(|l| label(l));
            let statement = &r.statement;
            assert!(statement.claim.is_some() || !statement.relations.is_empty());
            assert!(statement.evidence.len() <= request::MAX_EVIDENCE);
            assert!(
                statement.premise_count() + statement.relations.len() < request::MAX_BATCH_FACTS
            );
            ("declare", &r.operation_id)
        }
        Decoded::Apply(r) => {
            r.path.iter().for_each(|l| label(l));
            assert!(layout::check_user_labels(&r.path).is_ok());
            user_label(&r.tool);
            assert!(r.inputs.len() <= request::MAX_INPUT_ROLES);
            ("apply", &r.operation_id)
        }
        // `Decoded::Query` is answered above; a request added since is
        // only checked for its operation.
        _ => return,
    };
    assert_eq!(name, op.name, "{decoded:?}");
    assert!(
        !operation_id.is_empty()
            && operation_id.len() <= MAX_OPERATION_ID
            && operation_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b)),
        "operation ID {operation_id:?}"
    );
}

/// Runs [`facts::decode`] on `data` and checks its answer:
///
/// - a profile fact re-encodes to exactly `data`, and its JSON form builds
///   the same fact back ([`Fact::from_json`]);
/// - `Ok(None)` only for one canonical fact not headed by a profile label;
/// - an encoding refusal only for bytes that are not one canonical fact;
/// - an argument refusal only for a canonical fact headed by its
///   predicate's label, naming one of its arguments or `arity`.
pub fn check_facts(data: &[u8]) {
    let canonical = lab_values::decode_fact(data);
    match facts::decode(data) {
        Ok(Some(fact)) => {
            assert_eq!(fact.encode(), data, "{fact:?} re-encodes differently");
            let json = fact.to_json();
            assert_eq!(
                Fact::from_json(fact.predicate(), &json).as_ref(),
                Ok(&fact),
                "{json}"
            );
        }
        Ok(None) => {
            let value = canonical.expect("a foreign fact is one canonical fact");
            if let Some((lab_values::Value::Label(label), _)) = value.as_fact() {
                assert!(Predicate::from_label(label).is_none());
            }
        }
        Err(FactError::Encoding(error)) => {
            assert!(canonical.is_err(), "canonical bytes refused as {error:?}");
            assert!(error.offset() <= data.len());
        }
        Err(error) => {
            let value = canonical.expect("an argument refusal is of a canonical fact");
            let predicate = error.predicate().expect("an argument refusal names it");
            let Some((lab_values::Value::Label(label), _)) = value.as_fact() else {
                panic!("{error:?} of a fact not headed by a label");
            };
            assert_eq!(Predicate::from_label(label), Some(predicate));
            let field = error.field().expect("an argument refusal names it");
            assert!(
                field == "arity" || predicate.arguments().any(|a| a == field),
                "{error:?}"
            );
            assert!(!error.to_string().is_empty());
            assert!(error.details().is_object());
        }
    }
}

/// Runs [`Fact::from_json`] for every predicate on `data` (if JSON; a
/// `predicate` member, as the vectors carry, is set aside first) and checks
/// its answer: an accepted member builds a fact of that predicate whose
/// bytes decode back to it and whose JSON form builds it again; a refusal
/// names the predicate and a member (or the predicate itself when the
/// member is not an object).
pub fn check_fact_json(data: &[u8]) {
    let Ok(mut json) = serde_json::from_slice::<Json>(data) else {
        return;
    };
    if let Some(object) = json.as_object_mut() {
        object.remove("predicate");
    }
    for predicate in Predicate::ALL {
        match Fact::from_json(predicate, &json) {
            Ok(fact) => {
                assert_eq!(fact.predicate(), predicate);
                let bytes = fact.encode();
                assert_eq!(facts::decode(&bytes).as_ref(), Ok(&Some(fact.clone())));
                assert_eq!(
                    Fact::from_json(predicate, &fact.to_json()).as_ref(),
                    Ok(&fact)
                );
            }
            Err(error) => {
                assert_eq!(error.predicate(), Some(predicate), "{error:?}");
                let field = error.field().expect("a JSON refusal names a member");
                let named = field == predicate.name()
                    || predicate.arguments().any(|a| predicate.member(a) == field)
                    || json.as_object().is_some_and(|o| o.contains_key(field));
                assert!(named, "{error:?}");
            }
        }
    }
}

/// Checks that only a sealed cursor opens:
///
/// - [`cursor::open`] of `data` (if UTF-8) either answers a frontier whose
///   cursor is exactly `data` (and which no other scope opens), or refuses
///   with `invalid_cursor`;
/// - the cursor sealed for `data` as a frontier opens to it (within
///   [`cursor::MAX_CURSOR_CHARS`]), and changed in any one of a few bytes
///   picked by `data` it is refused with `invalid_cursor`.
pub fn check_cursor(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        match cursor::open(&CURSOR_KEY, CURSOR_SCOPE, text) {
            Ok(frontier) => {
                assert_eq!(cursor::seal(&CURSOR_KEY, CURSOR_SCOPE, &frontier), text);
                refused(cursor::open(&CURSOR_KEY, OTHER_SCOPE, text));
            }
            Err(refusal) => refused(Err(refusal)),
        }
    }
    let frontier = String::from_utf8_lossy(data);
    let sealed = cursor::seal(&CURSOR_KEY, CURSOR_SCOPE, &frontier);
    let opened = cursor::open(&CURSOR_KEY, CURSOR_SCOPE, &sealed);
    if sealed.len() <= cursor::MAX_CURSOR_CHARS {
        assert_eq!(opened.as_deref(), Ok(&*frontier));
    } else {
        refused(opened);
    }
    refused(cursor::open(&CURSOR_KEY, OTHER_SCOPE, &sealed));
    // Cursors are URL-safe base64: ASCII, so any one ASCII byte changed
    // leaves UTF-8.
    let mut pick = data
        .iter()
        .fold(0x9e37_79b9_u64, |h, &b| h.rotate_left(5) ^ u64::from(b));
    for _ in 0..4 {
        pick = pick.wrapping_mul(0x2545_f491_4f6c_dd1d).wrapping_add(1);
        let at = (pick >> 8) as usize % sealed.len();
        let old = sealed.as_bytes()[at];
        const REPLACEMENTS: &[u8] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/= .%";
        let mut new = REPLACEMENTS[(pick >> 40) as usize % REPLACEMENTS.len()];
        if new == old {
            new = if old == b'A' { b'B' } else { b'A' };
        }
        let mut changed = sealed.clone().into_bytes();
        changed[at] = new;
        let changed = String::from_utf8(changed).expect("ASCII");
        refused(cursor::open(&CURSOR_KEY, CURSOR_SCOPE, &changed));
    }
}

fn refused(opened: Result<String, Refusal>) {
    match opened {
        Ok(frontier) => panic!("a cursor opened to {frontier:?}"),
        Err(refusal) => {
            check_refusal(&refusal);
            assert_eq!(refusal.code(), "invalid_cursor", "{refusal:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: a fixed seed gives the same inputs on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const ROOT: &str = "rt_00112233445566778899aabbccddeeff";
    const SPACE: &str = "spc_00112233445566778899aabbccddeeff";
    const HASH: &str = "sha256:853ff93762a06ddbf722c4ebe9ddd66d8f63ddaea97f521c3ecc20da7c976020";
    /// RFC 8032, test 1: an admissible key.
    const PRINCIPAL: &str =
        "ed25519:d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

    /// Valid query strings, each accepted by at least one operation.
    fn query_seeds() -> Vec<String> {
        vec![
            "path=projects&path=alpha".into(),
            "path=a%20b&path=%C3%A9&path=x%2By+z&limit=5".into(),
            "path=projects&after=1&through=9&limit=128".into(),
            "through=7&limit=0".into(),
            format!("root_id={ROOT}&space_id={SPACE}&position=3"),
            format!("path=projects&path=alpha&bytes={HASH}"),
            format!("path=projects&path=alpha&path=artifacts&path=a1&type={HASH}"),
            "path=campaigns&depth=2".into(),
            format!(
                "path=projects&cursor={}",
                cursor::seal(&CURSOR_KEY, CURSOR_SCOPE, HASH)
            ),
            String::new(),
        ]
    }

    /// Valid bodies of every operation `request::decode` implements.
    fn body_seeds() -> Vec<(&'static str, String)> {
        let entry = format!(r#"{{"root_id":"{ROOT}","space_id":"{SPACE}","position":7}}"#);
        vec![
            (
                "publish",
                r#"{"operation_id":"op-1","path":["projects","alpha","snapshots","s"],"profile":"lab/finding/1","record":{"x":[1,2.5,null]},"expected_cutoff":3,"metadata":{"k":"v"}}"#.into(),
            ),
            (
                "create_artifact",
                format!(
                    r#"{{"operation_id":"a1","path":["projects","alpha","artifacts","a1"],"artifact":{{"bytes":"{HASH}","type":"{HASH}"}}}}"#
                ),
            ),
            (
                "create_project",
                r#"{"operation_id":"project-alpha","label":"alpha"}"#.into(),
            ),
            (
                "create_campaign",
                r#"{"operation_id":"c-1","label":"survey","project":"alpha"}"#.into(),
            ),
            (
                "provision_worker",
                format!(
                    r#"{{"operation_id":"w-1","project":"alpha","worker":"w1","principal":"{PRINCIPAL}","permissions":[{{"kind":"read","path":["projects","alpha"]}},{{"kind":"publish","path":["projects","alpha","workers","w1"]}}],"valid_until":1900000000}}"#
                ),
            ),
            (
                "retire_worker",
                r#"{"operation_id":"r-1","project":"alpha","worker":"w1","expected_cutoff":2}"#
                    .into(),
            ),
            (
                "assign",
                format!(
                    r#"{{"operation_id":"as-1","campaign":"survey","assignment":"first","worker":"w1","inputs":[{entry}],"outputs":[["projects","alpha","snapshots","x"]],"brief":"go","expected_cutoff":5}}"#
                ),
            ),
        ]
    }

    fn vectors() -> Json {
        serde_json::from_str(include_str!(
            "../../../contracts/coordination/facts-vectors.json"
        ))
        .expect("the vectors are JSON")
    }

    /// The hex vectors (valid, foreign and invalid) as bytes.
    fn fact_seeds() -> Vec<Vec<u8>> {
        let doc = vectors();
        ["valid", "foreign", "invalid"]
            .iter()
            .flat_map(|part| doc[part].as_array().expect("a list").clone())
            .map(|v| hex::decode(v["hex"].as_str().expect("hex")).expect("hex"))
            .collect()
    }

    /// The JSON forms of the valid vectors, `predicate` member included.
    fn fact_json_seeds() -> Vec<Vec<u8>> {
        vectors()["valid"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|v| serde_json::to_vec(&v["json"]).expect("JSON"))
            .collect()
    }

    fn cursor_seeds() -> Vec<String> {
        [HASH, "", "frontier", "é/\u{0}\"\\"]
            .iter()
            .map(|frontier| cursor::seal(&CURSOR_KEY, CURSOR_SCOPE, frontier))
            .collect()
    }

    /// Bytes that steer mutations toward interesting decoder states: query
    /// syntax, JSON syntax, grammar edges, and heads the values codec
    /// treats specially.
    const TOKENS: &[&[u8]] = &[
        b"&",
        b"=",
        b"%",
        b"%2F",
        b"%00",
        b"%C3",
        b"%e9",
        b"+",
        b"path=",
        b"limit=129",
        b"position=0",
        b"after=10",
        b"9007199254740992",
        b"01",
        b"{",
        b"}",
        b"[",
        b"]",
        b":",
        b",",
        b"\"",
        b"\\u0000",
        b"null",
        b"-1",
        b"1.5",
        b"\"projects\"",
        b"\"artifacts\"",
        b"\"workers\"",
        b"\"\"",
        b"/",
        b"..",
        b"\"expected_cutoff\":9007199254740992,",
        b"\"extra\":1,",
        b"rt_",
        b"spc_",
        b"sha256:",
        b"ed25519:",
        b"\xff",
        b"\xc3",
        b"\x00",
        b"\x17",
        b"\x18",
        b"\x1b",
        b"\x40",
        b"\x5f",
        b"\x7f",
        b"\x80",
        b"\x9f",
        b"\xa0",
        b"\xd8\x27",
        b"\xf6",
    ];

    fn mutate(rng: &mut Rng, input: &mut Vec<u8>, donors: &[Vec<u8>]) {
        match rng.below(9) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            1 if !input.is_empty() => {
                let i = rng.below(input.len());
                input.remove(i);
            }
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(input.len() + 1);
                input.splice(at..at, token.iter().copied());
            }
            3 if !input.is_empty() => {
                let start = rng.below(input.len());
                let end = start + rng.below(input.len() - start + 1);
                let copy = input[start..end].to_vec();
                let at = rng.below(input.len() + 1);
                input.splice(at..at, copy);
            }
            4 => {
                let at = rng.below(input.len() + 1);
                input.truncate(at);
            }
            5 => {
                let donor = &donors[rng.below(donors.len())];
                let start = rng.below(donor.len() + 1);
                let end = start + rng.below(donor.len() - start + 1);
                let at = rng.below(input.len() + 1);
                input.splice(at..at, donor[start..end].iter().copied());
            }
            6 => {
                let at = rng.below(input.len() + 1);
                input.insert(at, rng.next() as u8);
            }
            // A byte replaced by one of its class, which often keeps an ID,
            // hash, label or timestamp in its grammar and so reaches the
            // checks after it.
            _ if !input.is_empty() => {
                const HEX: &[u8] = b"0123456789abcdef";
                const ALNUM: &[u8] =
                    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
                let i = rng.below(input.len());
                let class = if HEX.contains(&input[i]) { HEX } else { ALNUM };
                if class == HEX || input[i].is_ascii_alphanumeric() {
                    input[i] = class[rng.below(class.len())];
                }
            }
            _ => {}
        }
    }

    /// `rounds` mutants (one to four mutations each, splicing from
    /// `donors`) of `seeds`, each handed to `check`; answers for how many
    /// `check` was true.
    fn run(
        rng: &mut Rng,
        seeds: &[Vec<u8>],
        donors: &[Vec<u8>],
        rounds: usize,
        mut check: impl FnMut(&[u8]) -> bool,
    ) -> usize {
        let mut accepted = 0;
        for _ in 0..rounds {
            let mut input = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(4) {
                mutate(rng, &mut input, donors);
            }
            if check(&input) {
                accepted += 1;
            }
        }
        accepted
    }

    fn op(name: &str) -> &'static Operation {
        OPERATIONS.iter().find(|o| o.name == name).expect(name)
    }

    #[test]
    fn seeds_are_valid() {
        for seed in query_seeds() {
            assert!(
                OPERATIONS
                    .iter()
                    .any(|op| params::parse(op, Some(&seed)).is_ok()),
                "{seed}"
            );
            check_params(seed.as_bytes());
            check_cursor(seed.as_bytes());
        }
        for (name, body) in body_seeds() {
            let decoded = request::decode(op(name), body.as_bytes());
            assert!(decoded.is_ok(), "{name}: {decoded:?}");
            check_requests(body.as_bytes());
            check_fact_json(body.as_bytes());
        }
        let doc = vectors();
        let decodes = ["valid", "foreign"]
            .iter()
            .map(|part| doc[part].as_array().expect("a list").len())
            .sum::<usize>();
        for (i, seed) in fact_seeds().iter().enumerate() {
            assert_eq!(facts::decode(seed).is_ok(), i < decodes);
            check_facts(seed);
            check_cursor(seed);
        }
        for seed in fact_json_seeds() {
            let mut json: Json = serde_json::from_slice(&seed).unwrap();
            let predicate = json["predicate"].as_str().unwrap();
            let predicate = Predicate::from_name(predicate).unwrap();
            json.as_object_mut().unwrap().remove("predicate");
            assert!(Fact::from_json(predicate, &json).is_ok(), "{json}");
            check_fact_json(&seed);
        }
        for seed in cursor_seeds() {
            assert!(cursor::open(&CURSOR_KEY, CURSOR_SCOPE, &seed).is_ok());
            check_cursor(seed.as_bytes());
        }
        check_cursor(&[b'x'; 5000]);
        check_cursor(b"\xff");
        check_requests(b"");
        check_params(b"");
    }

    #[test]
    fn every_one_byte_change_of_a_cursor_is_refused() {
        let sealed = cursor::seal(&CURSOR_KEY, CURSOR_SCOPE, HASH);
        for at in 0..sealed.len() {
            for new in [b'A', b'z', b'-', b'=', 0x00, 0x7f] {
                let mut changed = sealed.clone().into_bytes();
                if changed[at] != new {
                    changed[at] = new;
                    let changed = String::from_utf8(changed).expect("ASCII");
                    refused(cursor::open(&CURSOR_KEY, CURSOR_SCOPE, &changed));
                }
            }
        }
    }

    #[test]
    fn mutated_inputs_never_break_invariants() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

        let queries: Vec<Vec<u8>> = query_seeds().into_iter().map(String::into_bytes).collect();
        let accepted = run(&mut rng, &queries, &queries, 1500, |input| {
            check_params(input);
            std::str::from_utf8(input).is_ok_and(|text| {
                OPERATIONS
                    .iter()
                    .any(|op| params::parse(op, Some(text)).is_ok())
            })
        });
        assert!(accepted > 150 && accepted < 1350, "queries: {accepted}");

        let (names, bodies): (Vec<&str>, Vec<Vec<u8>>) = body_seeds()
            .into_iter()
            .map(|(name, body)| (name, body.into_bytes()))
            .unzip();
        let accepted = run(&mut rng, &bodies, &bodies, 2000, |input| {
            check_requests(input);
            names
                .iter()
                .any(|name| request::decode(op(name), input).is_ok())
        });
        assert!(accepted > 50 && accepted < 1900, "bodies: {accepted}");

        // Mutants of the valid vectors, spliced with every vector.
        let facts = fact_seeds();
        let valid = vectors()["valid"].as_array().expect("a list").len();
        let accepted = run(&mut rng, &facts[..valid], &facts, 1500, |input| {
            check_facts(input);
            matches!(facts::decode(input), Ok(Some(_)))
        });
        assert!(accepted > 40 && accepted < 1400, "facts: {accepted}");

        let members = fact_json_seeds();
        let accepted = run(&mut rng, &members, &members, 800, |input| {
            check_fact_json(input);
            let Ok(mut json) = serde_json::from_slice::<Json>(input) else {
                return false;
            };
            if let Some(object) = json.as_object_mut() {
                object.remove("predicate");
            }
            Predicate::ALL
                .iter()
                .any(|p| Fact::from_json(*p, &json).is_ok())
        });
        assert!(accepted > 20 && accepted < 750, "fact JSON: {accepted}");

        // Only the seeds themselves open: any change to a sealed cursor is
        // refused.
        let cursors: Vec<Vec<u8>> = cursor_seeds().into_iter().map(String::into_bytes).collect();
        let unchanged = run(&mut rng, &cursors, &cursors, 400, |input| {
            check_cursor(input);
            let opened = std::str::from_utf8(input)
                .is_ok_and(|text| cursor::open(&CURSOR_KEY, CURSOR_SCOPE, text).is_ok());
            assert_eq!(opened, cursors.iter().any(|seed| seed == input));
            opened
        });
        assert!(unchanged < 40, "cursors: {unchanged}");
    }
}
