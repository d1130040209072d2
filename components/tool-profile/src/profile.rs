//! Column statistics over a table's records.

use crate::csv::Records;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{json, Map, Value};

/// Distinct values are counted exactly up to this many per column; past
/// it the count is a lower bound.
pub const DISTINCT_BOUND: usize = 10_000;

/// How the table is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub delimiter: u8,
    pub header: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            delimiter: b',',
            header: true,
        }
    }
}

impl Options {
    /// The recipe: JSON text, `null` or an object with optional members
    /// `delimiter` (one ASCII character other than `"`, CR and LF) and
    /// `header` (a boolean). Any other member is refused.
    pub fn from_recipe(text: &str) -> Result<Options, String> {
        let mut options = Options::default();
        let recipe: Value = match text.trim() {
            "" => Value::Null,
            text => serde_json::from_str(text).map_err(|e| format!("recipe is not JSON: {e}"))?,
        };
        let members = match &recipe {
            Value::Null => return Ok(options),
            Value::Object(members) => members,
            _ => return Err("recipe must be an object".into()),
        };
        for (name, value) in members {
            match (name.as_str(), value) {
                ("delimiter", Value::String(d))
                    if d.len() == 1 && d.is_ascii() && !matches!(d.as_bytes()[0], b'"' | b'\r' | b'\n') =>
                {
                    options.delimiter = d.as_bytes()[0];
                }
                ("delimiter", _) => {
                    return Err("recipe: `delimiter` must be one ASCII character other than a quote or a line break".into())
                }
                ("header", Value::Bool(h)) => options.header = *h,
                ("header", _) => return Err("recipe: `header` must be a boolean".into()),
                (other, _) => return Err(format!("recipe: unknown member `{other}`")),
            }
        }
        Ok(options)
    }
}

/// The profile of `table` (UTF-8 CSV text).
pub fn profile(table: &str, options: Options) -> Result<Value, String> {
    let mut records = Records::new(table, options.delimiter);
    let mut columns: Vec<Column> = Vec::new();
    let mut names: Option<Vec<String>> = None;
    let mut rows = 0u64;
    while let Some(record) = records.next_record()? {
        if columns.is_empty() {
            columns = (0..record.len()).map(|_| Column::default()).collect();
            if options.header {
                names = Some(record.iter().map(|f| String::from(f.as_ref())).collect());
                continue;
            }
        }
        if record.len() != columns.len() {
            return Err(format!(
                "row {} has {} fields, the first has {}",
                rows + 1 + u64::from(options.header),
                record.len(),
                columns.len()
            ));
        }
        rows += 1;
        for (column, value) in columns.iter_mut().zip(&record) {
            column.add(value);
        }
    }
    let columns: Vec<Value> = columns
        .into_iter()
        .enumerate()
        .map(|(i, column)| {
            let name = names
                .as_ref()
                .map_or_else(|| format!("column {}", i + 1), |names| names[i].clone());
            column.to_json(name)
        })
        .collect();
    Ok(json!({ "rows": rows, "columns": columns }))
}

/// One column's statistics; the `all_*` flags say which types every
/// non-empty value so far fits (meaningful once `count` is not zero).
#[derive(Default)]
struct Column {
    count: u64,
    nulls: u64,
    distinct: BTreeSet<String>,
    saturated: bool,
    integer: Option<IntegerStats>,
    number: Option<NumberStats>,
    all_integer: bool,
    all_number: bool,
    all_boolean: bool,
    min_length: Option<u64>,
    max_length: u64,
}

struct IntegerStats {
    min: i64,
    max: i64,
    sum: i128,
}

struct NumberStats {
    min: f64,
    max: f64,
    sum: f64,
}

impl Column {
    fn add(&mut self, value: &str) {
        if value.is_empty() {
            self.nulls += 1;
            return;
        }
        if self.count == 0 {
            self.all_integer = true;
            self.all_number = true;
            self.all_boolean = true;
        }
        self.count += 1;
        if !self.distinct.contains(value) {
            if self.distinct.len() < DISTINCT_BOUND {
                self.distinct.insert(value.into());
            } else {
                self.saturated = true;
            }
        }
        let length = value.chars().count() as u64;
        self.min_length = Some(self.min_length.map_or(length, |m| m.min(length)));
        self.max_length = self.max_length.max(length);
        self.all_boolean &=
            value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false");
        if self.all_integer {
            match value.parse::<i64>() {
                Ok(v) if is_decimal(value) => {
                    let s = self.integer.get_or_insert(IntegerStats {
                        min: v,
                        max: v,
                        sum: 0,
                    });
                    s.min = s.min.min(v);
                    s.max = s.max.max(v);
                    s.sum += i128::from(v);
                }
                _ => self.all_integer = false,
            }
        }
        if self.all_number {
            match value.parse::<f64>() {
                Ok(v) if is_decimal(value) && v.is_finite() => {
                    let s = self.number.get_or_insert(NumberStats {
                        min: v,
                        max: v,
                        sum: 0.0,
                    });
                    s.min = s.min.min(v);
                    s.max = s.max.max(v);
                    s.sum += v;
                }
                _ => self.all_number = false,
            }
        }
    }

    fn to_json(&self, name: String) -> Value {
        let mut out = Map::new();
        out.insert("name".into(), name.into());
        out.insert("count".into(), self.count.into());
        out.insert("nulls".into(), self.nulls.into());
        out.insert("distinct".into(), (self.distinct.len() as u64).into());
        out.insert("distinct_exact".into(), (!self.saturated).into());
        let kind = if self.count == 0 {
            "empty"
        } else if self.all_integer {
            "integer"
        } else if self.all_number {
            "number"
        } else if self.all_boolean {
            "boolean"
        } else {
            "text"
        };
        out.insert("type".into(), kind.into());
        match (kind, &self.integer, &self.number) {
            ("integer", Some(s), _) => {
                out.insert("min".into(), s.min.into());
                out.insert("max".into(), s.max.into());
                out.insert("mean".into(), (s.sum as f64 / self.count as f64).into());
            }
            ("number", _, Some(s)) => {
                out.insert("min".into(), s.min.into());
                out.insert("max".into(), s.max.into());
                out.insert("mean".into(), (s.sum / self.count as f64).into());
            }
            ("text", _, _) => {
                out.insert("min_length".into(), self.min_length.unwrap_or(0).into());
                out.insert("max_length".into(), self.max_length.into());
            }
            _ => {}
        }
        Value::Object(out)
    }
}

/// Whether `value` is a decimal number: an optional `-` or `+`, digits,
/// optionally `.` and digits, optionally an exponent (so not `inf`,
/// `NaN`, `.5` or `1.`).
fn is_decimal(value: &str) -> bool {
    let b = value.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}
