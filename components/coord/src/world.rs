//! The deployment's world: its settings, and the spaces the service keeps
//! in the journal for it (`/worlds/<world>` and its organizers), provisioned
//! with stable operation IDs so that a partial setup resumes.

use crate::backend::CallError;
use crate::journal::{self, Space};
use crate::layout::WORLD_ORGANIZERS;
use crate::refusal::Refusal;
use lab_coord_auth::{Principal, SignatureOutcome, SigningKey, Verifier};
use lab_guest::lab::platform::{config, crypto, kv};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const TABLE: &str = "world";
/// SHA-256 of (root ID, journal path) → the space occupying the path.
const RESOLVED: &str = "resolved";
const LAYOUT_KEY: &[u8] = b"layout";

/// The settings the host passes (`labd --coord-*`).
#[derive(Clone)]
pub struct Settings {
    pub world: String,
    pub root: Principal,
    pub audience: String,
    /// The seed of the key the service signs the grants it issues with:
    /// the key itself is derived only by the operations that sign
    /// ([`Settings::issuer`]), since deriving it costs a scalar
    /// multiplication every other request would pay for nothing.
    issuer_seed: Option<[u8; 32]>,
}

impl Settings {
    pub fn load() -> Result<Settings, Refusal> {
        let get = |name: &str| {
            config::get(name).ok_or_else(|| {
                Refusal::Unavailable(format!("the deployment does not set `{name}`"))
            })
        };
        let world = get("world")?;
        let root = Principal::parse(&get("root-key")?)
            .ok_or_else(|| Refusal::Internal("the configured root key is malformed".into()))?;
        let issuer_seed = match config::get("issuer-key") {
            None => None,
            Some(hex) => Some(
                hex::decode(hex.trim())
                    .ok()
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| Refusal::Internal("the issuer key is malformed".into()))?,
            ),
        };
        Ok(Settings {
            world,
            root,
            audience: get("audience")?,
            issuer_seed,
        })
    }

    /// The key the service signs the grants it issues with, when set.
    pub fn issuer(&self) -> Option<SigningKey> {
        self.issuer_seed.as_ref().map(SigningKey::from_bytes)
    }

    /// The issuer key when it is the world's root key, the only key the
    /// service signs grants, admissions and attestations in the root's
    /// name with.
    pub fn root_signer(&self) -> Option<SigningKey> {
        self.issuer().filter(|key| Principal::of(key) == self.root)
    }

    /// The verifier of this world, checking signatures in the host's
    /// native code.
    pub fn verifier(&self) -> Verifier {
        Verifier::new(self.world.clone(), self.root, self.audience.clone())
            .with_signature_check(native_check)
    }
}

/// [`lab_coord_auth::check_strict`], run by the host.
fn native_check(principal: &Principal, message: &[u8], signature: &[u8; 64]) -> SignatureOutcome {
    use crypto::Ed25519Outcome as O;
    match crypto::verify_ed25519_strict(principal.as_bytes(), message, signature) {
        O::Valid => SignatureOutcome::Valid,
        O::KeyNotAdmissible => SignatureOutcome::KeyNotAdmissible,
        O::BadSignature => SignatureOutcome::BadSignature,
    }
}

/// The world's spaces, as provisioned.
#[derive(Debug, Clone)]
pub struct World {
    pub name: String,
    pub root_id: String,
    pub instance_id: String,
    pub world: Space,
    /// SHA-256 (hex) of the `tools` setting whose releases are provisioned.
    pub tools: String,
}

impl World {
    /// The journal path of a path below the world.
    pub fn journal_path(&self, path: &[String]) -> Vec<String> {
        let mut full = self.world.path.clone();
        full.extend(path.iter().cloned());
        full
    }

    /// The path below the world of a journal space, or none when the space
    /// lies outside the world (or is another root's).
    pub fn world_path(&self, space: &Space) -> Option<Vec<String>> {
        if space.root_id != self.root_id {
            return None;
        }
        space
            .path
            .strip_prefix(self.world.path.as_slice())
            .map(<[String]>::to_vec)
    }

    /// A space's JSON as this service reports it: its path below the world.
    pub fn space_json(&self, space: &Space) -> Value {
        json!({
            "root_id": space.root_id,
            "space_id": space.space_id,
            "path": self.world_path(space).unwrap_or_default(),
        })
    }

    /// The space at `path` below the world, or none.
    ///
    /// A path, once occupied, names the same space for ever (the journal
    /// never removes, renames or moves a space), so occupied paths are
    /// remembered in the store; an absent path is asked again every time.
    pub fn resolve(&self, path: &[String]) -> Result<Option<Space>, Refusal> {
        let full = self.journal_path(path);
        let key = resolved_key(&self.root_id, &full);
        let remembered = kv::begin_read()
            .and_then(|txn| txn.get(RESOLVED, &key))
            .ok()
            .flatten()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|value| Space::from_json(&value).ok());
        if let Some(space) = remembered.filter(|s| s.path == full) {
            return Ok(Some(space));
        }
        let found =
            journal::resolve_path(&self.root_id, &full).map_err(|e| e.into_refusal("journal"))?;
        if let Some(space) = &found {
            // Losing this write loses nothing but a shortcut.
            let _ = kv::begin_write().and_then(|txn| {
                txn.commit_detached(&[kv::TableWrite {
                    table: RESOLVED.into(),
                    key,
                    value: serde_json::to_vec(&space.to_json()).expect("JSON serializes"),
                }])
            });
        }
        Ok(found)
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "root_id": self.root_id,
            "instance_id": self.instance_id,
            "world": self.world.to_json(),
            "tools": self.tools,
        })
    }

    fn from_json(value: &Value) -> Option<World> {
        Some(World {
            name: value["name"].as_str()?.to_string(),
            root_id: value["root_id"].as_str()?.to_string(),
            instance_id: value["instance_id"].as_str()?.to_string(),
            world: Space::from_json(&value["world"]).ok()?,
            tools: value["tools"].as_str().unwrap_or_default().to_string(),
        })
    }
}

fn resolved_key(root_id: &str, path: &[String]) -> Vec<u8> {
    let named = serde_json::to_vec(&json!([root_id, path])).expect("JSON serializes");
    Sha256::digest(named).to_vec()
}

/// A stable journal operation ID for the service's own creation of `key`
/// under a parent: the same on every attempt, so a retry replays.
pub fn setup_operation_id(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    format!("coord.setup.{}", lab_kit::hex::encode_lower(&digest[..16]))
}

/// The child `key` of `parent`, created with `operation_id` when absent.
/// Returns the child and whether this call created it.
pub fn ensure_child(
    parent: &Space,
    key: &str,
    operation_id: &str,
) -> Result<(Space, bool), CallError> {
    if let Some(found) = journal::resolve_path(&parent.root_id, &parent.child_path(key))? {
        return Ok((found, false));
    }
    create_child(parent, key, operation_id)
}

/// The child `key` of `parent`, created with `operation_id` (for a caller
/// that has just seen it absent); one that exists meanwhile is resolved.
/// Returns the child and whether this call created it.
pub fn create_child(
    parent: &Space,
    key: &str,
    operation_id: &str,
) -> Result<(Space, bool), CallError> {
    match journal::create(parent, key, operation_id, None) {
        Ok(created) => Ok((created.child, !created.replayed)),
        Err(e) if e.code() == Some("exists") => {
            journal::resolve_path(&parent.root_id, &parent.child_path(key))?
                .map(|space| (space, false))
                .ok_or_else(|| CallError::Unavailable("a child exists but does not resolve".into()))
        }
        Err(e) => Err(e),
    }
}

/// The provisioned world: read from the store, or provisioned now (every
/// step idempotent, so an interrupted setup resumes where it stopped),
/// with the configured tool releases (provisioned again whenever the
/// `tools` setting changes).
pub fn world(settings: &Settings) -> Result<World, Refusal> {
    let tools = config::get("tools").unwrap_or_else(|| "[]".into());
    let tools_digest = lab_kit::hex::encode_lower(&Sha256::digest(tools.as_bytes()));
    let stored = kv::begin_read().and_then(|txn| txn.get(TABLE, LAYOUT_KEY))?;
    let stored = match stored {
        None => None,
        Some(bytes) => {
            let world = serde_json::from_slice(&bytes)
                .ok()
                .and_then(|value: Value| World::from_json(&value))
                .ok_or_else(|| Refusal::Internal("the stored world layout is unreadable".into()))?;
            if world.name != settings.world {
                return Err(Refusal::Internal(format!(
                    "this data directory serves world `{}`, not `{}`",
                    world.name, settings.world
                )));
            }
            if world.tools == tools_digest {
                return Ok(world);
            }
            Some(world)
        }
    };
    let releases = crate::tools::configured(&tools)?;
    let mut world = match stored {
        Some(world) => world,
        None => provision(settings).map_err(|e| e.into_refusal("journal"))?,
    };
    crate::tools::provision(&world, &releases)?;
    world.tools = tools_digest;
    let txn = kv::begin_write()?;
    let bytes = serde_json::to_vec(&world.to_json()).expect("JSON serializes");
    txn.commit_with(&[kv::TableWrite {
        table: TABLE.into(),
        key: LAYOUT_KEY.to_vec(),
        value: bytes,
    }])?;
    Ok(world)
}

fn provision(settings: &Settings) -> Result<World, CallError> {
    let (root_id, instance_id) = journal::identity()?;
    let root = journal::resolve_path(&root_id, &[])?
        .ok_or_else(|| CallError::Unavailable("the journal root does not resolve".into()))?;
    let (worlds, _) = ensure_child(&root, "worlds", &setup_operation_id("worlds"))?;
    let (world, _) = ensure_child(
        &worlds,
        &settings.world,
        &setup_operation_id(&settings.world),
    )?;
    for organizer in WORLD_ORGANIZERS {
        ensure_child(&world, organizer, &setup_operation_id(organizer))?;
    }
    Ok(World {
        name: settings.world.clone(),
        root_id,
        instance_id,
        world,
        tools: String::new(),
    })
}
