//! The world layout: which kind of space a path names, the structural
//! labels, and the grammar of labels users choose.

use crate::refusal::Refusal;

/// Labels the layout places; no user label may be one of them.
pub const STRUCTURAL: &[&str] = &[
    "tools",
    "releases",
    "artifacts",
    "declarations",
    "applications",
    "snapshots",
    "inventories",
    "views",
    "workers",
    "notes",
    "state",
    "assignments",
    "evidence",
];

/// The organizers every world has.
pub const WORLD_ORGANIZERS: &[&str] = &["tools", "projects", "campaigns"];
/// The organizers every project has.
pub const PROJECT_ORGANIZERS: &[&str] = &[
    "artifacts",
    "applications",
    "snapshots",
    "inventories",
    "views",
    "workers",
];
/// The organizers every campaign has (beside its `state` leaf).
pub const CAMPAIGN_ORGANIZERS: &[&str] = &["assignments", "evidence"];

/// Greatest length of a user label, in characters.
pub const MAX_USER_LABEL: usize = 128;

/// What a path below the world names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    World,
    /// `tools`, `projects`, `campaigns`, a project's or campaign's
    /// organizers, `releases`, `notes`.
    Organizer,
    Tool,
    Release,
    Project,
    Artifact,
    Declarations,
    Application,
    /// `snapshots/<n>`, `inventories/<n>`.
    ProjectRecord,
    View,
    Worker,
    WorkerState,
    Note,
    Campaign,
    CampaignState,
    Assignment,
    Evidence,
    /// Not a position of the layout.
    Outside,
}

/// The position `path` (labels below the world) names.
pub fn classify(path: &[String]) -> Position {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    use Position::*;
    match p[..] {
        [] => World,
        ["tools" | "projects" | "campaigns"] => Organizer,
        ["tools", _] => Tool,
        ["tools", _, "releases"] => Organizer,
        ["tools", _, "releases", _] => Release,
        ["tools", _, "releases", _, "declarations"] => Declarations,
        ["projects", _] => Project,
        ["projects", _, org] if PROJECT_ORGANIZERS.contains(&org) => Organizer,
        ["projects", _, "artifacts", _] => Artifact,
        ["projects", _, "artifacts", _, "declarations"] => Declarations,
        ["projects", _, "applications", _] => Application,
        ["projects", _, "snapshots" | "inventories", _] => ProjectRecord,
        ["projects", _, "views", _] => View,
        ["projects", _, "workers", _] => Worker,
        ["projects", _, "workers", _, "state"] => WorkerState,
        ["projects", _, "workers", _, "notes"] => Organizer,
        ["projects", _, "workers", _, "notes", _] => Note,
        ["campaigns", _] => Campaign,
        ["campaigns", _, "state"] => CampaignState,
        ["campaigns", _, org] if CAMPAIGN_ORGANIZERS.contains(&org) => Organizer,
        ["campaigns", _, "assignments", _] => Assignment,
        ["campaigns", _, "evidence", _] => Evidence,
        _ => Outside,
    }
}

/// A label a user chooses (project, campaign, worker, artifact, record
/// leaf, assignment): 1..128 characters of `[A-Za-z0-9._~-]` starting with
/// a letter or digit, and not a structural label.
pub fn check_user_label(field: &str, label: &str) -> Result<(), Refusal> {
    let grammar = !label.is_empty()
        && label.len() <= MAX_USER_LABEL
        && label.as_bytes()[0].is_ascii_alphanumeric()
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b));
    if !grammar {
        return Err(Refusal::invalid(
            field,
            "a label is 1..128 characters of [A-Za-z0-9._~-] starting with a letter or digit",
        ));
    }
    if STRUCTURAL.contains(&label) || WORLD_ORGANIZERS.contains(&label) {
        return Err(Refusal::structural(label));
    }
    Ok(())
}

/// Checks every user-chosen label of a path that names a layout position:
/// the labels at positions the layout leaves to users.
pub fn check_user_labels(path: &[String]) -> Result<(), Refusal> {
    let user_positions: &[usize] = match classify(path) {
        Position::Project => &[1],
        Position::Artifact | Position::Application | Position::ProjectRecord | Position::View => {
            &[1, 3]
        }
        Position::Worker => &[1, 3],
        Position::WorkerState => &[1, 3],
        Position::Note => &[1, 3, 5],
        Position::Campaign | Position::CampaignState => &[1],
        Position::Assignment | Position::Evidence => &[1, 3],
        _ => &[],
    };
    for &i in user_positions {
        check_user_label("path", &path[i])?;
    }
    Ok(())
}

/// Whether a path names a leaf where `publish` may write records.
pub fn is_publishable(position: Position) -> bool {
    matches!(
        position,
        Position::ProjectRecord | Position::Note | Position::Evidence
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn positions() {
        assert_eq!(classify(&path("")), Position::World);
        assert_eq!(
            classify(&path("projects/p/artifacts/a")),
            Position::Artifact
        );
        assert_eq!(
            classify(&path("projects/p/artifacts/a/declarations")),
            Position::Declarations
        );
        assert_eq!(
            classify(&path("projects/p/workers/w/notes/n")),
            Position::Note
        );
        assert_eq!(classify(&path("projects/p/misc/n")), Position::Outside);
        assert_eq!(
            classify(&path("campaigns/c/evidence/e")),
            Position::Evidence
        );
        assert!(is_publishable(classify(&path("projects/p/snapshots/s"))));
        assert!(!is_publishable(classify(&path(
            "projects/p/workers/w/state"
        ))));
        assert!(!is_publishable(classify(&path("projects/p/views/v"))));
    }

    #[test]
    fn user_labels() {
        assert!(check_user_label("label", "alpha-1.v2").is_ok());
        assert_eq!(check_user_label("label", "").unwrap_err().code(), "invalid");
        assert_eq!(
            check_user_label("label", "-x").unwrap_err().code(),
            "invalid"
        );
        assert_eq!(
            check_user_label("label", "a b").unwrap_err().code(),
            "invalid"
        );
        assert_eq!(
            check_user_label("label", &"a".repeat(129))
                .unwrap_err()
                .code(),
            "invalid"
        );
        assert_eq!(
            check_user_label("label", "artifacts").unwrap_err().code(),
            "structural"
        );
        assert_eq!(
            check_user_label("label", "state").unwrap_err().code(),
            "structural"
        );
        assert_eq!(
            check_user_labels(&path("projects/views/snapshots/x"))
                .unwrap_err()
                .code(),
            "structural"
        );
    }
}
