//! Snapshot manifests: the explicit prefixes a `query` reads.
//!
//! A manifest lists its scope and every covered descendant in depth-first
//! preorder by child creation, each with the cutoff it is read through.
//! Its normalized document has every member present (`max_depth` included)
//! and every path an array of keys.
//!
//! `max_depth` in a `query` request is absent or null to select all
//! descendants; a manifest always holds a number, so that request
//! normalizes to [`UNBOUNDED_DEPTH`] (2^53-1, deeper than any tree a store
//! of at most 2^53-1 positions per journal can hold within the bounds).

use std::collections::HashSet;
use std::io::{self, Write};

use lab_strict_json::Json;
#[cfg(test)]
use serde_json::{json, Value};

use crate::ids::{RootId, SpaceId};
use crate::refusal::Refusal;
use crate::requests::{self, Members, SpaceRef, MAX_POSITION};
use sha2::{Digest, Sha256};

/// The `max_depth` of a query that selects all descendants.
pub const UNBOUNDED_DEPTH: u64 = MAX_POSITION;
/// Greatest number of spaces in one manifest.
pub const MAX_SNAPSHOT_SPACES: usize = 4096;
/// Greatest canonical JSON size of one manifest, in bytes.
pub const MAX_SNAPSHOT_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub scope: SpaceRef,
    pub max_depth: u64,
    /// Depth-first preorder by child creation, the scope first.
    pub spaces: Vec<Listed>,
}

/// One covered space and the cutoff it is read through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub root: RootId,
    pub space: SpaceId,
    /// Keys from the root.
    pub path: Vec<String>,
    pub through: u64,
}

/// Decodes the manifest member `json` at `field` (its dotted path).
///
/// Order: members `scope`, `max_depth` (required integer), `spaces`; the
/// space count (over [`MAX_SNAPSHOT_SPACES`] is `limit_exceeded` before any
/// element is read); each element `{space: {root_id, space_id, path},
/// through}`; the canonical size (over [`MAX_SNAPSHOT_BYTES`] is
/// `limit_exceeded`); then the tree shape that needs no storage:
/// - the first element is the scope, and every element has the scope's root;
/// - no space ID and no path is listed twice;
/// - each later element's path extends the path of an element on the
///   current preorder branch by exactly one key (so it is below the scope,
///   reachable, and its subtree is contiguous);
/// - no element lies more than `max_depth` keys below the scope.
///
/// Whether the listed spaces exist, agree with the creation records, list
/// every visible child in creation order and stop at committed cutoffs is
/// for the operation to check against storage.
pub fn decode(json: Json, field: &str) -> Result<Manifest, Refusal> {
    let mut members = Members::nested(json, field, &["scope", "max_depth", "spaces"])?;
    let scope = requests::space_ref(members.required("scope")?, &members.field("scope"))?;
    let max_depth_field = members.field("max_depth");
    let max_depth = requests::position(members.required("max_depth")?, &max_depth_field)?;
    let spaces_field = members.field("spaces");
    let items = requests::array(members.required("spaces")?, &spaces_field)?;
    if items.len() > MAX_SNAPSHOT_SPACES {
        return Err(Refusal::LimitExceeded(format!(
            "{field:?} lists {} spaces, above {MAX_SNAPSHOT_SPACES}",
            items.len()
        )));
    }
    let spaces = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match well_formed_listed(&item) {
            Some(listed) => Ok(listed),
            None => listed(item, &format!("{spaces_field}[{i}]")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    members.finish()?;
    let manifest = Manifest {
        scope,
        max_depth,
        spaces,
    };
    if manifest.canonical_json_len() > MAX_SNAPSHOT_BYTES {
        return Err(Refusal::LimitExceeded(format!(
            "{field:?} is more than {MAX_SNAPSHOT_BYTES} bytes of canonical JSON"
        )));
    }
    manifest.check_tree(&spaces_field)?;
    Ok(manifest)
}

/// [`listed`] of an element it accepts, read in place without naming its
/// fields (field names are for refusals); `None` for anything else, which
/// [`listed`] then refuses with the field at fault. Invariant: whatever this
/// accepts, [`listed`] accepts and decodes to the same value.
fn well_formed_listed(json: &Json) -> Option<Listed> {
    let element = json.as_object()?;
    let space = element.get("space")?.as_object()?;
    // Names are unique in a parsed object, so two (three) members that are
    // all documented are all the members.
    if element.len() != 2 || space.len() != 3 {
        return None;
    }
    let through = element
        .get("through")?
        .as_u64()
        .filter(|&n| n <= MAX_POSITION)?;
    let root = RootId::parse(space.get("root_id")?.as_str()?)?;
    let id = SpaceId::parse(space.get("space_id")?.as_str()?)?;
    let path = space
        .get("path")?
        .as_array()?
        .iter()
        .map(|key| {
            key.as_str()
                .filter(|key| requests::is_key(key))
                .map(str::to_owned)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Listed {
        root,
        space: id,
        path,
        through,
    })
}

/// `{space: {root_id, space_id, path}, through}` at `field`.
fn listed(json: Json, field: &str) -> Result<Listed, Refusal> {
    let mut members = Members::nested(json, field, &["space", "through"])?;
    let space_field = members.field("space");
    let mut space = Members::nested(
        members.required("space")?,
        &space_field,
        &["root_id", "space_id", "path"],
    )?;
    let root = requests::root_id(space.required("root_id")?, &space.field("root_id"))?;
    let id = requests::space_id(space.required("space_id")?, &space.field("space_id"))?;
    let path = requests::path(space.required("path")?, &space.field("path"))?;
    space.finish()?;
    let through_field = members.field("through");
    let through = requests::position(members.required("through")?, &through_field)?;
    members.finish()?;
    Ok(Listed {
        root,
        space: id,
        path,
        through,
    })
}

impl Manifest {
    /// The tree-shape rules of [`decode`]; `field` names the `spaces` member.
    fn check_tree(&self, field: &str) -> Result<(), Refusal> {
        let at = |i: usize| format!("{field}[{i}]");
        let Some(first) = self.spaces.first() else {
            return Err(Refusal::invalid(
                field,
                format!("{field:?} must list the scope"),
            ));
        };
        if first.root != self.scope.root || first.space != self.scope.space {
            return Err(Refusal::invalid(
                at(0),
                format!("{:?} must be the scope", at(0)),
            ));
        }
        let base = first.path.len();
        let mut ids = HashSet::with_capacity(self.spaces.len());
        let mut paths: HashSet<&[String]> = HashSet::with_capacity(self.spaces.len());
        // Path lengths of the current preorder branch, the scope's at the bottom.
        let mut branch: Vec<usize> = Vec::new();
        for (i, listed) in self.spaces.iter().enumerate() {
            if listed.root != self.scope.root {
                return Err(Refusal::invalid(
                    at(i),
                    format!("{:?} is outside the scope's root", at(i)),
                ));
            }
            if !ids.insert(listed.space) {
                return Err(Refusal::invalid(
                    at(i),
                    format!("{:?} lists a space twice", at(i)),
                ));
            }
            if !paths.insert(&listed.path) {
                return Err(Refusal::invalid(
                    at(i),
                    format!("{:?} lists a path twice", at(i)),
                ));
            }
            if i > 0 {
                let parent = listed.path.len().checked_sub(1);
                while let Some(&top) = branch.last() {
                    // Invariant: the branch entry of length `top` has the
                    // path `spaces[i - 1].path[..top]`.
                    let is_parent =
                        Some(top) == parent && listed.path[..top] == self.spaces[i - 1].path[..top];
                    if is_parent {
                        break;
                    }
                    branch.pop();
                }
                if branch.is_empty() {
                    return Err(Refusal::invalid(
                        at(i),
                        format!(
                            "{:?} is not a child of an earlier space on its branch",
                            at(i)
                        ),
                    ));
                }
                let depth = (listed.path.len() - base) as u64;
                if depth > self.max_depth {
                    return Err(Refusal::invalid(
                        at(i),
                        format!("{:?} is deeper than max_depth", at(i)),
                    ));
                }
            }
            branch.push(listed.path.len());
        }
        Ok(())
    }

    /// The normalized document, members in the order the spec lists them:
    /// what [`Self::digest`] and the echoed snapshot are held to.
    #[cfg(test)]
    pub fn normalized_json(&self) -> Value {
        json!({
            "scope": self.scope.to_json(),
            "max_depth": self.max_depth,
            "spaces": self.spaces.iter().map(Listed::normalized_json).collect::<Vec<_>>(),
        })
    }

    /// The normalized document as compact JSON (no whitespace), members in
    /// the spec's order: `scope` (`root_id`, `space_id`), `max_depth`,
    /// `spaces`, each `{space: {root_id, space_id, path}, through}`; strings
    /// escaped as `serde_json` does. Member order does not change the length.
    pub fn canonical_json(&self) -> String {
        let mut out = Vec::new();
        self.write_canonical(&mut out)
            .expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("JSON text is UTF-8")
    }

    /// `canonical_json().len()`, without building it: the size the 4 MiB
    /// snapshot bound counts. Equals the empty manifest's length plus each
    /// element's [`Listed::canonical_json_len`] plus one comma between two.
    pub fn canonical_json_len(&self) -> usize {
        let mut counter = Counter(0);
        self.write_canonical(&mut counter)
            .expect("counting cannot fail");
        counter.0
    }

    /// SHA-256 over the canonical encoding of
    /// `[label "lab.journal.snapshot.v1", data-json(normalized document)]`.
    ///
    /// The encoding is written straight from the manifest, not through the
    /// document: maps with their keys in canonical order (shorter first,
    /// then bytewise), arrays as tuples, strings as text, integers unsigned.
    /// The tests hold it to `data_json_digest` of [`Self::normalized_json`].
    pub fn digest(&self) -> [u8; 32] {
        use lab_values::{put_head, LABEL_TAG, MAJOR_ARRAY, MAJOR_BYTES, MAJOR_MAP, MAJOR_TAG};
        let tag = lab_values::SNAPSHOT_DIGEST_TAG;
        let mut out = Vec::with_capacity(96 + self.spaces.len() * 160);
        put_head(&mut out, MAJOR_ARRAY, 2);
        put_head(&mut out, MAJOR_TAG, LABEL_TAG);
        put_head(&mut out, MAJOR_BYTES, tag.len() as u64);
        out.extend_from_slice(tag);
        put_head(&mut out, MAJOR_MAP, 3);
        cbor_text(&mut out, b"scope");
        put_head(&mut out, MAJOR_MAP, 2);
        cbor_text(&mut out, b"root_id");
        cbor_text(&mut out, &self.scope.root.text());
        cbor_text(&mut out, b"space_id");
        cbor_text(&mut out, &self.scope.space.text());
        cbor_text(&mut out, b"spaces");
        put_head(&mut out, MAJOR_ARRAY, self.spaces.len() as u64);
        for listed in &self.spaces {
            put_head(&mut out, MAJOR_MAP, 2);
            cbor_text(&mut out, b"space");
            put_head(&mut out, MAJOR_MAP, 3);
            cbor_text(&mut out, b"path");
            put_head(&mut out, MAJOR_ARRAY, listed.path.len() as u64);
            for key in &listed.path {
                cbor_text(&mut out, key.as_bytes());
            }
            cbor_text(&mut out, b"root_id");
            cbor_text(&mut out, &listed.root.text());
            cbor_text(&mut out, b"space_id");
            cbor_text(&mut out, &listed.space.text());
            cbor_text(&mut out, b"through");
            put_head(&mut out, lab_values::MAJOR_UNSIGNED, listed.through);
        }
        cbor_text(&mut out, b"max_depth");
        put_head(&mut out, lab_values::MAJOR_UNSIGNED, self.max_depth);
        Sha256::digest(&out).into()
    }

    fn write_canonical(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(b"{\"scope\":{\"root_id\":\"")?;
        out.write_all(&self.scope.root.text())?;
        out.write_all(b"\",\"space_id\":\"")?;
        out.write_all(&self.scope.space.text())?;
        out.write_all(b"\"")?;
        write!(out, "}},\"max_depth\":{},\"spaces\":[", self.max_depth)?;
        for (i, listed) in self.spaces.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            listed.write_canonical(out)?;
        }
        out.write_all(b"]}")
    }
}

impl Listed {
    #[cfg(test)]
    pub fn normalized_json(&self) -> Value {
        json!({
            "space": {
                "root_id": self.root.to_string(),
                "space_id": self.space.to_string(),
                "path": self.path,
            },
            "through": self.through,
        })
    }

    /// Length of this element in [`Manifest::canonical_json`].
    pub fn canonical_json_len(&self) -> usize {
        let mut counter = Counter(0);
        self.write_canonical(&mut counter)
            .expect("counting cannot fail");
        counter.0
    }

    fn write_canonical(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(b"{\"space\":{\"root_id\":\"")?;
        out.write_all(&self.root.text())?;
        out.write_all(b"\",\"space_id\":\"")?;
        out.write_all(&self.space.text())?;
        out.write_all(b"\",\"path\":[")?;
        for (i, key) in self.path.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            string(out, key)?;
        }
        write!(out, "]}},\"through\":{}}}", self.through)
    }
}

/// A text value's canonical encoding; `text` is UTF-8.
fn cbor_text(out: &mut Vec<u8>, text: &[u8]) {
    lab_values::put_head(out, lab_values::MAJOR_TEXT, text.len() as u64);
    out.extend_from_slice(text);
}

/// A JSON string literal as `serde_json` writes it.
fn string(out: &mut impl Write, text: &str) -> io::Result<()> {
    serde_json::to_writer(out, text).map_err(io::Error::other)
}

/// Counts bytes written.
struct Counter(usize);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::tests::{assert_invalid, assert_limit, invalid_field, ROOT, SPACE};
    use crate::requests::MAX_KEY_BYTES;
    use sha2::{Digest, Sha256};

    fn id(n: u8) -> String {
        format!("spc_{}", format!("{n:02x}").repeat(16))
    }

    fn element(space: &str, path: &[&str], through: u64) -> Value {
        json!({"space": {"root_id": ROOT, "space_id": space, "path": path}, "through": through})
    }

    fn doc(max_depth: u64, spaces: Vec<Value>) -> Value {
        json!({"scope": {"root_id": ROOT, "space_id": SPACE}, "max_depth": max_depth, "spaces": spaces})
    }

    fn manifest(doc: Value) -> Result<Manifest, Refusal> {
        let json = lab_strict_json::parse(&serde_json::to_vec(&doc).unwrap()).unwrap();
        decode(json, "snapshot")
    }

    /// A scope at path ["s"] with children a (with child a/x) and b.
    fn tree() -> Vec<Value> {
        vec![
            element(SPACE, &["s"], 3),
            element(&id(1), &["s", "a"], 1),
            element(&id(2), &["s", "a", "x"], 0),
            element(&id(3), &["s", "b"], 0),
        ]
    }

    #[test]
    fn decodes_and_normalizes() {
        let m = manifest(doc(2, tree())).unwrap();
        assert_eq!(m.scope.space.to_string(), SPACE);
        assert_eq!(m.max_depth, 2);
        assert_eq!(m.spaces.len(), 4);
        assert_eq!(m.spaces[2].path, ["s", "a", "x"]);
        assert_eq!(m.spaces[0].through, 3);
        assert_eq!(m.normalized_json(), doc(2, tree()));
        let again = manifest(m.normalized_json()).unwrap();
        assert_eq!(again, m);
        assert!(manifest(doc(UNBOUNDED_DEPTH, tree())).is_ok());
    }

    #[test]
    fn canonical_json_matches_the_normalized_document() {
        let mut spaces = tree();
        spaces.push(element(&id(4), &["s", "\"q\"\\é"], 9));
        let m = manifest(doc(7, spaces)).unwrap();
        let text = m.canonical_json();
        assert_eq!(text.len(), m.canonical_json_len());
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            m.normalized_json()
        );
        assert_eq!(
            text.len(),
            serde_json::to_string(&m.normalized_json()).unwrap().len()
        );
        assert!(text.starts_with(&format!(
            r#"{{"scope":{{"root_id":"{ROOT}","space_id":"{SPACE}"}},"max_depth":7,"spaces":[{{"space":{{"root_id":"{ROOT}""#
        )));
        let empty = Manifest {
            spaces: Vec::new(),
            ..m.clone()
        };
        let sum: usize = m.spaces.iter().map(Listed::canonical_json_len).sum();
        assert_eq!(
            m.canonical_json_len(),
            empty.canonical_json_len() + sum + m.spaces.len() - 1
        );
    }

    #[test]
    fn digest_is_pinned_and_independently_constructed() {
        let m = manifest(doc(0, vec![element(SPACE, &[], 5)])).unwrap();
        // [label tag, {scope: {root_id, space_id}, spaces: [{space: {...}, through}], max_depth}]
        // with map keys in canonical order: shorter first, then bytewise.
        let text = |out: &mut Vec<u8>, s: &str| {
            assert!(s.len() < 24);
            out.push(0x60 + s.len() as u8);
            out.extend_from_slice(s.as_bytes());
        };
        let id_text = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&[0x78, s.len() as u8]);
            out.extend_from_slice(s.as_bytes());
        };
        let mut cbor = vec![0x82, 0xd8, 0x27, 0x57];
        cbor.extend_from_slice(b"lab.journal.snapshot.v1");
        cbor.push(0xa3);
        text(&mut cbor, "scope");
        cbor.push(0xa2);
        text(&mut cbor, "root_id");
        id_text(&mut cbor, ROOT);
        text(&mut cbor, "space_id");
        id_text(&mut cbor, SPACE);
        text(&mut cbor, "spaces");
        cbor.extend_from_slice(&[0x81, 0xa2]);
        text(&mut cbor, "space");
        cbor.push(0xa3);
        text(&mut cbor, "path");
        cbor.push(0x80);
        text(&mut cbor, "root_id");
        id_text(&mut cbor, ROOT);
        text(&mut cbor, "space_id");
        id_text(&mut cbor, SPACE);
        text(&mut cbor, "through");
        cbor.push(0x05);
        text(&mut cbor, "max_depth");
        cbor.push(0x00);
        let independent: [u8; 32] = Sha256::digest(&cbor).into();
        assert_eq!(m.digest(), independent);
        let hex: String = m.digest().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "393417acf3435477588131cbb3c173dcea9db222f6e5d83030957c08e8120489"
        );
    }

    /// The digest as the data-json profile defines it, through the
    /// document and the value tree.
    fn projected_digest(m: &Manifest) -> [u8; 32] {
        lab_values::data_json_digest(lab_values::SNAPSHOT_DIGEST_TAG, &m.normalized_json()).unwrap()
    }

    #[test]
    fn digest_is_the_projection_of_the_normalized_document() {
        let key = |n: usize| format!("k{n}é\"\\{}", "x".repeat(n % 240));
        let sizes = [0usize, 1, 22, 23, 24, 255, 256, 300];
        for (round, &count) in sizes.iter().enumerate() {
            let spaces = std::iter::once(element(SPACE, &["s"], 1 << 40))
                .chain((1..count.max(1)).map(|n| {
                    let depth = 1 + n % 3;
                    let path: Vec<String> = std::iter::once("s".to_string())
                        .chain((0..depth).map(|d| key(n * 7 + d)))
                        .collect();
                    let path: Vec<&str> = path.iter().map(String::as_str).collect();
                    let through = [0, 23, 24, 255, 65_536, u64::from(u32::MAX) + 1][n % 6];
                    element(&format!("spc_{n:032x}"), &path, through)
                }))
                .collect::<Vec<_>>();
            let depth = [0, 23, 24, UNBOUNDED_DEPTH][round % 4];
            let m = Manifest {
                scope: SpaceRef {
                    root: RootId::parse(ROOT).unwrap(),
                    space: SpaceId::parse(SPACE).unwrap(),
                },
                max_depth: depth,
                spaces: spaces
                    .into_iter()
                    .map(|e| {
                        listed(
                            lab_strict_json::parse(&serde_json::to_vec(&e).unwrap()).unwrap(),
                            "e",
                        )
                        .unwrap()
                    })
                    .collect(),
            };
            assert_eq!(m.digest(), projected_digest(&m), "{count} spaces");
        }
        let m = manifest(doc(2, tree())).unwrap();
        assert_eq!(m.digest(), projected_digest(&m));
    }

    #[test]
    fn the_in_place_element_reader_agrees_with_the_checked_one() {
        let good = element(&id(3), &["s", "b", "é\"\\"], 9);
        let mut variants = vec![good.clone(), element(SPACE, &[], 0)];
        let mut edit = |f: &dyn Fn(&mut Value)| {
            let mut e = good.clone();
            f(&mut e);
            variants.push(e);
        };
        edit(&|e| e["through"] = json!(-1));
        edit(&|e| e["through"] = json!(1.0));
        edit(&|e| e["through"] = json!(MAX_POSITION + 1));
        edit(&|e| e["through"] = json!(MAX_POSITION));
        edit(&|e| e["through"] = json!(null));
        edit(&|e| e["Through"] = json!(1));
        edit(&|e| e["extra"] = json!(1));
        edit(&|e| {
            e.as_object_mut().unwrap().remove("through");
        });
        edit(&|e| e["space"]["extra"] = json!(1));
        edit(&|e| {
            e["space"].as_object_mut().unwrap().remove("path");
        });
        edit(&|e| e["space"]["path"] = json!("s/b"));
        edit(&|e| e["space"]["path"] = json!(["s", ""]));
        edit(&|e| e["space"]["path"] = json!(["s", "a/b"]));
        edit(&|e| e["space"]["path"] = json!(["s", "\u{85}"]));
        edit(&|e| e["space"]["path"] = json!(["s", 1]));
        edit(&|e| e["space"]["path"] = json!(["s", "k".repeat(MAX_KEY_BYTES + 1)]));
        edit(&|e| e["space"]["path"] = json!(["s", "k".repeat(MAX_KEY_BYTES)]));
        edit(&|e| e["space"]["root_id"] = json!(SPACE));
        edit(&|e| e["space"]["space_id"] = json!(ROOT));
        edit(&|e| e["space"]["space_id"] = json!(id(3).to_uppercase()));
        edit(&|e| e["space"]["space_id"] = json!(null));
        edit(&|e| e["space"] = json!([]));
        variants.push(json!([]));
        variants.push(json!(null));
        for variant in variants {
            let text = serde_json::to_vec(&variant).unwrap();
            let json = lab_strict_json::parse(&text).unwrap();
            let fast = well_formed_listed(&json);
            let checked = listed(json, "e");
            match (fast, checked) {
                (Some(fast), Ok(checked)) => assert_eq!(fast, checked, "{variant}"),
                (Some(_), Err(e)) => panic!("accepted in place, refused checked: {variant} {e:?}"),
                (None, Ok(_)) => panic!("a well-formed element went the slow way: {variant}"),
                (None, Err(_)) => {}
            }
        }
    }

    #[test]
    fn member_refusals() {
        let with = |name: &str, value: Value| {
            let mut d = doc(2, tree());
            d[name] = value;
            manifest(d)
        };
        assert_invalid(with("Scope", json!(1)), "snapshot.Scope");
        assert_invalid(with("max_depth", json!(null)), "snapshot.max_depth");
        assert_invalid(with("max_depth", json!(1.0)), "snapshot.max_depth");
        assert_invalid(
            with("max_depth", json!(9_007_199_254_740_992u64)),
            "snapshot.max_depth",
        );
        assert_invalid(
            with("scope", json!({"root_id": ROOT})),
            "snapshot.scope.space_id",
        );
        assert_invalid(with("spaces", json!({})), "snapshot.spaces");
        let mut d = doc(2, tree());
        d.as_object_mut().unwrap().remove("max_depth");
        assert_invalid(manifest(d), "snapshot.max_depth");
        assert_invalid(manifest(json!([])), "snapshot");

        let at = |i: usize, e: Value| {
            let mut spaces = tree();
            spaces[i] = e;
            manifest(doc(2, spaces))
        };
        let mut e = element(&id(3), &["s", "b"], 0);
        e["space"]["path"] = json!("s/b");
        assert_invalid(at(3, e.clone()), "snapshot.spaces[3].space.path");
        e["space"]["path"] = json!(["s", "b/c"]);
        assert_invalid(at(3, e.clone()), "snapshot.spaces[3].space.path[1]");
        e["space"]["path"] = json!(["s", "\u{85}"]);
        assert_invalid(at(3, e.clone()), "snapshot.spaces[3].space.path[1]");
        e["space"].as_object_mut().unwrap().remove("path");
        assert_invalid(at(3, e), "snapshot.spaces[3].space.path");
        let mut e = element(&id(3), &["s", "b"], 0);
        e["through"] = json!(-1);
        assert_invalid(at(3, e.clone()), "snapshot.spaces[3].through");
        e["through"] = json!(null);
        assert_invalid(at(3, e.clone()), "snapshot.spaces[3].through");
        e["Through"] = json!(0);
        assert_invalid(at(3, e), "snapshot.spaces[3].Through");
        let mut e = element(&id(3), &["s", "b"], 0);
        e["space"]["space_id"] = json!(ROOT);
        assert_invalid(at(3, e), "snapshot.spaces[3].space.space_id");
    }

    #[test]
    fn tree_refusals() {
        let check = |spaces: Vec<Value>, depth: u64| manifest(doc(depth, spaces));
        assert_invalid(check(vec![], 2), "snapshot.spaces");
        // The scope is first.
        let mut spaces = tree();
        spaces.swap(0, 1);
        assert_invalid(check(spaces, 2), "snapshot.spaces[0]");
        // Another root.
        let mut spaces = tree();
        spaces[3]["space"]["root_id"] = json!("rt_ffffffffffffffffffffffffffffffff");
        assert_invalid(check(spaces, 2), "snapshot.spaces[3]");
        // A space or a path twice.
        let mut spaces = tree();
        spaces[3]["space"]["space_id"] = json!(id(1));
        assert_invalid(check(spaces, 2), "snapshot.spaces[3]");
        let mut spaces = tree();
        spaces[3]["space"]["path"] = json!(["s", "a"]);
        assert_invalid(check(spaces, 2), "snapshot.spaces[3]");
        // Out of scope, unreachable, a subtree split.
        let mut spaces = tree();
        spaces[3]["space"]["path"] = json!(["t", "b"]);
        assert_invalid(check(spaces, 2), "snapshot.spaces[3]");
        let mut spaces = tree();
        spaces[3]["space"]["path"] = json!(["s", "z", "b"]);
        assert_invalid(check(spaces, 2), "snapshot.spaces[3]");
        let mut spaces = tree();
        spaces.push(element(&id(4), &["s", "a", "y"], 0));
        assert_invalid(check(spaces, 2), "snapshot.spaces[4]");
        let mut spaces = tree();
        spaces[3]["space"]["path"] = json!(["s"]);
        assert_invalid(check(spaces, 2), "snapshot.spaces[3]");
        // Deeper than max_depth.
        assert_invalid(check(tree(), 1), "snapshot.spaces[2]");
        assert_invalid(check(tree(), 0), "snapshot.spaces[1]");
        assert!(check(vec![element(SPACE, &["s"], 0)], 0).is_ok());
        // Returning up the branch then down again is preorder.
        let mut spaces = tree();
        spaces.push(element(&id(4), &["s", "b", "y"], 0));
        spaces.push(element(&id(5), &["s", "c"], 0));
        assert!(check(spaces, 2).is_ok());
        // The root as scope has the empty path.
        let root = vec![element(SPACE, &[], 1), element(&id(1), &["a"], 0)];
        assert!(check(root, 1).is_ok());
    }

    #[test]
    fn bounds() {
        let key = "k".repeat(250);
        let many: Vec<Value> = std::iter::once(element(SPACE, &[], 0))
            .chain((1..MAX_SNAPSHOT_SPACES).map(|n| {
                let id = format!("spc_{n:032x}");
                element(&id, &[&format!("{key}{n:04}")], 0)
            }))
            .collect();
        let m = manifest(doc(1, many.clone())).unwrap();
        assert_eq!(m.spaces.len(), MAX_SNAPSHOT_SPACES);
        let mut over = many.clone();
        over.push(element(&id(0xee), &["late"], 0));
        assert_limit(manifest(doc(1, over)));
        // 4096 spaces with 4 KiB paths exceed the canonical size.
        let long: Vec<Value> = std::iter::once(element(SPACE, &[], 0))
            .chain((1..MAX_SNAPSHOT_SPACES).map(|n| {
                let id = format!("spc_{n:032x}");
                let path: Vec<String> = (0..4).map(|i| format!("{key}{n:04}{i}")).collect();
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                element(&id, &path, 0)
            }))
            .collect();
        assert_limit(manifest(doc(UNBOUNDED_DEPTH, long)));
        // The count is decided before the elements.
        let mut broken = vec![json!(null); MAX_SNAPSHOT_SPACES + 1];
        broken[0] = json!(1);
        assert_limit(manifest(doc(1, broken)));
        assert_eq!(
            invalid_field(manifest(doc(1, vec![json!(null)]))).as_deref(),
            Some("snapshot.spaces[0]")
        );
    }
}
