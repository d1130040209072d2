//! `lab:platform/config`: the deployment's settings for one service.

use super::RequestState;
use crate::bindings::config;
use std::collections::BTreeMap;
use std::sync::RwLock;
use wasmtime::Result;

/// A service's settings by name. The host sets them before the service
/// starts, and may add ones it learns later (an address known only once
/// its listener is bound) before the service serves a request; every
/// request reads the values current when it asks.
#[derive(Debug, Default)]
pub struct ServiceConfig(RwLock<BTreeMap<String, String>>);

impl ServiceConfig {
    pub fn new(settings: impl IntoIterator<Item = (String, String)>) -> Self {
        ServiceConfig(RwLock::new(settings.into_iter().collect()))
    }

    pub fn get(&self, name: &str) -> Option<String> {
        self.0.read().unwrap().get(name).cloned()
    }

    pub fn set(&self, name: &str, value: String) {
        self.0.write().unwrap().insert(name.to_string(), value);
    }
}

impl config::Host for RequestState {
    async fn get(&mut self, name: String) -> Result<Option<String>> {
        Ok(self.env.config.get(&name))
    }
}
