//! A socket client of the coordination service (`WS.md`): tungstenite over
//! a blocking `TcpStream`, and calls signed by the client crate.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;
use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use super::coord::{nonce, now, Coord, Holder, Req};

/// How long a test waits for one frame.
const FRAME_WAIT: Duration = Duration::from_secs(60);

/// One socket connection.
pub struct Ws {
    pub socket: WebSocket<TcpStream>,
    /// The upgrade response's headers.
    pub headers: tungstenite::http::HeaderMap,
}

/// Opens `GET /v1/ws` on `address`, offering `protocol` when given.
pub fn connect(address: SocketAddr, protocol: Option<&str>) -> Ws {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(FRAME_WAIT)).unwrap();
    let mut request = format!("ws://{address}/v1/ws")
        .into_client_request()
        .unwrap();
    if let Some(protocol) = protocol {
        request
            .headers_mut()
            .insert("sec-websocket-protocol", protocol.parse().unwrap());
    }
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (socket, response) =
        tungstenite::client::client_with_config(request, stream, Some(config)).unwrap();
    Ws {
        socket,
        headers: response.headers().clone(),
    }
}

impl Ws {
    pub fn send_text(&mut self, text: &str) {
        self.socket.send(Message::text(text)).unwrap();
    }

    pub fn send_json(&mut self, value: &Value) {
        self.send_text(&value.to_string());
    }

    /// The next data or close frame (pings and pongs skipped).
    pub fn next(&mut self) -> Message {
        loop {
            match self.socket.read().unwrap() {
                Message::Ping(_) | Message::Pong(_) => continue,
                message => return message,
            }
        }
    }

    /// The next frame, which must be a text reply.
    pub fn reply(&mut self) -> Value {
        match self.next() {
            Message::Text(text) => serde_json::from_str(text.as_str()).unwrap(),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    /// The next frame, which must be a close: its code and reason.
    pub fn closed(&mut self) -> (u16, String) {
        match self.next() {
            Message::Close(Some(frame)) => (frame.code.into(), frame.reason.to_string()),
            other => panic!("expected a close, got {other:?}"),
        }
    }
}

/// The reply's `error` code and message, asserting the reply is an error
/// for `id`.
pub fn error_of<'a>(reply: &'a Value, id: &str) -> (&'a str, &'a str) {
    assert_eq!(reply["id"], id, "{reply}");
    assert_eq!(reply["status"], "error", "{reply}");
    assert_eq!(reply["contract"], "2026-09-19", "{reply}");
    (
        reply["error"]["error"].as_str().unwrap(),
        reply["error"]["message"].as_str().unwrap(),
    )
}

impl Coord {
    /// The call envelope of `req` signed by `who` now, with a fresh nonce.
    pub fn envelope(&self, who: &Holder, req: &Req, id: &str) -> Value {
        self.envelope_at(who, req, id, now(), &nonce())
    }

    pub fn envelope_at(
        &self,
        who: &Holder,
        req: &Req,
        id: &str,
        timestamp: u64,
        nonce: &str,
    ) -> Value {
        let built = req.built().canonical().unwrap();
        let carriage = built
            .carriage(
                &who.key,
                who.grants.clone(),
                nonce,
                timestamp,
                &self.audience,
            )
            .unwrap();
        built.envelope(id, &carriage).unwrap()
    }

    /// A socket on this service's operations listener, offering `coord`.
    pub fn socket(&self) -> Ws {
        connect(self.client.address, Some("coord"))
    }

    /// `req` signed by `who`, called on `ws`: its reply.
    pub fn call(&self, ws: &mut Ws, who: &Holder, req: &Req) -> Value {
        let id = nonce();
        ws.send_json(&self.envelope(who, req, &id));
        let reply = ws.reply();
        assert_eq!(reply["id"], id.as_str(), "{reply}");
        reply
    }
}
