use super::*;

fn root() -> String {
    format!("rt_{}", "0123456789abcdef".repeat(2))
}

fn space(n: u8) -> String {
    format!("spc_{}", format!("{n:02x}").repeat(16))
}

fn entry(n: u8, position: u64) -> EntryRef {
    EntryRef {
        root_id: root(),
        space_id: space(n),
        position,
    }
}

fn hash(n: u8) -> Hash {
    Hash([n; 32])
}

fn publisher() -> String {
    format!("ed25519:{}", "ab".repeat(32))
}

fn request_id() -> String {
    format!("req_{}", "cd".repeat(32))
}

const AT: &str = "2026-11-22T14:10:10.123456Z";

/// One fact of every kind, and a second declaration with a subject and no
/// application.
fn samples() -> Vec<Fact> {
    vec![
        Fact::Content {
            artifact: Artifact {
                bytes: hash(1),
                kind: hash(2),
            },
        },
        Fact::Record(RecordFact {
            profile: "coord/note/1".into(),
            hash: hash(3),
            metadata: [("b", "2"), ("aa", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            publisher: publisher(),
            request_id: request_id(),
            request_digest: hash(4),
            accepted_at: AT.into(),
        }),
        Fact::Declaration(DeclarationFact {
            assertion_id: "as-1".into(),
            envelope: hash(5),
            artifact: Artifact {
                bytes: hash(1),
                kind: hash(2),
            },
            subject: None,
            publisher: publisher(),
            application: Application::Hosted(entry(7, 1)),
        }),
        Fact::Declaration(DeclarationFact {
            assertion_id: "as-2".into(),
            envelope: hash(6),
            artifact: Artifact {
                bytes: hash(1),
                kind: hash(2),
            },
            subject: Some("space#local".into()),
            publisher: publisher(),
            application: Application::None,
        }),
        Fact::Attempt(AttemptFact {
            release: entry(1, 1),
            request: hash(7),
            publisher: publisher(),
            request_id: request_id(),
            request_digest: hash(8),
            accepted_at: AT.into(),
        }),
        Fact::Bound {
            application: entry(7, 1),
            role: "source".into(),
            entry: entry(2, 1),
        },
        Fact::Produced {
            application: entry(7, 1),
            role: "report".into(),
            entry: entry(3, 2),
        },
        Fact::Result {
            application: entry(7, 1),
            outcome: Outcome::Completed,
            manifest: hash(9),
            resolution: hash(10),
            attestation: hash(11),
        },
        Fact::Staged {
            application: entry(7, 1),
        },
        Fact::Justifies {
            assertion_id: "as-1".into(),
            group: "g1".into(),
            premise: entry(4, MAX_POSITION),
            method: "inspection".into(),
        },
        Fact::Relation {
            assertion_id: "as-2".into(),
            kind: RelationKind::Supersedes,
            target: entry(5, 3),
        },
    ]
}

fn sample(predicate: Predicate) -> Fact {
    samples()
        .into_iter()
        .find(|f| f.predicate() == predicate)
        .unwrap()
}

/// The sample of `predicate` as a value with argument `index` (0 is the
/// first after the predicate) replaced by `with`.
fn with_argument(predicate: Predicate, index: usize, with: Value) -> Value {
    let Value::Tuple(mut children) = sample(predicate).to_value() else {
        unreachable!()
    };
    children[1 + index] = with;
    Value::Tuple(children)
}

fn refusal(value: &Value) -> (Predicate, String) {
    match decode(&value.to_bytes()) {
        Err(FactError::Argument {
            predicate, field, ..
        }) => (predicate, field),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn every_kind_round_trips() {
    let all = samples();
    for p in Predicate::ALL {
        assert!(all.iter().any(|f| f.predicate() == p), "no sample of {p}");
    }
    for fact in all {
        let bytes = fact.encode();
        // Canonical: the codec accepts it and re-encodes it unchanged.
        let value = lab_values::decode_fact(&bytes).unwrap();
        assert_eq!(lab_values::encode(&value), bytes);
        assert_eq!(value, fact.to_value());
        assert_eq!(decode(&bytes), Ok(Some(fact.clone())));
        let json = fact.to_json();
        assert_eq!(Fact::from_json(fact.predicate(), &json), Ok(fact.clone()));
        assert_eq!(fact.member_name(), fact.predicate().name());
        assert_eq!(
            fact.to_value().as_fact().unwrap().1.len(),
            fact.predicate().arguments().count()
        );
    }
}

#[test]
fn json_forms() {
    let declaration = sample(Predicate::Declaration);
    let json = declaration.to_json();
    assert_eq!(json["application"], entry(7, 1).to_json());
    assert!(json.get("subject").is_none());
    let Fact::Declaration(own) = &samples()[3] else {
        unreachable!()
    };
    let json = Fact::Declaration(own.clone()).to_json();
    assert_eq!(json["application"], Json::Null);
    assert_eq!(json["subject"], "space#local");

    assert_eq!(
        sample(Predicate::Bound).to_json(),
        json!({
            "application": entry(7, 1).to_json(),
            "role": "source",
            "bound": entry(2, 1).to_json(),
        })
    );
    assert_eq!(
        sample(Predicate::Content).to_json(),
        json!({"artifact": {
            "bytes": format!("sha256:{}", "01".repeat(32)),
            "type": format!("sha256:{}", "02".repeat(32)),
        }})
    );
    assert_eq!(
        sample(Predicate::Record).to_json()["metadata"],
        json!({"aa": "1", "b": "2"})
    );
}

#[test]
fn canonical_bytes_are_stable() {
    // [label "staged", [label "coord.entry.v1", text rt_.., text spc_.., int 1]]
    let staged = Fact::Staged {
        application: EntryRef {
            root_id: format!("rt_{}", "0".repeat(32)),
            space_id: format!("spc_{}", "0".repeat(32)),
            position: 1,
        },
    };
    let expected = [
        "82",
        "d827",
        "46",
        &hex::encode("staged"),
        "84",
        "d827",
        "4e",
        &hex::encode("coord.entry.v1"),
        "7823",
        &hex::encode(format!("rt_{}", "0".repeat(32))),
        "7824",
        &hex::encode(format!("spc_{}", "0".repeat(32))),
        "01",
    ]
    .concat();
    assert_eq!(hex::encode(staged.encode()), expected);

    // [label "content", [label "coord.artifact.v1", [label "sha256", bytes], [label "sha256", bytes]]]
    let content = sample(Predicate::Content);
    let hash = |n: &str| ["82d82746", &hex::encode("sha256"), "5820", &n.repeat(32)].concat();
    let expected = [
        "82",
        "d82747",
        &hex::encode("content"),
        "83",
        "d82751",
        &hex::encode("coord.artifact.v1"),
        &hash("01"),
        &hash("02"),
    ]
    .concat();
    assert_eq!(hex::encode(content.encode()), expected);

    // Metadata keys sort by encoded bytes: "b" (61 62) before "aa" (62 61 61).
    let Value::Tuple(children) = sample(Predicate::Record).to_value() else {
        unreachable!()
    };
    assert_eq!(hex::encode(children[3].to_bytes()), "a2616261326261616131");
    // The none label.
    assert_eq!(
        hex::encode(Application::None.to_value().to_bytes()),
        ["d8274d", &hex::encode("coord.none.v1")].concat()
    );
}

#[test]
fn predicate_labels() {
    for p in Predicate::ALL {
        let bytes = predicate_value(p);
        assert_eq!(&bytes[..2], &[0xd8, 0x27]);
        assert_eq!(bytes[2], 0x40 + p.name().len() as u8);
        assert_eq!(&bytes[3..], p.name().as_bytes());
        assert_eq!(Predicate::from_label(p.name().as_bytes()), Some(p));
        assert_eq!(Predicate::from_name(p.name()), Some(p));
        assert_eq!(lab_values::decode(&bytes).unwrap(), Value::label(p.name()));
    }
    assert_eq!(Predicate::Content.filter_base64(), "2CdHY29udGVudA==");
    assert_eq!(Predicate::Record.filter_base64(), "2CdGcmVjb3Jk");
    assert_eq!(Predicate::Bound.argument_index("entry"), Some(2));
    assert_eq!(Predicate::Record.argument_index("accepted_at"), Some(6));
    assert_eq!(Predicate::Record.argument_index("bound"), None);
    assert_eq!(Predicate::Produced.member("entry"), "produced");
    assert_eq!(Predicate::Result.member("application"), "application");
}

#[test]
fn foreign_facts_are_none() {
    let foreign = [
        lab_values::creation_fact("a", &space(0)),
        Value::Tuple(vec![Value::text("record"), Value::text("x")]).to_bytes(),
        Value::Tuple(vec![Value::label("records")]).to_bytes(),
        Value::Tuple(vec![Value::label("Record")]).to_bytes(),
        Value::Tuple(vec![Value::label(NONE_LABEL)]).to_bytes(),
        Value::Tuple(vec![Value::int(1u64), Value::text("content")]).to_bytes(),
        Value::Tuple(vec![Value::bytes(b"content".to_vec())]).to_bytes(),
    ];
    for bytes in foreign {
        assert_eq!(decode(&bytes), Ok(None), "{}", hex::encode(&bytes));
    }
    // Not a value with a fact's shape at all: no fact, as a value ...
    assert_eq!(Fact::from_value(&Value::label("content")), Ok(None));
    // ... and refused as bytes, with the codec's offset.
    let error = decode(&Value::label("content").to_bytes()).unwrap_err();
    assert!(matches!(error, FactError::Encoding(_)));
    assert_eq!(error.predicate(), None);
    // Non-canonical bytes: a one-byte int in a two-byte head.
    let error = decode(&[
        0x82, 0xd8, 0x27, 0x46, b's', b't', b'a', b'g', b'e', b'd', 0x18, 0x01,
    ])
    .unwrap_err();
    assert_eq!(error.details(), json!({"offset": 10}));
}

#[test]
fn every_malformed_argument_names_its_field() {
    use Predicate as P;
    let text = |t: &str| Value::text(t);
    let int = |n: u64| Value::int(n);
    let entry_with = |f: &dyn Fn(&mut Vec<Value>)| {
        let Value::Tuple(mut parts) = entry(7, 1).to_value() else {
            unreachable!()
        };
        f(&mut parts);
        Value::Tuple(parts)
    };
    let short_hash = Value::Tuple(vec![Value::label(HASH_LABEL), Value::bytes(vec![0; 31])]);
    let md5 = Value::Tuple(vec![Value::label("md5"), Value::bytes(vec![0; 32])]);
    let metadata_int: Map = [(text("k"), int(1))].into_iter().collect();
    let metadata_label_key: Map = [(Value::label("k"), text("v"))].into_iter().collect();

    let cases: Vec<(P, usize, Value, &str)> = vec![
        (P::Content, 0, hash(1).to_value(), "artifact"),
        (
            P::Content,
            0,
            Value::Tuple(vec![
                Value::label(ARTIFACT_LABEL),
                hash(1).to_value(),
                text("x"),
            ]),
            "artifact",
        ),
        (P::Record, 0, Value::label("p"), "profile"),
        (P::Record, 1, text(&hash(3).to_string()), "hash"),
        (P::Record, 1, short_hash.clone(), "hash"),
        (P::Record, 1, md5, "hash"),
        (P::Record, 2, Value::Map(metadata_int), "metadata"),
        (P::Record, 2, Value::Map(metadata_label_key), "metadata"),
        (P::Record, 2, Value::Null, "metadata"),
        (P::Record, 3, text(&publisher().to_uppercase()), "publisher"),
        (P::Record, 4, text("req_1"), "request_id"),
        (P::Record, 5, short_hash.clone(), "request_digest"),
        (P::Record, 6, text("2026-11-22T14:10:10Z"), "accepted_at"),
        (
            P::Record,
            6,
            text("2026-11-22T14:10:10.123Z"),
            "accepted_at",
        ),
        (
            P::Record,
            6,
            text("2026-02-29T14:10:10.123456Z"),
            "accepted_at",
        ),
        (P::Declaration, 0, text(""), "assertion_id"),
        (P::Declaration, 0, text(&"a".repeat(129)), "assertion_id"),
        (P::Declaration, 1, Value::Null, "envelope"),
        (P::Declaration, 2, Value::Null, "artifact"),
        (P::Declaration, 3, int(1), "subject"),
        (P::Declaration, 3, Value::label("s"), "subject"),
        (P::Declaration, 4, text("ed25519:"), "publisher"),
        (P::Declaration, 5, Value::Null, "application"),
        (P::Declaration, 5, text("coord.none.v1"), "application"),
        (
            P::Declaration,
            5,
            Value::label("coord.none.v2"),
            "application",
        ),
        (P::Attempt, 0, Value::label(NONE_LABEL), "release"),
        (P::Attempt, 0, entry_with(&|p| p[3] = int(0)), "release"),
        (
            P::Attempt,
            0,
            entry_with(&|p| p[3] = int(MAX_POSITION + 1)),
            "release",
        ),
        (
            P::Attempt,
            0,
            entry_with(&|p| p[3] = Value::int(-1i64)),
            "release",
        ),
        (P::Attempt, 0, entry_with(&|p| p[3] = text("1")), "release"),
        (
            P::Attempt,
            0,
            entry_with(&|p| p[1] = text("rt_0")),
            "release",
        ),
        (
            P::Attempt,
            0,
            entry_with(&|p| p[2] = text(&root())),
            "release",
        ),
        (
            P::Attempt,
            0,
            entry_with(&|p| p[0] = Value::label("coord.entry.v2")),
            "release",
        ),
        (
            P::Attempt,
            0,
            entry_with(&|p| p[0] = text("coord.entry.v1")),
            "release",
        ),
        (P::Attempt, 0, entry_with(&|p| p.push(int(1))), "release"),
        (
            P::Attempt,
            0,
            entry_with(&|p| {
                p.pop();
            }),
            "release",
        ),
        (
            P::Attempt,
            1,
            hash(7)
                .to_value()
                .to_bytes()
                .into_iter()
                .map(|b| int(u64::from(b)))
                .collect::<Vec<_>>()
                .into(),
            "request",
        ),
        (P::Attempt, 2, text(&request_id()), "publisher"),
        (P::Attempt, 3, text(&publisher()), "request_id"),
        (P::Attempt, 4, Value::bytes(vec![0; 32]), "request_digest"),
        (
            P::Attempt,
            5,
            text("2026-11-22T14:10:10.123456+00:00"),
            "accepted_at",
        ),
        (P::Bound, 0, Value::label(NONE_LABEL), "application"),
        (P::Bound, 1, Value::Null, "role"),
        (P::Bound, 2, Value::label(NONE_LABEL), "entry"),
        (P::Produced, 0, hash(1).to_value(), "application"),
        (P::Produced, 1, Value::label("report"), "role"),
        (P::Produced, 2, entry_with(&|p| p[3] = int(0)), "entry"),
        (P::Result, 0, Value::Null, "application"),
        (P::Result, 1, text("succeeded"), "outcome"),
        (P::Result, 1, text("Completed"), "outcome"),
        (P::Result, 1, Value::label("completed"), "outcome"),
        (P::Result, 2, Value::Null, "manifest"),
        (P::Result, 3, Value::Null, "resolution"),
        (P::Result, 4, short_hash, "attestation"),
        (P::Staged, 0, Value::label(NONE_LABEL), "application"),
        (P::Justifies, 0, int(1), "assertion_id"),
        (P::Justifies, 1, Value::Null, "group"),
        (P::Justifies, 2, entry_with(&|p| p[3] = int(0)), "premise"),
        (P::Justifies, 3, Value::Null, "method"),
        (P::Relation, 0, text(""), "assertion_id"),
        (P::Relation, 1, text("amends"), "kind"),
        (P::Relation, 2, Value::label(NONE_LABEL), "target"),
    ];
    for (predicate, index, with, field) in cases {
        let value = with_argument(predicate, index, with);
        assert_eq!(
            refusal(&value),
            (predicate, field.to_owned()),
            "{}",
            hex::encode(value.to_bytes())
        );
        let error = decode(&value.to_bytes()).unwrap_err();
        assert_eq!(error.field(), Some(field));
        assert_eq!(
            error.details(),
            json!({"predicate": predicate.name(), "field": field})
        );
    }
}

#[test]
fn arity_refusals() {
    for fact in samples() {
        let predicate = fact.predicate();
        let Value::Tuple(children) = fact.to_value() else {
            unreachable!()
        };
        let names: Vec<&str> = predicate.arguments().collect();
        // Each missing tail names its first missing argument.
        for keep in 0..names.len() {
            let short = Value::Tuple(children[..1 + keep].to_vec());
            assert_eq!(refusal(&short), (predicate, names[keep].to_owned()));
        }
        let mut long = children.clone();
        long.push(Value::Null);
        assert_eq!(
            refusal(&Value::Tuple(long)),
            (predicate, "arity".to_owned())
        );
    }
    // The first offending argument in order decides: a bad profile before a
    // missing accepted_at.
    let Value::Tuple(mut children) = sample(Predicate::Record).to_value() else {
        unreachable!()
    };
    children[1] = Value::Null;
    children.pop();
    assert_eq!(
        refusal(&Value::Tuple(children)),
        (Predicate::Record, "profile".to_owned())
    );
}

#[test]
fn json_refusals_name_members() {
    let refuse = |predicate: Predicate, json: Json| match Fact::from_json(predicate, &json) {
        Err(FactError::Argument { field, .. }) => field,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let mut bound = sample(Predicate::Bound).to_json();
    bound["bound"]["position"] = json!(0);
    assert_eq!(refuse(Predicate::Bound, bound), "bound");

    let mut bound = sample(Predicate::Bound).to_json();
    bound["entry"] = entry(1, 1).to_json();
    assert_eq!(refuse(Predicate::Bound, bound), "entry");

    let mut record = sample(Predicate::Record).to_json();
    record.as_object_mut().unwrap().remove("accepted_at");
    assert_eq!(refuse(Predicate::Record, record), "accepted_at");

    let mut record = sample(Predicate::Record).to_json();
    record["accepted_at"] = json!("2026-11-22T14:10:10Z");
    assert_eq!(refuse(Predicate::Record, record), "accepted_at");

    let mut record = sample(Predicate::Record).to_json();
    record["metadata"] = json!({"k": 1});
    assert_eq!(refuse(Predicate::Record, record), "metadata");

    let mut record = sample(Predicate::Record).to_json();
    record["hash"] = json!(format!("sha256:{}", "AB".repeat(32)));
    assert_eq!(refuse(Predicate::Record, record), "hash");

    let mut declaration = sample(Predicate::Declaration).to_json();
    declaration["subject"] = Json::Null;
    assert_eq!(refuse(Predicate::Declaration, declaration), "subject");

    let mut declaration = sample(Predicate::Declaration).to_json();
    declaration.as_object_mut().unwrap().remove("application");
    let Ok(Fact::Declaration(d)) = Fact::from_json(Predicate::Declaration, &declaration) else {
        panic!("absent application is none")
    };
    assert_eq!(d.application, Application::None);

    let mut artifact = sample(Predicate::Content).to_json();
    artifact["artifact"]["extra"] = json!("x");
    assert_eq!(refuse(Predicate::Content, artifact), "artifact");

    assert_eq!(refuse(Predicate::Staged, json!([])), "staged");
}

#[test]
fn references() {
    let hash = Hash::of(b"abc");
    assert_eq!(
        hash.to_string(),
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(Hash::parse(&hash.to_string()), Some(hash));
    assert_eq!(Hash::parse(&hash.to_string().to_uppercase()), None);
    assert_eq!(Hash::parse("sha256:ba78"), None);
    assert_eq!(
        Hash::parse(&hash.to_string().replace("sha256", "sha512")),
        None
    );

    assert_eq!(
        hash.to_value_bytes(),
        [
            &[0x82, 0xd8, 0x27, 0x46][..],
            b"sha256",
            &[0x58, 0x20],
            &hash.0
        ]
        .concat()
    );
    assert_eq!(text_value_bytes("a"), [0x61, 0x61]);
    assert_eq!(text_value_bytes(&request_id())[..2], [0x78, 68]);

    let e = entry(1, 5);
    assert_eq!(EntryRef::from_json(&e.to_json()), Ok(e.clone()));
    assert_eq!(EntryRef::from_value(&e.to_value()), Ok(e.clone()));
    assert_eq!(
        lab_values::decode(&e.to_value_bytes()).unwrap(),
        e.to_value()
    );
    let mut extra = e.to_json();
    extra["x"] = json!(1);
    assert!(EntryRef::from_json(&extra).is_err());
    let mut negative = e.to_json();
    negative["position"] = json!(-1);
    assert!(EntryRef::from_json(&negative).is_err());
    let mut float = e.to_json();
    float["position"] = json!(1.0);
    assert!(EntryRef::from_json(&float).is_err());

    let artifact = Artifact {
        bytes: hash,
        kind: Hash::of(b""),
    };
    assert_eq!(
        Artifact::from_json(&artifact.to_json()),
        Ok(artifact.clone())
    );
    assert_eq!(
        Artifact::from_value(&artifact.to_value()),
        Ok(artifact.clone())
    );
    assert_eq!(
        lab_values::decode(&artifact.to_value_bytes()).unwrap(),
        artifact.to_value()
    );
}
