//! The coordination service's callers: keys holding root-issued grants,
//! and requests built and signed by the client crate (`lab-coord-client`),
//! sent as raw HTTP/1.1.

use std::sync::atomic::{AtomicU64, Ordering};

use lab_coord_auth::{issue_grant, Grant, GrantFields, GrantKind, Principal, SigningKey};
use lab_coord_client::{Built, Request};
use serde_json::{json, Value};

use super::{Client, Labd, Response};

pub const WORLD: &str = "lab";
pub const DAY: u64 = 86_400;

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A nonce never used before by this process.
pub fn nonce() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "n{:010}{:012}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// `a/b/c` as labels; the empty text is the world.
pub fn labels(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn hex_decode(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// One request as a client builds it: an operation of the table with its
/// parameters and body. The content type is the row's unless a test
/// replaces it to provoke the service's check of it.
#[derive(Clone)]
pub struct Req {
    request: Request,
    pub content_type: Option<&'static str>,
}

impl Req {
    /// A request of `op`, which the table lists.
    pub fn new(op: &str) -> Req {
        let request = Request::new(op).unwrap();
        Req {
            content_type: request.operation().body.content_type(),
            request,
        }
    }

    /// A request of `op` by its query parameters alone.
    pub fn read(op: &str) -> Req {
        Req::new(op)
    }

    /// A request of `op` whose body is `body`.
    pub fn json(op: &str, body: &Value) -> Req {
        Req::raw(op, body.to_string())
    }

    /// A request of `op` whose body is exactly `body`.
    pub fn raw(op: &str, body: impl Into<Vec<u8>>) -> Req {
        let mut req = Req::new(op);
        req.request = req.request.body(body);
        req
    }

    /// Sends it with `content_type` instead of the row's.
    pub fn with_content_type(mut self, content_type: Option<&'static str>) -> Req {
        self.content_type = content_type;
        self
    }

    /// Adds the labels of `path` (`a/b/c`).
    pub fn path(mut self, path: &str) -> Req {
        self.request = self.request.path(labels(path));
        self
    }

    pub fn string(mut self, name: &str, value: &str) -> Req {
        self.request = self.request.string(name, value);
        self
    }

    pub fn int(mut self, name: &str, value: i64) -> Req {
        self.request = self.request.int(name, value);
        self
    }

    pub fn op(&self) -> &'static str {
        self.request.operation().name
    }

    /// The request as sent; the table admits every request a test builds.
    pub fn built(&self) -> Built {
        let mut built = self.request.build().unwrap();
        built.content_type = self.content_type;
        built
    }

    pub fn body(&self) -> Vec<u8> {
        self.built().body
    }

    /// The query string, with its `?`, or empty.
    pub fn query(&self) -> String {
        self.built().query().to_string()
    }
}

/// A key and the grants it carries.
#[derive(Clone)]
pub struct Holder {
    pub key: SigningKey,
    pub grants: Vec<Grant>,
}

impl Holder {
    pub fn principal(&self) -> String {
        Principal::of(&self.key).to_string()
    }
}

/// The coordination service of one `labd`, and its root key.
pub struct Coord {
    pub client: Client,
    pub audience: String,
    pub root: SigningKey,
}

impl Coord {
    pub fn new(labd: &Labd) -> Coord {
        let client = labd.coord();
        let text = std::fs::read_to_string(labd.data_dir.join("state/coord/root.key")).unwrap();
        let hex = text.trim().strip_prefix("ed25519-secret:").unwrap();
        let seed: [u8; 32] = hex_decode(hex).try_into().unwrap();
        Coord {
            audience: format!("http://{}", client.address),
            client,
            root: SigningKey::from_bytes(&seed),
        }
    }

    /// A root-issued grant.
    pub fn grant(&self, to: &SigningKey, kind: GrantKind, path: &str, valid_until: u64) -> Grant {
        issue_grant(
            &self.root,
            WORLD,
            GrantFields {
                principal: Principal::of(to),
                kind,
                path: labels(path),
                valid_until,
            },
            None,
        )
        .unwrap()
    }

    /// A key holding root-issued grants of `kinds` on `path` for a day.
    pub fn holder(&self, seed: u8, kinds: &[GrantKind], path: &str) -> Holder {
        let key = key(seed);
        let grants = kinds
            .iter()
            .map(|k| self.grant(&key, *k, path, now() + DAY))
            .collect();
        Holder { key, grants }
    }

    /// The root with read, publish and provision on the whole world.
    pub fn admin(&self) -> Holder {
        let kinds = [GrantKind::Read, GrantKind::Publish, GrantKind::Provision];
        let grants = kinds
            .iter()
            .map(|k| self.grant(&self.root, *k, "", now() + DAY))
            .collect();
        Holder {
            key: self.root.clone(),
            grants,
        }
    }

    /// The `Svc-Auth` value of `req` signed by `who`.
    pub fn header(&self, who: &Holder, req: &Req, timestamp: u64, nonce: &str) -> String {
        req.built()
            .carriage(
                &who.key,
                who.grants.clone(),
                nonce,
                timestamp,
                &self.audience,
            )
            .unwrap()
            .to_header()
    }

    /// Sends `req` with `header` as its `Svc-Auth`, or none.
    pub fn send_with_header(&self, req: &Req, header: Option<&str>) -> Response {
        let built = req.built();
        let mut head = format!("{} {} HTTP/1.1", built.method(), built.target);
        if let Some(ct) = built.content_type {
            head.push_str(&format!("\ncontent-type: {ct}"));
        }
        if let Some(h) = header {
            head.push_str(&format!("\nsvc-auth: {h}"));
        }
        let body = (built.method() != "GET").then_some(built.body.as_slice());
        self.client.send(&head, body)
    }

    /// Sends `req` signed by `who` now.
    pub fn send(&self, who: &Holder, req: &Req) -> Response {
        let header = self.header(who, req, now(), &nonce());
        self.send_with_header(req, Some(&header))
    }

    /// Sends `req` signed by `who`; the answer must be `status` JSON.
    pub fn ok(&self, who: &Holder, req: &Req, status: u16) -> Value {
        let response = self.send(who, req);
        assert_eq!(
            response.status,
            status,
            "{} {}",
            req.op(),
            String::from_utf8_lossy(&response.body)
        );
        response.json()
    }

    /// `req` sent `n` times at once, each with its own proof; every answer
    /// must be 200 or 201.
    pub fn send_together(&self, who: &Holder, req: &Req, n: usize) -> Vec<Value> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|_| scope.spawn(|| self.send(who, req)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    let r = h.join().unwrap();
                    assert!(
                        r.status == 200 || r.status == 201,
                        "{}",
                        String::from_utf8_lossy(&r.body)
                    );
                    r.json()
                })
                .collect()
        })
    }
}

/// The settings that give another host `labd`'s world: its development
/// root key, as the root and as the issuer.
pub fn same_world(labd: &Labd) -> Vec<String> {
    let root = Coord::new(labd).root;
    let key_file = labd.data_dir.join("state/coord/root.key");
    vec![
        "--coord-root-key".into(),
        Principal::of(&root).to_string(),
        "--coord-issuer-key-file".into(),
        key_file.display().to_string(),
    ]
}

/// A second `labd` with `args`, in `first`'s world, and its coordination
/// service answering to `audience` (which `first` must answer to as well).
pub fn second_host(name: &str, first: &Labd, audience: &str, args: &[&str]) -> (Labd, Coord) {
    second_host_in_env(name, first, audience, args, Vec::new())
}

/// [`second_host`] with `env` added to its environment.
pub fn second_host_in_env(
    name: &str,
    first: &Labd,
    audience: &str,
    args: &[&str],
    env: Vec<(String, String)>,
) -> (Labd, Coord) {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.extend(same_world(first));
    let labd = Labd::start_in_env(super::temp_dir(name), args, env);
    let coord = Coord {
        client: labd.coord(),
        audience: audience.into(),
        root: Coord::new(first).root,
    };
    (labd, coord)
}

/// A `labd` and its coordination service.
pub fn start(name: &str) -> (Labd, Coord) {
    let labd = Labd::start(name, &[]);
    let coord = Coord::new(&labd);
    (labd, coord)
}

/// The head and the first half of the body of one signed request, left
/// open: a request certainly in flight until the stream is dropped.
pub fn send_half(address: std::net::SocketAddr, req: &Req, header: &str) -> std::net::TcpStream {
    use std::io::Write;
    let built = req.built();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .write_all(request_head(&built, header, "close").as_bytes())
        .unwrap();
    stream
        .write_all(&built.body[..built.body.len() / 2])
        .unwrap();
    stream
}

fn request_head(built: &Built, header: &str, connection: &str) -> String {
    format!(
        "{} {} HTTP/1.1\r\nhost: test\r\nconnection: {connection}\r\ncontent-type: application/json\r\nsvc-auth: {header}\r\ncontent-length: {}\r\n\r\n",
        built.method(),
        built.target,
        built.body.len()
    )
}

/// One signed request whose transport may fail (a server being killed).
pub fn try_send(
    address: std::net::SocketAddr,
    req: &Req,
    header: &str,
) -> std::io::Result<Response> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    stream.write_all(&request_bytes(req, header))?;
    super::try_read_response(&mut stream)
}

/// One signed request as bytes on the wire: head and body; the server
/// closes the connection after its answer.
pub fn request_bytes(req: &Req, header: &str) -> Vec<u8> {
    on_the_wire(req, header, "close")
}

/// One signed request as bytes on the wire, the connection kept open for
/// the next.
pub fn kept_alive_request_bytes(req: &Req, header: &str) -> Vec<u8> {
    on_the_wire(req, header, "keep-alive")
}

fn on_the_wire(req: &Req, header: &str, connection: &str) -> Vec<u8> {
    let built = req.built();
    let mut bytes = request_head(&built, header, connection).into_bytes();
    bytes.extend_from_slice(&built.body);
    bytes
}

/// Projects, artifacts and applications, as the root's administrator.
impl Coord {
    /// A project `label`.
    pub fn project(&self, label: &str) {
        let body = json!({ "operation_id": format!("project-{label}"), "label": label });
        self.ok(&self.admin(), &Req::json("create_project", &body), 201);
    }

    /// The worker `worker` of `project`, provisioned with the key of
    /// `seed` and a grant to read the project: the worker, as a holder.
    pub fn provision_worker(&self, project: &str, worker: &str, seed: u8) -> Holder {
        let key = key(seed);
        let body = json!({
            "operation_id": format!("provision-{project}-{worker}"),
            "project": project,
            "worker": worker,
            "principal": Principal::of(&key).to_string(),
            "permissions": [{ "kind": "read", "path": ["projects", project] }],
            "valid_until": now() + DAY,
        });
        let provisioned = self.ok(&self.admin(), &Req::json("provision_worker", &body), 201);
        let grants = provisioned["grants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| Grant::from_json_bytes(g.to_string().as_bytes()).unwrap())
            .collect();
        Holder { key, grants }
    }

    /// Retires the worker `worker` of `project`.
    pub fn retire_worker(&self, project: &str, worker: &str) {
        let body = json!({
            "operation_id": format!("retire-{project}-{worker}"),
            "project": project,
            "worker": worker,
        });
        self.ok(&self.admin(), &Req::json("retire_worker", &body), 201);
    }

    /// An artifact at `path` with `bytes`; answers its content occurrence.
    pub fn artifact(&self, path: &str, bytes: &[u8]) -> Value {
        let admin = self.admin();
        let descriptor = br#"{"interpretation":"text"}"#;
        let kind = super::name_of(descriptor);
        let project = path.split('/').take(2).collect::<Vec<_>>().join("/");
        for body in [&descriptor[..], bytes] {
            let req = Req::raw("retain", body.to_vec())
                .path(&project)
                .string("type", &kind);
            self.ok(&admin, &req, 200);
        }
        let artifact = json!({ "bytes": super::name_of(bytes), "type": kind });
        let body = json!({ "operation_id": path.replace('/', "."), "path": labels(path), "artifact": artifact });
        self.ok(&admin, &Req::json("create_artifact", &body), 201)["content"]["entry"].clone()
    }

    /// `apply` with `body`, signed by `who`.
    pub fn apply(&self, who: &Holder, body: &Value) -> Response {
        self.send(who, &Req::json("apply", body))
    }

    /// The bytes `hash` as served at `path`.
    pub fn fetch(&self, path: &str, hash: &str) -> Response {
        self.send(
            &self.admin(),
            &Req::read("fetch").path(path).string("bytes", hash),
        )
    }

    /// The entries of the leaf at `path` as the admin reads them, all on
    /// one page.
    pub fn entries(&self, path: &str) -> Vec<Value> {
        self.entries_as(&self.admin(), path)
    }

    /// The entries of the leaf at `path` as `who` reads them, all on one
    /// page.
    pub fn entries_as(&self, who: &Holder, path: &str) -> Vec<Value> {
        let page = self.ok(who, &Req::read("entries").path(path).int("limit", 128), 200);
        assert!(page.get("next_after").is_none());
        page["entries"].as_array().unwrap().clone()
    }

    /// The space at `path` as the admin resolves it, or null.
    pub fn space_at(&self, path: &str) -> Value {
        self.ok(&self.admin(), &Req::read("resolve").path(path), 200)["space"].clone()
    }

    /// Whether a space exists at `path`.
    pub fn exists(&self, path: &str) -> bool {
        !self.space_at(path).is_null()
    }
}
