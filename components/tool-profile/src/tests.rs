//! The profiler's logic natively.

use crate::csv::Records;
use crate::profile::{profile, Options, DISTINCT_BOUND};
use serde_json::json;
use std::string::String;
use std::vec::Vec;

fn records(text: &str, delimiter: u8) -> Result<Vec<Vec<String>>, String> {
    let mut reader = Records::new(text, delimiter);
    let mut out = Vec::new();
    while let Some(record) = reader.next_record()? {
        out.push(record.into_iter().map(|f| f.into_owned()).collect());
    }
    Ok(out)
}

#[test]
fn rfc_4180_quoting_and_line_breaks() {
    let text = "a,\"b,c\",\"say \"\"hi\"\"\"\r\n\"multi\nline\",,x\n";
    assert_eq!(
        records(text, b',').unwrap(),
        vec![vec!["a", "b,c", "say \"hi\""], vec!["multi\nline", "", "x"]]
    );
    assert_eq!(
        records("a;b\nc;d", b';').unwrap(),
        vec![vec!["a", "b"], vec!["c", "d"]]
    );
    assert_eq!(records("", b',').unwrap(), Vec::<Vec<String>>::new());
}

#[test]
fn malformed_quoting_is_refused_with_its_line() {
    assert_eq!(
        records("a,b\nc,\"open\n", b',').unwrap_err(),
        "line 2: a quoted field is not closed"
    );
    assert_eq!(
        records("a,b\"c\n", b',').unwrap_err(),
        "line 1: a quote inside an unquoted field"
    );
    assert_eq!(
        records("\"a\"b,c\n", b',').unwrap_err(),
        "line 1: a quoted field is followed by something other than a delimiter or a line break"
    );
}

#[test]
fn profiles_columns_by_inferred_type() {
    let table = "id,price,ok,name,none\n1,2.5,true,Ann,\n2,3,FALSE,Bob,\n3,,true,Ann,\n";
    let got = profile(table, Options::default()).unwrap();
    assert_eq!(
        got,
        json!({"rows": 3, "columns": [
            {"name": "id", "count": 3, "nulls": 0, "distinct": 3, "distinct_exact": true,
             "type": "integer", "min": 1, "max": 3, "mean": 2.0},
            {"name": "price", "count": 2, "nulls": 1, "distinct": 2, "distinct_exact": true,
             "type": "number", "min": 2.5, "max": 3.0, "mean": 2.75},
            {"name": "ok", "count": 3, "nulls": 0, "distinct": 2, "distinct_exact": true, "type": "boolean"},
            {"name": "name", "count": 3, "nulls": 0, "distinct": 2, "distinct_exact": true,
             "type": "text", "min_length": 3, "max_length": 3},
            {"name": "none", "count": 0, "nulls": 3, "distinct": 0, "distinct_exact": true, "type": "empty"},
        ]})
    );
}

#[test]
fn without_a_header_columns_are_numbered() {
    let options = Options {
        delimiter: b'\t',
        header: false,
    };
    let got = profile("x\t1e3\ny\t-2\n", options).unwrap();
    assert_eq!(got["rows"], 2);
    assert_eq!(got["columns"][0]["name"], "column 1");
    assert_eq!(got["columns"][1]["type"], "number");
    assert_eq!(got["columns"][1]["min"], -2.0);
    assert_eq!(got["columns"][1]["max"], 1000.0);
    // Not decimal numbers: text.
    let got = profile("v\ninf\nNaN\n.5\n", Options::default()).unwrap();
    assert_eq!(got["columns"][0]["type"], "text");
}

#[test]
fn distinct_values_past_the_bound_are_a_lower_bound() {
    let mut table = String::from("n\n");
    for i in 0..DISTINCT_BOUND + 5 {
        table.push_str(&format!("{i}\n"));
    }
    let got = profile(&table, Options::default()).unwrap();
    assert_eq!(got["columns"][0]["distinct"], DISTINCT_BOUND);
    assert_eq!(got["columns"][0]["distinct_exact"], false);
    assert_eq!(got["rows"], DISTINCT_BOUND + 5);
}

#[test]
fn ragged_rows_are_refused() {
    assert_eq!(
        profile("a,b\n1\n", Options::default()).unwrap_err(),
        "row 2 has 1 fields, the first has 2"
    );
}

#[test]
fn the_recipe_sets_delimiter_and_header_and_nothing_else() {
    assert_eq!(Options::from_recipe("{}").unwrap(), Options::default());
    assert_eq!(Options::from_recipe("null").unwrap(), Options::default());
    assert_eq!(
        Options::from_recipe(r#"{"delimiter": ";", "header": false}"#).unwrap(),
        Options {
            delimiter: b';',
            header: false
        }
    );
    assert!(Options::from_recipe(r#"{"delimiter": "\""}"#)
        .unwrap_err()
        .starts_with("recipe: `delimiter`"));
    assert!(Options::from_recipe(r#"{"delimiter": "é"}"#)
        .unwrap_err()
        .starts_with("recipe: `delimiter`"));
    assert_eq!(
        Options::from_recipe(r#"{"quote": "'"}"#).unwrap_err(),
        "recipe: unknown member `quote`"
    );
    assert!(Options::from_recipe("[")
        .unwrap_err()
        .starts_with("recipe is not JSON"));
}
