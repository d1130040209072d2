//! Writes `contracts/coordination/auth-vectors.json` to standard output:
//!
//! ```text
//! cargo run -p lab-coord-auth --example auth_vectors > contracts/coordination/auth-vectors.json
//! ```
//!
//! Everything is derived from fixed seeds and fixed instants, so the output
//! is the same on every run. The crate's `tests/vectors.rs` checks the file
//! against the library without running this program.

use lab_coord_auth::{
    canonical_json, grant_signing_bytes, issue_grant, issue_grant_unchecked, sign_request,
    signing_record, BodyDigest, Carriage, Grant, GrantFields, GrantKind, Params, Principal, Proof,
    RequestFacts, SigningKey,
};
use serde_json::{json, Value};

const WORLD: &str = "lab";
const AUDIENCE: &str = "http://127.0.0.1:8094";
/// 2026-01-01T00:00:00Z: every proof's timestamp.
const T: u64 = 1_767_225_600;
const DAY: u64 = 86_400;

struct Key {
    name: &'static str,
    seed: u8,
}

const KEYS: [Key; 3] = [
    Key {
        name: "root",
        seed: 1,
    },
    Key {
        name: "delegate",
        seed: 2,
    },
    Key {
        name: "worker",
        seed: 3,
    },
];

fn signing_key(name: &str) -> SigningKey {
    let key = KEYS.iter().find(|k| k.name == name).expect("known key");
    SigningKey::from_bytes(&[key.seed; 32])
}

fn principal(name: &str) -> Principal {
    Principal::of(&signing_key(name))
}

fn labels(path: &[&str]) -> Vec<String> {
    path.iter().map(|s| s.to_string()).collect()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

struct NamedGrant {
    name: &'static str,
    grant: Grant,
    json: Value,
}

struct Grants(Vec<NamedGrant>);

impl Grants {
    fn get(&self, name: &str) -> &Grant {
        &self.0.iter().find(|g| g.name == name).expect(name).grant
    }

    /// Adds a grant signed by `signer`, deriving from the grant named
    /// `parent` (its digest), or from the grant named by `derives_from`
    /// without the attenuation check.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        name: &'static str,
        about: &str,
        signer: &str,
        to: &str,
        kind: GrantKind,
        path: &[&str],
        valid_until: u64,
        parent: Option<&str>,
        checked: bool,
    ) {
        let fields = GrantFields {
            principal: principal(to),
            kind,
            path: labels(path),
            valid_until,
        };
        let parent_grant = parent.map(|p| self.get(p).clone());
        let derives_from = parent_grant.as_ref().map(Grant::digest);
        let key = signing_key(signer);
        let grant = if checked {
            issue_grant(&key, WORLD, fields.clone(), parent_grant.as_ref()).unwrap()
        } else {
            issue_grant_unchecked(&key, WORLD, fields.clone(), derives_from.as_deref()).unwrap()
        };
        let bytes = grant_signing_bytes(
            WORLD,
            &fields,
            &Principal::of(&key),
            derives_from.as_deref(),
        )
        .unwrap();
        let json = json!({
            "name": name,
            "about": about,
            "signer": signer,
            "parent": parent,
            "derives_from": derives_from,
            "signing_json": String::from_utf8(bytes.clone()).unwrap(),
            "signing_hex": hex::encode(&bytes),
            "grant": grant.to_json(),
            "grant_json": String::from_utf8(canonical_json(&grant.to_json())).unwrap(),
            "digest": grant.digest(),
        });
        self.0.push(NamedGrant { name, grant, json });
    }
}

#[derive(Clone)]
struct Request {
    op: &'static str,
    params: Value,
    body: Vec<u8>,
}

impl Request {
    fn params(&self) -> Params {
        let json = lab_strict_json::parse(self.params.to_string().as_bytes()).unwrap();
        Params::from_json_object(json.as_object().unwrap()).unwrap()
    }

    fn to_json(&self) -> Value {
        json!({
            "op": self.op,
            "params": self.params,
            "body_hex": hex::encode(&self.body),
            "body_digest": BodyDigest::of(&self.body).to_string(),
        })
    }
}

/// How the header differs from the plain encoding of the carriage.
#[derive(Clone, Copy, PartialEq)]
enum Header {
    Plain,
    Missing,
    NotBase64,
    UnknownMember,
}

#[derive(Clone, Copy, PartialEq)]
enum Tamper {
    None,
    FlipBit,
    AddOrderToS,
    SmallOrderKey,
}

struct Vector {
    name: &'static str,
    about: &'static str,
    signed: Request,
    arrived: Option<Request>,
    audience: &'static str,
    tamper: Tamper,
    header: Header,
    grants: Vec<&'static str>,
    replay_seen: bool,
    now: u64,
    kind: GrantKind,
    path: Vec<String>,
    expected: &'static str,
}

fn entries(path: &[&str]) -> Request {
    Request {
        op: "entries",
        params: json!({"path": path, "limit": 10}),
        body: Vec::new(),
    }
}

fn publish(text: &str) -> Request {
    let body = json!({
        "operation_id": "note-1",
        "path": ["projects", "alpha", "workers", "w1", "notes", "n1"],
        "profile": "coord/note/1",
        "record": {"text": text},
    });
    Request {
        op: "publish",
        params: json!({}),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

const A1: [&str; 4] = ["projects", "alpha", "artifacts", "a1"];
const N1: [&str; 6] = ["projects", "alpha", "workers", "w1", "notes", "n1"];

fn base(name: &'static str, about: &'static str, expected: &'static str) -> Vector {
    Vector {
        name,
        about,
        signed: entries(&A1),
        arrived: None,
        audience: AUDIENCE,
        tamper: Tamper::None,
        header: Header::Plain,
        grants: vec!["root_worker_read_alpha"],
        replay_seen: false,
        now: T + 10,
        kind: GrantKind::Read,
        path: labels(&A1),
        expected,
    }
}

fn publish_vector(name: &'static str, about: &'static str, expected: &'static str) -> Vector {
    Vector {
        signed: publish("hello"),
        grants: vec!["delegate_worker_publish_w1", "root_delegate_publish_alpha"],
        kind: GrantKind::Publish,
        path: labels(&N1),
        ..base(name, about, expected)
    }
}

/// The order L of the base point, little-endian.
const ORDER: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

fn add_order_to_s(signature: &mut [u8; 64]) {
    let mut carry = 0u16;
    for (s, l) in signature[32..].iter_mut().zip(ORDER) {
        let sum = u16::from(*s) + u16::from(l) + carry;
        *s = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0);
}

fn grants_table() -> Grants {
    use GrantKind::*;
    let mut g = Grants(Vec::new());
    let far = T + DAY;
    g.add(
        "root_worker_read_alpha",
        "root lets worker read projects/alpha",
        "root",
        "worker",
        Read,
        &["projects", "alpha"],
        far,
        None,
        true,
    );
    g.add(
        "root_delegate_publish_alpha",
        "root lets delegate publish under projects/alpha",
        "root",
        "delegate",
        Publish,
        &["projects", "alpha"],
        far,
        None,
        true,
    );
    g.add(
        "delegate_worker_publish_w1",
        "delegate passes publish on its worker space to worker, for an hour",
        "delegate",
        "worker",
        Publish,
        &["projects", "alpha", "workers", "w1"],
        T + 3600,
        Some("root_delegate_publish_alpha"),
        true,
    );
    g.add(
        "root_worker_read_short",
        "root lets worker read projects/alpha until T+5",
        "root",
        "worker",
        Read,
        &["projects", "alpha"],
        T + 5,
        None,
        true,
    );
    g.add(
        "broken_null",
        "delegate's grant to worker signed with derives_from null: not the root, so no chain",
        "delegate",
        "worker",
        Publish,
        &["projects", "alpha", "workers", "w1"],
        T + 3600,
        None,
        false,
    );
    g.add(
        "broken_wrong_parent",
        "delegate's grant to worker naming root_worker_read_alpha, which delegate does not hold",
        "delegate",
        "worker",
        Publish,
        &["projects", "alpha", "workers", "w1"],
        T + 3600,
        Some("root_worker_read_alpha"),
        false,
    );
    g.add(
        "widened_path",
        "delegate's grant to worker on projects, broader than its parent's projects/alpha",
        "delegate",
        "worker",
        Publish,
        &["projects"],
        T + 3600,
        Some("root_delegate_publish_alpha"),
        false,
    );
    g.add(
        "widened_expiry",
        "delegate's grant to worker outliving its parent by one second",
        "delegate",
        "worker",
        Publish,
        &["projects", "alpha", "workers", "w1"],
        far + 1,
        Some("root_delegate_publish_alpha"),
        false,
    );
    g.add(
        "other_kind",
        "delegate's read grant to worker derived from a publish parent",
        "delegate",
        "worker",
        Read,
        &["projects", "alpha"],
        T + 3600,
        Some("root_delegate_publish_alpha"),
        false,
    );
    g.add(
        "cycle_a",
        "delegate to worker, derives from nothing (not the root)",
        "delegate",
        "worker",
        Read,
        &[],
        far,
        None,
        false,
    );
    g.add(
        "cycle_b",
        "worker to delegate, derived from cycle_a",
        "worker",
        "delegate",
        Read,
        &[],
        far,
        Some("cycle_a"),
        false,
    );
    g.add(
        "cycle_c",
        "delegate to worker, derived from cycle_b",
        "delegate",
        "worker",
        Read,
        &[],
        far,
        Some("cycle_b"),
        false,
    );
    g.add(
        "depth_1",
        "root to delegate, read on projects: depth 1",
        "root",
        "delegate",
        Read,
        &["projects"],
        far,
        None,
        true,
    );
    let depth_names = [
        "depth_1", "depth_2", "depth_3", "depth_4", "depth_5", "depth_6", "depth_7", "depth_8",
    ];
    for window in depth_names.windows(2) {
        g.add(
            window[1],
            "delegate to itself, derived from the previous level",
            "delegate",
            "delegate",
            Read,
            &["projects"],
            far,
            Some(window[0]),
            true,
        );
    }
    g.add(
        "depth_8_worker",
        "delegate to worker from depth_7: depth 8",
        "delegate",
        "worker",
        Read,
        &["projects", "alpha"],
        far,
        Some("depth_7"),
        true,
    );
    g.add(
        "depth_9_worker",
        "delegate to worker from depth_8: depth 9, beyond the limit",
        "delegate",
        "worker",
        Read,
        &["projects", "alpha"],
        far,
        Some("depth_8"),
        true,
    );
    g
}

fn vectors() -> Vec<Vector> {
    let depth = |last: &'static str, upto: usize| -> Vec<&'static str> {
        let mut names = vec![
            "depth_1", "depth_2", "depth_3", "depth_4", "depth_5", "depth_6", "depth_7", "depth_8",
        ];
        names.truncate(upto);
        names.push(last);
        names
    };
    vec![
        base(
            "ok_read_direct",
            "worker reads entries of an artifact under a root grant on projects/alpha",
            "ok",
        ),
        publish_vector(
            "ok_publish_chain",
            "worker publishes a note with a grant delegated by delegate",
            "ok",
        ),
        Vector {
            signed: Request {
                op: "retain",
                params: json!({"path": ["projects", "alpha", "workers", "w1"], "type": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}),
                body: b"hello bytes\n".to_vec(),
            },
            path: labels(&["projects", "alpha", "workers", "w1"]),
            ..publish_vector(
                "ok_retain_raw_body",
                "raw body bytes enter through their digest",
                "ok",
            )
        },
        Vector {
            now: T + 300,
            ..base(
                "ok_fresh_edge_past",
                "now is exactly 300 s after the timestamp",
                "ok",
            )
        },
        Vector {
            now: T - 300,
            ..base(
                "ok_fresh_edge_future",
                "now is exactly 300 s before the timestamp",
                "ok",
            )
        },
        Vector {
            now: T + 301,
            ..base(
                "unverified_stale",
                "now is 301 s after the timestamp",
                "unverified",
            )
        },
        Vector {
            now: T - 301,
            ..base(
                "unverified_future",
                "now is 301 s before the timestamp",
                "unverified",
            )
        },
        Vector {
            header: Header::Missing,
            ..base(
                "unverified_missing_header",
                "no Svc-Auth header",
                "unverified",
            )
        },
        Vector {
            header: Header::NotBase64,
            ..base(
                "unverified_bad_base64",
                "the first character of the header replaced by '*'",
                "unverified",
            )
        },
        Vector {
            header: Header::UnknownMember,
            ..base(
                "unverified_unknown_member",
                "the proof object carries an extra member \"expires\"",
                "unverified",
            )
        },
        Vector {
            tamper: Tamper::FlipBit,
            ..base(
                "unverified_bad_signature",
                "the first signature byte xor 0x01",
                "unverified",
            )
        },
        Vector {
            tamper: Tamper::AddOrderToS,
            ..base(
                "unverified_noncanonical_s",
                "S replaced by S + L (a lax verifier accepts it)",
                "unverified",
            )
        },
        Vector {
            tamper: Tamper::SmallOrderKey,
            ..base(
                "unverified_small_order_key",
                "principal is the identity point; R the identity and S zero satisfy a lax check",
                "unverified",
            )
        },
        Vector {
            arrived: Some(entries(&["projects", "alpha", "artifacts", "a2"])),
            ..base(
                "unverified_params_changed",
                "path parameter changed after signing",
                "unverified",
            )
        },
        Vector {
            arrived: Some(Request {
                params: json!({"path": A1}),
                ..entries(&A1)
            }),
            ..base(
                "unverified_param_removed",
                "limit parameter dropped after signing",
                "unverified",
            )
        },
        Vector {
            arrived: Some(publish("hellp")),
            ..publish_vector(
                "unverified_body_changed",
                "one byte of the body changed after signing",
                "unverified",
            )
        },
        Vector {
            arrived: Some(Request {
                op: "children",
                ..entries(&A1)
            }),
            ..base(
                "unverified_op_changed",
                "signed for entries, arrived as children",
                "unverified",
            )
        },
        Vector {
            audience: "http://127.0.0.1:8094/",
            ..base(
                "unverified_wrong_audience",
                "audience with a trailing slash",
                "unverified",
            )
        },
        Vector {
            replay_seen: true,
            ..base(
                "unverified_replayed",
                "the (principal, nonce) pair is already in the replay cache",
                "unverified",
            )
        },
        Vector {
            grants: vec!["root_worker_read_alpha"; 17],
            ..base("unverified_too_many_grants", "17 grants", "unverified")
        },
        Vector {
            grants: vec!["root_worker_read_alpha"; 16],
            ..base("ok_sixteen_grants", "16 grants is the limit", "ok")
        },
        Vector {
            grants: vec!["root_worker_read_short"],
            now: T + 4,
            ..base(
                "ok_grant_before_expiry",
                "now is one second before valid_until",
                "ok",
            )
        },
        Vector {
            grants: vec!["root_worker_read_short"],
            now: T + 5,
            ..base("denied_expired_grant", "now equals valid_until", "denied")
        },
        Vector {
            signed: entries(&["projects", "beta", "artifacts", "a1"]),
            path: labels(&["projects", "beta", "artifacts", "a1"]),
            ..base(
                "denied_sibling_path",
                "grant on projects/alpha, request on projects/beta",
                "denied",
            )
        },
        Vector {
            grants: vec!["root_worker_read_alpha"],
            ..publish_vector(
                "denied_wrong_kind",
                "publish with only a read grant",
                "denied",
            )
        },
        Vector {
            grants: vec!["broken_null", "root_delegate_publish_alpha"],
            ..publish_vector(
                "denied_broken_chain_null",
                "child signed with derives_from null",
                "denied",
            )
        },
        Vector {
            grants: vec![
                "broken_wrong_parent",
                "root_delegate_publish_alpha",
                "root_worker_read_alpha",
            ],
            ..publish_vector(
                "denied_broken_chain_wrong_parent",
                "child names a grant its issuer does not hold",
                "denied",
            )
        },
        Vector {
            grants: vec!["widened_path", "root_delegate_publish_alpha"],
            ..publish_vector(
                "denied_widened_path",
                "child path broader than its parent's",
                "denied",
            )
        },
        Vector {
            grants: vec!["widened_expiry", "root_delegate_publish_alpha"],
            ..publish_vector(
                "denied_widened_expiry",
                "child expiry later than its parent's",
                "denied",
            )
        },
        Vector {
            grants: vec!["other_kind", "root_delegate_publish_alpha"],
            ..base(
                "denied_other_kind",
                "read child of a publish parent",
                "denied",
            )
        },
        Vector {
            grants: vec!["cycle_a", "cycle_b", "cycle_c"],
            ..base(
                "denied_cycle",
                "grants that only lead to each other",
                "denied",
            )
        },
        Vector {
            grants: depth("depth_8_worker", 7),
            ..base("ok_depth_8", "a chain of 8 grants", "ok")
        },
        Vector {
            grants: depth("depth_9_worker", 8),
            ..base("denied_depth_9", "a chain of 9 grants", "denied")
        },
    ]
}

fn main() {
    let table = grants_table();
    let mut out = Vec::new();
    for (index, v) in vectors().into_iter().enumerate() {
        let nonce = format!("vector-{index:02}-nonce-0000000");
        let params = v.signed.params();
        let request = RequestFacts {
            op: v.signed.op,
            params: &params,
            body_digest: BodyDigest::of(&v.signed.body),
        };
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let (signer, proof) = if v.tamper == Tamper::SmallOrderKey {
            let mut signature = [0u8; 64];
            signature[0] = 1;
            let proof = Proof {
                principal: Principal::from_bytes(identity),
                nonce: nonce.clone(),
                timestamp: T,
                audience: v.audience.to_owned(),
                signature,
            };
            (None, proof)
        } else {
            let mut proof = sign_request(
                &signing_key("worker"),
                v.signed.op,
                &params,
                &v.signed.body,
                &nonce,
                T,
                v.audience,
            )
            .unwrap();
            match v.tamper {
                Tamper::FlipBit => proof.signature[0] ^= 1,
                Tamper::AddOrderToS => add_order_to_s(&mut proof.signature),
                _ => {}
            }
            (Some("worker"), proof)
        };
        let record = signing_record(&request, &proof.principal, &nonce, T, v.audience).unwrap();
        let grants: Vec<Grant> = v
            .grants
            .iter()
            .map(|name| table.get(name).clone())
            .collect();
        let carriage = Carriage::new(proof.clone(), grants);
        let header = match v.header {
            Header::Plain => Some(carriage.to_header()),
            Header::Missing => None,
            Header::NotBase64 => Some(format!("*{}", &carriage.to_header()[1..])),
            Header::UnknownMember => {
                let mut json = carriage.to_json();
                json["proof"]["expires"] = json!(T + 60);
                Some(b64(&canonical_json(&json)))
            }
        };
        let mut signed = v.signed.to_json();
        let object = signed.as_object_mut().unwrap();
        object.insert("principal".into(), json!(proof.principal.to_string()));
        object.insert("nonce".into(), json!(nonce));
        object.insert("timestamp".into(), json!(T));
        object.insert("audience".into(), json!(v.audience));
        out.push(json!({
            "name": v.name,
            "about": v.about,
            "signer": signer,
            "signed": signed,
            "signing_record": String::from_utf8(record.clone()).unwrap(),
            "signing_record_hex": hex::encode(&record),
            "tamper": match v.tamper {
                Tamper::None => Value::Null,
                Tamper::FlipBit => json!("flip_bit"),
                Tamper::AddOrderToS => json!("s_plus_l"),
                Tamper::SmallOrderKey => json!("small_order_key"),
            },
            "signature": b64(&proof.signature),
            "grants": v.grants,
            "header_recipe": match v.header {
                Header::Plain => "carriage",
                Header::Missing => "absent",
                Header::NotBase64 => "first_char_star",
                Header::UnknownMember => "proof_extra_member",
            },
            "header": header,
            "arrived": v.arrived.as_ref().map(Request::to_json),
            "replay_seen": v.replay_seen,
            "check": {"now": v.now, "kind": v.kind.as_str(), "path": v.path},
            "expected": v.expected,
        }));
    }
    let document = json!({
        "about": "Coordination service authentication vectors; recipes in contracts/coordination/AUTH.md. Generated by components/coord-auth/examples/auth_vectors.rs.",
        "world": WORLD,
        "audience": AUDIENCE,
        "timestamp": T,
        "freshness_seconds": lab_coord_auth::FRESHNESS_SECONDS,
        "replay_retention_seconds": lab_coord_auth::REPLAY_RETENTION_SECONDS,
        "keys": KEYS.iter().map(|k| json!({
            "name": k.name,
            "seed_hex": hex::encode([k.seed; 32]),
            "principal": principal(k.name).to_string(),
        })).collect::<Vec<_>>(),
        "root": principal("root").to_string(),
        "grants": table.0.iter().map(|g| g.json.clone()).collect::<Vec<_>>(),
        "vectors": out,
    });
    println!("{}", serde_json::to_string_pretty(&document).unwrap());
}
