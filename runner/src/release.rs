//! What the host reads of a release's description, and the check of its
//! component's imports against it (`contracts/coordination/TOOLS.md`).
//!
//! The host reads only `effects`, `egress` and the output roles; the
//! coordination service checks the whole description.

use wasmtime::component::Component;
use wasmtime::Engine;

/// An effect a release may declare: an interface of the tool world that is
/// linked only for releases that declare it, in deployments that allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// `lab:tool/clock`: the wall clock.
    Clock,
    /// `lab:tool/random`: the host's random source.
    Random,
}

impl Effect {
    pub const ALL: [Effect; 2] = [Effect::Clock, Effect::Random];

    pub fn name(self) -> &'static str {
        match self {
            Effect::Clock => "clock",
            Effect::Random => "random",
        }
    }

    pub fn parse(name: &str) -> Option<Effect> {
        Effect::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The interface that grants it.
    fn interface(self) -> &'static str {
        match self {
            Effect::Clock => "lab:tool/clock@0.1.0",
            Effect::Random => "lab:tool/random@0.1.0",
        }
    }
}

/// Interfaces every release may import.
const BASE_IMPORTS: [&str; 3] = [
    "lab:tool/inputs@0.1.0",
    "lab:tool/outputs@0.1.0",
    "lab:tool/log@0.1.0",
];

/// Why a release cannot be configured.
#[derive(Debug, PartialEq, Eq)]
pub enum ReleaseError {
    /// The description is not JSON with the members the host reads.
    Description(String),
    /// The description declares an effect this source does not know.
    UnknownEffect(String),
    /// The description declares an effect the deployment does not allow.
    EffectNotAllowed(Effect),
    /// The description declares egress; releases get no network here.
    Egress(Vec<String>),
    /// The component imports an effect's interface its description does
    /// not declare.
    UndeclaredEffect(Effect),
    /// The component imports something outside the tool world.
    ForeignImport(String),
    /// The component does not compile or does not export `run`.
    Component(String),
}

impl std::fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReleaseError::Description(what) => write!(f, "description: {what}"),
            ReleaseError::UnknownEffect(name) => write!(
                f,
                "declares the effect `{name}`, which this host does not know (known: clock, random)"
            ),
            ReleaseError::EffectNotAllowed(effect) => write!(
                f,
                "declares the effect `{}`, which this deployment does not allow (--tool-effects)",
                effect.name()
            ),
            ReleaseError::Egress(egress) => write!(
                f,
                "declares egress {egress:?}; this host gives releases no network"
            ),
            ReleaseError::UndeclaredEffect(effect) => write!(
                f,
                "its component imports `{}` (the effect `{}`), which its description does not declare",
                effect.interface(),
                effect.name()
            ),
            ReleaseError::ForeignImport(import) => write!(
                f,
                "its component imports `{import}`, which is outside the tool world (wit/tool)"
            ),
            ReleaseError::Component(what) => write!(f, "its component: {what}"),
        }
    }
}

impl std::error::Error for ReleaseError {}

/// What the host holds a release to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseTerms {
    pub effects: Vec<Effect>,
    /// The roles its outputs may have.
    pub output_roles: Vec<String>,
}

impl ReleaseTerms {
    /// Reads `effects`, `egress` and `outputs` of a description and checks
    /// them against the deployment's `allowed` effects.
    pub fn read(description: &str, allowed: &[Effect]) -> Result<ReleaseTerms, ReleaseError> {
        let bad = |what: &str| ReleaseError::Description(what.to_string());
        let value: serde_json::Value =
            serde_json::from_str(description).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let strings = |member: &str| -> Result<Vec<String>, ReleaseError> {
            value
                .get(member)
                .and_then(|v| v.as_array())
                .and_then(|items| {
                    items
                        .iter()
                        .map(|i| i.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| bad(&format!("`{member}` must be an array of strings")))
        };
        let egress = strings("egress")?;
        if !egress.is_empty() {
            return Err(ReleaseError::Egress(egress));
        }
        let mut effects = Vec::new();
        for name in strings("effects")? {
            let effect = Effect::parse(&name).ok_or(ReleaseError::UnknownEffect(name))?;
            if !allowed.contains(&effect) {
                return Err(ReleaseError::EffectNotAllowed(effect));
            }
            effects.push(effect);
        }
        let output_roles = value
            .get("outputs")
            .and_then(|v| v.as_array())
            .and_then(|items| {
                items
                    .iter()
                    .map(|o| o.get("role").and_then(|r| r.as_str()).map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| bad("`outputs` must be an array of objects with a `role` string"))?;
        Ok(ReleaseTerms {
            effects,
            output_roles,
        })
    }

    /// Checks the component's own imports: the tool world's base
    /// interfaces, and the interfaces of declared effects; nothing else.
    pub fn check_imports(
        &self,
        engine: &Engine,
        component: &Component,
    ) -> Result<(), ReleaseError> {
        for (name, _) in component.component_type().imports(engine) {
            if BASE_IMPORTS.contains(&name) {
                continue;
            }
            match Effect::ALL.into_iter().find(|e| e.interface() == name) {
                Some(effect) if self.effects.contains(&effect) => {}
                Some(effect) => return Err(ReleaseError::UndeclaredEffect(effect)),
                None => return Err(ReleaseError::ForeignImport(name.to_string())),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description(effects: &str, egress: &str) -> String {
        format!(
            r#"{{"name":"t","version":"1","class":"c","inputs":[],"outputs":[{{"role":"out"}}],"effects":{effects},"egress":{egress},"deterministic":true}}"#
        )
    }

    #[test]
    fn a_description_declares_known_allowed_effects_and_no_egress() {
        let terms = ReleaseTerms::read(&description(r#"["clock"]"#, "[]"), &Effect::ALL).unwrap();
        assert_eq!(terms.effects, vec![Effect::Clock]);
        assert_eq!(terms.output_roles, vec!["out".to_string()]);
        assert_eq!(
            ReleaseTerms::read(&description(r#"["network"]"#, "[]"), &Effect::ALL),
            Err(ReleaseError::UnknownEffect("network".into()))
        );
        assert_eq!(
            ReleaseTerms::read(&description(r#"["random"]"#, "[]"), &[Effect::Clock]),
            Err(ReleaseError::EffectNotAllowed(Effect::Random))
        );
        assert_eq!(
            ReleaseTerms::read(&description("[]", r#"["example.org:443"]"#), &Effect::ALL),
            Err(ReleaseError::Egress(vec!["example.org:443".into()]))
        );
        assert!(matches!(
            ReleaseTerms::read(&description("[1]", "[]"), &Effect::ALL),
            Err(ReleaseError::Description(_))
        ));
    }
}
