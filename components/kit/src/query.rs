//! Strict query strings: named, single, non-empty parameters.

/// Why a query string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// A parameter the route does not document.
    Unknown(String),
    /// A parameter given more than once.
    Repeated(String),
    /// A parameter with no value (`a=` or `a`), or an empty `&&` slot.
    Empty(String),
    /// A value that is not what the parameter takes.
    Malformed(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Unknown(n) => write!(f, "unknown query parameter `{n}`"),
            QueryError::Repeated(n) => write!(f, "query parameter `{n}` is repeated"),
            QueryError::Empty(n) if n.is_empty() => write!(f, "empty query parameter"),
            QueryError::Empty(n) => write!(f, "query parameter `{n}` is empty"),
            QueryError::Malformed(n) => write!(f, "query parameter `{n}` is malformed"),
        }
    }
}

/// The values of `allowed` parameters in `query`, in the order of `allowed`.
/// Names and values are compared raw (no percent-decoding): a documented
/// parameter is plain ASCII.
pub fn parse<'q>(
    query: Option<&'q str>,
    allowed: &[&str],
) -> Result<Vec<Option<&'q str>>, QueryError> {
    let mut values = vec![None; allowed.len()];
    let Some(query) = query else {
        return Ok(values);
    };
    if query.is_empty() {
        return Ok(values);
    }
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let Some(slot) = allowed.iter().position(|a| *a == name) else {
            return Err(if name.is_empty() {
                QueryError::Empty(String::new())
            } else {
                QueryError::Unknown(name.to_string())
            });
        };
        if values[slot].is_some() {
            return Err(QueryError::Repeated(name.to_string()));
        }
        if value.is_empty() {
            return Err(QueryError::Empty(name.to_string()));
        }
        values[slot] = Some(value);
    }
    Ok(values)
}

/// A canonical non-negative decimal integer: digits only, no sign, no leading
/// zero (but `0` itself), within u64.
pub fn canonical_u64(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let no_leading_zero = text == "0" || !text.starts_with('0');
    if digits_only && no_leading_zero {
        text.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_parameters_parse() {
        let got = parse(Some("length=5&offset=2"), &["offset", "length"]).unwrap();
        assert_eq!(got, vec![Some("2"), Some("5")]);
        assert_eq!(parse(None, &["offset"]).unwrap(), vec![None]);
        assert_eq!(parse(Some(""), &["offset"]).unwrap(), vec![None]);
    }

    #[test]
    fn strictness() {
        let allowed = &["offset", "length"];
        assert_eq!(
            parse(Some("x=1"), allowed),
            Err(QueryError::Unknown("x".into()))
        );
        assert_eq!(
            parse(Some("Offset=1"), allowed),
            Err(QueryError::Unknown("Offset".into()))
        );
        assert_eq!(
            parse(Some("offset=1&offset=1"), allowed),
            Err(QueryError::Repeated("offset".into()))
        );
        assert_eq!(
            parse(Some("offset="), allowed),
            Err(QueryError::Empty("offset".into()))
        );
        assert_eq!(
            parse(Some("offset"), allowed),
            Err(QueryError::Empty("offset".into()))
        );
        assert_eq!(
            parse(Some("offset=1&"), allowed),
            Err(QueryError::Empty(String::new()))
        );
    }

    #[test]
    fn canonical_integers() {
        assert_eq!(canonical_u64("0"), Some(0));
        assert_eq!(canonical_u64("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "",
            "-1",
            "+1",
            "01",
            "1.0",
            "1e3",
            " 1",
            "18446744073709551616",
            "%31",
        ] {
            assert_eq!(canonical_u64(bad), None, "{bad}");
        }
    }
}
