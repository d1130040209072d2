//! The evaluation of a view (HTTP.md decision 28): pure over the selected
//! occurrences as read, so it is tested without a journal.
//!
//! Invariants:
//! 1. The items come out in query order: claims sorted by (artifact bytes,
//!    subject with null first, property, artifact type, selection order),
//!    then relation-only declarations, then records, each in selection
//!    order. The items of one key are therefore contiguous, and so are
//!    those of one artifact, one (artifact, subject) and one (artifact,
//!    subject, property).
//! 2. Only relations between selected declarations count, and only under
//!    `relations: honor`; every selected declaration's relations count,
//!    whatever its own state.
//! 3. Values are compared by their RFC 8785 form.

use crate::facts::{Artifact, EntryRef, RelationKind};
use lab_coord_auth::canonical_json;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// How a key with differing active claims is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// Only agreement decides.
    Disagree,
    /// The first listed publisher with an active claim decides.
    PreferPublishers(Vec<String>),
}

/// The normalized `rules` of a compose request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub conflict: Conflict,
    /// `relations: honor`.
    pub honor_relations: bool,
}

impl Rules {
    /// Every member present, `publishers` `[]` when the rule takes none.
    pub fn to_json(&self) -> Value {
        let (conflict, publishers) = match &self.conflict {
            Conflict::Disagree => ("disagree", Vec::new()),
            Conflict::PreferPublishers(p) => ("prefer_publishers", p.clone()),
        };
        json!({
            "conflict": conflict,
            "publishers": publishers,
            "relations": if self.honor_relations { "honor" } else { "ignore" },
        })
    }
}

/// A claim: what a declaration says about its key.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub property: String,
    pub value: Value,
}

/// A selected declaration as read from its fact and envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub assertion_id: String,
    pub publisher: String,
    pub artifact: Artifact,
    pub subject: Option<String>,
    /// None for a pure relation.
    pub claim: Option<Claim>,
    pub relations: Vec<(RelationKind, EntryRef)>,
}

/// What a selection is.
#[derive(Debug, Clone, PartialEq)]
pub enum Selected {
    Declaration(Declared),
    /// The Record object of the selected `record` fact.
    Record(Value),
}

/// One selection with the path of its space below the world.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub entry: EntryRef,
    pub path: Vec<String>,
    pub selected: Selected,
}

/// The evaluated view: its items in query order, how many of them are
/// claims (the first `claims` items), and its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub items: Vec<Value>,
    pub claims: usize,
    pub counts: Value,
}

/// The identity of a key, in sort order: (artifact bytes, subject,
/// property, artifact type).
type Key = (String, Option<String>, String, String);

fn key_of(d: &Declared, claim: &Claim) -> Key {
    (
        d.artifact.bytes.to_string(),
        d.subject.clone(),
        claim.property.clone(),
        d.artifact.kind.to_string(),
    )
}

fn kind_name(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::Supersedes => "supersedes",
        RelationKind::Challenges => "challenges",
        RelationKind::Withdraws => "withdraws",
    }
}

/// The status of one key.
struct KeyStatus {
    status: &'static str,
    value: Option<Value>,
    /// Selection index of the adopting claim.
    adopted_by: Option<usize>,
}

pub fn evaluate(selections: &[Selection], rules: &Rules) -> Evaluated {
    let canonical: Vec<Option<Vec<u8>>> = selections
        .iter()
        .map(|s| match &s.selected {
            Selected::Declaration(Declared {
                claim: Some(claim), ..
            }) => Some(canonical_json(&claim.value)),
            _ => None,
        })
        .collect();
    let index_of: HashMap<&EntryRef, usize> = selections
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.selected, Selected::Declaration(_)))
        .map(|(i, s)| (&s.entry, i))
        .collect();
    // Relations among selected declarations: against[target] = (by, kind).
    let mut against: Vec<Vec<(usize, RelationKind)>> = vec![Vec::new(); selections.len()];
    if rules.honor_relations {
        for (by, s) in selections.iter().enumerate() {
            let Selected::Declaration(d) = &s.selected else {
                continue;
            };
            for (kind, target) in &d.relations {
                if let Some(&t) = index_of.get(target) {
                    if t != by {
                        against[t].push((by, *kind));
                    }
                }
            }
        }
    }
    let retired: Vec<bool> = against
        .iter()
        .map(|a| {
            a.iter()
                .any(|(_, k)| matches!(k, RelationKind::Supersedes | RelationKind::Withdraws))
        })
        .collect();
    let challenged: Vec<bool> = against
        .iter()
        .map(|a| a.iter().any(|(_, k)| *k == RelationKind::Challenges))
        .collect();

    // Claims grouped by key, each group in selection order.
    let mut keys: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    let mut relation_only = Vec::new();
    let mut records = Vec::new();
    for (i, s) in selections.iter().enumerate() {
        match &s.selected {
            Selected::Declaration(d) => match &d.claim {
                Some(claim) => keys.entry(key_of(d, claim)).or_default().push(i),
                None => relation_only.push(i),
            },
            Selected::Record(_) => records.push(i),
        }
    }
    let publisher_of = |i: usize| match &selections[i].selected {
        Selected::Declaration(d) => d.publisher.as_str(),
        Selected::Record(_) => "",
    };
    // Whether claims agree: equal values and none challenged.
    let agreeing = |group: &[usize]| {
        group.iter().all(|&i| canonical[i] == canonical[group[0]])
            && !group.iter().any(|&i| challenged[i])
    };
    let value_of = |i: usize| match &selections[i].selected {
        Selected::Declaration(Declared {
            claim: Some(claim), ..
        }) => claim.value.clone(),
        _ => Value::Null,
    };

    let mut statuses: HashMap<usize, (usize, KeyStatus)> = HashMap::new();
    let mut counts = BTreeMap::from([
        ("agreed", 0u64),
        ("adopted", 0),
        ("disagreeing", 0),
        ("retracted", 0),
    ]);
    let mut order = Vec::with_capacity(selections.len());
    for members in keys.values() {
        let active: Vec<usize> = members.iter().copied().filter(|&i| !retired[i]).collect();
        let status = if active.is_empty() {
            KeyStatus {
                status: "retracted",
                value: None,
                adopted_by: None,
            }
        } else {
            let decided: Option<(&'static str, Vec<usize>)> = match &rules.conflict {
                Conflict::Disagree => Some(("agreed", active.clone())),
                Conflict::PreferPublishers(publishers) => publishers.iter().find_map(|p| {
                    let theirs: Vec<usize> = active
                        .iter()
                        .copied()
                        .filter(|&i| publisher_of(i) == p)
                        .collect();
                    (!theirs.is_empty()).then_some(("adopted", theirs))
                }),
            };
            match decided {
                Some((status, group)) if agreeing(&group) => KeyStatus {
                    status,
                    value: Some(value_of(group[0])),
                    adopted_by: Some(group[0]),
                },
                _ => KeyStatus {
                    status: "disagreeing",
                    value: None,
                    adopted_by: None,
                },
            }
        };
        *counts.get_mut(status.status).expect("a counted status") += 1;
        let first = members[0];
        for &i in members {
            statuses.insert(
                i,
                (
                    first,
                    KeyStatus {
                        status: status.status,
                        value: status.value.clone(),
                        adopted_by: status.adopted_by,
                    },
                ),
            );
            order.push(i);
        }
    }
    let claims = order.len();
    order.extend(&relation_only);
    order.extend(&records);
    let ordinal_of: HashMap<usize, usize> =
        order.iter().enumerate().map(|(o, &i)| (i, o)).collect();

    let items = order
        .iter()
        .map(|&i| {
            let s = &selections[i];
            let Selected::Declaration(d) = &s.selected else {
                let Selected::Record(record) = &s.selected else {
                    unreachable!("a selection is a declaration or a record")
                };
                return json!({
                    "kind": "record",
                    "selection": s.entry.to_json(),
                    "path": s.path,
                    "state": "record",
                    "record": record,
                });
            };
            let mut against: Vec<(usize, Value)> = against[i]
                .iter()
                .map(|&(by, kind)| {
                    (
                        ordinal_of[&by],
                        json!({
                            "selection": selections[by].entry.to_json(),
                            "relation": kind_name(kind),
                            "ordinal": ordinal_of[&by],
                        }),
                    )
                })
                .collect();
            against.sort_by_key(|(o, _)| *o);
            let against: Vec<Value> = against.into_iter().map(|(_, v)| v).collect();
            let (state, key) = match statuses.get(&i) {
                None => ("relation", Value::Null),
                Some((_, key)) => {
                    let state = if retired[i] {
                        "retired"
                    } else if key.status == "disagreeing" {
                        "disagreeing"
                    } else if key.adopted_by == Some(i) {
                        "adopted"
                    } else if key
                        .value
                        .as_ref()
                        .is_some_and(|v| canonical_json(v) == *canonical[i].as_ref().unwrap())
                    {
                        "agreeing"
                    } else {
                        "overruled"
                    };
                    let key = json!({
                        "status": key.status,
                        "value": key.value,
                        "adopted_by": key.adopted_by.map(|a| selections[a].entry.to_json()),
                    });
                    (state, key)
                }
            };
            let (property, value) = match &d.claim {
                Some(claim) => (json!(claim.property), claim.value.clone()),
                None => (Value::Null, Value::Null),
            };
            json!({
                "kind": "declaration",
                "selection": s.entry.to_json(),
                "path": s.path,
                "state": state,
                "assertion_id": d.assertion_id,
                "publisher": d.publisher,
                "artifact": d.artifact.to_json(),
                "subject": d.subject,
                "property": property,
                "value": value,
                "key": key,
                "against": against,
            })
        })
        .collect();
    let declarations = selections.len() - records.len();
    let counts = json!({
        "selections": selections.len(),
        "declarations": declarations,
        "records": records.len(),
        "keys": keys.len(),
        "agreed": counts["agreed"],
        "adopted": counts["adopted"],
        "disagreeing": counts["disagreeing"],
        "retracted": counts["retracted"],
    });
    Evaluated {
        items,
        claims,
        counts,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::facts::Hash;

    pub(crate) fn entry(position: u64) -> EntryRef {
        EntryRef {
            root_id: format!("rt_{}", "a".repeat(32)),
            space_id: format!("spc_{}", "b".repeat(32)),
            position,
        }
    }

    pub(crate) fn artifact(n: u8) -> Artifact {
        Artifact {
            bytes: Hash([n; 32]),
            kind: Hash([0; 32]),
        }
    }

    pub(crate) fn claim(
        position: u64,
        publisher: &str,
        artifact_n: u8,
        subject: Option<&str>,
        property: &str,
        value: Value,
    ) -> Selection {
        Selection {
            entry: entry(position),
            path: vec!["projects".into(), "p".into()],
            selected: Selected::Declaration(Declared {
                assertion_id: format!("asr_{position:064}"),
                publisher: publisher.into(),
                artifact: artifact(artifact_n),
                subject: subject.map(String::from),
                claim: Some(Claim {
                    property: property.into(),
                    value,
                }),
                relations: Vec::new(),
            }),
        }
    }

    fn relate(mut s: Selection, kind: RelationKind, target: u64) -> Selection {
        if let Selected::Declaration(d) = &mut s.selected {
            d.relations.push((kind, entry(target)));
        }
        s
    }

    fn pure(position: u64, publisher: &str, kind: RelationKind, target: u64) -> Selection {
        let mut s = claim(position, publisher, 1, None, "x", Value::Null);
        if let Selected::Declaration(d) = &mut s.selected {
            d.claim = None;
        }
        relate(s, kind, target)
    }

    fn record(position: u64) -> Selection {
        Selection {
            entry: entry(position),
            path: vec!["projects".into()],
            selected: Selected::Record(json!({ "profile": "lab/x/1" })),
        }
    }

    fn disagree() -> Rules {
        Rules {
            conflict: Conflict::Disagree,
            honor_relations: true,
        }
    }

    fn states(e: &Evaluated) -> Vec<(u64, String)> {
        e.items
            .iter()
            .map(|i| {
                (
                    i["selection"]["position"].as_u64().unwrap(),
                    i["state"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn s(list: &[(u64, &str)]) -> Vec<(u64, String)> {
        list.iter().map(|(p, s)| (*p, s.to_string())).collect()
    }

    #[test]
    fn agreement_and_order() {
        let e = evaluate(
            &[
                record(9),
                claim(1, "a", 2, None, "license", json!("MIT")),
                claim(2, "b", 1, Some("x#y"), "license", json!("MIT")),
                claim(3, "b", 1, None, "license", json!("MIT")),
                claim(4, "c", 1, None, "license", json!({"b": 1, "a": 2})),
                claim(5, "c", 1, None, "size", json!(3)),
            ],
            &disagree(),
        );
        // artifact 1 before 2, subject null first, property order,
        // selection order; records last.
        assert_eq!(
            states(&e),
            s(&[
                (3, "disagreeing"),
                (4, "disagreeing"),
                (5, "adopted"),
                (2, "adopted"),
                (1, "adopted"),
                (9, "record")
            ])
        );
        assert_eq!(e.claims, 5);
        assert_eq!(e.items[2]["key"]["status"], "agreed");
        assert_eq!(e.items[2]["key"]["value"], 3);
        assert_eq!(e.counts["keys"], 4);
        assert_eq!(e.counts["agreed"], 3);
        assert_eq!(e.counts["disagreeing"], 1);
        assert_eq!(e.counts["records"], 1);
        assert_eq!(e.counts["declarations"], 5);
        assert_eq!(e.items[0]["key"]["value"], Value::Null);
        assert_eq!(e.items[0]["key"]["adopted_by"], Value::Null);
    }

    #[test]
    fn equal_values_agree_and_the_first_adopts() {
        let e = evaluate(
            &[
                claim(1, "a", 1, None, "p", json!({"x": [1, 2]})),
                claim(2, "b", 1, None, "p", json!({"x": [1, 2]})),
            ],
            &disagree(),
        );
        assert_eq!(states(&e), s(&[(1, "adopted"), (2, "agreeing")]));
        assert_eq!(e.items[1]["key"]["adopted_by"]["position"], 1);
    }

    #[test]
    fn relations_retire_and_challenge() {
        let sel = [
            claim(1, "a", 1, None, "p", json!(1)),
            relate(
                claim(2, "a", 1, None, "p", json!(2)),
                RelationKind::Supersedes,
                1,
            ),
            claim(3, "b", 1, None, "q", json!(1)),
            pure(4, "c", RelationKind::Challenges, 3),
            claim(5, "d", 1, None, "r", json!(1)),
            pure(6, "d", RelationKind::Withdraws, 5),
            // A relation to an unselected declaration is not counted.
            pure(7, "d", RelationKind::Withdraws, 99),
        ];
        let e = evaluate(&sel, &disagree());
        assert_eq!(
            states(&e),
            s(&[
                (1, "retired"),
                (2, "adopted"),
                (3, "disagreeing"),
                (5, "retired"),
                (4, "relation"),
                (6, "relation"),
                (7, "relation")
            ])
        );
        assert_eq!(e.counts["retracted"], 1);
        assert_eq!(e.counts["disagreeing"], 1);
        assert_eq!(e.items[0]["against"][0]["selection"]["position"], 2);
        assert_eq!(e.items[0]["against"][0]["relation"], "supersedes");
        assert_eq!(e.items[0]["against"][0]["ordinal"], 1);
        assert_eq!(e.items[2]["against"][0]["ordinal"], 4);
        // Ignored, the same selections are plain claims.
        let ignoring = Rules {
            honor_relations: false,
            ..disagree()
        };
        let e = evaluate(&sel, &ignoring);
        assert_eq!(
            states(&e),
            s(&[
                (1, "disagreeing"),
                (2, "disagreeing"),
                (3, "adopted"),
                (5, "adopted"),
                (4, "relation"),
                (6, "relation"),
                (7, "relation")
            ])
        );
        assert!(e.items[0]["against"].as_array().unwrap().is_empty());
    }

    #[test]
    fn preferred_publishers_decide() {
        let sel = [
            claim(1, "a", 1, None, "p", json!(1)),
            claim(2, "b", 1, None, "p", json!(2)),
            claim(3, "b", 1, None, "p", json!(2)),
            claim(4, "a", 1, None, "q", json!(1)),
            claim(5, "a", 1, None, "q", json!(2)),
            claim(6, "z", 1, None, "r", json!(2)),
        ];
        let rules = Rules {
            conflict: Conflict::PreferPublishers(vec!["b".into(), "a".into()]),
            honor_relations: true,
        };
        let e = evaluate(&sel, &rules);
        assert_eq!(
            states(&e),
            s(&[
                (1, "overruled"),
                (2, "adopted"),
                (3, "agreeing"),
                (4, "disagreeing"),
                (5, "disagreeing"),
                (6, "disagreeing")
            ])
        );
        assert_eq!(e.items[0]["key"]["status"], "adopted");
        assert_eq!(e.items[0]["key"]["value"], 2);
        assert_eq!(e.counts["adopted"], 1);
        assert_eq!(e.counts["disagreeing"], 2);
        assert_eq!(
            rules.to_json(),
            json!({"conflict": "prefer_publishers", "publishers": ["b", "a"], "relations": "honor"})
        );
    }
}
