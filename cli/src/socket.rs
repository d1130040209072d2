//! The coordination socket (`contracts/coordination/WS.md`): the upgrade
//! of `GET <prefix>/v1/ws` over the endpoint's stream (`ws://` over TCP,
//! `wss://` over the same TLS as every other command), offering the
//! subprotocol `coord`, with the answer checked before any frame is sent.

use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::WebSocket;

use crate::call::{CONTRACT, SERVICE};
use crate::failure::{Failure, Refusal};
use crate::transport::{Connector, Stream};

/// The subprotocol the socket speaks.
pub const SUBPROTOCOL: &str = "coord";

/// The service's frame read limit (64 MiB plus 1 MiB of envelope
/// headroom): no reply or frame it writes is larger.
const MAX_FRAME: usize = 68_157_440;

/// An open coordination socket.
pub type Socket = WebSocket<Stream>;

/// Opens the coordination socket of `connector`'s endpoint. A refusal of
/// the upgrade by the service (its JSON envelope with `Lab-Service:
/// coord`) is returned as that refusal; an answer from anything else, or
/// an upgrade without the subprotocol, is a protocol error.
pub fn open(connector: &Connector) -> Result<Socket, Failure> {
    let url = connector.endpoint.socket_url();
    let stream = connector
        .connect()
        .map_err(|err| Failure::Transport(format!("{url}: {err}")))?;
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|err| Failure::Usage(format!("{url}: {err}")))?;
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static(SUBPROTOCOL),
    );
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
    let (socket, response) = tungstenite::client::client_with_config(request, stream, Some(config))
        .map_err(|err| match err {
            HandshakeError::Failure(err) => refused_upgrade(&url, err),
            HandshakeError::Interrupted(_) => {
                Failure::Transport(format!("{url}: the upgrade timed out"))
            }
        })?;
    check_identity(&url, response.headers())?;
    let protocol = response
        .headers()
        .get("Sec-WebSocket-Protocol")
        .and_then(|value| value.to_str().ok());
    if protocol != Some(SUBPROTOCOL) {
        return Err(Failure::Protocol(format!(
            "{url} accepted the socket with subprotocol {protocol:?}, not {SUBPROTOCOL:?}"
        )));
    }
    Ok(socket)
}

/// Checks `Lab-Service` (and warns on another `Lab-Contract`).
fn check_identity(url: &str, headers: &tungstenite::http::HeaderMap) -> Result<(), Failure> {
    let service = headers
        .get("Lab-Service")
        .and_then(|value| value.to_str().ok());
    if service != Some(SERVICE) {
        return Err(Failure::Protocol(format!(
            "{url} answered the upgrade as service {service:?}, not {SERVICE:?}; \
             is it the coordination service?"
        )));
    }
    if let Some(contract) = headers
        .get("Lab-Contract")
        .and_then(|value| value.to_str().ok())
    {
        if contract != CONTRACT {
            eprintln!(
                "labctl: warning: the service answers contract {contract}; \
                 labctl was written for {CONTRACT}"
            );
        }
    }
    Ok(())
}

/// Why the upgrade failed.
fn refused_upgrade(url: &str, err: tungstenite::Error) -> Failure {
    use tungstenite::error::{ProtocolError, SubProtocolError};
    match err {
        tungstenite::Error::Http(response) => {
            if let Err(failure) = check_identity(url, response.headers()) {
                return failure;
            }
            let body = response.body().as_deref().unwrap_or_default();
            Failure::Refused(Refusal::from_answer(response.status().as_u16(), body))
        }
        tungstenite::Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(
            SubProtocolError::NoSubProtocol | SubProtocolError::InvalidSubProtocol,
        )) => Failure::Protocol(format!(
            "{url} accepted the socket without the subprotocol {SUBPROTOCOL:?}"
        )),
        tungstenite::Error::Io(err) => Failure::Transport(format!("{url}: {err}")),
        other => Failure::Protocol(format!("{url}: the upgrade failed: {other}")),
    }
}
