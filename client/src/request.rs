//! Building a request: an operation, its typed parameters and its body
//! become the method, the target with its query string, the signing
//! record's `params` and the content type; then a key signs it.
//!
//! The query and the signed `params` are written from the same checked
//! parameters: the query in the row's order, a `strings` parameter as one
//! pair per item, each value percent-encoded; the signed `params` hold the
//! values themselves. An empty `strings` parameter is absent from both (the
//! query cannot carry an empty array, and absent is what the service
//! rebuilds from it).

use lab_coord_auth::{
    canonical_json, sign_request, Carriage, Grant, ParamValue, Params, SignError, SigningKey,
};

use crate::error::{BuildError, EnvelopeError};
use crate::table::{self, BodyKind, Operation, ParamKind};

/// A request being assembled. Parameters and body are checked against the
/// row by [`Request::build`], which reports the first problem.
#[derive(Debug, Clone)]
pub struct Request {
    operation: &'static Operation,
    params: Vec<(String, ParamValue)>,
    body: Option<Vec<u8>>,
}

/// A request ready to sign and send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub operation: &'static Operation,
    /// The route and its query string (`/v1/entries?path=a&limit=1`).
    pub target: String,
    /// The signing record's `params`.
    pub params: Params,
    /// The body's exact bytes; empty without one.
    pub body: Vec<u8>,
    /// The `Content-Type` of the row's body kind.
    pub content_type: Option<&'static str>,
}

impl Request {
    /// A request of the operation named `name`.
    pub fn new(name: &str) -> Result<Request, BuildError> {
        match table::find(name) {
            Some(operation) => Ok(Request::of(operation)),
            None if table::SOCKET_ONLY.contains(&name) => Err(BuildError::SocketOnly {
                name: name.to_owned(),
            }),
            None => Err(BuildError::UnknownOperation {
                name: name.to_owned(),
            }),
        }
    }

    /// A request of `operation`.
    pub fn of(operation: &'static Operation) -> Request {
        Request {
            operation,
            params: Vec::new(),
            body: None,
        }
    }

    pub fn operation(&self) -> &'static Operation {
        self.operation
    }

    /// Adds `name` with `value`.
    pub fn param(mut self, name: &str, value: ParamValue) -> Request {
        self.params.push((name.to_owned(), value));
        self
    }

    /// Adds the `path` labels.
    pub fn path<S: Into<String>>(self, labels: impl IntoIterator<Item = S>) -> Request {
        let labels = labels.into_iter().map(Into::into).collect();
        self.param("path", ParamValue::Strings(labels))
    }

    pub fn string(self, name: &str, value: impl Into<String>) -> Request {
        self.param(name, ParamValue::String(value.into()))
    }

    pub fn int(self, name: &str, value: i64) -> Request {
        self.param(name, ParamValue::Int(value))
    }

    /// Sets the body's exact bytes.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = Some(body.into());
        self
    }

    /// Checks the parameters and body against the row and writes both
    /// forms of the parameters.
    pub fn build(&self) -> Result<Built, BuildError> {
        let op = self.operation;
        let mut given: Vec<Option<&ParamValue>> = vec![None; op.params.len()];
        for (name, value) in &self.params {
            let Some(index) = op.params.iter().position(|spec| spec.name == name) else {
                return Err(BuildError::UnknownParam {
                    operation: op.name,
                    name: name.clone(),
                });
            };
            let spec = &op.params[index];
            if !spec.kind.admits(value) {
                return Err(BuildError::WrongKind {
                    operation: op.name,
                    name: spec.name,
                    expected: spec.kind,
                });
            }
            if given[index].replace(value).is_some() {
                return Err(BuildError::Repeated {
                    operation: op.name,
                    name: spec.name,
                });
            }
        }

        let mut params = Params::new();
        let mut pairs: Vec<String> = Vec::new();
        let mut missing = Vec::new();
        for (spec, value) in op.params.iter().zip(given) {
            match value {
                Some(ParamValue::Strings(items)) if items.is_empty() => {}
                Some(value) => {
                    pairs.extend(query_pairs(spec.name, value));
                    params.insert(spec.name, value.clone());
                    continue;
                }
                None => {}
            }
            if spec.required {
                missing.push(spec.name);
            }
        }
        if !missing.is_empty() {
            return Err(BuildError::Missing {
                operation: op.name,
                names: missing,
            });
        }

        let body = match (&self.body, op.body) {
            (Some(_), BodyKind::None) => {
                return Err(BuildError::UnexpectedBody { operation: op.name })
            }
            (body, _) => body.clone().unwrap_or_default(),
        };
        let query = if pairs.is_empty() {
            String::new()
        } else {
            format!("?{}", pairs.join("&"))
        };
        Ok(Built {
            operation: op,
            target: format!("{}{query}", op.route),
            params,
            body,
            content_type: op.body.content_type(),
        })
    }
}

impl ParamKind {
    /// Whether `value` is of this kind.
    pub fn admits(self, value: &ParamValue) -> bool {
        matches!(
            (self, value),
            (ParamKind::String, ParamValue::String(_))
                | (ParamKind::Int, ParamValue::Int(_))
                | (ParamKind::Strings, ParamValue::Strings(_))
        )
    }

    /// The kind's name in `operations.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::String => "string",
            ParamKind::Int => "int",
            ParamKind::Strings => "strings",
        }
    }
}

/// `name=value` pairs of one parameter: one per item of a `strings`.
fn query_pairs(name: &str, value: &ParamValue) -> Vec<String> {
    match value {
        ParamValue::String(text) => vec![format!("{name}={}", percent_encode(text))],
        ParamValue::Int(number) => vec![format!("{name}={number}")],
        ParamValue::Strings(items) => items
            .iter()
            .map(|item| format!("{name}={}", percent_encode(item)))
            .collect(),
    }
}

impl Built {
    pub fn method(&self) -> &'static str {
        self.operation.method
    }

    pub fn op(&self) -> &'static str {
        self.operation.name
    }

    /// The query string with its `?`, or empty.
    pub fn query(&self) -> &str {
        &self.target[self.operation.route.len()..]
    }

    /// The carriage of this request: a proof by `key` of this operation,
    /// parameters and body for `audience` at `timestamp` with `nonce`, and
    /// `grants`. Its [`Carriage::to_header`] is the `Svc-Auth` value.
    pub fn carriage(
        &self,
        key: &SigningKey,
        grants: Vec<Grant>,
        nonce: &str,
        timestamp: u64,
        audience: &str,
    ) -> Result<Carriage, SignError> {
        let proof = sign_request(
            key,
            self.operation.name,
            &self.params,
            &self.body,
            nonce,
            timestamp,
            audience,
        )?;
        Ok(Carriage::new(proof, grants))
    }
}

/// The socket binding (`WS.md`): the same request as a call envelope.
impl Built {
    /// This request with its body replaced by the body's RFC 8785 text, the
    /// bytes the socket's signing record covers (WS.md decision 10); sign
    /// the result with [`Built::carriage`] for [`Built::envelope`]. A body
    /// already canonical is unchanged, and then one proof would hold on
    /// either binding. An error: the body is not JSON.
    pub fn canonical(mut self) -> Result<Built, serde_json::Error> {
        if !self.body.is_empty() {
            let body: serde_json::Value = serde_json::from_slice(&self.body)?;
            self.body = canonical_json(&body);
        }
        Ok(self)
    }

    /// The call envelope of this request (see [`envelope`]).
    pub fn envelope(
        &self,
        id: &str,
        carriage: &Carriage,
    ) -> Result<serde_json::Value, EnvelopeError> {
        let body = if self.body.is_empty() {
            None
        } else {
            Some(serde_json::from_slice(&self.body).map_err(EnvelopeError::Body)?)
        };
        envelope(id, self.operation.name, &self.params, body, carriage)
    }
}

/// The call envelope (`SocketCall.schema.json`): `id`, `op`, `params`
/// typed per table (a path as an array of strings), `body` when there is
/// one, and `carriage` as `auth`. The envelope of every socket call any of
/// our clients sends is made here.
pub fn envelope(
    id: &str,
    op: &str,
    params: &Params,
    body: Option<serde_json::Value>,
    carriage: &Carriage,
) -> Result<serde_json::Value, EnvelopeError> {
    let mut envelope = serde_json::json!({
        "id": id,
        "op": op,
        "params": params.to_json().map_err(EnvelopeError::Record)?,
        "auth": carriage.to_json(),
    });
    if let Some(body) = body {
        envelope["body"] = body;
    }
    Ok(envelope)
}

/// Percent-encodes every byte of `text`'s UTF-8 outside the unreserved
/// characters `A-Z a-z 0-9 - . _ ~`, as `%XX` with upper-case hex.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_auth::{
        issue_grant, BodyDigest, GrantFields, GrantKind, MemoryReplayCache, Principal,
        RequestFacts, Verifier,
    };
    use serde_json::json;

    fn built(request: Request) -> Built {
        request.build().unwrap()
    }

    fn req(name: &str) -> Request {
        Request::new(name).unwrap()
    }

    #[test]
    fn odd_labels_are_percent_encoded() {
        assert_eq!(percent_encode("plain-label_1.0~x"), "plain-label_1.0~x");
        assert_eq!(percent_encode("a b"), "a%20b");
        assert_eq!(percent_encode("a&b=c"), "a%26b%3Dc");
        assert_eq!(percent_encode("a/b"), "a%2Fb");
        assert_eq!(percent_encode("a+b%"), "a%2Bb%25");
        assert_eq!(percent_encode("é"), "%C3%A9");
        assert_eq!(percent_encode("日本"), "%E6%97%A5%E6%9C%AC");
        assert_eq!(percent_encode("?#[]"), "%3F%23%5B%5D");
        let b = built(req("resolve").path(["projects", "a b&c=d/e", "ü"]));
        assert_eq!(
            b.target,
            "/v1/resolve?path=projects&path=a%20b%26c%3Dd%2Fe&path=%C3%BC"
        );
        assert_eq!(
            b.query(),
            "?path=projects&path=a%20b%26c%3Dd%2Fe&path=%C3%BC"
        );
        // The signed path is the labels themselves.
        assert_eq!(
            b.params.to_json().unwrap(),
            json!({"path": ["projects", "a b&c=d/e", "ü"]})
        );
    }

    #[test]
    fn the_query_follows_the_row_order() {
        let b = built(
            req("entries")
                .int("limit", 10)
                .int("after", 3)
                .path(["p", "a"]),
        );
        assert_eq!(b.target, "/v1/entries?path=p&path=a&after=3&limit=10");
        assert_eq!(
            b.params.to_json().unwrap(),
            json!({"path": ["p", "a"], "after": 3, "limit": 10})
        );
        assert_eq!(b.method(), "GET");
        assert_eq!(b.content_type, None);
        assert!(b.body.is_empty());

        let b = built(
            req("get")
                .int("position", 7)
                .string("space_id", "s 2")
                .string("root_id", "r1"),
        );
        assert_eq!(b.target, "/v1/get?root_id=r1&space_id=s%202&position=7");
        assert_eq!(
            b.params.to_json().unwrap(),
            json!({"root_id": "r1", "space_id": "s 2", "position": 7})
        );
        let b = built(req("entries").path(["a"]).int("after", -1));
        assert_eq!(b.query(), "?path=a&after=-1");
    }

    /// The socket envelope carries the signed parameters typed per table
    /// and the body whose canonical text the proof covers.
    #[test]
    fn the_socket_envelope() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let b = built(req("publish").body(&br#"{ "z": 1, "a": "\u00e9" }"#[..]))
            .canonical()
            .unwrap();
        assert_eq!(b.body, "{\"a\":\"é\",\"z\":1}".as_bytes());
        let carriage = b
            .carriage(&key, Vec::new(), &"n".repeat(22), 5, "http://x")
            .unwrap();
        let envelope = b.envelope("c-1", &carriage).unwrap();
        assert_eq!(envelope["id"], "c-1");
        assert_eq!(envelope["op"], "publish");
        assert_eq!(envelope["params"], json!({}));
        assert_eq!(envelope["body"], json!({"a": "é", "z": 1}));
        assert_eq!(envelope["auth"], carriage.to_json());
        let b = built(req("entries").path(["p", "a"]).int("limit", 2));
        let envelope = b.envelope("c-2", &carriage).unwrap();
        assert_eq!(envelope["params"], json!({"path": ["p", "a"], "limit": 2}));
        assert!(envelope.get("body").is_none());
    }

    #[test]
    fn bodies_and_their_content_types() {
        let b = built(
            req("retain")
                .path(["p"])
                .string("type", "sha256:ab")
                .body(&b"xy"[..]),
        );
        assert_eq!(b.method(), "PUT");
        assert_eq!(b.target, "/v1/retain?path=p&type=sha256%3Aab");
        assert_eq!(b.content_type, Some("application/octet-stream"));
        assert_eq!(b.body, b"xy");
        let b = built(req("retire_worker").body(&b"{}"[..]));
        assert_eq!(
            (b.method(), b.target.as_str()),
            ("POST", "/v1/workers/retire")
        );
        assert_eq!(b.content_type, Some("application/json"));
        assert_eq!(b.params.to_json().unwrap(), json!({}));
        // The body is sent as given; judging it is the service's job.
        assert_eq!(
            built(req("publish").body(&b"not json"[..])).body,
            b"not json"
        );
    }

    #[test]
    fn the_world_is_no_path() {
        let b = built(req("children").path(Vec::<String>::new()).int("through", 0));
        assert_eq!(b.target, "/v1/children?through=0");
        assert_eq!(b.params.to_json().unwrap(), json!({"through": 0}));
        assert_eq!(built(req("export")).target, "/v1/export");
    }

    #[test]
    fn requests_refused() {
        assert_eq!(
            Request::new("nope").unwrap_err(),
            BuildError::UnknownOperation {
                name: "nope".into()
            }
        );
        assert_eq!(
            Request::new("subscribe").unwrap_err(),
            BuildError::SocketOnly {
                name: "subscribe".into()
            }
        );
        for (request, want) in [
            (
                req("entries").path(["a"]).string("cursor", "c"),
                BuildError::UnknownParam {
                    operation: "entries",
                    name: "cursor".into(),
                },
            ),
            (
                req("get").path(["a"]),
                BuildError::UnknownParam {
                    operation: "get",
                    name: "path".into(),
                },
            ),
            (
                req("entries").path(["a"]).string("limit", "10"),
                BuildError::WrongKind {
                    operation: "entries",
                    name: "limit",
                    expected: ParamKind::Int,
                },
            ),
            (
                req("entries").string("path", "a"),
                BuildError::WrongKind {
                    operation: "entries",
                    name: "path",
                    expected: ParamKind::Strings,
                },
            ),
            (
                req("entries").path(["a"]).int("limit", 1).int("limit", 2),
                BuildError::Repeated {
                    operation: "entries",
                    name: "limit",
                },
            ),
            (
                req("get").string("space_id", "s"),
                BuildError::Missing {
                    operation: "get",
                    names: vec!["root_id", "position"],
                },
            ),
            (
                req("entries").path(Vec::<String>::new()),
                BuildError::Missing {
                    operation: "entries",
                    names: vec!["path"],
                },
            ),
            (
                req("resolve").path(["a"]).body(Vec::new()),
                BuildError::UnexpectedBody {
                    operation: "resolve",
                },
            ),
        ] {
            assert_eq!(request.build().unwrap_err(), want);
        }
    }

    #[test]
    fn a_signed_request_verifies_as_sent() {
        let root = SigningKey::from_bytes(&[1; 32]);
        let key = SigningKey::from_bytes(&[2; 32]);
        let path = vec!["projects".to_string(), "alpha".to_string()];
        let grant = issue_grant(
            &root,
            "lab",
            GrantFields {
                principal: Principal::of(&key),
                kind: GrantKind::Read,
                path: path.clone(),
                valid_until: 2_000_000_000,
            },
            None,
        )
        .unwrap();
        let b = built(req("entries").path(path.clone()).int("limit", 1));
        let header = b
            .carriage(
                &key,
                vec![grant],
                "n0000000000000000000001",
                1_900_000_000,
                "http://x",
            )
            .unwrap()
            .to_header();
        let carriage = Carriage::from_header(Some(header.as_bytes())).unwrap();
        assert_eq!(carriage.proof.principal, Principal::of(&key));
        let verifier = Verifier::new("lab", Principal::of(&root), "http://x");
        let facts = RequestFacts {
            op: "entries",
            params: &b.params,
            body_digest: BodyDigest::of(&b.body),
        };
        let mut cache = MemoryReplayCache::new();
        verifier
            .check(
                &carriage,
                &facts,
                GrantKind::Read,
                &path,
                1_900_000_000,
                &mut cache,
            )
            .unwrap();
        // Another limit than the one signed does not verify.
        let other = built(req("entries").path(path.clone()).int("limit", 2));
        let facts = RequestFacts {
            params: &other.params,
            ..facts
        };
        let fresh = b
            .carriage(
                &key,
                carriage.grants.clone(),
                "n0000000000000000000002",
                1_900_000_000,
                "http://x",
            )
            .unwrap();
        assert!(verifier
            .check(
                &fresh,
                &facts,
                GrantKind::Read,
                &path,
                1_900_000_000,
                &mut cache
            )
            .is_err());
    }
}
