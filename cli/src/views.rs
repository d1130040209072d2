//! `labctl compose`, `labctl query` and `labctl explain`: views, with
//! their requests built from options and their answers printed for people
//! (or as JSON with `--json`).
//!
//! An occurrence is written `ROOT_ID/SPACE_ID/POSITION`.

use clap::Args;
use serde_json::{json, Map, Value};

use crate::call::call_json;
use crate::failure::Failure;
use crate::Common;

/// An occurrence from `ROOT_ID/SPACE_ID/POSITION`.
fn occurrence(text: &str) -> Result<Value, String> {
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

/// `ROOT_ID/SPACE_ID/POSITION` of an occurrence in an answer.
fn written(entry: &Value) -> String {
    match (
        entry["root_id"].as_str(),
        entry["space_id"].as_str(),
        entry["position"].as_u64(),
    ) {
        (Some(root), Some(space), Some(position)) => format!("{root}/{space}/{position}"),
        _ => "-".into(),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[derive(Debug, Args)]
pub struct ComposeArgs {
    /// The caller's operation ID (a retry sends the same one).
    #[arg(long = "operation-id", value_name = "ID")]
    pub operation_id: String,
    /// The view's project.
    #[arg(long, value_name = "LABEL")]
    pub project: String,
    /// The view's name (`projects/<project>/views/<name>`).
    #[arg(long, value_name = "LABEL")]
    pub name: String,
    /// A selected occurrence, ROOT_ID/SPACE_ID/POSITION; repeatable, in
    /// order.
    #[arg(long = "select", value_name = "OCCURRENCE", value_parser = occurrence)]
    pub selections: Vec<Value>,
    /// Prefer these publishers' claims, highest rank first (the
    /// `prefer_publishers` rule); repeatable.
    #[arg(long = "prefer", value_name = "PRINCIPAL")]
    pub prefer: Vec<String>,
    /// Ignore supersedes, withdraws and challenges among the selections.
    #[arg(long)]
    pub ignore_relations: bool,
    /// The view's journal head the caller expects (a precondition).
    #[arg(long = "expected-cutoff", value_name = "N")]
    pub expected_cutoff: Option<u64>,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_compose(args: ComposeArgs, common: &Common) -> Result<(), Failure> {
    let mut rules = Map::new();
    if !args.prefer.is_empty() {
        rules.insert("conflict".into(), json!("prefer_publishers"));
        rules.insert("publishers".into(), json!(args.prefer));
    }
    if args.ignore_relations {
        rules.insert("relations".into(), json!("ignore"));
    }
    let mut body = json!({
        "operation_id": args.operation_id,
        "path": ["projects", args.project, "views", args.name],
        "selections": args.selections,
        "rules": rules,
        "interpretation_profile": "coord/view/1",
    });
    if let Some(cutoff) = args.expected_cutoff {
        body["expected_cutoff"] = json!(cutoff);
    }
    let answer = call_json(common, "compose", &body)?;
    if args.json {
        return print_json(&answer);
    }
    let record = &answer["record"];
    println!("view      {}", written(&record["entry"]));
    println!("record    {}", text(&record["hash"]));
    println!("accepted  {}", text(&record["accepted_at"]));
    let how = if answer["replayed"] == true {
        "replayed"
    } else if answer["space_created"] == true {
        "composed (the view's space was created)"
    } else {
        "composed"
    };
    println!("{how}");
    Ok(())
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The view occurrence, ROOT_ID/SPACE_ID/POSITION.
    #[arg(long, value_name = "OCCURRENCE", value_parser = occurrence)]
    pub view: Value,
    /// Only `declaration` or `record` items.
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Only claims about the artifact with these bytes (sha256:...).
    #[arg(long, value_name = "HASH")]
    pub artifact: Option<String>,
    /// Only claims about this subject.
    #[arg(long, value_name = "SUBJECT", conflicts_with = "no_subject")]
    pub subject: Option<String>,
    /// Only claims without a subject.
    #[arg(long)]
    pub no_subject: bool,
    /// Only claims of this property.
    #[arg(long, value_name = "NAME")]
    pub property: Option<String>,
    /// Only items of this publisher.
    #[arg(long, value_name = "PRINCIPAL")]
    pub publisher: Option<String>,
    /// Only items in this state (adopted, agreeing, disagreeing, overruled,
    /// retired, relation, record).
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// Records per page, 1..128 (default 64).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Resume from this cursor.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Follow `next_cursor` to the last page.
    #[arg(long)]
    pub all: bool,
    /// Print each page as JSON (one document per page).
    #[arg(long)]
    pub json: bool,
}

fn filters(args: &QueryArgs) -> Value {
    let mut filters = Map::new();
    let mut put = |name: &str, value: &Option<String>| {
        if let Some(value) = value {
            filters.insert(name.into(), json!(value));
        }
    };
    put("kind", &args.kind);
    put("artifact", &args.artifact);
    put("subject", &args.subject);
    put("property", &args.property);
    put("publisher", &args.publisher);
    put("state", &args.state);
    if args.no_subject {
        filters.insert("subject".into(), Value::Null);
    }
    Value::Object(filters)
}

/// One line per item: state, kind, selection, then what it says.
fn item_line(item: &Value) -> String {
    let selection = written(&item["selection"]);
    let state = text(&item["state"]);
    if item["kind"] == "record" {
        let record = &item["record"];
        return format!(
            "{state:<12} record       {selection}  {} {}",
            text(&record["profile"]),
            text(&record["hash"])
        );
    }
    let claim = if item["property"].is_null() {
        "(relations only)".to_string()
    } else {
        format!("{} = {}", text(&item["property"]), item["value"])
    };
    format!(
        "{state:<12} declaration  {selection}  {} {} {claim}  [key {}]",
        text(&item["artifact"]["bytes"]),
        text(&item["subject"]),
        text(&item["key"]["status"]),
    )
}

pub fn run_query(args: QueryArgs, common: &Common) -> Result<(), Failure> {
    let mut body = json!({ "view": args.view, "filters": filters(&args) });
    if let Some(limit) = args.limit {
        body["limit"] = json!(limit);
    }
    let mut cursor = args.cursor.clone();
    loop {
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let page = call_json(common, "query", &body)?;
        if args.json {
            print_json(&page)?;
        } else {
            for item in page["records"].as_array().into_iter().flatten() {
                println!("{}", item_line(item));
            }
        }
        cursor = page["next_cursor"].as_str().map(String::from);
        if !args.all || cursor.is_none() {
            if !args.json {
                let coverage = &page["coverage"];
                println!(
                    "outcome {}: inspected {} of {} selections, matched {}, withheld {}{}",
                    text(&page["outcome"]),
                    coverage["inspected"],
                    coverage["selections"],
                    coverage["matched"],
                    coverage["withheld"],
                    if coverage["complete"] == true {
                        String::new()
                    } else {
                        format!(
                            "; ended by {}",
                            page["limits"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(text)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                );
                if let Some(next) = &cursor {
                    println!("next cursor {next}");
                }
            }
            return Ok(());
        }
    }
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The view occurrence, ROOT_ID/SPACE_ID/POSITION.
    #[arg(long, value_name = "OCCURRENCE", value_parser = occurrence)]
    pub view: Value,
    /// The assertion ID to explain.
    #[arg(value_name = "ASSERTION")]
    pub assertion: String,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_explain(args: ExplainArgs, common: &Common) -> Result<(), Failure> {
    let body = json!({ "view": args.view, "assertion": args.assertion });
    let answer = call_json(common, "explain", &body)?;
    if args.json {
        return print_json(&answer);
    }
    println!("{}", item_line(&answer["record"]));
    println!("defined by   {}", written(&answer["defined_by"]));
    println!(
        "adopted by   {}",
        if answer["adopted_by"].is_null() {
            "-".into()
        } else {
            written(&answer["adopted_by"])
        }
    );
    let disagreeing: Vec<String> = answer["disagreeing"]
        .as_array()
        .into_iter()
        .flatten()
        .map(written)
        .collect();
    if disagreeing.is_empty() {
        println!("disagreeing  -");
    }
    for (i, selection) in disagreeing.iter().enumerate() {
        let label = if i == 0 { "disagreeing" } else { "" };
        println!("{label:<12} {selection}");
    }
    Ok(())
}

fn print_json(value: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).expect("a JSON value serializes");
    println!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_are_written_and_read_back() {
        let entry = occurrence("rt_a/spc_b/7").unwrap();
        assert_eq!(
            entry,
            json!({"root_id": "rt_a", "space_id": "spc_b", "position": 7})
        );
        assert_eq!(written(&entry), "rt_a/spc_b/7");
        assert!(occurrence("rt_a/spc_b").is_err());
        assert!(occurrence("rt_a/spc_b/x").is_err());
    }

    #[test]
    fn items_print_on_one_line() {
        let item = json!({
            "kind": "declaration", "state": "adopted",
            "selection": {"root_id": "rt_a", "space_id": "spc_b", "position": 3},
            "artifact": {"bytes": "sha256:ab"}, "subject": null,
            "property": "license", "value": "MIT", "key": {"status": "agreed"},
        });
        assert_eq!(
            item_line(&item),
            "adopted      declaration  rt_a/spc_b/3  sha256:ab - license = \"MIT\"  [key agreed]"
        );
    }
}
