//! The operation table: name, route, grant kind, parameters, body and code
//! of every operation of the HTTP binding. The router, the parameter
//! checks, the verifier and the dispatch all read it; `operations.json`
//! documents the same rows. An operation is one row: its decoder and its
//! handler are paired by type ([`json`]), so nothing dispatches on a
//! name.

use crate::ops::{content, export, json, read, subscriptions};
use crate::refusal::Refusal;
use crate::request::{
    ApplyRequest, AssignRequest, ComposeRequest, CreateArtifactRequest, CreateCampaignRequest,
    CreateProjectRequest, DeclareRequest, Decoded, ExplainRequest, ProvisionWorkerRequest,
    PublishRequest, QueryRequest, RetireWorkerRequest, SubscribeRequest,
};
use crate::{Call, Reply};
use lab_coord_auth::GrantKind;

/// How a parameter is carried in the signing record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    Str,
    Int,
    /// Repeated; a path.
    Strings,
}

/// What the request body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (reads by query parameters).
    None,
    /// One JSON object.
    Json,
    /// Raw bytes, streamed (`retain`).
    Raw,
}

/// Serves one authenticated call.
pub type Handler = for<'a, 'b> fn(&'a mut Call<'b>) -> Result<Reply, Refusal>;

/// How a row is served.
#[derive(Debug, Clone, Copy)]
pub enum Serve {
    /// Everything is in the query string (reads; `retain` streams its body
    /// and authenticates once it is staged).
    Query(Handler),
    /// A JSON body: `decode` is its strict decoder alone, `run` decodes and
    /// handles (both from [`ops::json`]).
    Json {
        decode: fn(&[u8]) -> Result<Decoded, Refusal>,
        run: Handler,
    },
}

/// One row of the table.
#[derive(Debug)]
pub struct Operation {
    pub name: &'static str,
    pub method: &'static str,
    /// Route segments after `/v1`.
    pub route: &'static [&'static str],
    pub grant: GrantKind,
    /// (name, kind, required)
    pub params: &'static [(&'static str, ParamKind, bool)],
    pub body: BodyKind,
    pub serve: Serve,
}

use BodyKind as B;
use GrantKind as G;
use ParamKind as P;

const PATH: (&str, ParamKind, bool) = ("path", P::Strings, false);
const PATH_REQUIRED: (&str, ParamKind, bool) = ("path", P::Strings, true);

pub const OPERATIONS: &[Operation] = &[
    Operation {
        name: "resolve",
        method: "GET",
        route: &["resolve"],
        grant: G::Read,
        params: &[PATH_REQUIRED],
        body: B::None,
        serve: Serve::Query(read::resolve),
    },
    Operation {
        name: "children",
        method: "GET",
        route: &["children"],
        grant: G::Read,
        params: &[
            PATH,
            ("through", P::Int, false),
            ("cursor", P::Str, false),
            ("limit", P::Int, false),
        ],
        body: B::None,
        serve: Serve::Query(read::children),
    },
    Operation {
        name: "entries",
        method: "GET",
        route: &["entries"],
        grant: G::Read,
        params: &[
            PATH_REQUIRED,
            ("after", P::Int, false),
            ("through", P::Int, false),
            ("limit", P::Int, false),
        ],
        body: B::None,
        serve: Serve::Query(read::entries),
    },
    Operation {
        name: "get",
        method: "GET",
        route: &["get"],
        grant: G::Read,
        params: &[
            ("root_id", P::Str, true),
            ("space_id", P::Str, true),
            ("position", P::Int, true),
        ],
        body: B::None,
        serve: Serve::Query(read::get),
    },
    Operation {
        name: "fetch",
        method: "GET",
        route: &["fetch"],
        grant: G::Read,
        params: &[PATH_REQUIRED, ("bytes", P::Str, true)],
        body: B::None,
        serve: Serve::Query(content::fetch),
    },
    Operation {
        name: "snapshot",
        method: "GET",
        route: &["snapshot"],
        grant: G::Read,
        params: &[PATH, ("depth", P::Int, false)],
        body: B::None,
        serve: Serve::Query(read::snapshot),
    },
    Operation {
        name: "retain",
        method: "PUT",
        route: &["retain"],
        grant: G::Publish,
        params: &[PATH_REQUIRED, ("type", P::Str, true)],
        body: B::Raw,
        serve: Serve::Query(content::retain),
    },
    Operation {
        name: "publish",
        method: "POST",
        route: &["publish"],
        grant: G::Publish,
        params: &[],
        body: B::Json,
        serve: json::<PublishRequest>(),
    },
    Operation {
        name: "create_artifact",
        method: "POST",
        route: &["artifacts"],
        grant: G::Publish,
        params: &[],
        body: B::Json,
        serve: json::<CreateArtifactRequest>(),
    },
    Operation {
        name: "declare",
        method: "POST",
        route: &["declarations"],
        grant: G::Declare,
        params: &[],
        body: B::Json,
        serve: json::<DeclareRequest>(),
    },
    Operation {
        name: "compose",
        method: "POST",
        route: &["compose"],
        grant: G::Publish,
        params: &[],
        body: B::Json,
        serve: json::<ComposeRequest>(),
    },
    Operation {
        name: "apply",
        method: "POST",
        route: &["applications"],
        grant: G::Publish,
        params: &[],
        body: B::Json,
        serve: json::<ApplyRequest>(),
    },
    Operation {
        name: "query",
        method: "POST",
        route: &["query"],
        grant: G::Read,
        params: &[],
        body: B::Json,
        serve: json::<QueryRequest>(),
    },
    Operation {
        name: "explain",
        method: "POST",
        route: &["explain"],
        grant: G::Read,
        params: &[],
        body: B::Json,
        serve: json::<ExplainRequest>(),
    },
    Operation {
        name: "create_project",
        method: "POST",
        route: &["projects"],
        grant: G::Provision,
        params: &[],
        body: B::Json,
        serve: json::<CreateProjectRequest>(),
    },
    Operation {
        name: "provision_worker",
        method: "POST",
        route: &["workers"],
        grant: G::Provision,
        params: &[],
        body: B::Json,
        serve: json::<ProvisionWorkerRequest>(),
    },
    Operation {
        name: "retire_worker",
        method: "POST",
        route: &["workers", "retire"],
        grant: G::Provision,
        params: &[],
        body: B::Json,
        serve: json::<RetireWorkerRequest>(),
    },
    Operation {
        name: "create_campaign",
        method: "POST",
        route: &["campaigns"],
        grant: G::Provision,
        params: &[],
        body: B::Json,
        serve: json::<CreateCampaignRequest>(),
    },
    Operation {
        name: "assign",
        method: "POST",
        route: &["assignments"],
        grant: G::Provision,
        params: &[],
        body: B::Json,
        serve: json::<AssignRequest>(),
    },
    Operation {
        name: "export",
        method: "GET",
        route: &["export"],
        grant: G::Provision,
        params: &[PATH, ("cursor", P::Str, false)],
        body: B::None,
        serve: Serve::Query(export::export),
    },
];

/// The socket-only operations (`WS.md`, "Subscriptions"): no route, so
/// the HTTP binding never reaches them.
pub const SOCKET_OPERATIONS: &[Operation] = &[
    Operation {
        name: "subscribe",
        method: "",
        route: &[],
        grant: G::Read,
        params: &[],
        body: B::Json,
        serve: json::<SubscribeRequest>(),
    },
    Operation {
        name: "unsubscribe",
        method: "",
        route: &[],
        grant: G::Read,
        params: &[("subscription", P::Str, true)],
        body: B::None,
        serve: Serve::Query(subscriptions::unsubscribe),
    },
];

/// The operation at route segments `route` (after `/v1`).
pub fn by_route(route: &[&str]) -> Option<&'static Operation> {
    OPERATIONS.iter().find(|o| o.route == route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_unique() {
        for (i, a) in OPERATIONS.iter().enumerate() {
            for b in &OPERATIONS[i + 1..] {
                assert_ne!(a.route, b.route);
                assert_ne!(a.name, b.name);
            }
        }
    }
}
