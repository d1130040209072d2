//! The coordination service's socket as the subscription tests drive it,
//! and the journal beneath it over HTTP.

use super::coord::{labels, nonce, now, Coord, Holder};
use super::Client;
use lab_coord_auth::{
    canonical_json, sign_request_facts, BodyDigest, Carriage, Params, RequestFacts,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::TcpStream;
use tungstenite::{Message, WebSocket};

/// One socket connection: subscription frames are kept aside while a
/// reply is awaited, in the order they came.
pub struct Socket {
    pub ws: WebSocket<TcpStream>,
    audience: String,
    frames: VecDeque<Value>,
    next_id: u64,
}

impl Socket {
    pub fn open(coord: &Coord) -> Socket {
        let connected = super::ws::connect(coord.client.address, Some("coord"));
        assert_eq!(
            connected.headers.get("lab-service").map(|v| v.as_bytes()),
            Some(&b"coord"[..])
        );
        let ws = connected.socket;
        Socket {
            ws,
            audience: coord.audience.clone(),
            frames: VecDeque::new(),
            next_id: 0,
        }
    }

    /// The envelope of `op` signed by `who`.
    pub fn envelope(
        &mut self,
        who: &Holder,
        op: &str,
        params: Params,
        body: Option<Value>,
    ) -> Value {
        let digest = match &body {
            Some(body) => BodyDigest::of(&canonical_json(body)),
            None => BodyDigest::of(b""),
        };
        let facts = RequestFacts {
            op,
            params: &params,
            body_digest: digest,
        };
        let proof = sign_request_facts(&who.key, &facts, &nonce(), now(), &self.audience).unwrap();
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let carriage = Carriage::new(proof, who.grants.clone());
        lab_coord_client::envelope(&id, op, &params, body, &carriage).unwrap()
    }

    pub fn send(&mut self, envelope: &Value) {
        self.ws
            .send(Message::Text(envelope.to_string().into()))
            .unwrap();
    }

    /// The next message: a JSON frame, or the close code.
    pub fn read(&mut self) -> Result<Value, u16> {
        loop {
            match self.ws.read() {
                Ok(Message::Text(text)) => return Ok(serde_json::from_str(text.as_str()).unwrap()),
                Ok(Message::Close(frame)) => return Err(frame.map_or(1005, |f| u16::from(f.code))),
                Ok(_) => continue,
                Err(e) => panic!("the socket failed: {e}"),
            }
        }
    }

    /// Sends `op` and answers its reply; frames met on the way are kept.
    pub fn call(&mut self, who: &Holder, op: &str, params: Params, body: Option<Value>) -> Value {
        let envelope = self.envelope(who, op, params, body);
        self.send(&envelope);
        loop {
            let message = self.read().expect("a reply before the close");
            if message["id"] == envelope["id"] {
                return message;
            }
            assert!(message.get("subscription").is_some(), "{message}");
            self.frames.push_back(message);
        }
    }

    /// `subscribe` to `path` (with `depth`): the reply.
    pub fn subscribe(&mut self, who: &Holder, path: &str, depth: Option<u64>) -> Value {
        let mut body = json!({ "path": labels(path) });
        if let Some(depth) = depth {
            body["depth"] = json!(depth);
        }
        self.call(who, "subscribe", Params::new(), Some(body))
    }

    /// `subscribe` that must succeed: the subscription ID.
    pub fn subscribed(&mut self, who: &Holder, path: &str, depth: Option<u64>) -> String {
        let reply = self.subscribe(who, path, depth);
        assert_eq!(reply["status"], "ok", "{reply}");
        reply["result"]["subscription"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Events until one names `space` at `cutoff`: the cutoffs seen for
    /// `space` on the way (every other frame must be an event elsewhere).
    pub fn until(&mut self, space: &Value, cutoff: u64) -> Vec<u64> {
        let mut seen = Vec::new();
        while seen.last() != Some(&cutoff) {
            let frame = self.frame();
            let (id, _, got) = event_of(&frame);
            if id == space["space_id"] {
                seen.push(got);
            }
        }
        seen
    }

    /// The next subscription frame.
    pub fn frame(&mut self) -> Value {
        if let Some(frame) = self.frames.pop_front() {
            return frame;
        }
        let frame = self.read().expect("a frame before the close");
        assert!(frame.get("subscription").is_some(), "{frame}");
        assert!(frame.get("id").is_none() && frame.get("status").is_none());
        assert_eq!(frame["contract"], "2026-09-19");
        frame
    }
}

pub fn refused(reply: &Value, code: &str) {
    assert_eq!(reply["status"], "error", "{reply}");
    assert_eq!(reply["error"]["error"], code, "{reply}");
}

/// The journal beneath the coordination service, driven over HTTP.
pub struct Journal {
    pub client: Client,
    root_id: String,
}

impl Journal {
    pub fn of(client: Client) -> Journal {
        let identity = client.get("/healthz").json()["identity"].clone();
        Journal {
            client,
            root_id: identity["root_id"].as_str().unwrap().to_string(),
        }
    }

    /// The space at `path` below the world `lab`.
    pub fn space(&self, path: &str) -> Value {
        let mut full = labels("worlds/lab");
        full.extend(labels(path));
        let body = json!({ "root_id": self.root_id, "path": full });
        let answer = self
            .client
            .post_json("/v1/resolve", &body.to_string())
            .json();
        assert!(answer["space"].is_object(), "{path}: {answer}");
        json!({ "root_id": answer["space"]["root_id"], "space_id": answer["space"]["space_id"] })
    }

    pub fn post(&self, route: &str, body: &Value) -> Value {
        let response = self.client.post_json(route, &body.to_string());
        assert_eq!(
            response.status,
            201,
            "{route}: {}",
            String::from_utf8_lossy(&response.body)
        );
        response.json()
    }

    /// Appends `facts` (base64) to `space`: the new cutoff.
    pub fn append(&self, space: &Value, facts: &[&str]) -> u64 {
        let body = json!({ "space": space, "facts": facts, "operation_id": nonce() });
        self.post("/v1/append", &body)["cutoff"].as_u64().unwrap()
    }

    pub fn append_one(&self, space: &Value) -> u64 {
        self.append(space, &["gmFwAQ=="])
    }

    /// Creates `key` under `parent`: the child's reference and the
    /// parent's new cutoff.
    pub fn create(&self, parent: &Value, key: &str) -> (Value, u64) {
        let body = json!({ "parent": parent, "key": key, "operation_id": nonce() });
        let created = self.post("/v1/create", &body);
        (
            json!({ "root_id": self.root_id, "space_id": created["child"]["space_id"] }),
            created["parent_cutoff"].as_u64().unwrap(),
        )
    }
}

/// Asserts that `frame` is subscription `id`'s event of the journal
/// `space` (its root and space IDs, as the journal answers them) at
/// `path`, reaching `cutoff`: the whole event, field by field.
pub fn assert_event(frame: &Value, id: &str, space: &Value, path: &[&str], cutoff: u64) {
    assert_eq!(frame["subscription"], id, "{frame}");
    assert_eq!(
        frame["event"],
        json!({
            "space": {
                "root_id": space["root_id"],
                "space_id": space["space_id"],
                "path": path,
            },
            "cutoff": cutoff,
        })
    );
}

pub fn event_of(frame: &Value) -> (&str, &Value, u64) {
    let event = &frame["event"];
    assert!(event.is_object(), "not an event: {frame}");
    (
        event["space"]["space_id"].as_str().unwrap(),
        &event["space"]["path"],
        event["cutoff"].as_u64().unwrap(),
    )
}
