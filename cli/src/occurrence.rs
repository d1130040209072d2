//! How labctl writes an occurrence (EntryRef) on the command line and in
//! its output: `ROOT_ID/SPACE_ID/POSITION`.

use serde_json::{json, Value};

/// Reads `ROOT_ID/SPACE_ID/POSITION` as an EntryRef.
pub fn parse(text: &str) -> Result<Value, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let [root_id, space_id, position] = parts[..] else {
        return Err(format!(
            "{text:?}: an occurrence is ROOT_ID/SPACE_ID/POSITION"
        ));
    };
    let position: u64 = position
        .parse()
        .map_err(|_| format!("{text:?}: the position is an integer"))?;
    Ok(json!({ "root_id": root_id, "space_id": space_id, "position": position }))
}

/// `ROOT_ID/SPACE_ID/POSITION` of an EntryRef in an answer (`-` when it
/// is not one).
pub fn written(entry: &Value) -> String {
    match (
        entry["root_id"].as_str(),
        entry["space_id"].as_str(),
        entry["position"].as_u64(),
    ) {
        (Some(root), Some(space), Some(position)) => format!("{root}/{space}/{position}"),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_are_written_and_read_back() {
        let entry = parse("rt_a/spc_b/7").unwrap();
        assert_eq!(
            entry,
            json!({"root_id": "rt_a", "space_id": "spc_b", "position": 7})
        );
        assert_eq!(written(&entry), "rt_a/spc_b/7");
        assert!(parse("rt_a/spc_b").is_err());
        assert!(parse("rt_a/spc_b/x").is_err());
    }
}
