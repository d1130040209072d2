//! Point reads of one snapshot, fetched in one exchange with the store.

use crate::refusal::Refusal;
use crate::store::Reads;
use lab_guest::lab::platform::kv::{Entry, Range, TableKey};

/// The values of a fixed set of keys, read together from one snapshot
/// (`kv.read-all`). As [`Reads`] it answers `get` for exactly those keys;
/// any other read is a fault of the operation that fetched them.
pub struct Fetched {
    keys: Vec<TableKey>,
    /// `values[i]` is the value of `keys[i]`.
    values: Vec<Option<Vec<u8>>>,
}

impl Fetched {
    /// `values` as the store answered `keys`.
    pub fn new(keys: Vec<TableKey>, values: Vec<Option<Vec<u8>>>) -> Result<Fetched, Refusal> {
        if keys.len() != values.len() {
            return Err(Refusal::Internal(format!(
                "the store answered {} values for {} keys",
                values.len(),
                keys.len()
            )));
        }
        Ok(Fetched { keys, values })
    }
}

impl Reads for Fetched {
    fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Refusal> {
        self.keys
            .iter()
            .position(|k| k.table == table && k.key == key)
            .map(|at| self.values[at].clone())
            .ok_or_else(|| Refusal::Internal(format!("a read of `{table}` that was not fetched")))
    }

    fn get_all(&self, keys: &[TableKey]) -> Result<Vec<Option<Vec<u8>>>, Refusal> {
        keys.iter().map(|k| self.get(&k.table, &k.key)).collect()
    }

    fn scan(&self, table: &str, _: &Range) -> Result<Vec<Entry>, Refusal> {
        Err(Refusal::Internal(format!(
            "a scan of `{table}` in fetched reads"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(table: &str, key: &[u8]) -> TableKey {
        TableKey {
            table: table.into(),
            key: key.to_vec(),
        }
    }

    #[test]
    fn answers_the_fetched_keys_only() {
        let fetched = Fetched::new(
            vec![key("meta", b"identity"), key("head", b"s")],
            vec![Some(b"id".to_vec()), None],
        )
        .unwrap();
        assert_eq!(fetched.get("meta", b"identity"), Ok(Some(b"id".to_vec())));
        assert_eq!(fetched.get("head", b"s"), Ok(None));
        assert_eq!(
            fetched.get_all(&[key("head", b"s"), key("meta", b"identity")]),
            Ok(vec![None, Some(b"id".to_vec())])
        );
        assert!(matches!(
            fetched.get_all(&[key("meta", b"identity"), key("head", b"t")]),
            Err(Refusal::Internal(_))
        ));
        assert!(matches!(
            fetched.get("head", b"t"),
            Err(Refusal::Internal(_))
        ));
        assert!(matches!(
            fetched.get("space", b"s"),
            Err(Refusal::Internal(_))
        ));
        let all = Range {
            start: Vec::new(),
            end: None,
            reverse: false,
            limit: 1,
        };
        assert!(matches!(
            fetched.scan("head", &all),
            Err(Refusal::Internal(_))
        ));
    }

    #[test]
    fn a_short_answer_is_refused() {
        assert!(matches!(
            Fetched::new(vec![key("meta", b"identity")], Vec::new()),
            Err(Refusal::Internal(_))
        ));
    }
}
