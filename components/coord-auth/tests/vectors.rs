//! Checks every vector of `contracts/coordination/auth-vectors.json`
//! against the library: the grant signing bytes, signatures and digests, the
//! signing records, the header encoding, and the outcome at the stated
//! `now`.

use std::collections::HashMap;
use std::path::PathBuf;

use lab_coord_auth::{
    canonical_json, grant_signing_bytes, sign_request, signing_record, AuthError, BodyDigest,
    Carriage, Grant, GrantFields, GrantKind, MemoryReplayCache, Params, Principal, Proof,
    ReplayCache, RequestFacts, SigningKey, Verifier,
};
use serde_json::Value;

fn document() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../contracts/coordination/auth-vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn s(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

fn u(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not an integer: {value}"))
}

fn labels(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|l| s(l).to_owned())
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn keys(doc: &Value) -> HashMap<String, SigningKey> {
    doc["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let seed: [u8; 32] = hex::decode(s(&k["seed_hex"])).unwrap().try_into().unwrap();
            let key = SigningKey::from_bytes(&seed);
            assert_eq!(Principal::of(&key).to_string(), s(&k["principal"]));
            (s(&k["name"]).to_owned(), key)
        })
        .collect()
}

/// A grant's wire object decoded through the carriage decoder, so the test
/// reads grants exactly as the service would.
fn decode_grant(value: &Value) -> Grant {
    let proof = serde_json::json!({
        "principal": format!("ed25519:{}", "00".repeat(32)),
        "nonce": "A".repeat(22),
        "timestamp": 0,
        "audience": "",
        "signature": b64(&[0; 64]),
    });
    let carriage = serde_json::json!({"proof": proof, "grants": [value]});
    let mut carriage = Carriage::from_json_bytes(&canonical_json(&carriage)).unwrap();
    carriage.grants.remove(0)
}

fn params(value: &Value) -> Params {
    let json = lab_strict_json::parse(value.to_string().as_bytes()).unwrap();
    Params::from_json_object(json.as_object().unwrap()).unwrap()
}

#[test]
fn every_grant_matches_its_recipe() {
    let doc = document();
    let keys = keys(&doc);
    let world = s(&doc["world"]);
    let mut digests: HashMap<String, String> = HashMap::new();
    for entry in doc["grants"].as_array().unwrap() {
        let name = s(&entry["name"]);
        let grant = decode_grant(&entry["grant"]);
        let signer = &keys[s(&entry["signer"])];
        assert_eq!(grant.issuer, Principal::of(signer), "{name}");

        let derives_from = entry["derives_from"].as_str();
        match entry["parent"].as_str() {
            Some(parent) => assert_eq!(derives_from, Some(digests[parent].as_str()), "{name}"),
            None => assert_eq!(derives_from, None, "{name}"),
        }
        let fields = GrantFields {
            principal: grant.principal,
            kind: grant.kind,
            path: grant.path.clone(),
            valid_until: grant.valid_until,
        };
        let bytes = grant_signing_bytes(world, &fields, &grant.issuer, derives_from).unwrap();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            s(&entry["signing_json"]),
            "{name}"
        );
        assert_eq!(hex::encode(&bytes), s(&entry["signing_hex"]), "{name}");
        // Ed25519 is deterministic: the same key over the same bytes.
        use ed25519_dalek::Signer as _;
        assert_eq!(signer.sign(&bytes).to_bytes(), grant.signature, "{name}");
        assert!(grant.signature_verifies(world, derives_from), "{name}");

        assert_eq!(
            std::str::from_utf8(&canonical_json(&grant.to_json())).unwrap(),
            s(&entry["grant_json"]),
            "{name}"
        );
        assert_eq!(grant.digest(), s(&entry["digest"]), "{name}");
        digests.insert(name.to_owned(), grant.digest());
    }
}

#[test]
fn every_vector_has_its_outcome() {
    let doc = document();
    let keys = keys(&doc);
    let world = s(&doc["world"]);
    let root = Principal::parse(s(&doc["root"])).unwrap();
    let verifier = Verifier::new(world, root, s(&doc["audience"]));
    let table: HashMap<&str, Grant> = doc["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (s(&g["name"]), decode_grant(&g["grant"])))
        .collect();

    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 30);
    for v in vectors {
        let name = s(&v["name"]);
        let signed = &v["signed"];
        let signed_params = params(&signed["params"]);
        let body = hex::decode(s(&signed["body_hex"])).unwrap();
        assert_eq!(
            BodyDigest::of(&body).to_string(),
            s(&signed["body_digest"]),
            "{name}"
        );
        let principal = Principal::parse(s(&signed["principal"])).unwrap();
        let nonce = s(&signed["nonce"]);
        let timestamp = u(&signed["timestamp"]);
        let audience = s(&signed["audience"]);

        // The signing record from the signed inputs.
        let request = RequestFacts {
            op: s(&signed["op"]),
            params: &signed_params,
            body_digest: BodyDigest::of(&body),
        };
        let record = signing_record(&request, &principal, nonce, timestamp, audience).unwrap();
        assert_eq!(
            std::str::from_utf8(&record).unwrap(),
            s(&v["signing_record"]),
            "{name}"
        );
        assert_eq!(hex::encode(&record), s(&v["signing_record_hex"]), "{name}");

        // The signature: the signer's own unless the vector tampers with it.
        let signature: [u8; 64] = lab_strict_json::decode_canonical_base64(s(&v["signature"]))
            .unwrap()
            .try_into()
            .unwrap();
        if let Some(signer) = v["signer"].as_str() {
            let proof = sign_request(
                &keys[signer],
                request.op,
                &signed_params,
                &body,
                nonce,
                timestamp,
                audience,
            )
            .unwrap();
            assert_eq!(proof.principal, principal, "{name}");
            assert_eq!(
                proof.signature == signature,
                v["tamper"].is_null(),
                "{name}"
            );
        }

        // The header from the proof and the named grants.
        let grants: Vec<Grant> = v["grants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| table[s(g)].clone())
            .collect();
        let carriage = Carriage::new(
            Proof {
                principal,
                nonce: nonce.to_owned(),
                timestamp,
                audience: audience.to_owned(),
                signature,
            },
            grants,
        );
        let header = v["header"].as_str();
        match s(&v["header_recipe"]) {
            "carriage" => assert_eq!(header, Some(carriage.to_header().as_str()), "{name}"),
            "absent" => assert_eq!(header, None, "{name}"),
            "first_char_star" => assert!(header.unwrap().starts_with('*'), "{name}"),
            "proof_extra_member" => {}
            other => panic!("{name}: unknown recipe {other}"),
        }

        // What arrived, and the outcome.
        let arrived = if v["arrived"].is_null() {
            signed
        } else {
            &v["arrived"]
        };
        let arrived_params = params(&arrived["params"]);
        let arrived_body = hex::decode(s(&arrived["body_hex"])).unwrap();
        let arrived_request = RequestFacts {
            op: s(&arrived["op"]),
            params: &arrived_params,
            body_digest: BodyDigest::of(&arrived_body),
        };
        let mut cache = MemoryReplayCache::new();
        if v["replay_seen"].as_bool().unwrap() {
            assert!(cache
                .check_and_remember(&principal.to_string(), nonce, timestamp + 600)
                .unwrap());
        }
        let check = &v["check"];
        let kind = GrantKind::parse(s(&check["kind"])).unwrap();
        let outcome = Carriage::from_header(header.map(str::as_bytes))
            .map_err(AuthError::Unverified)
            .and_then(|carriage| {
                verifier.check(
                    &carriage,
                    &arrived_request,
                    kind,
                    &labels(&check["path"]),
                    u(&check["now"]),
                    &mut cache,
                )
            });
        let got = match &outcome {
            Ok(_) => "ok",
            Err(AuthError::Unverified(_)) => "unverified",
            Err(AuthError::Denied) => "denied",
            Err(other) => panic!("{name}: {other:?}"),
        };
        assert_eq!(got, s(&v["expected"]), "{name}: {outcome:?}");
    }
}
