//! Configured tool releases: each is an artifact space
//! `tools/<tool>/releases/<digest>` whose content is the release's
//! description, provisioned with stable operation IDs like the rest of the
//! world.
//!
//! The deployment passes `tools`: a JSON array of
//! `{description, component, size}`, the operator's description text, the
//! digest of the tool's component (retained in the bytes service by the
//! host) and its size. The release description the service writes is the
//! operator's description with `executable` added:
//! `{service_binary: <component digest>, revision: <version>,
//! configuration: <configuration or null>}`; `<digest>` is the hash of its
//! RFC 8785 JSON, which is also the content's `bytes`.

use crate::blobs;
use crate::facts::{Artifact, Fact, Hash};
use crate::journal::{self, Space};
use crate::layout;
use crate::ops::publish::retain_descriptor;
use crate::refusal::Refusal;
use crate::world::{ensure_child, setup_operation_id, World};
use lab_coord_auth::canonical_json;
use lab_strict_json::{expect_object, parse, Json, Object};
use serde_json::{json, Value};

/// The record profile of a release description.
pub const RELEASE_PROFILE: &str = "coord/tool-release/1";

/// One configured release, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    pub name: String,
    /// The tool's component, retained by the host.
    pub component: Hash,
    /// The release description, `executable` included.
    pub description: Value,
}

impl Release {
    /// The description's canonical bytes: the release's content.
    pub fn content(&self) -> Vec<u8> {
        canonical_json(&self.description)
    }
}

fn bad(message: impl Into<String>) -> Refusal {
    Refusal::Internal(format!("the configured tools: {}", message.into()))
}

/// The releases the deployment configures, validated; a malformed setting
/// is an error (the service does not start with it).
pub fn configured(text: &str) -> Result<Vec<Release>, Refusal> {
    let items: Vec<Value> =
        serde_json::from_str(text).map_err(|e| bad(format!("not a JSON array: {e}")))?;
    let mut releases: Vec<Release> = Vec::new();
    for item in items {
        let (Some(description), Some(component)) =
            (item["description"].as_str(), item["component"].as_str())
        else {
            return Err(bad("an item lacks `description` or `component`"));
        };
        let component =
            Hash::parse(component).ok_or_else(|| bad("a component digest is malformed"))?;
        let release = describe(description, &component)?;
        if releases.iter().any(|r| r.name == release.name) {
            return Err(bad(format!("tool `{}` is configured twice", release.name)));
        }
        releases.push(release);
    }
    Ok(releases)
}

/// A tool description: `{name, version, class, inputs: [{role, required}],
/// outputs: [{role}], effects: [string], deterministic, egress: [string],
/// configuration?}`, strictly.
fn describe(text: &str, component: &Hash) -> Result<Release, Refusal> {
    let json = parse(text.as_bytes())
        .map_err(|e| bad(format!("a description is not strict JSON: {e}")))?;
    let mut object = expect_object(json).map_err(|e| bad(e.to_string()))?;
    let string = |o: &mut Object, field: &str| -> Result<String, Refusal> {
        let text = o.take_required_str(field).map_err(|e| bad(e.to_string()))?;
        if text.is_empty() || text.chars().count() > 128 {
            return Err(bad(format!("`{field}` is 1..128 characters")));
        }
        Ok(text)
    };
    let name = string(&mut object, "name")?;
    layout::check_user_label("name", &name).map_err(|e| bad(e.message()))?;
    let version = string(&mut object, "version")?;
    let class = string(&mut object, "class")?;
    let mut roles = |field: &str, with_required: bool| -> Result<Vec<Value>, Refusal> {
        let mut out = Vec::new();
        for item in object
            .take_required_array(field)
            .map_err(|e| bad(e.to_string()))?
        {
            let Json::Object(mut item) = item else {
                return Err(bad(format!("`{field}` holds objects")));
            };
            let role = string(&mut item, "role")?;
            let mut entry = json!({ "role": role });
            if with_required {
                entry["required"] = json!(item
                    .take_required_bool("required")
                    .map_err(|e| bad(e.to_string()))?);
            }
            item.finish().map_err(|e| bad(e.to_string()))?;
            if out.iter().any(|o: &Value| o["role"] == entry["role"]) {
                return Err(bad(format!("role `{role}` is listed twice in `{field}`")));
            }
            out.push(entry);
        }
        Ok(out)
    };
    let inputs = roles("inputs", true)?;
    let outputs = roles("outputs", false)?;
    let mut strings = |field: &str| -> Result<Vec<String>, Refusal> {
        object
            .take_required_array(field)
            .map_err(|e| bad(e.to_string()))?
            .into_iter()
            .map(|v| match v {
                Json::String(s) => Ok(s),
                _ => Err(bad(format!("`{field}` holds strings"))),
            })
            .collect()
    };
    let effects = strings("effects")?;
    let egress = strings("egress")?;
    let deterministic = object
        .take_required_bool("deterministic")
        .map_err(|e| bad(e.to_string()))?;
    let configuration = object
        .take_optional("configuration")
        .map(|c| serde_json::to_value(&c).expect("strict JSON is JSON"))
        .unwrap_or(Value::Null);
    object.finish().map_err(|e| bad(e.to_string()))?;
    Ok(Release {
        name: name.clone(),
        component: *component,
        description: json!({
            "name": name,
            "version": version,
            "class": class,
            "inputs": inputs,
            "outputs": outputs,
            "effects": effects,
            "deterministic": deterministic,
            "egress": egress,
            "executable": {
                "service_binary": component.to_string(),
                "revision": version,
                "configuration": configuration,
            },
        }),
    })
}

/// Ensures every configured release's artifact space, with its content fact
/// and its `declarations` child. Every step is idempotent.
pub fn provision(world: &World, releases: &[Release]) -> Result<(), Refusal> {
    if releases.is_empty() {
        return Ok(());
    }
    let journal_error = |e: crate::backend::CallError| e.into_refusal("journal");
    let tools = world
        .resolve(&["tools".to_string()])?
        .ok_or_else(|| Refusal::Unavailable("the world has no `tools` organizer".into()))?;
    let kind = retain_descriptor(RELEASE_PROFILE)?;
    for release in releases {
        if !blobs::exists(&release.component.to_string()).map_err(|e| e.into_refusal("bytes"))? {
            return Err(bad(format!(
                "the component of `{}` is not retained",
                release.name
            )));
        }
        let content = release.content();
        let retained = blobs::put(content).map_err(|e| e.into_refusal("bytes"))?;
        let bytes = Hash::parse(&retained.name).ok_or_else(|| {
            Refusal::Unavailable("the bytes service named a description oddly".into())
        })?;
        let (tool, _) = ensure_child(&tools, &release.name, &setup_operation_id(&release.name))
            .map_err(journal_error)?;
        let (releases_space, _) = ensure_child(&tool, "releases", &setup_operation_id("releases"))
            .map_err(journal_error)?;
        let label = bytes.to_string();
        let (space, _) = ensure_child(&releases_space, &label, &setup_operation_id(&label))
            .map_err(journal_error)?;
        content_once(&space, &Artifact { bytes, kind })?;
        ensure_child(&space, "declarations", &setup_operation_id("declarations"))
            .map_err(journal_error)?;
    }
    Ok(())
}

/// The release space's one content fact, at position 1.
fn content_once(space: &Space, artifact: &Artifact) -> Result<(), Refusal> {
    let fact = Fact::Content {
        artifact: artifact.clone(),
    }
    .encode();
    match journal::append(space, &[fact], "coord.content", Some(0)) {
        Ok(_) => Ok(()),
        Err(e) => Err(match e.code() {
            Some("conflict" | "idempotency_mismatch") => {
                Refusal::Internal("a release space holds other content".into())
            }
            _ => e.into_refusal("journal"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENT: &str =
        "sha256:00000000000000000000000000000000000000000000000000000000000000aa";

    fn config(description: &str) -> String {
        json!([{ "description": description, "component": COMPONENT, "size": 3 }]).to_string()
    }

    const ECHO: &str = r#"{"name":"echo","version":"1.0.0","class":"transform",
        "inputs":[{"role":"source","required":true}],"outputs":[{"role":"result"}],
        "effects":[],"deterministic":true,"egress":[]}"#;

    #[test]
    fn a_description_gains_its_executable() {
        let releases = configured(&config(ECHO)).unwrap();
        assert_eq!(releases.len(), 1);
        let d = &releases[0].description;
        assert_eq!(d["executable"]["service_binary"], COMPONENT);
        assert_eq!(d["executable"]["revision"], "1.0.0");
        assert_eq!(d["executable"]["configuration"], Value::Null);
        assert_eq!(configured("[]").unwrap(), vec![]);
    }

    #[test]
    fn malformed_descriptions_are_refused() {
        for bad_text in [
            ECHO.replace("\"echo\"", "\"tools\""),
            ECHO.replace("\"egress\":[]", "\"egress\":[1]"),
            ECHO.replace("\"deterministic\":true,", ""),
            ECHO.replace(
                "\"class\":\"transform\"",
                "\"class\":\"transform\",\"extra\":1",
            ),
            ECHO.replace(
                "[{\"role\":\"result\"}]",
                "[{\"role\":\"r\"},{\"role\":\"r\"}]",
            ),
            "not json".to_string(),
        ] {
            assert!(configured(&config(&bad_text)).is_err(), "{bad_text}");
        }
        let twice = json!([
            { "description": ECHO, "component": COMPONENT, "size": 3 },
            { "description": ECHO, "component": COMPONENT, "size": 3 },
        ]);
        assert!(configured(&twice.to_string()).is_err());
    }
}
