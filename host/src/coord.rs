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
//!
//! Without `--coord-root-key`, the root key is a development key kept in
//! `<data-dir>/coord/root.key` and created on the first start.

use crate::capabilities::ServiceConfig;
use crate::keys::{self, KeyError, SecretKey};
use crate::settings::Settings;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The coordination service's settings, resolved before anything binds.
pub struct CoordSettings {
    values: Vec<(String, String)>,
    /// Whether `audience` waits for the bound operations address.
    audience_from_listener: bool,
    /// The development root key's file and principal, when one is used.
    development_key: Option<(PathBuf, String)>,
}

impl CoordSettings {
    /// Checks the configured keys and reads (or creates) the development
    /// root key when no root key is configured.
    pub fn resolve(settings: &Settings) -> Result<CoordSettings, KeyError> {
        let mut values = vec![("world".to_string(), settings.coord_world.clone())];
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
        Ok(CoordSettings {
            values,
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
