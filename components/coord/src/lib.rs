//! The coordination service: signed requests, delegated grants, records and
//! retained content, over the journal and bytes services.
//!
//! - [`table`]: the operation table (routes, grant kinds, parameters).
//! - [`params`]: query parameters (request rules 5 to 7).
//! - [`refusal`]: refusal codes, statuses and details.
//! - [`auth`]: verification with the persistent replay cache.
//! - [`world`]: settings and the provisioned world.
//! - [`layout`]: positions of the world layout and label grammar.
//! - [`tools`]: configured tool releases and their artifact spaces.
//! - [`application`]: the documents of an application (request, manifest,
//!   resolution, attestation statement).
//! - [`facts`]: the `coord-facts-v2` fact profile.
//! - [`backend`], [`journal`], [`blobs`]: the services underneath.
//! - [`request`]: the strict body decoders.
//! - [`cursor`]: sealed export cursors.
//! - [`declarations`]: the declaration index of each declarations journal.
//! - [`ops`]: the operations.
//! - [`views`]: view evaluation and the retained view index.
//! - [`operational`]: `livez`, `healthz`, `describe`, `describe/{file}`.
//! - [`socket`]: the socket binding's calls (`WS.md`).

pub mod application;
pub mod auth;
pub mod backend;
pub mod blobs;
pub mod cursor;
pub mod declarations;
pub mod facts;
pub mod fuzzing;
pub mod journal;
pub mod layout;
pub mod operational;
pub mod ops;
pub mod params;
pub mod refusal;
pub mod request;
pub mod reuse;
pub mod socket;
pub mod table;
pub mod tools;
pub mod views;
pub mod world;

use lab_coord_auth::{
    Authorization, BodyDigest, Carriage, GrantKind, KnownGrants, Principal, RequestFacts,
};
use lab_guest::exports::lab::platform::handler::{Guest, Request, Response, ServiceIdentity};
use lab_guest::lab::platform::body::IncomingBody;
use lab_guest::lab::platform::log;
use lab_kit::body::ReadError;
use lab_kit::reply::Replier;
use params::Query;
use refusal::Refusal;
use serde_json::Value;
use table::{BodyKind, Operation, Serve};
use world::{Settings, World};

/// Identity headers of every response on the operations listener.
pub(crate) const REPLY: Replier = Replier {
    service: "coord",
    contract: "2026-09-19",
    extra: &[],
};

/// Greatest JSON request body: 64 MiB.
pub const MAX_JSON_BODY: u64 = 64 << 20;

struct Coord;

impl Guest for Coord {
    fn identity() -> ServiceIdentity {
        REPLY.identity()
    }

    /// Provisions the world when the journal can be reached; when it
    /// cannot yet (a split deployment starting in any order), the first
    /// request provisions it, and `healthz` reports the journal failing.
    fn prepare() -> Result<(), String> {
        auth::record_start()?;
        let settings = Settings::load().map_err(|e| e.message())?;
        // A malformed tool configuration stops the start; an unreachable
        // journal does not.
        let tools = lab_guest::lab::platform::config::get("tools").unwrap_or_else(|| "[]".into());
        tools::configured(&tools).map_err(|e| e.message())?;
        match world::world(&settings) {
            Err(e) => log::emit(
                log::Level::Warn,
                &format!("the world is not provisioned yet: {}", e.message()),
            ),
            // Runs cut by the previous process end now; what cannot be
            // closed yet is closed when its application is next asked about.
            Ok(world) => match ops::apply::interrupt_cut_runs(&world, &settings) {
                Ok(0) => {}
                Ok(n) => log::emit(
                    log::Level::Info,
                    &format!("{n} cut application runs closed as interrupted"),
                ),
                Err(e) => log::emit(
                    log::Level::Warn,
                    &format!("cut application runs are not closed yet: {}", e.message()),
                ),
            },
        }
        Ok(())
    }

    fn handle(request: Request, body: &IncomingBody) -> Response {
        route(&request, body)
    }
}

lab_guest::export_service!(Coord);

/// What an operation answers.
pub enum Reply {
    Json(u16, Value),
    Response(Response),
}

/// One authenticated call of an operation: what every operation needs,
/// whichever binding it arrived on.
pub struct Call<'a> {
    pub op: &'static Operation,
    pub query: Query,
    /// The request body (HTTP), or the frame (socket, already read): only
    /// `retain` reads it, and the socket does not carry `retain`.
    pub body: &'a IncomingBody,
    /// The JSON body as sent (empty for reads and `retain`); given up once
    /// it is decoded.
    /// On the socket, the RFC 8785 text of the `body` member (WS.md
    /// decision 10).
    pub json_body: Vec<u8>,
    pub settings: Settings,
    pub world: World,
    pub carriage: Carriage,
    /// The socket connection the call arrived on; none over HTTP.
    pub connection: Option<u64>,
    principal: Option<Principal>,
    /// The carriage's grants' digests and which of them are revoked:
    /// computed and looked up once a call, however often it authorizes.
    known: std::cell::OnceCell<KnownGrants>,
}

impl Call<'_> {
    /// Steps 1-4 over `body_digest` (once per call).
    pub fn authenticate_with(&mut self, body_digest: BodyDigest) -> Result<Principal, Refusal> {
        if let Some(principal) = self.principal {
            return Ok(principal);
        }
        let facts = RequestFacts {
            op: self.op.name,
            params: &self.query.signed,
            body_digest,
        };
        let principal = auth::authenticate(&self.settings, &self.carriage, &facts)?;
        self.principal = Some(principal);
        Ok(principal)
    }

    /// Steps 1-4 over the JSON body (or the empty body).
    pub fn authenticate(&mut self) -> Result<Principal, Refusal> {
        if let Some(principal) = self.principal {
            return Ok(principal);
        }
        let digest = BodyDigest::of(&self.json_body);
        self.authenticate_with(digest)
    }

    /// Steps 1-5 for the operation's grant kind on `path`, then the domain
    /// rules of the query parameters (rules 6 and 7 follow verification).
    pub fn verify(&mut self, path: &[String]) -> Result<Authorization, Refusal> {
        self.authenticate()?;
        let authorization = self.authorize(self.op.grant, path)?;
        params::check_domains(&self.query)?;
        Ok(authorization)
    }

    /// Step 5 alone, for another kind.
    pub fn authorize(&self, kind: GrantKind, path: &[String]) -> Result<Authorization, Refusal> {
        let principal = self
            .principal
            .ok_or_else(|| Refusal::Internal("authorization before authentication".into()))?;
        self.authorize_as(&principal, kind, path)
    }

    /// Whether the carriage's grants would give the principal its proof
    /// claims `kind` on `path`, before the proof is verified: it decides
    /// only how much a request that could not succeed is given.
    pub fn could_authorize(&self, kind: GrantKind, path: &[String]) -> bool {
        let claimed = self.carriage.proof.principal;
        self.authorize_as(&claimed, kind, path).is_ok()
    }

    fn authorize_as(
        &self,
        principal: &Principal,
        kind: GrantKind,
        path: &[String],
    ) -> Result<Authorization, Refusal> {
        auth::authorize(
            &self.settings,
            &self.carriage,
            self.known_grants()?,
            principal,
            kind,
            path,
        )
    }

    /// The carriage's grants as [`auth::known_grants`] gives them, once a
    /// call.
    pub fn known_grants(&self) -> Result<&KnownGrants, Refusal> {
        match self.known.get() {
            Some(known) => Ok(known),
            None => {
                let looked_up = auth::known_grants(&self.carriage)?;
                Ok(self.known.get_or_init(|| looked_up))
            }
        }
    }

    /// Request rule 10: `not_found` for a caller who may read the world,
    /// `denied` for every other caller.
    pub fn absent(&self, what: &str) -> Refusal {
        if self.authorize(GrantKind::Read, &[]).is_ok() {
            Refusal::NotFound(what.to_string())
        } else {
            Refusal::Denied
        }
    }
}

fn route(request: &Request, body: &IncomingBody) -> Response {
    let Some(segments) = lab_kit::path::clean_segments(&request.path) else {
        return refuse(None, &Refusal::NotFound("no such route".into()));
    };
    if let ["v1", rest @ ..] = &segments[..] {
        let Some(op) = table::by_route(rest) else {
            return refuse(None, &Refusal::NotFound("no such route".into()));
        };
        if request.method != op.method {
            return REPLY.method_not_allowed("invalid", op.method);
        }
        return match operation(op, request, body) {
            Ok(Reply::Json(status, value)) => REPLY.json(status, &value, Some(op.name)),
            Ok(Reply::Response(response)) => response,
            Err(refusal) => refuse(Some(op.name), &refusal),
        };
    }
    operational::route(&segments, request)
}

fn operation(
    op: &'static Operation,
    request: &Request,
    body: &IncomingBody,
) -> Result<Reply, Refusal> {
    let query = params::parse(op, request.query.as_deref())?;
    request::check_query(&query)?;
    let content_type =
        lab_kit::header(request, "content-type").map_err(Refusal::invalid_request)?;
    let json_body = match op.body {
        BodyKind::None => {
            if has_body(body) {
                return Err(Refusal::invalid_request(
                    "this operation takes no request body",
                ));
            }
            Vec::new()
        }
        BodyKind::Json => {
            if content_type.is_some_and(|v| !lab_kit::is_media_type(v, "application/json")) {
                return Err(Refusal::invalid_request(
                    "content-type must be application/json",
                ));
            }
            let body = read_json_body(body)?;
            // Request rule 2, with the body's size, like rule 1.
            check_declare_size(op, &body)?;
            body
        }
        BodyKind::Raw => {
            if content_type.is_some_and(|v| !lab_kit::is_media_type(v, "application/octet-stream"))
            {
                return Err(Refusal::invalid_request(
                    "content-type must be application/octet-stream",
                ));
            }
            Vec::new()
        }
    };
    let carriage = lab_kit::header(request, "svc-auth").ok().flatten();
    run(op, query, body, json_body, auth::carriage(carriage), None)
}

/// Everything after decoding, shared by both bindings: the settings, the
/// carriage (its decoding failure is `unverified` from here, after the
/// parameter and body checks), the world, the proof, the handler.
pub(crate) fn run(
    op: &'static Operation,
    query: Query,
    body: &IncomingBody,
    json_body: Vec<u8>,
    carriage: Result<Carriage, Refusal>,
    connection: Option<u64>,
) -> Result<Reply, Refusal> {
    let handler = match op.serve {
        Serve::Query(handler) | Serve::Json { run: handler, .. } => handler,
    };
    let settings = Settings::load()?;
    let carriage = carriage?;
    let world = world::world(&settings)?;
    let mut call = Call {
        op,
        query,
        body,
        json_body,
        settings,
        world,
        carriage,
        connection,
        principal: None,
        known: std::cell::OnceCell::new(),
    };
    // A failed proof is `unverified` and nothing is evaluated: the body is
    // decoded only once the proof over its digest holds. `retain` verifies
    // once its body is staged and hashed.
    if op.body != BodyKind::Raw {
        call.authenticate()?;
    }
    handler(&mut call)
}

/// Request rule 2, with the body's size, like rule 1 (on the socket, the
/// size of the body member's canonical text).
pub(crate) fn check_declare_size(op: &Operation, body: &[u8]) -> Result<(), Refusal> {
    if op.name == "declare" && body.len() > request::MAX_DECLARE_BODY {
        return Err(Refusal::invalid_request(
            "a declare body is at most 16 MiB (16,777,216 bytes)",
        ));
    }
    Ok(())
}

/// Whether the request has a body: a declared length, or bytes to read.
fn has_body(body: &IncomingBody) -> bool {
    body.declared_length().is_some_and(|n| n > 0) || !matches!(body.read(1), Ok(b) if b.is_empty())
}

/// The whole JSON body, within 64 MiB.
fn read_json_body(body: &IncomingBody) -> Result<Vec<u8>, Refusal> {
    lab_kit::body::read_to_end(body, MAX_JSON_BODY).map_err(|e| match e {
        ReadError::TooLarge => Refusal::BodyTooLarge,
        ReadError::Broken(e) => {
            Refusal::invalid_request(format!("the request body broke off: {e:?}"))
        }
    })
}

pub(crate) fn refuse(operation: Option<&str>, refusal: &Refusal) -> Response {
    REPLY.error(
        refusal.status(),
        refusal.code(),
        &refusal.message(),
        refusal.details(),
        operation,
    )
}
