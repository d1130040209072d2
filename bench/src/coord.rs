//! The coordination service's measurements, each beside a baseline taken
//! in the same run on the same machine:
//!
//! - signed `publish` requests/s and µs per request from 1 and 16
//!   concurrent keep-alive clients, each request a new operation ID, round
//!   robin over `LEAVES` record leaves of one project, against `append` of
//!   one fact (each a new operation ID) straight to the journal's listener
//!   from as many clients, round robin over as many journals: the
//!   service's cost on top of the journal append underneath a publish;
//! - beside them, the recovery search a publish makes (a filtered journal
//!   read) on a journal of 4,000 record-shaped facts against one of 40:
//!   whether its cost grows with the leaf;
//! - signed `entries` (`limit=1`) of those leaves against the journal's
//!   unsigned `read` (`limit` 1) of the same leaf journals;
//! - signed `declare` (each a new operation ID, round robin over
//!   `ARTIFACTS` artifacts) from 1 and 16 clients against signed `publish`
//!   from as many, in alternating rounds: what an attributed declaration
//!   (content check, retained envelope and frame, root signature, index)
//!   costs over a record;
//! - signed `apply` of the deterministic `upper` release (one 1 KiB
//!   input in, one output out) with `wait: true`, each a new operation ID
//!   and a new application leaf, from 1 and 16 clients against signed
//!   `publish` from as many, in alternating rounds (target: at most 3x a
//!   publish's time). Each apply's recipe (`{"id": <operation ID>}`) is
//!   its own, so no earlier application can be reused (HTTP.md decision
//!   33) and each runs the release; and, at c=1, applies that all share
//!   one recipe, so every one but the first reuses the first instead of
//!   running;
//! - `query` pages (`limit` 125, every page full) of a view of 10,000 declarations: the
//!   first page against a signed `entries` page of 125 of the same
//!   declarations journal (c=1), the last page against the first (their
//!   costs must be within 2x: cost follows the page, not the view), and
//!   every page in turn from 16 clients against that `entries` page;
//! - the verifier on one core, in this process: a bare strict Ed25519
//!   verify, and the service's whole check of a publish (decode the
//!   `Svc-Auth` header, rebuild the signing record, verify the proof and
//!   the one grant carried, remember the nonce in an in-memory replay
//!   cache); then that check as a share of a publish's and a read's µs.
//!
//! The requests are signed by a key holding root-issued `publish` and
//! `read` grants on the project (the root key, read from labd's data
//! directory, creates the project); each request carries the one grant its
//! operation needs, so labd verifies two signatures per request. Every
//! signed request has a fresh nonce, so each is signed on its own, and all
//! are signed before the clock starts (on every core): signing in the
//! clients would compete with labd for this machine's cores inside the
//! measured window. A short unmeasured run per configuration, which signs
//! as it sends, warms up and sizes the supply; a client whose supply runs
//! out stops, and the row says so.
//!
//! What the in-process check leaves out: labd runs it inside the
//! component (WebAssembly), and its replay cache is a durable store write
//! per request, so the share it shows is a lower bound.
//!
//! Each load row shows requests/s, µs per request (1/rate, all clients
//! together), the mean latency a client saw, labd's CPU time per request
//! (from /proc, all of labd's threads) and the cores the clients used.
//! Figures and baselines are taken in alternating rounds.

pub mod shared;

use crate::client::{self, Conn};
use crate::journal::{self, Api};
use crate::measure::{percent, progress, reachable, verdict, Row};
use anyhow::{ensure, Context, Result};
use ed25519_dalek::Signature;
use lab_coord_auth::{
    issue_grant, signing_record, BodyDigest, Carriage, Grant, GrantFields, GrantKind,
    MemoryReplayCache, Principal, RequestFacts, SigningKey, Verifier,
};
use lab_coord_client::{Built, Request};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Record facts of the long and the short leaf the recovery search is
/// measured on: under the page's inspection budget (4,096 candidates), so
/// a search that reads every record still answers in one page.
const LONG_LEAF: usize = 4_000;
const SHORT_LEAF: usize = 40;
/// Record facts per append while those leaves are filled.
const APPEND_RECORDS: usize = 128;

/// The project the records go to.
const PROJECT: &str = "bench";
/// Record leaves (`projects/bench/snapshots/s<i>`), and journals of the
/// append baseline.
const LEAVES: usize = 4;
/// Concurrent keep-alive clients measured.
const CLIENTS: [usize; 2] = [1, 16];
/// Alternating rounds of figure and baseline.
const ROUNDS: u32 = 2;
/// Measured time per figure and per baseline (split into rounds).
const ROW_TIME: Duration = Duration::from_secs(2);
/// The unmeasured run before each configuration.
const WARMUP: Duration = Duration::from_millis(300);
/// Connections open before a measured run's clock starts.
const START_DELAY: Duration = Duration::from_millis(50);
/// Requests signed per client: this many times what the best rate seen
/// so far would use up.
const HEADROOM: f64 = 3.0;
const MIN_PER_CLIENT: u64 = 32;
/// Upper bound of requests per client and run.
const MAX_REQUESTS_PER_CLIENT: u64 = 1_000_000;
/// Lifetime of the grants the bench issues, in seconds.
const GRANT_SECONDS: u64 = 3_600;
/// Measured time of each verifier figure.
const AUTH_TIME: Duration = Duration::from_secs(1);
/// Signed publish carriages the check loop cycles through (each pass with
/// a new replay cache, since a nonce is good once).
const POOL: usize = 2_000;
/// Artifacts the declarations go to (`projects/bench/artifacts/a<i>`),
/// round robin like the record leaves.
const ARTIFACTS: usize = 4;
/// The artifact whose declarations the queried view selects.
const VIEW_ARTIFACT: &str = "viewed";
/// Selections of the queried view.
const VIEW_SELECTIONS: u64 = 10_000;
/// Records per query page, and entries per page of its baseline: it
/// divides `VIEW_SELECTIONS`, so the last page is as full as the first.
const QUERY_PAGE: u64 = 125;
/// Clients that declare the view's declarations.
const FILL_CLIENTS: usize = 16;
/// Bound on the time filling the view's artifact may take.
const FILL_TIME: Duration = Duration::from_secs(600);
/// The configured release `apply` runs, and the size of its input.
const TOOL: &str = "upper";
const APPLY_INPUT: usize = 1 << 10;
/// How many times a publish's time an apply may take.
const APPLY_TARGET: f64 = 3.0;
/// The seed of the publishing key.
const PUBLISHER_SEED: [u8; 32] = [7; 32];

/// Where the services listen, and labd's process and data.
#[derive(Clone)]
pub struct Target {
    /// The coordination service's operations listener.
    pub operations: SocketAddr,
    /// The journal service's operations listener.
    pub journal: SocketAddr,
    /// The bytes service's operations listener.
    pub bytes: SocketAddr,
    /// labd's process id: its CPU time is read from /proc.
    pub pid: u32,
    /// labd's `--data-dir`, which holds the development root key.
    pub data_dir: PathBuf,
}

/// One signed request, before it is signed.
struct Call {
    /// Where the grant it needs must reach (labels below the world).
    path: Vec<String>,
    request: Built,
}

impl Call {
    fn create_project(label: &str) -> Result<Call> {
        let body = json!({ "operation_id": format!("project-{label}"), "label": label });
        Call::new(
            Request::new("create_project")?.body(body.to_string()),
            vec!["projects".into(), label.into()],
        )
    }

    /// A new record (`{"n": n}`) for leaf `leaf`.
    fn publish(operation_id: &str, leaf: usize, n: u64) -> Result<Call> {
        let path = leaf_path(leaf);
        let body = json!({
            "operation_id": operation_id,
            "path": path,
            "profile": "lab/bench/1",
            "record": { "n": n },
        });
        Call::new(Request::new("publish")?.body(body.to_string()), path)
    }

    /// A declaration about artifact `artifact` (`projects/bench/artifacts/<artifact>`):
    /// subject `doc#s<n mod 64>`, property `p<n mod 8>`, value `n`.
    fn declare(operation_id: &str, artifact: &str, n: u64) -> Result<Call> {
        let path = artifact_path(artifact);
        let body = json!({
            "operation_id": operation_id,
            "artifact": path,
            "statement": {
                "subject": format!("doc#s{}", n % 64),
                "property": format!("p{}", n % 8),
                "value": n,
            },
        });
        Call::new(Request::new("declare")?.body(body.to_string()), path)
    }

    /// An application `projects/bench/applications/<operation_id>` of
    /// `TOOL` to `input` (an EntryRef) with `recipe`, waited for.
    fn apply(operation_id: &str, input: &Value, recipe: Value) -> Result<Call> {
        let path: Vec<String> = ["projects", PROJECT, "applications", operation_id]
            .map(String::from)
            .to_vec();
        let body = json!({
            "operation_id": operation_id,
            "path": path,
            "tool": TOOL,
            "inputs": { "text": input },
            "recipe": recipe,
            "wait": true,
        });
        Call::new(Request::new("apply")?.body(body.to_string()), path)
    }

    /// `bytes` retained under the type `kind` (its own digest when none).
    fn retain(bytes: &[u8], kind: Option<&str>) -> Result<Call> {
        let path: Vec<String> = vec!["projects".into(), PROJECT.into()];
        let kind = kind.map_or_else(|| sha256_name(bytes), str::to_string);
        let request = Request::new("retain")?
            .path(path.clone())
            .string("type", kind)
            .body(bytes.to_vec());
        Call::new(request, path)
    }

    fn create_artifact(label: &str, artifact: &Value) -> Result<Call> {
        let path = artifact_path(label);
        let body = json!({ "operation_id": label, "path": path, "artifact": artifact });
        Call::new(
            Request::new("create_artifact")?.body(body.to_string()),
            path,
        )
    }

    /// The view `projects/bench/views/<name>` of `selections`, rules by default.
    fn compose(name: &str, selections: &[Value]) -> Result<Call> {
        let path: Vec<String> = ["projects", PROJECT, "views", name]
            .map(String::from)
            .to_vec();
        let body = json!({
            "operation_id": name,
            "path": path,
            "selections": selections,
            "rules": {},
            "interpretation_profile": "coord/view/1",
        });
        Call::new(Request::new("compose")?.body(body.to_string()), path)
    }

    /// One page (`limit` `QUERY_PAGE`) of `view`, unfiltered, from `cursor`.
    fn query(view: &Value, cursor: Option<&str>) -> Result<Call> {
        let mut body = json!({ "view": view, "filters": {}, "limit": QUERY_PAGE });
        if let Some(cursor) = cursor {
            body["cursor"] = json!(cursor);
        }
        let path = vec!["projects".into(), PROJECT.into()];
        Call::new(Request::new("query")?.body(body.to_string()), path)
    }

    /// A page of `QUERY_PAGE` entries of the journal at `path`.
    fn entries_page(path: &[String]) -> Result<Call> {
        let request = Request::new("entries")?
            .path(path.to_vec())
            .int("limit", QUERY_PAGE as i64);
        Call::new(request, path.to_vec())
    }

    /// The space at leaf `leaf`'s path: authenticated and authorized like
    /// every signed request, answered from the service's own store (the
    /// path is remembered), with no call to another service.
    fn resolve(leaf: usize) -> Result<Call> {
        let path = leaf_path(leaf);
        Call::new(Request::new("resolve")?.path(path.clone()), path)
    }

    /// The first entry of leaf `leaf`.
    fn entries(leaf: usize) -> Result<Call> {
        let path = leaf_path(leaf);
        let request = Request::new("entries")?.path(path.clone()).int("limit", 1);
        Call::new(request, path)
    }

    fn new(request: Request, path: Vec<String>) -> Result<Call> {
        Ok(Call {
            path,
            request: request.build()?,
        })
    }

    /// The grant kind its operation needs.
    fn kind(&self) -> GrantKind {
        self.request.operation.grant
    }

    /// The grant kinds it must carry: its operation's, and `read` where
    /// the operation also reads what it cites (a declaration's content, a
    /// view's selections, an application's inputs).
    fn kinds(&self) -> Vec<GrantKind> {
        let kind = self.request.operation.grant;
        match self.request.op() {
            "declare" | "compose" | "apply" => vec![kind, GrantKind::Read],
            _ => vec![kind],
        }
    }

    /// What the service rebuilds the signing record from.
    fn facts(&self) -> RequestFacts<'_> {
        RequestFacts {
            op: self.request.op(),
            params: &self.request.params,
            body_digest: BodyDigest::of(&self.request.body),
        }
    }
}

/// `projects/<PROJECT>/artifacts/<label>`.
fn artifact_path(label: &str) -> Vec<String> {
    ["projects", PROJECT, "artifacts", label]
        .map(String::from)
        .to_vec()
}

/// `sha256:` and the hex digest of `bytes`: a blob's name.
fn sha256_name(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// `projects/<PROJECT>/snapshots/s<leaf>`.
/// A fact shaped as a record as far as the recovery search reads it:
/// `[label record, 0, 1, 2, text req_<n>]`, the request identity at
/// argument 4.
fn record_shaped(n: usize) -> Vec<u8> {
    use lab_values::Value;
    let mut children = vec![Value::label("record")];
    children.extend((0..3u64).map(Value::int));
    children.push(Value::text(format!("req_{n:064x}")));
    Value::Tuple(children).to_bytes()
}

fn leaf_path(leaf: usize) -> Vec<String> {
    ["projects", PROJECT, "snapshots", &format!("s{leaf}")]
        .map(String::from)
        .to_vec()
}

/// A nonce of the proof grammar (22..64 of `[A-Za-z0-9_-]`), distinct for
/// every `n` under one `prefix`.
fn nonce(prefix: u64, n: u64) -> String {
    format!("{prefix:016x}{n:012}")
}

/// The seed of an `ed25519-secret:<64 hex>` key file.
pub(crate) fn secret_key(text: &str) -> Result<[u8; 32]> {
    let hex = text
        .trim()
        .strip_prefix("ed25519-secret:")
        .context("not an `ed25519-secret:` key")?;
    ensure!(
        hex.len() == 64,
        "the key has {} hex digits, not 64",
        hex.len()
    );
    let mut seed = [0u8; 32];
    for (byte, pair) in seed.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).context("the key is not hex")?;
        *byte = u8::from_str_radix(pair, 16).context("the key is not hex")?;
    }
    Ok(seed)
}

/// Requests per client for a run of `time` at an expected `rate` (all
/// clients together), with `HEADROOM`.
fn supply(rate: f64, time: Duration, clients: usize) -> u64 {
    let wanted = rate * time.as_secs_f64() * HEADROOM / clients as f64;
    (wanted.ceil() as u64).clamp(MIN_PER_CLIENT, MAX_REQUESTS_PER_CLIENT)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A key, its grants, and the service it signs for.
struct Signer {
    addr: SocketAddr,
    audience: String,
    key: SigningKey,
    /// Root-issued, one per kind.
    grants: Vec<Grant>,
    nonce_prefix: u64,
    next_nonce: AtomicU64,
}

impl Signer {
    /// `key` holding a grant of each of `kinds` on `path`, issued by `root`.
    fn new(
        addr: SocketAddr,
        world: &str,
        root: &SigningKey,
        key: SigningKey,
        kinds: &[GrantKind],
        path: &[String],
    ) -> Result<Signer> {
        let grants = kinds
            .iter()
            .map(|&kind| {
                let fields = GrantFields {
                    principal: Principal::of(&key),
                    kind,
                    path: path.to_vec(),
                    valid_until: now() + GRANT_SECONDS,
                };
                issue_grant(root, world, fields, None).context("issue a grant")
            })
            .collect::<Result<_>>()?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Ok(Signer {
            addr,
            audience: format!("http://{addr}"),
            key,
            grants,
            nonce_prefix: nanos as u64,
            next_nonce: AtomicU64::new(0),
        })
    }

    /// The same signer, for requests to `audience` (a deployment's one
    /// address in front of several hosts) instead of its host's own.
    fn for_audience(self, audience: &str) -> Signer {
        Signer {
            audience: audience.to_string(),
            ..self
        }
    }

    /// A fresh proof of `call` with the grants it needs.
    fn carriage(&self, call: &Call) -> Result<Carriage> {
        let grants = call
            .kinds()
            .into_iter()
            .map(|kind| {
                self.grants
                    .iter()
                    .find(|g| g.kind == kind)
                    .cloned()
                    .with_context(|| format!("the signer holds no {kind} grant"))
            })
            .collect::<Result<Vec<_>>>()?;
        let n = self.next_nonce.fetch_add(1, Ordering::Relaxed);
        Ok(call.request.carriage(
            &self.key,
            grants,
            &nonce(self.nonce_prefix, n),
            now(),
            &self.audience,
        )?)
    }

    /// `call` signed, as the bytes that go on the wire.
    fn request(&self, call: &Call) -> Result<Vec<u8>> {
        Ok(raw_request(
            self.addr,
            call,
            &self.carriage(call)?.to_header(),
        ))
    }
}

/// The HTTP/1.1 request of `call` with the `Svc-Auth` value `auth`.
fn raw_request(addr: SocketAddr, call: &Call, auth: &str) -> Vec<u8> {
    let request = &call.request;
    let mut head = format!(
        "{} {} HTTP/1.1\r\nhost: {addr}\r\n",
        request.method(),
        request.target
    );
    if let Some(content_type) = request.content_type {
        head.push_str(&format!(
            "content-type: {content_type}\r\ncontent-length: {}\r\n",
            request.body.len()
        ));
    }
    head.push_str(&format!("svc-auth: {auth}\r\n\r\n"));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&request.body);
    bytes
}

/// An unsigned `POST /v1/<op>` with a JSON body, as the bytes that go on
/// the wire.
fn journal_request(addr: SocketAddr, op: &str, body: &str) -> Vec<u8> {
    let mut bytes = client::post_head(addr, &format!("/v1/{op}"), "application/json", body.len());
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// Sends one request over a new connection; its answer, whose status must
/// be `want`.
async fn once(addr: SocketAddr, request: &[u8], want: u16) -> Result<Value> {
    let mut conn = Conn::connect(addr).await?;
    let mut reply = Vec::new();
    let response = conn.exchange(request, &[], false, Some(&mut reply)).await?;
    ensure!(
        response.status == want,
        "{addr} answered {}: {}",
        response.status,
        String::from_utf8_lossy(&reply)
    );
    serde_json::from_slice(&reply).context("a JSON answer")
}

/// The world of the coordination service at `addr`, from `GET /healthz`.
pub(crate) async fn world(addr: SocketAddr) -> Result<String> {
    let health = journal::healthz(addr, "coord").await?;
    health["identity"]["world"]
        .as_str()
        .map(str::to_string)
        .context("healthz without identity.world")
}

/// Runs every coordination measurement against `target` (only the
/// `publish` and `entries` rows with `paths_only`); `threads` sign the
/// requests ahead of each run.
pub async fn run(target: Target, threads: usize, paths_only: bool) -> Result<Vec<Row>> {
    progress("coord: setup");
    let coord = target.operations;
    let world = world(coord).await?;
    let key_file = target.data_dir.join("coord").join("root.key");
    let text = std::fs::read_to_string(&key_file)
        .with_context(|| format!("read {}", key_file.display()))?;
    let root = SigningKey::from_bytes(&secret_key(&text).context("the development root key")?);
    let admin = Signer::new(
        coord,
        &world,
        &root,
        root.clone(),
        &[GrantKind::Provision],
        &[],
    )?;
    let created = once(coord, &admin.request(&Call::create_project(PROJECT)?)?, 201).await?;
    ensure!(
        created["space"].is_object(),
        "create_project answered {created}"
    );
    let publisher = Arc::new(Signer::new(
        coord,
        &world,
        &root,
        SigningKey::from_bytes(&PUBLISHER_SEED),
        &[GrantKind::Publish, GrantKind::Read, GrantKind::Declare],
        &["projects".into(), PROJECT.into()],
    )?);
    let mut artifacts = Vec::new();
    for label in (0..ARTIFACTS)
        .map(|i| format!("a{i}"))
        .chain([VIEW_ARTIFACT.to_string()])
    {
        let content = format!("bench artifact {label}\n");
        let (declarations, _) =
            create_artifact(coord, &publisher, &label, content.as_bytes()).await?;
        artifacts.push(declarations);
    }
    let input = vec![b'a'; APPLY_INPUT];
    let (_, apply_input) = create_artifact(coord, &publisher, "apply-input", &input).await?;

    // The first record of each leaf creates it; its entry names the leaf's
    // journal, which the read baseline reads directly.
    let ids = journal::identity(target.journal).await?;
    let mut leaves = Vec::new();
    for leaf in 0..LEAVES {
        let call = Call::publish(&format!("first-{leaf}"), leaf, 0)?;
        let answer = once(coord, &publisher.request(&call)?, 201).await?;
        let entry = &answer["record"]["entry"];
        ensure!(
            answer["space_created"] == true && entry["root_id"] == ids.root.as_str(),
            "the first publish answered {answer}"
        );
        let space = entry["space_id"].as_str().context("an entry's space")?;
        leaves.push(ids.space_ref(space).to_string());
    }
    let mut api = Api::connect(target.journal).await?;
    let mut journals = Vec::new();
    for i in 0..LEAVES {
        let space = journal::create(&mut api, &ids, &ids.root_space, &format!("coord-{i}")).await?;
        journals.push(ids.space_ref(&space).to_string());
    }
    let bench = Bench {
        target,
        threads,
        publisher,
        journals: Arc::new(journals),
        leaves: Arc::new(leaves),
        run: AtomicU64::new(0),
        view: Arc::new(OnceLock::new()),
        apply_input: Arc::new(apply_input),
    };

    let mut rows = Vec::new();
    let mut publishes = Vec::new();
    for clients in CLIENTS {
        progress(&format!("coord: publish, c={clients}"));
        let (publish, append) = bench.compare(Kind::Publish, clients).await?;
        let mut row = load_row(
            &format!("coord publish, c={clients}, {LEAVES} leaves"),
            &publish,
            &append,
            "journal append 1 fact",
        );
        if clients == 16 {
            let ratio = publish.per_second() / append.per_second();
            row.target = verdict(">= 40% of the append", ratio >= 0.40);
        }
        rows.push(row);
        publishes.push((clients, publish));
    }
    progress("coord: publish against its parts, c=16");
    rows.push(bench.publish_parts(16).await?.row());
    progress("coord: recovery search, a long leaf against a short one, c=16");
    rows.push(bench.search_growth(16).await?);
    let mut reads = Vec::new();
    for clients in CLIENTS {
        progress(&format!("coord: entries, c={clients}"));
        let (entries, read) = bench.compare(Kind::Entries, clients).await?;
        let mut row = load_row(
            &format!("coord entries limit=1, c={clients}, {LEAVES} leaves"),
            &entries,
            &read,
            "journal read limit 1, same leaves",
        );
        if clients == 16 {
            let ratio = entries.per_second() / read.per_second();
            row.target = verdict(">= 50% of the read", ratio >= 0.50);
        }
        rows.push(row);
        reads.push((clients, entries));
    }
    // The ceiling under both targets: a signed request that calls no other
    // service (authentication, the replay cache, a remembered path).
    progress("coord: entries against a signed resolve, c=16");
    let (entries, resolve) = bench
        .compare_signed(Kind::Entries, Kind::Resolve, 16)
        .await?;
    let mut ceiling = load_row(
        "  ceiling: coord entries limit=1, c=16, against a signed request calling no service",
        &entries,
        &resolve,
        "coord resolve, remembered path",
    );
    // The entries target's 50%, taken of the ceiling where the ceiling is
    // below the journal read.
    ceiling.target = verdict(
        ">= 50% of the signed resolve",
        entries.per_second() >= 0.5 * resolve.per_second(),
    );
    rows.push(ceiling);
    if paths_only {
        return Ok(rows);
    }

    for clients in CLIENTS {
        progress(&format!("coord: declare, c={clients}"));
        let (declare, publish) = bench
            .compare_signed(Kind::Declare, Kind::Publish, clients)
            .await?;
        rows.push(load_row(
            &format!("coord declare, c={clients}, {ARTIFACTS} artifacts"),
            &declare,
            &publish,
            &format!("coord publish, {LEAVES} leaves"),
        ));
    }

    for clients in CLIENTS {
        progress(&format!("coord: apply, c={clients}"));
        let (apply, publish) = bench
            .compare_signed(Kind::Apply, Kind::Publish, clients)
            .await?;
        rows.push(apply_row("", clients, &apply, &publish));
    }
    // The first application of the shared recipe runs, unmeasured.
    once(
        coord,
        &bench.publisher.request(&Call::apply(
            "reused-first",
            &bench.apply_input,
            json!("reused"),
        )?)?,
        201,
    )
    .await?;
    progress("coord: apply, reused, c=1");
    let (reused, publish) = bench
        .compare_signed(Kind::ApplyReused, Kind::Publish, 1)
        .await?;
    rows.push(apply_row(", reused", 1, &reused, &publish));

    let declarations = artifacts.last().context("the view's artifact")?;
    bench.compose_view(declarations).await?;
    let (first, entries) = bench
        .compare_signed(Kind::Query(Page::First), Kind::DeclarationsPage, 1)
        .await?;
    let what = format!("coord query, {VIEW_SELECTIONS}-selection view, limit {QUERY_PAGE}");
    rows.push(load_row(
        &format!("{what}, first page, c=1: pages"),
        &first,
        &entries,
        &format!("coord entries limit={QUERY_PAGE} of its declarations journal"),
    ));
    let (last, first) = bench
        .compare_signed(Kind::Query(Page::Last), Kind::Query(Page::First), 1)
        .await?;
    let mut last_row = load_row(
        &format!("{what}, last page, c=1: pages"),
        &last,
        &first,
        "first pages",
    );
    last_row.target = "last page costs <= 2x the first".into();
    rows.push(last_row);
    let (each, entries) = bench
        .compare_signed(Kind::Query(Page::Each), Kind::DeclarationsPage, 16)
        .await?;
    rows.push(load_row(
        &format!("{what}, every page in turn, c=16: pages"),
        &each,
        &entries,
        &format!("coord entries limit={QUERY_PAGE} of its declarations journal"),
    ));

    progress("coord: verifier, one core");
    let auth = tokio::task::block_in_place(|| auth_costs(&bench.publisher, &world, &root))?;
    rows.extend(auth.rows());
    for (op, loads) in [("publish", &publishes), ("entries", &reads)] {
        for (clients, load) in loads.iter() {
            rows.push(share_row(op, *clients, &auth, load));
        }
    }
    Ok(rows)
}

/// An apply row: its figure beside publish's, the ratio of their times
/// against `APPLY_TARGET`.
fn apply_row(what: &str, clients: usize, apply: &Load, publish: &Load) -> Row {
    let mut row = load_row(
        &format!("coord apply {TOOL}{what}, {APPLY_INPUT} B in, wait, c={clients}"),
        apply,
        publish,
        &format!("coord publish, {LEAVES} leaves"),
    );
    let times = publish.per_second() / apply.per_second();
    row.ratio = format!("{times:.2}x publish's time");
    row.target = verdict(
        &format!("<= {APPLY_TARGET:.0}x publish's time"),
        times <= APPLY_TARGET,
    );
    row
}

/// Retains `content` and names it as the artifact
/// `projects/bench/artifacts/<label>`; the path of its declarations journal
/// and its content occurrence (an EntryRef).
async fn create_artifact(
    addr: SocketAddr,
    signer: &Signer,
    label: &str,
    content: &[u8],
) -> Result<(Vec<String>, Value)> {
    let descriptor = br#"{"interpretation":"text"}"#;
    let kind = once(
        addr,
        &signer.request(&Call::retain(descriptor, None)?)?,
        200,
    )
    .await?;
    let kind = kind["bytes"]
        .as_str()
        .context("retain names the descriptor")?
        .to_string();
    let bytes = once(
        addr,
        &signer.request(&Call::retain(content, Some(&kind))?)?,
        200,
    )
    .await?;
    let artifact = json!({ "bytes": bytes["bytes"], "type": kind });
    let created = once(
        addr,
        &signer.request(&Call::create_artifact(label, &artifact)?)?,
        201,
    )
    .await?;
    let path = created["declarations"]["path"]
        .as_array()
        .context("create_artifact names the declarations space")?;
    let declarations = path
        .iter()
        .map(|label| label.as_str().map(str::to_string).context("a path label"))
        .collect::<Result<_>>()?;
    let entry = created["content"]["entry"].clone();
    ensure!(entry.is_object(), "create_artifact answered {created}");
    Ok((declarations, entry))
}

/// What is measured: a signed coordination operation and, beside it, the
/// unsigned journal operation underneath it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Publish,
    Entries,
    /// A signed `resolve` of a leaf: the floor of every signed request.
    Resolve,
    /// A new declaration about one of the `ARTIFACTS` artifacts.
    Declare,
    /// A new declaration about the view's artifact (setup).
    Fill,
    /// A page of the view: the first, the last, or each in turn.
    Query(Page),
    /// A page of `QUERY_PAGE` entries of the view artifact's
    /// declarations journal, from its start.
    DeclarationsPage,
    /// A new application of `TOOL` to the 1 KiB input, with its own recipe.
    Apply,
    /// A new application of `TOOL` to the 1 KiB input, with one recipe
    /// for all: reused.
    ApplyReused,
}

/// Which page of the view a query asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    First,
    Last,
    Each,
}

/// The queried view and the cursors that reach each of its pages.
struct View {
    entry: Value,
    /// `cursors[i]` asks for page `i` (none for the first).
    cursors: Vec<Option<String>>,
    /// Path of the view artifact's declarations journal.
    declarations: Vec<String>,
}

/// Everything a measured run needs.
struct Bench {
    target: Target,
    threads: usize,
    publisher: Arc<Signer>,
    /// Journals of the append baseline, as JSON space refs.
    journals: Arc<Vec<String>>,
    /// The leaves' journals, as JSON space refs.
    leaves: Arc<Vec<String>>,
    /// Numbers runs, keeping operation IDs unique.
    run: AtomicU64,
    /// Set once the view is composed.
    view: Arc<OnceLock<View>>,
    /// The content occurrence of the artifact every apply takes as input.
    apply_input: Arc<Value>,
}

impl Bench {
    /// The coordination figure and its journal baseline for `kind` with
    /// `clients` clients, in alternating rounds after one warm-up each.
    async fn compare(&self, kind: Kind, clients: usize) -> Result<(Load, Load)> {
        let time = ROW_TIME / ROUNDS;
        let warm = self.load(self.signing_feeds(kind, clients), WARMUP, kind, true);
        let mut rate = warm.await?.per_second();
        self.load(self.journal_feeds(kind, clients), WARMUP, kind, false)
            .await?;
        let (mut figure, mut baseline) = (Load::default(), Load::default());
        for _ in 0..ROUNDS {
            let feeds = self.signed_feeds(kind, clients, supply(rate, time, clients))?;
            let load = self.load(feeds, time, kind, true).await?;
            rate = rate.max(load.per_second());
            figure.add(&load);
            baseline.add(
                &self
                    .load(self.journal_feeds(kind, clients), time, kind, false)
                    .await?,
            );
        }
        Ok((figure, baseline))
    }

    /// A signed `publish` and, in the same rounds, each operation it is
    /// made of measured alone with the same clients: a signed `resolve`
    /// (authentication, an instance, the store's reads), its recovery
    /// search (the same filtered journal read, for an identity the leaf
    /// does not hold), the bytes put of its payload and the journal append.
    async fn publish_parts(&self, clients: usize) -> Result<PublishParts> {
        let time = ROW_TIME / ROUNDS;
        let warm = self.load(
            self.signing_feeds(Kind::Publish, clients),
            WARMUP,
            Kind::Publish,
            true,
        );
        let mut rates = [warm.await?.per_second(), 0.0];
        rates[1] = self
            .load(
                self.signing_feeds(Kind::Resolve, clients),
                WARMUP,
                Kind::Resolve,
                true,
            )
            .await?
            .per_second();
        let mut parts = PublishParts::default();
        for _ in 0..ROUNDS {
            for (i, kind) in [Kind::Publish, Kind::Resolve].into_iter().enumerate() {
                let feeds = self.signed_feeds(kind, clients, supply(rates[i], time, clients))?;
                let load = self.load(feeds, time, kind, true).await?;
                rates[i] = rates[i].max(load.per_second());
                [&mut parts.publish, &mut parts.resolve][i].add(&load);
            }
            parts
                .search
                .add(&self.load_searches(&self.leaves, clients, time).await?);
            parts.put.add(&self.load_puts(clients, time).await?);
            parts.append.add(
                &self
                    .load(
                        self.journal_feeds(Kind::Publish, clients),
                        time,
                        Kind::Publish,
                        false,
                    )
                    .await?,
            );
        }
        Ok(parts)
    }

    /// The recovery search's rate on a journal of `LONG_LEAF` record
    /// facts against one of `SHORT_LEAF`, in alternating rounds: whether
    /// its cost grows with the leaf. The facts are written straight
    /// through the journal, shaped as records only as far as the search
    /// looks (predicate `record`, a request identity at argument 4).
    async fn search_growth(&self, clients: usize) -> Result<Row> {
        let ids = journal::identity(self.target.journal).await?;
        let mut api = Api::connect(self.target.journal).await?;
        let mut leaves = Vec::new();
        for records in [LONG_LEAF, SHORT_LEAF] {
            let name = format!("search-{records}");
            let space = journal::create(&mut api, &ids, &ids.root_space, &name).await?;
            let space_ref = ids.space_ref(&space);
            for from in (0..records).step_by(APPEND_RECORDS) {
                let facts: Vec<String> = (from..records.min(from + APPEND_RECORDS))
                    .map(|n| journal::base64(&record_shaped(n)))
                    .collect();
                let body = json!({
                    "space": space_ref,
                    "facts": facts,
                    "operation_id": format!("{name}-{from}"),
                });
                api.call("append", &body, 201).await?;
            }
            leaves.push(Arc::new(vec![space_ref.to_string()]));
        }
        let time = ROW_TIME / ROUNDS;
        let (mut long, mut short) = (Load::default(), Load::default());
        for _ in 0..ROUNDS {
            long.add(&self.load_searches(&leaves[0], clients, time).await?);
            short.add(&self.load_searches(&leaves[1], clients, time).await?);
        }
        let mut row = load_row(
            &format!(
                "  recovery search c={clients}, a leaf of {LONG_LEAF} records against one of \
                 {SHORT_LEAF}"
            ),
            &long,
            &short,
            &format!("search, leaf of {SHORT_LEAF}"),
        );
        row.target = verdict(
            ">= 80% of the short leaf's (cost does not grow with the leaf)",
            long.per_second() >= 0.8 * short.per_second(),
        );
        Ok(row)
    }

    /// Unsigned journal reads of `spaces` filtered as a publish's
    /// recovery search filters a leaf (`components/coord/src/ops/publish.rs`,
    /// `search`): records whose request identity (argument 4) is one no
    /// record carries, so every page is empty, for `time`.
    async fn load_searches(
        &self,
        spaces: &Arc<Vec<String>>,
        clients: usize,
        time: Duration,
    ) -> Result<Load> {
        let (run, addr) = (self.next_run(), self.target.journal);
        let spaces = Arc::clone(spaces);
        let predicate = journal::base64(&lab_values::Value::label("record").to_bytes());
        let build: Arc<Build> = Arc::new(move |client, n| {
            let space = &spaces[(client + n as usize * clients) % spaces.len()];
            let identity = sha256_name(format!("r{run}-c{client}-{n}").as_bytes());
            let identity = identity.replace("sha256:", "req_");
            let equals = journal::base64(&lab_values::Value::text(identity).to_bytes());
            Ok(journal_request(
                addr,
                "read",
                &format!(
                    r#"{{"space":{space},"after":0,"limit":128,"filter":{{"predicate":"{predicate}","arguments":[{{"index":4,"equals":"{equals}"}}],"origin":"append"}}}}"#
                ),
            ))
        });
        let feeds = (0..clients)
            .map(|_| Feed::Built(Arc::clone(&build)))
            .collect();
        load(addr, self.target.pid, feeds, time, 200, |answer| {
            ensure!(
                answer["entries"].as_array().is_some_and(Vec::is_empty)
                    && answer["next_after"].is_null(),
                "a recovery search answered {answer}"
            );
            Ok(())
        })
        .await
    }

    /// Unsigned bytes puts of a publish's payloads (a record's canonical
    /// JSON, `{"n":<n>}` as `Call::publish` builds it) for `time`.
    async fn load_puts(&self, clients: usize, time: Duration) -> Result<Load> {
        let addr = self.target.bytes;
        let build: Arc<Build> = Arc::new(move |_, n| {
            let payload = format!(r#"{{"n":{n}}}"#);
            let mut bytes =
                client::post_head(addr, "/v1/blobs", "application/octet-stream", payload.len());
            bytes.extend_from_slice(payload.as_bytes());
            Ok(bytes)
        });
        let feeds = (0..clients)
            .map(|_| Feed::Built(Arc::clone(&build)))
            .collect();
        load(addr, self.target.pid, feeds, time, 200, |answer| {
            ensure!(answer["name"].is_string(), "put answered {answer}");
            Ok(())
        })
        .await
    }

    /// Two signed figures in alternating rounds after one warm-up each:
    /// `kind` against `baseline`, with the same clients.
    async fn compare_signed(
        &self,
        kind: Kind,
        baseline: Kind,
        clients: usize,
    ) -> Result<(Load, Load)> {
        let time = ROW_TIME / ROUNDS;
        let mut rates = [0.0f64; 2];
        for (i, k) in [kind, baseline].into_iter().enumerate() {
            rates[i] = self
                .load(self.signing_feeds(k, clients), WARMUP, k, true)
                .await?
                .per_second();
        }
        let mut loads = [Load::default(), Load::default()];
        for _ in 0..ROUNDS {
            for (i, k) in [kind, baseline].into_iter().enumerate() {
                let feeds = self.signed_feeds(k, clients, supply(rates[i], time, clients))?;
                let load = self.load(feeds, time, k, true).await?;
                rates[i] = rates[i].max(load.per_second());
                loads[i].add(&load);
            }
        }
        let [figure, base] = loads;
        Ok((figure, base))
    }

    /// The call client `client` of `clients` makes `n`th in run `run`:
    /// round robin over the leaves, the artifacts or the view's pages.
    fn call(
        view: &OnceLock<View>,
        input: &Value,
        kind: Kind,
        run: u64,
        clients: usize,
        client: usize,
        n: u64,
    ) -> Result<Call> {
        let turn = client + n as usize * clients;
        let id = format!("r{run}-c{client}-{n}");
        let view = || view.get().context("the view is not composed yet");
        match kind {
            Kind::Publish => Call::publish(&id, turn % LEAVES, n),
            Kind::Entries => Call::entries(turn % LEAVES),
            Kind::Resolve => Call::resolve(turn % LEAVES),
            Kind::Declare => Call::declare(&id, &format!("a{}", turn % ARTIFACTS), n),
            Kind::Fill => Call::declare(&id, VIEW_ARTIFACT, turn as u64),
            Kind::Query(page) => {
                let view = view()?;
                let page = match page {
                    Page::First => 0,
                    Page::Last => view.cursors.len() - 1,
                    Page::Each => turn % view.cursors.len(),
                };
                Call::query(&view.entry, view.cursors[page].as_deref())
            }
            Kind::DeclarationsPage => Call::entries_page(&view()?.declarations),
            Kind::Apply => Call::apply(&id, input, json!({ "id": id })),
            Kind::ApplyReused => Call::apply(&id, input, json!("reused")),
        }
    }

    /// Declares `VIEW_SELECTIONS` statements about the view's artifact
    /// (from `FILL_CLIENTS` clients, signed ahead), composes the view of
    /// all of them, and walks its pages once for their cursors.
    async fn compose_view(&self, declarations: &[String]) -> Result<()> {
        progress(&format!(
            "coord: declaring {VIEW_SELECTIONS} statements to select"
        ));
        let per_client = VIEW_SELECTIONS / FILL_CLIENTS as u64;
        ensure!(
            per_client * FILL_CLIENTS as u64 == VIEW_SELECTIONS,
            "uneven fill"
        );
        let feeds = self.signed_feeds(Kind::Fill, FILL_CLIENTS, per_client)?;
        let filled = self.load(feeds, FILL_TIME, Kind::Fill, true).await?;
        ensure!(
            filled.requests == VIEW_SELECTIONS,
            "{} of {VIEW_SELECTIONS} declarations made in {FILL_TIME:?}",
            filled.requests
        );

        let addr = self.target.operations;
        let publisher = &self.publisher;
        let mut selections = Vec::new();
        let (mut after, mut through) = (0u64, None::<u64>);
        loop {
            let mut request = Request::new("entries")?
                .path(declarations.to_vec())
                .int("after", after as i64)
                .int("limit", QUERY_PAGE as i64);
            if let Some(through) = through {
                request = request.int("through", through as i64);
            }
            let page = once(
                addr,
                &publisher.request(&Call::new(request, declarations.to_vec())?)?,
                200,
            )
            .await?;
            through = page["through"].as_u64();
            for entry in page["entries"].as_array().context("entries")? {
                if entry.get("declaration").is_some() {
                    selections.push(entry["ref"].clone());
                }
            }
            match page.get("next_after").and_then(Value::as_u64) {
                Some(next) => after = next,
                None => break,
            }
        }
        ensure!(
            selections.len() as u64 == VIEW_SELECTIONS,
            "the artifact holds {} declarations",
            selections.len()
        );

        progress("coord: composing the view");
        let started = Instant::now();
        let composed = once(
            addr,
            &publisher.request(&Call::compose("bench", &selections)?)?,
            201,
        )
        .await?;
        progress(&format!(
            "coord: composed {VIEW_SELECTIONS} selections in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        let entry = composed["record"]["entry"].clone();
        let mut cursors = vec![None];
        loop {
            let cursor = cursors.last().cloned().flatten();
            let page = once(
                addr,
                &publisher.request(&Call::query(&entry, cursor.as_deref())?)?,
                200,
            )
            .await?;
            match page.get("next_cursor").and_then(Value::as_str) {
                Some(next) => cursors.push(Some(next.to_string())),
                None => break,
            }
        }
        ensure!(
            cursors.len() as u64 == VIEW_SELECTIONS.div_ceil(QUERY_PAGE),
            "the view has {} pages",
            cursors.len()
        );
        let view = View {
            entry,
            cursors,
            declarations: declarations.to_vec(),
        };
        self.view
            .set(view)
            .map_err(|_| anyhow::anyhow!("the view is composed twice"))
    }

    fn next_run(&self) -> u64 {
        self.run.fetch_add(1, Ordering::Relaxed)
    }

    /// Feeds that sign each request as they send it (the warm-ups).
    fn signing_feeds(&self, kind: Kind, clients: usize) -> Vec<Feed> {
        let (run, signer) = (self.next_run(), Arc::clone(&self.publisher));
        let (view, input) = (Arc::clone(&self.view), Arc::clone(&self.apply_input));
        let build: Arc<Build> = Arc::new(move |client, n| {
            signer.request(&Bench::call(&view, &input, kind, run, clients, client, n)?)
        });
        (0..clients)
            .map(|_| Feed::Built(Arc::clone(&build)))
            .collect()
    }

    /// `per_client` signed requests for each client, signed now on
    /// `threads` threads.
    fn signed_feeds(&self, kind: Kind, clients: usize, per_client: u64) -> Result<Vec<Feed>> {
        let run = self.next_run();
        let total = clients as u64 * per_client;
        let started = Instant::now();
        let (signer, view, input) = (&*self.publisher, &*self.view, &*self.apply_input);
        let chunk = total.div_ceil(self.threads as u64).max(1);
        let signed = tokio::task::block_in_place(|| {
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..total)
                    .step_by(chunk as usize)
                    .map(|from| {
                        scope.spawn(move || {
                            (from..total.min(from + chunk))
                                .map(|i| {
                                    let (client, n) = ((i / per_client) as usize, i % per_client);
                                    signer.request(&Bench::call(
                                        view, input, kind, run, clients, client, n,
                                    )?)
                                })
                                .collect::<Result<Vec<_>>>()
                        })
                    })
                    .collect();
                let mut all = Vec::with_capacity(total as usize);
                for worker in workers {
                    all.extend(
                        worker
                            .join()
                            .map_err(|_| anyhow::anyhow!("a signing thread panicked"))??,
                    );
                }
                anyhow::Ok(all)
            })
        })?;
        progress(&format!(
            "coord: signed {total} requests in {:.2} s",
            started.elapsed().as_secs_f64()
        ));
        let mut signed = signed.into_iter();
        Ok((0..clients)
            .map(|_| {
                let mine: Vec<Vec<u8>> = signed.by_ref().take(per_client as usize).collect();
                Feed::Signed(mine.into_iter())
            })
            .collect())
    }

    /// Feeds of the unsigned journal operation under `kind`, built as sent:
    /// an append of one fact into the baseline journals (each a new
    /// operation ID) under `Kind::Publish`, else a read of the first entry
    /// of the leaves' journals.
    fn journal_feeds(&self, kind: Kind, clients: usize) -> Vec<Feed> {
        let (run, addr) = (self.next_run(), self.target.journal);
        let fact = journal::base64(&journal::fact("bench", 0));
        let append = kind == Kind::Publish;
        let spaces = Arc::clone(if append { &self.journals } else { &self.leaves });
        let build: Arc<Build> = Arc::new(move |client, n| {
            let space = &spaces[(client + n as usize * clients) % spaces.len()];
            Ok(if append {
                journal_request(
                    addr,
                    "append",
                    &format!(
                        r#"{{"space":{space},"facts":["{fact}"],"operation_id":"r{run}-c{client}-{n}"}}"#
                    ),
                )
            } else {
                journal_request(
                    addr,
                    "read",
                    &format!(r#"{{"space":{space},"after":0,"limit":1}}"#),
                )
            })
        });
        (0..clients)
            .map(|_| Feed::Built(Arc::clone(&build)))
            .collect()
    }

    /// One run of `feeds` for `time`: against the coordination service
    /// (`signed`) or the journal.
    async fn load(
        &self,
        feeds: Vec<Feed>,
        time: Duration,
        kind: Kind,
        signed: bool,
    ) -> Result<Load> {
        let (addr, want, check): (SocketAddr, u16, Check) = match (kind, signed) {
            (Kind::Publish, true) => (self.target.operations, 201, |answer| {
                ensure!(
                    answer["replayed"] == false && answer["record"]["entry"]["position"].is_u64(),
                    "publish answered {answer}"
                );
                Ok(())
            }),
            (Kind::Publish, false) => (self.target.journal, 201, |answer| {
                journal::appended(answer, 1).map(drop)
            }),
            (Kind::Entries, true) => (self.target.operations, 200, one_entry),
            (Kind::Resolve, _) => (self.target.operations, 200, |answer| {
                ensure!(answer["space"].is_object(), "resolve answered {answer}");
                Ok(())
            }),
            (_, false) => (self.target.journal, 200, one_entry),
            (Kind::Declare | Kind::Fill, _) => (self.target.operations, 201, |answer| {
                ensure!(
                    answer["replayed"] == false && answer["declaration"]["position"].is_u64(),
                    "declare answered {answer}"
                );
                Ok(())
            }),
            (Kind::Query(_), _) => (self.target.operations, 200, full_page),
            (Kind::Apply, _) => (self.target.operations, 201, |answer| {
                ensure!(
                    answer["replayed"] == false
                        && answer["outcome"] == "completed"
                        && answer["reused"].is_null()
                        && answer["outputs"]["text"].is_object(),
                    "apply answered {answer}"
                );
                Ok(())
            }),
            (Kind::ApplyReused, _) => (self.target.operations, 201, |answer| {
                ensure!(
                    answer["replayed"] == false
                        && answer["outcome"] == "completed"
                        && answer["reused"].is_object(),
                    "a reused apply answered {answer}"
                );
                Ok(())
            }),
            (Kind::DeclarationsPage, _) => (self.target.operations, 200, |answer| {
                ensure!(
                    answer["entries"].as_array().map(Vec::len) == Some(QUERY_PAGE as usize),
                    "entries answered {answer}"
                );
                Ok(())
            }),
        };
        load(addr, self.target.pid, feeds, time, want, check).await
    }
}

/// A query page holding `QUERY_PAGE` records, or the view's last page.
fn full_page(answer: &Value) -> Result<()> {
    let records = answer["records"].as_array().map_or(0, Vec::len) as u64;
    let last = VIEW_SELECTIONS % QUERY_PAGE;
    ensure!(
        records == QUERY_PAGE || (answer.get("next_cursor").is_none() && records == last),
        "query answered {answer}"
    );
    Ok(())
}

fn one_entry(answer: &Value) -> Result<()> {
    ensure!(
        answer["entries"].as_array().map(Vec::len) == Some(1),
        "a read answered {answer}"
    );
    Ok(())
}

/// Builds client `c`'s `n`th request.
type Build = dyn Fn(usize, u64) -> Result<Vec<u8>> + Send + Sync;
/// Checks an answer.
type Check = fn(&Value) -> Result<()>;

/// Where one client's requests come from.
enum Feed {
    /// Signed before the clock started; the client stops when they run out.
    Signed(std::vec::IntoIter<Vec<u8>>),
    /// Built as the client sends them.
    Built(Arc<Build>),
}

impl Feed {
    fn next(&mut self, client: usize, n: u64) -> Option<Result<Vec<u8>>> {
        match self {
            Feed::Signed(requests) => requests.next().map(Ok),
            Feed::Built(build) => Some(build(client, n)),
        }
    }
}

/// Measured runs, added up.
#[derive(Default)]
struct Load {
    requests: u64,
    /// From the common start to the last answer.
    elapsed: Duration,
    /// From sending each request to the end of its answer, summed.
    latency: Duration,
    /// CPU time of labd and of this process (the clients).
    labd_cpu: Duration,
    bench_cpu: Duration,
    /// The time over which CPU time was counted.
    wall: Duration,
    /// Clients whose signed requests ran out before the time did.
    ran_out: usize,
}

impl Load {
    fn add(&mut self, other: &Load) {
        self.requests += other.requests;
        self.elapsed += other.elapsed;
        self.latency += other.latency;
        self.labd_cpu += other.labd_cpu;
        self.bench_cpu += other.bench_cpu;
        self.wall += other.wall;
        self.ran_out += other.ran_out;
    }

    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn latency_us(&self) -> f64 {
        self.latency.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }

    fn labd_us(&self) -> f64 {
        self.labd_cpu.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }

    fn bench_cores(&self) -> f64 {
        self.bench_cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }
}

/// labd's and this process's CPU time now.
fn cpu(pid: u32) -> Result<(Instant, Duration, Duration)> {
    let labd = journal::cpu_time(&format!("/proc/{pid}/stat"))?;
    let bench = journal::cpu_time("/proc/self/stat")?;
    Ok((Instant::now(), labd, bench))
}

/// One keep-alive connection to `addr` per feed, each sending its feed's
/// requests back to back for `time` (or until its feed runs out); every
/// answer must have status `want` and pass `check`.
async fn load(
    addr: SocketAddr,
    pid: u32,
    feeds: Vec<Feed>,
    time: Duration,
    want: u16,
    check: Check,
) -> Result<Load> {
    let mut conns = Vec::with_capacity(feeds.len());
    for _ in 0..feeds.len() {
        conns.push(Conn::connect(addr).await?);
    }
    let begin = Instant::now() + START_DELAY;
    let end = begin + time;
    let tasks: Vec<_> = conns
        .into_iter()
        .zip(feeds)
        .enumerate()
        .map(|(client, (mut conn, mut feed))| {
            tokio::spawn(async move {
                tokio::time::sleep_until(begin.into()).await;
                let (mut n, mut latency, mut finished) = (0u64, Duration::ZERO, begin);
                let mut reply = Vec::with_capacity(4 << 10);
                let mut ran_out = false;
                while Instant::now() < end && n < MAX_REQUESTS_PER_CLIENT {
                    let Some(request) = feed.next(client, n) else {
                        ran_out = true;
                        break;
                    };
                    let request = request?;
                    reply.clear();
                    let sent = Instant::now();
                    let response = conn
                        .exchange(&request, &[], false, Some(&mut reply))
                        .await?;
                    finished = Instant::now();
                    latency += finished - sent;
                    ensure!(
                        response.status == want,
                        "{addr} answered {}: {}",
                        response.status,
                        String::from_utf8_lossy(&reply)
                    );
                    check(&serde_json::from_slice(&reply).context("a JSON answer")?)?;
                    n += 1;
                }
                anyhow::Ok((n, latency, finished, ran_out))
            })
        })
        .collect();
    tokio::time::sleep_until(begin.into()).await;
    let before = cpu(pid)?;
    let mut load = Load::default();
    let mut last = begin;
    for task in tasks {
        let (n, latency, finished, ran_out) = task.await??;
        load.requests += n;
        load.latency += latency;
        last = last.max(finished);
        load.ran_out += usize::from(ran_out);
    }
    let after = cpu(pid)?;
    ensure!(
        load.requests > 0,
        "no request to {addr} completed in {time:?}"
    );
    load.elapsed = last - begin;
    load.wall = after.0 - before.0;
    load.labd_cpu = after.1.saturating_sub(before.1);
    load.bench_cpu = after.2.saturating_sub(before.2);
    Ok(load)
}

/// A figure beside its journal baseline.
fn load_row(what: &str, figure: &Load, baseline: &Load, baseline_what: &str) -> Row {
    let ran_out = if figure.ran_out > 0 {
        format!("; {} clients ran out of signed requests", figure.ran_out)
    } else {
        String::new()
    };
    Row::new(
        format!("{what}: req/s (n={})", figure.requests),
        format!(
            "{:.0} ({:.0} µs/req, {:.0} µs latency; labd {:.0} µs CPU/req; bench {:.2} cores{ran_out})",
            figure.per_second(),
            1e6 / figure.per_second(),
            figure.latency_us(),
            figure.labd_us(),
            figure.bench_cores(),
        ),
        format!(
            "{:.0} {baseline_what} ({:.0} µs/req, {:.0} µs latency; labd {:.0} µs CPU/req; n={})",
            baseline.per_second(),
            1e6 / baseline.per_second(),
            baseline.latency_us(),
            baseline.labd_us(),
            baseline.requests,
        ),
        percent(figure.per_second() / baseline.per_second()),
        "-".into(),
    )
}

/// A publish and the operations it is made of, each measured alone.
#[derive(Default)]
struct PublishParts {
    publish: Load,
    resolve: Load,
    search: Load,
    put: Load,
    append: Load,
}

impl PublishParts {
    /// The publish against the rate at which its parts, run one after the
    /// other, could follow each other: the ceiling of a publish that does
    /// what it does today through these operations. Under it, the nearest
    /// target to the publish target (40% of the append) is 40% of the
    /// ceiling.
    fn row(&self) -> Row {
        let parts = [&self.resolve, &self.search, &self.put, &self.append];
        let us: f64 = parts.iter().map(|p| 1e6 / p.per_second()).sum();
        let cpu: f64 = parts.iter().map(|p| p.labd_us()).sum();
        let ceiling = 1e6 / us;
        let publish = self.publish.per_second();
        let reachable_share = ceiling >= 0.40 * self.append.per_second();
        Row::new(
            format!(
                "  ceiling: coord publish c=16 against its parts, each alone: req/s (n={})",
                self.publish.requests
            ),
            format!(
                "{publish:.0} ({:.0} µs/req; labd {:.0} µs CPU/req)",
                1e6 / publish,
                self.publish.labd_us()
            ),
            format!(
                "{ceiling:.0} = 1/({us:.0} µs: signed resolve {:.0}/s + recovery search {:.0}/s \
                 + bytes put {:.0}/s + journal append {:.0}/s; labd {cpu:.0} µs CPU); \
                 {} of the append",
                self.resolve.per_second(),
                self.search.per_second(),
                self.put.per_second(),
                self.append.per_second(),
                percent(ceiling / self.append.per_second()),
            ),
            percent(publish / ceiling),
            verdict(
                &format!(
                    ">= 40% of the ceiling ({})",
                    reachable("40% of the append reachable under it", reachable_share)
                ),
                publish >= 0.40 * ceiling,
            ),
        )
    }
}

/// The verifier's costs on one core, in µs.
struct AuthCosts {
    /// A bare strict Ed25519 verify.
    verify: (u64, f64),
    /// The service's whole check of one signed publish.
    check: (u64, f64),
    /// Signing one publish: record, proof and `Svc-Auth` header.
    sign: (u64, f64),
}

impl AuthCosts {
    fn rows(&self) -> Vec<Row> {
        let per_s = |us: f64| 1e6 / us;
        vec![
            Row::new(
                format!("ed25519 verify_strict/s, 1 core (n={})", self.verify.0),
                format!("{:.0} ({:.1} µs each)", per_s(self.verify.1), self.verify.1),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
            Row::new(
                format!(
                    "auth check/s of a publish, 1 core: header decode, record, proof + 1 grant verified, replay cache in memory (n={})",
                    self.check.0
                ),
                format!("{:.0} ({:.1} µs each)", per_s(self.check.1), self.check.1),
                format!("{:.0} bare verifies/s", per_s(self.verify.1)),
                percent(self.verify.1 / self.check.1),
                "-".into(),
            ),
            Row::new(
                format!(
                    "  ref: signing a publish/s, 1 core: record, proof, header (n={})",
                    self.sign.0
                ),
                format!("{:.0} ({:.1} µs each)", per_s(self.sign.1), self.sign.1),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        ]
    }
}

/// The in-process auth check as a share of a signed request's latency
/// (c=1) or of labd's CPU time per request (more clients, where the cores
/// are the limit).
fn share_row(op: &str, clients: usize, auth: &AuthCosts, load: &Load) -> Row {
    let (of, us) = if clients == 1 {
        ("latency", load.latency_us())
    } else {
        ("labd CPU", load.labd_us())
    };
    Row::new(
        format!("auth check share of {op} {of}, c={clients}"),
        format!(
            "{:.1} µs auth check (2 verifies of {:.1} µs)",
            auth.check.1, auth.verify.1
        ),
        format!("{us:.0} µs {of}/req"),
        format!("{:.1}%", auth.check.1 / us * 100.0),
        "-".into(),
    )
}

/// Runs `step` until `time` has passed, checking the clock every 64 steps;
/// the steps run and µs per step.
fn timed(time: Duration, mut step: impl FnMut(usize) -> Result<()>) -> Result<(u64, f64)> {
    let started = Instant::now();
    let mut count = 0usize;
    while started.elapsed() < time {
        for _ in 0..64 {
            step(count)?;
            count += 1;
        }
    }
    let us = started.elapsed().as_secs_f64() * 1e6 / count as f64;
    Ok((count as u64, us))
}

/// Signing, a bare verify and the service's check of a publish, each on
/// this thread alone.
fn auth_costs(signer: &Signer, world: &str, root: &SigningKey) -> Result<AuthCosts> {
    let calls: Vec<Call> = (0..POOL)
        .map(|i| Call::publish(&format!("auth-{i}"), i % LEAVES, i as u64))
        .collect::<Result<_>>()?;
    let started = Instant::now();
    let headers = calls
        .iter()
        .map(|call| Ok(signer.carriage(call)?.to_header()))
        .collect::<Result<Vec<_>>>()?;
    let sign = (
        POOL as u64,
        started.elapsed().as_secs_f64() * 1e6 / POOL as f64,
    );

    let first = &calls[0];
    let proof = Carriage::from_header(Some(headers[0].as_bytes()))?.proof;
    let record = signing_record(
        &first.facts(),
        &proof.principal,
        &proof.nonce,
        proof.timestamp,
        &proof.audience,
    )?;
    let key = proof
        .principal
        .verifying_key()
        .context("an admissible key")?;
    let signature = Signature::from_bytes(&proof.signature);
    let verify = timed(AUTH_TIME, |_| {
        key.verify_strict(std::hint::black_box(&record), &signature)
            .context("the proof does not verify")
    })?;

    let verifier = Verifier::new(world, Principal::of(root), signer.audience.clone());
    let now = now();
    let mut cache = MemoryReplayCache::new();
    let check = timed(AUTH_TIME, |count| {
        let i = count % POOL;
        if i == 0 {
            cache = MemoryReplayCache::new();
        }
        let call = &calls[i];
        let carriage = Carriage::from_header(Some(headers[i].as_bytes()))?;
        verifier.check(
            &carriage,
            &call.facts(),
            call.kind(),
            &call.path,
            now,
            &mut cache,
        )?;
        Ok(())
    })?;
    Ok(AuthCosts {
        verify,
        check,
        sign,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_auth::is_valid_nonce;

    #[test]
    fn nonces_are_valid_and_distinct() {
        let a = nonce(u64::MAX, 0);
        assert!(is_valid_nonce(&a), "{a}");
        assert!(is_valid_nonce(&nonce(0, 999_999_999_999_999)));
        assert_ne!(nonce(1, 2), nonce(1, 3));
        assert_ne!(nonce(1, 2), nonce(2, 2));
    }

    #[test]
    fn reads_a_secret_key() {
        let text = format!("ed25519-secret:{}\n", "0a".repeat(32));
        assert_eq!(secret_key(&text).unwrap(), [10; 32]);
        assert!(secret_key("ed25519-secret:0a").is_err());
        assert!(secret_key(&format!("ed25519:{}", "0a".repeat(32))).is_err());
        assert!(secret_key(&format!("ed25519-secret:{}", "zz".repeat(32))).is_err());
    }

    #[test]
    fn queries_repeat_the_path() {
        assert_eq!(
            Call::entries(2).unwrap().request.target,
            "/v1/entries?path=projects&path=bench&path=snapshots&path=s2&limit=1"
        );
    }

    #[test]
    fn requests_frame_their_body() {
        let addr: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let get = raw_request(addr, &Call::entries(0).unwrap(), "QUJD");
        assert!(get.starts_with(b"GET /v1/entries?path=projects&"));
        assert!(get.ends_with(b"\r\nhost: 127.0.0.1:80\r\nsvc-auth: QUJD\r\n\r\n"));
        let call = Call::publish("op", 1, 5).unwrap();
        let post = String::from_utf8(raw_request(addr, &call, "QUJD")).unwrap();
        let (head, body) = post.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("POST /v1/publish HTTP/1.1\r\n"));
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())));
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            body["path"],
            json!(["projects", "bench", "snapshots", "s1"])
        );
        assert_eq!(body["record"], json!({ "n": 5 }));
    }

    #[test]
    fn supply_has_headroom_and_bounds() {
        assert_eq!(supply(1000.0, Duration::from_secs(1), 1), 3000);
        assert_eq!(supply(1000.0, Duration::from_secs(1), 16), 188);
        assert_eq!(supply(0.0, Duration::from_secs(1), 16), MIN_PER_CLIENT);
        assert_eq!(
            supply(f64::MAX, Duration::from_secs(1), 1),
            MAX_REQUESTS_PER_CLIENT
        );
    }

    #[test]
    fn signed_requests_verify_once() {
        let addr: SocketAddr = "127.0.0.1:8094".parse().unwrap();
        let root = SigningKey::from_bytes(&[1; 32]);
        let path = ["projects".into(), PROJECT.into()];
        let signer = Signer::new(
            addr,
            "lab",
            &root,
            SigningKey::from_bytes(&PUBLISHER_SEED),
            &[GrantKind::Publish],
            &path,
        )
        .unwrap();
        let verifier = Verifier::new("lab", Principal::of(&root), signer.audience.clone());
        let call = Call::publish("op", 0, 1).unwrap();
        let carriage = signer.carriage(&call).unwrap();
        let facts = call.facts();
        let mut cache = MemoryReplayCache::new();
        let now = now();
        verifier
            .check(&carriage, &facts, call.kind(), &call.path, now, &mut cache)
            .unwrap();
        assert!(verifier
            .check(&carriage, &facts, call.kind(), &call.path, now, &mut cache)
            .is_err());
        let again = signer.carriage(&call).unwrap();
        assert_ne!(again.proof.nonce, carriage.proof.nonce);
        verifier
            .check(&again, &facts, call.kind(), &call.path, now, &mut cache)
            .unwrap();
        assert!(signer.carriage(&Call::entries(0).unwrap()).is_err());
    }
}
