//! The coordination service's deployment settings, passed to it through
//! `config`; the host checks their form and does not otherwise interpret
//! them.
//!
//! | setting | value |
//! |---|---|
//! | `world` | `--coord-world` |
//! | `root-key` | `--coord-root-key`, or the development root key's principal |
//! | `issuer-key` | hex seed of `--coord-issuer-key-file`, or of the development root key |
//! | `audience` | `--coord-audience`, or `http://` and the bound operations address |
//! | `tools` | every `--coord-tool DESCRIPTION=COMPONENT`, as a JSON array |
//!
//! Without `--coord-root-key`, the root key is a development key kept in
//! `<data-dir>/coord/root.key` and created on the first start.
//!
//! `tools` is the JSON text of an array with one object per `--coord-tool`,
//! in the order given: `{"description": <the description file's text>,
//! "component": "sha256:<64 lowercase hex>", "size": <bytes>}`; `[]` when
//! none is configured. Each component file is copied into the blob store
//! (under the deployment's blob cap) at start, so the digest names a blob
//! the service can read; the description is passed as text, not parsed.

use crate::blobstore::{BlobStore, Digest32, WriteError};
use crate::capabilities::ServiceConfig;
use crate::keys::{self, KeyError, SecretKey};
use crate::settings::Settings;
use std::fs::{self, File};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest tool description, in bytes.
const TOOL_DESCRIPTION_CAP: u64 = 1 << 20;

/// Component bytes moved per step of the copy into the blob store.
const COMPONENT_CHUNK: usize = 1 << 20;

/// Why the coordination service's settings could not be resolved.
#[derive(Debug)]
pub enum CoordError {
    /// A configured or development key.
    Key(KeyError),
    /// A `--coord-tool`: the value as given, and what is wrong with it.
    Tool { spec: String, what: String },
}

impl From<KeyError> for CoordError {
    fn from(e: KeyError) -> Self {
        CoordError::Key(e)
    }
}

impl std::fmt::Display for CoordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CoordError::Key(e) => write!(f, "the coordination keys: {e}"),
            CoordError::Tool { spec, what } => write!(f, "--coord-tool `{spec}`: {what}"),
        }
    }
}

impl std::error::Error for CoordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CoordError::Key(e) => Some(e),
            CoordError::Tool { .. } => None,
        }
    }
}

/// The coordination service's settings, resolved before anything binds.
pub struct CoordSettings {
    values: Vec<(String, String)>,
    /// Every `--coord-tool`, in the order given, its component in the blob
    /// store.
    pub tools: Vec<ConfiguredTool>,
    /// Whether `audience` waits for the bound operations address.
    audience_from_listener: bool,
    /// The development root key's file and principal, when one is used.
    development_key: Option<(PathBuf, String)>,
}

impl CoordSettings {
    /// Checks the configured keys and reads (or creates) the development
    /// root key when no root key is configured; reads the configured tools'
    /// descriptions and copies their components into `blobs`.
    pub fn resolve(
        settings: &Settings,
        blobs: &Arc<BlobStore>,
    ) -> Result<CoordSettings, CoordError> {
        let mut values = vec![
            ("world".to_string(), settings.coord_world.clone()),
            ("host-started".to_string(), host_started().to_string()),
        ];
        let mut development_key = None;
        let issuer = match &settings.coord_root_key {
            Some(root) => {
                keys::parse_principal(root)?;
                values.push(("root-key".into(), root.clone()));
                match &settings.coord_issuer_key_file {
                    Some(path) => Some(SecretKey::read(path)?),
                    None => None,
                }
            }
            None => {
                let path = settings.data_dir.join("coord").join("root.key");
                let (key, _created) = keys::read_or_create(&path)?;
                let principal = keys::principal(&key.public());
                values.push(("root-key".into(), principal.clone()));
                development_key = Some((path, principal));
                Some(key)
            }
        };
        if let Some(issuer) = issuer {
            values.push(("issuer-key".into(), issuer.seed_hex()));
        }
        if let Some(audience) = &settings.coord_audience {
            values.push(("audience".into(), audience.clone()));
        }
        let tools = tools(&settings.coord_tools, blobs, settings.blob_cap)?;
        values.push(("tools".into(), tools_setting(&tools)));
        Ok(CoordSettings {
            values,
            tools,
            audience_from_listener: settings.coord_audience.is_none(),
            development_key,
        })
    }

    /// Sets the service's settings, given the bound address of its
    /// operations listener, and says how to use a development root key.
    pub fn configure(&self, config: &ServiceConfig, operations: SocketAddr) {
        for (name, value) in &self.values {
            config.set(name, value.clone());
        }
        if self.audience_from_listener {
            config.set("audience", format!("http://{operations}"));
        }
        if let Some((path, principal)) = &self.development_key {
            let audience = config.get("audience").unwrap_or_default();
            tracing::info!(
                "development root key: {} (principal {principal}); sign requests with: \
                 labctl --key {} --endpoint {audience} ...",
                path.display(),
                path.display()
            );
        }
    }
}

/// One `--coord-tool DESCRIPTION=COMPONENT`.
#[derive(Debug, PartialEq, Eq)]
struct ToolSpec {
    description: PathBuf,
    component: PathBuf,
}

impl ToolSpec {
    /// Splits at the first `=`: a description path cannot hold one, a
    /// component path can.
    fn parse(spec: &str) -> Result<ToolSpec, String> {
        let (description, component) = spec
            .split_once('=')
            .ok_or_else(|| "expected DESCRIPTION=COMPONENT (two paths)".to_string())?;
        if description.is_empty() {
            return Err("the DESCRIPTION path (before `=`) is empty".into());
        }
        if component.is_empty() {
            return Err("the COMPONENT path (after `=`) is empty".into());
        }
        Ok(ToolSpec {
            description: description.into(),
            component: component.into(),
        })
    }
}

/// A configured tool release.
pub struct ConfiguredTool {
    /// The `--coord-tool` value, for messages.
    pub spec: String,
    /// The description file's text.
    pub description: String,
    /// The component's digest in the blob store, and its size.
    pub component: Digest32,
    pub size: u64,
}

/// The `tools` setting: the JSON array the component reads.
fn tools_setting(tools: &[ConfiguredTool]) -> String {
    let entries: Vec<String> = tools
        .iter()
        .map(|tool| {
            format!(
                r#"{{"description":{},"component":"sha256:{}","size":{}}}"#,
                serde_json::Value::String(tool.description.clone()),
                hex::encode(tool.component),
                tool.size
            )
        })
        .collect();
    format!("[{}]", entries.join(","))
}

/// Checks every `--coord-tool` and reads every description before copying
/// any component, so a refusal that costs nothing comes before the copies.
fn tools(
    specs: &[String],
    blobs: &Arc<BlobStore>,
    cap: u64,
) -> Result<Vec<ConfiguredTool>, CoordError> {
    let refuse = |spec: &str, what: String| CoordError::Tool {
        spec: spec.to_string(),
        what,
    };
    let mut checked: Vec<(&str, ToolSpec, String, File)> = Vec::new();
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for spec in specs {
        let tool = ToolSpec::parse(spec).map_err(|what| refuse(spec, what))?;
        let description = tool.description.as_path();
        // The same file under two spellings is the same description.
        let canonical = fs::canonicalize(description)
            .map_err(|e| refuse(spec, format!("description {}: {e}", description.display())))?;
        if let Some((_, first)) = seen.iter().find(|(path, _)| *path == canonical) {
            return Err(refuse(
                spec,
                format!(
                    "description {} is already configured by `--coord-tool {first}`",
                    description.display()
                ),
            ));
        }
        let text = read_description(description).map_err(|what| refuse(spec, what))?;
        let component = open_component(&tool.component, cap).map_err(|what| refuse(spec, what))?;
        seen.push((canonical, spec));
        checked.push((spec, tool, text, component));
    }
    let mut entries = Vec::with_capacity(checked.len());
    for (spec, tool, description, file) in checked {
        let (digest, size) = store_component(file, &tool.component, blobs, cap)
            .map_err(|what| refuse(spec, what))?;
        entries.push(ConfiguredTool {
            spec: spec.to_string(),
            description,
            component: digest,
            size,
        });
    }
    Ok(entries)
}

/// A description's text: UTF-8, at most [`TOOL_DESCRIPTION_CAP`] bytes.
fn read_description(path: &Path) -> Result<String, String> {
    let failed = |e: io::Error| format!("description {}: {e}", path.display());
    let mut bytes = Vec::new();
    File::open(path)
        .map_err(failed)?
        .take(TOOL_DESCRIPTION_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > TOOL_DESCRIPTION_CAP {
        return Err(format!(
            "description {} is larger than {TOOL_DESCRIPTION_CAP} bytes (1 MiB)",
            path.display()
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "description {} is not UTF-8 text (invalid at byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Opens a component file, refusing one already known to pass the cap.
fn open_component(path: &Path, cap: u64) -> Result<File, String> {
    let failed = |e: io::Error| format!("component {}: {e}", path.display());
    let file = File::open(path).map_err(failed)?;
    let size = file.metadata().map_err(failed)?.len();
    if size > cap {
        return Err(too_large(path, cap));
    }
    Ok(file)
}

fn too_large(path: &Path, cap: u64) -> String {
    format!(
        "component {} is larger than the blob cap ({cap} bytes, --blob-cap)",
        path.display()
    )
}

/// Streams a component file into a new blob and commits it; returns its
/// digest and size.
fn store_component(
    mut file: File,
    path: &Path,
    blobs: &Arc<BlobStore>,
    cap: u64,
) -> Result<(Digest32, u64), String> {
    let stored = |e: WriteError| match e {
        WriteError::TooLarge => too_large(path, cap),
        e => format!("component {}: {e}", path.display()),
    };
    let mut writer = blobs.writer(cap);
    let mut chunk = vec![0u8; COMPONENT_CHUNK];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("component {}: {e}", path.display())),
        };
        writer.write(&chunk[..n]).map_err(stored)?;
    }
    writer.commit().map_err(stored)
}

/// The Unix second this process resolved its settings in, before any
/// component prepared: the coordination service refuses proofs timestamped
/// at or before it (contracts/coordination/AUTH.md, step 3). A reload
/// happens within the same process, so it moves nothing.
fn host_started() -> u64 {
    crate::clock::unix_now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blobstore::random_16;
    use clap::Parser;
    use sha2::{Digest, Sha256};

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("coord-{name}-{}", hex::encode(random_16())));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn store(dir: &Path) -> Arc<BlobStore> {
        Arc::new(BlobStore::open(&dir.join("blobs")).unwrap())
    }

    fn spec(description: &Path, component: &Path) -> String {
        format!("{}={}", description.display(), component.display())
    }

    fn setting_of(
        specs: &[String],
        blobs: &Arc<BlobStore>,
        cap: u64,
    ) -> Result<String, CoordError> {
        tools(specs, blobs, cap).map(|t| tools_setting(&t))
    }

    fn refusal(result: Result<String, CoordError>) -> String {
        match result {
            Err(e @ CoordError::Tool { .. }) => e.to_string(),
            other => panic!("expected a --coord-tool refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_tool_is_two_paths_split_at_the_first_equals_sign() {
        assert_eq!(
            ToolSpec::parse("tools/fmt.json=build/fmt.wasm").unwrap(),
            ToolSpec {
                description: "tools/fmt.json".into(),
                component: "build/fmt.wasm".into(),
            }
        );
        assert_eq!(
            ToolSpec::parse("d.json=c=1.wasm").unwrap(),
            ToolSpec {
                description: "d.json".into(),
                component: "c=1.wasm".into(),
            }
        );
        for (bad, why) in [
            ("fmt.json", "DESCRIPTION=COMPONENT"),
            ("", "DESCRIPTION=COMPONENT"),
            ("=fmt.wasm", "DESCRIPTION path"),
            ("fmt.json=", "COMPONENT path"),
            ("=", "DESCRIPTION path"),
        ] {
            let error = ToolSpec::parse(bad).unwrap_err();
            assert!(error.contains(why), "{bad:?}: {error}");
        }
    }

    #[test]
    fn tools_are_descriptions_and_stored_components_in_flag_order() {
        let dir = temp_dir("tools");
        let blobs = store(&dir);
        assert_eq!(setting_of(&[], &blobs, 1 << 20).unwrap(), "[]");

        let description = "{\"name\": \"fmt\",\n \"note\": \"quotes \\\" and é\"}\n";
        fs::write(dir.join("fmt.json"), description).unwrap();
        fs::write(dir.join("lint.json"), "{}").unwrap();
        let fmt: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        fs::write(dir.join("fmt.wasm"), &fmt).unwrap();
        fs::write(dir.join("lint.wasm"), b"\0asm").unwrap();
        let specs = [
            spec(&dir.join("lint.json"), &dir.join("lint.wasm")),
            spec(&dir.join("fmt.json"), &dir.join("fmt.wasm")),
        ];
        let value = setting_of(&specs, &blobs, 1 << 30).unwrap();

        let parsed: serde_json::Value = serde_json::from_str(&value).unwrap();
        let fmt_digest: Digest32 = Sha256::digest(&fmt).into();
        let lint_digest: Digest32 = Sha256::digest(b"\0asm").into();
        assert_eq!(
            parsed,
            serde_json::json!([
                {
                    "description": "{}",
                    "component": format!("sha256:{}", hex::encode(lint_digest)),
                    "size": 4,
                },
                {
                    "description": description,
                    "component": format!("sha256:{}", hex::encode(fmt_digest)),
                    "size": fmt.len(),
                },
            ])
        );
        assert!(value.starts_with(r#"[{"description":"{}","component":"sha256:"#));
        // The components are retained, under their digests.
        assert_eq!(blobs.size(&fmt_digest).unwrap(), Some(fmt.len() as u64));
        assert_eq!(blobs.size(&lint_digest).unwrap(), Some(4));
        let mut head = [0u8; 4];
        let reader = blobs.open_blob(&lint_digest).unwrap().unwrap();
        assert_eq!(reader.read_at(0, &mut head).unwrap(), 4);
        assert_eq!(&head, b"\0asm");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unusable_tools_are_refused_before_any_component_is_stored() {
        let dir = temp_dir("refused");
        let blobs = store(&dir);
        fs::write(dir.join("ok.json"), "{}").unwrap();
        fs::write(dir.join("ok.wasm"), b"component").unwrap();
        fs::write(dir.join("latin1.json"), b"{\"n\": \"caf\xe9\"}").unwrap();
        fs::write(
            dir.join("big.json"),
            vec![b' '; TOOL_DESCRIPTION_CAP as usize + 1],
        )
        .unwrap();
        fs::write(
            dir.join("edge.json"),
            vec![b' '; TOOL_DESCRIPTION_CAP as usize],
        )
        .unwrap();
        let ok = spec(&dir.join("ok.json"), &dir.join("ok.wasm"));
        let with = |description: &str, component: &str| {
            [
                ok.clone(),
                spec(&dir.join(description), &dir.join(component)),
            ]
        };

        let error = refusal(setting_of(&with("absent.json", "ok.wasm"), &blobs, 1 << 20));
        assert!(
            error.contains("absent.json") && error.contains("No such file"),
            "{error}"
        );
        let error = refusal(setting_of(
            &with("edge.json", "absent.wasm"),
            &blobs,
            1 << 20,
        ));
        assert!(
            error.contains("absent.wasm") && error.contains("No such file"),
            "{error}"
        );
        let error = refusal(setting_of(&with("latin1.json", "ok.wasm"), &blobs, 1 << 20));
        assert!(error.contains("not UTF-8"), "{error}");
        let error = refusal(setting_of(&with("big.json", "ok.wasm"), &blobs, 1 << 20));
        assert!(error.contains("larger than 1048576 bytes"), "{error}");
        // The same description twice, also under another spelling.
        let error = refusal(setting_of(&with("ok.json", "ok.wasm"), &blobs, 1 << 20));
        assert!(error.contains("already configured"), "{error}");
        let error = refusal(setting_of(&with("./ok.json", "ok.wasm"), &blobs, 1 << 20));
        assert!(error.contains("already configured"), "{error}");
        let error = refusal(setting_of(&with("edge.json", "ok.wasm"), &blobs, 4));
        assert!(
            error.contains("larger than the blob cap (4 bytes"),
            "{error}"
        );
        let error = refusal(setting_of(&["ok.json".into()], &blobs, 1 << 20));
        assert!(
            error.starts_with("--coord-tool `ok.json`: expected"),
            "{error}"
        );
        // Nothing was stored, not even the first tool's component.
        let stored: Digest32 = Sha256::digest(b"component").into();
        assert_eq!(blobs.size(&stored).unwrap(), None);

        // A description of exactly 1 MiB is accepted.
        let value = setting_of(&with("edge.json", "ok.wasm"), &blobs, 1 << 20).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&value).unwrap()[1]["size"],
            9
        );
        assert_eq!(blobs.size(&stored).unwrap(), Some(9));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn resolve_passes_tools_and_an_empty_list_without_any() {
        let dir = temp_dir("resolve");
        let blobs = store(&dir);
        let data = dir.join("data");
        let value = |settings: &Settings| {
            let coord = CoordSettings::resolve(settings, &blobs).unwrap();
            let (_, tools) = coord.values.iter().find(|(n, _)| n == "tools").unwrap();
            tools.clone()
        };
        let settings = Settings::parse_from(["labd", "--data-dir", data.to_str().unwrap()]);
        assert_eq!(value(&settings), "[]");

        fs::write(dir.join("a.json"), "{\"a\": 1}").unwrap();
        fs::write(dir.join("a.wasm"), b"a").unwrap();
        fs::write(dir.join("b.json"), "{\"b\": 2}").unwrap();
        let a = spec(&dir.join("a.json"), &dir.join("a.wasm"));
        let b = spec(&dir.join("b.json"), &dir.join("a.wasm"));
        let settings = Settings::parse_from([
            "labd",
            "--data-dir",
            data.to_str().unwrap(),
            "--coord-tool",
            &a,
            "--coord-tool",
            &b,
        ]);
        let tools: serde_json::Value = serde_json::from_str(&value(&settings)).unwrap();
        assert_eq!(tools[0]["description"], "{\"a\": 1}");
        assert_eq!(tools[1]["description"], "{\"b\": 2}");
        assert_eq!(tools[0]["component"], tools[1]["component"]);
        fs::remove_dir_all(dir).unwrap();
    }
}
