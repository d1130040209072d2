//! `labctl ws` (a socket session: one call per input line, every frame
//! printed) and `labctl watch` (one subscription, its frames printed), over
//! the coordination socket (`contracts/coordination/WS.md`).
//!
//! Output: each frame the service sends is printed on stdout as one line
//! of compact JSON, as it arrives, replies and subscription frames alike.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::CloseFrame;
use tungstenite::Message;

use crate::call::connector_of;
use crate::envelope::{self, Call};
use crate::failure::{Failure, Refusal, REFUSALS};
use crate::signer::Signer;
use crate::socket::{self, Socket};
use crate::Common;

/// How long one wait for a frame lasts before stdin is looked at again.
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Args)]
pub struct WsArgs {}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The scope: labels separated by `/` (`projects/alpha`); `/` is the
    /// whole world.
    #[arg(value_name = "PATH")]
    pub path: String,

    /// Watch spaces down to N levels below the scope (0: the scope's own
    /// journal); none watches every descendant.
    #[arg(long, value_name = "N")]
    pub depth: Option<u64>,
}

/// One input line, numbered from 1.
type Line = (u64, io::Result<String>);

/// The calls sent and not yet answered: how many with each `id` (the
/// service refuses a reused in-flight `id` with a reply of that `id`).
type InFlight = HashMap<String, usize>;

pub fn run_ws(_: WsArgs, common: &Common) -> Result<(), Failure> {
    let connector = connector_of(common)?;
    let signer = Signer::load(common, &connector.endpoint)?;
    let mut socket = socket::open(&connector)?;
    set_read_timeout(&socket, Some(POLL))?;
    let lines = read_stdin();
    let mut in_flight = InFlight::new();
    let mut stdin_open = true;
    let mut refused_lines = 0u64;
    let mut out = io::stdout().lock();
    // A reply may never come (the service drops one it cannot write within
    // 30 seconds): with calls in flight, a silence this long ends the
    // session.
    let silence_limit = Duration::from_secs(common.timeout.max(1));
    let mut last_heard = Instant::now();

    while stdin_open || !in_flight.is_empty() {
        loop {
            match lines.try_recv() {
                Ok((number, Ok(text))) => {
                    if text.trim().is_empty() {
                        continue;
                    }
                    match envelope::parse_line(&text, format!("line-{number}")) {
                        Ok(call) => {
                            send_call(&mut socket, &signer, &call)?;
                            if in_flight.is_empty() {
                                last_heard = Instant::now();
                            }
                            *in_flight.entry(call.id).or_default() += 1;
                        }
                        Err(why) => {
                            eprintln!("labctl: line {number}: {why}; not sent");
                            refused_lines += 1;
                        }
                    }
                }
                Ok((_, Err(err))) => {
                    return Err(Failure::Io(format!("cannot read stdin: {err}")));
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    stdin_open = false;
                    break;
                }
            }
        }
        if !stdin_open && in_flight.is_empty() {
            break;
        }
        let Some(frame) = next_frame(&mut socket, &in_flight)? else {
            if !in_flight.is_empty() && last_heard.elapsed() >= silence_limit {
                return Err(Failure::Transport(format!(
                    "no frame from the service for {} seconds; unanswered: {}",
                    silence_limit.as_secs(),
                    unanswered(&in_flight)
                )));
            }
            continue;
        };
        last_heard = Instant::now();
        if let Some(count) = reply_id(&frame).and_then(|id| in_flight.get_mut(id)) {
            *count -= 1;
            if *count == 0 {
                in_flight.retain(|_, count| *count > 0);
            }
        }
        print_frame(&mut out, &frame)?;
    }
    close(&mut socket, common.timeout, &mut out)?;
    if refused_lines > 0 {
        return Err(Failure::Data(format!(
            "{refused_lines} input line(s) were not sent (see above)"
        )));
    }
    Ok(())
}

pub fn run_watch(args: WatchArgs, common: &Common) -> Result<(), Failure> {
    let path = scope_labels(&args.path).map_err(Failure::Usage)?;
    let mut body = json!({ "path": path });
    if let Some(depth) = args.depth {
        body["depth"] = json!(depth);
    }
    let line = json!({ "id": "subscribe", "op": "subscribe", "body": body }).to_string();
    let call = envelope::parse_line(&line, String::new()).map_err(Failure::Usage)?;

    let connector = connector_of(common)?;
    let signer = Signer::load(common, &connector.endpoint)?;
    let mut socket = socket::open(&connector)?;
    send_call(&mut socket, &signer, &call)?;
    let pending = InFlight::from([(call.id.clone(), 1)]);
    let mut out = io::stdout().lock();
    let mut subscribed = false;
    loop {
        let Some(frame) = next_frame(&mut socket, &pending)? else {
            if subscribed {
                continue;
            }
            return Err(Failure::Transport(format!(
                "no reply to subscribe within {} seconds",
                common.timeout.max(1)
            )));
        };
        if reply_id(&frame) == Some(call.id.as_str()) {
            if frame["status"] == "error" {
                return Err(Failure::Refused(socket_refusal(&frame["error"])));
            }
            eprintln!(
                "labctl: subscribed {} (expires at {})",
                frame["result"]["subscription"].as_str().unwrap_or("?"),
                frame["result"]["expires_at"]
            );
            subscribed = true;
            // Events may be far apart: from now on, wait for them as long
            // as the connection lives.
            set_read_timeout(&socket, None)?;
            continue;
        }
        print_frame(&mut out, &frame)?;
        if frame.get("subscription").is_some() && frame.get("closed").is_some() {
            // The subscription's last frame; the close is a courtesy.
            let _ = socket.close(None);
            let _ = socket.flush();
            return Ok(());
        }
    }
}

/// The labels of a `watch` scope: `a/b` is `["a","b"]`, `/` (or nothing)
/// the world; an empty label is refused.
fn scope_labels(path: &str) -> Result<Vec<String>, String> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    let labels: Vec<String> = trimmed.split('/').map(str::to_owned).collect();
    if labels.iter().any(String::is_empty) {
        return Err(format!("{path:?}: a path label is not empty"));
    }
    Ok(labels)
}

/// Reads stdin on its own thread, so the session can wait for frames and
/// lines at once; the channel closes at the end of stdin.
fn read_stdin() -> Receiver<Line> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for (number, line) in (1..).zip(io::stdin().lock().lines()) {
            let failed = line.is_err();
            if sender.send((number, line)).is_err() || failed {
                break;
            }
        }
    });
    receiver
}

fn set_read_timeout(socket: &Socket, timeout: Option<Duration>) -> Result<(), Failure> {
    socket
        .get_ref()
        .tcp()
        .set_read_timeout(timeout)
        .map_err(|err| Failure::Transport(err.to_string()))
}

/// Signs `call` and sends its envelope.
fn send_call(socket: &mut Socket, signer: &Signer, call: &Call) -> Result<(), Failure> {
    let carriage = signer.carriage(call.op, &call.params, &call.digested())?;
    let text = call.envelope(&carriage).to_string();
    socket
        .send(Message::text(text))
        .map_err(|err| Failure::Transport(format!("sending call {}: {err}", call.id)))
}

/// The next text frame as JSON, or none when the wait ran out. A close by
/// the service or a lost connection is a failure naming the calls left
/// unanswered (`in_flight`).
fn next_frame(socket: &mut Socket, in_flight: &InFlight) -> Result<Option<Value>, Failure> {
    let unanswered = || {
        if in_flight.is_empty() {
            String::new()
        } else {
            format!("; unanswered: {}", unanswered(in_flight))
        }
    };
    match socket.read() {
        Ok(Message::Text(text)) => serde_json::from_str::<Value>(text.as_str())
            .ok()
            .filter(Value::is_object)
            .map(Some)
            .ok_or_else(|| {
                Failure::Protocol(format!(
                    "the service sent a frame that is not a JSON object: {text}"
                ))
            }),
        Ok(Message::Binary(_)) => Err(Failure::Protocol(
            "the service sent a binary frame; the socket is text only".into(),
        )),
        Ok(Message::Close(frame)) => Err(closed_by_service(frame.as_ref(), &unanswered())),
        Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => Ok(None),
        Err(tungstenite::Error::Io(err))
            if matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(err) => Err(Failure::Transport(format!(
            "the connection was lost: {err}{}",
            unanswered()
        ))),
    }
}

/// The IDs of the calls in flight, sorted, comma-separated.
fn unanswered(in_flight: &InFlight) -> String {
    let mut ids: Vec<&str> = in_flight.keys().map(String::as_str).collect();
    ids.sort_unstable();
    ids.join(", ")
}

/// Why the service's close ends the session: a close for a frame it could
/// not take is a protocol error, any other a lost connection; `more` ends
/// the text.
fn closed_by_service(frame: Option<&CloseFrame>, more: &str) -> Failure {
    let Some(frame) = frame else {
        return Failure::Transport(format!(
            "the service closed the socket without a code{more}"
        ));
    };
    let text = format!(
        "the service closed the socket: {} {}{more}",
        u16::from(frame.code),
        frame.reason
    );
    match frame.code {
        CloseCode::Protocol | CloseCode::Unsupported | CloseCode::Invalid | CloseCode::Size => {
            Failure::Protocol(text)
        }
        _ => Failure::Transport(text),
    }
}

/// The `id` of a reply; subscription frames have none.
fn reply_id(frame: &Value) -> Option<&str> {
    frame.get("status")?;
    frame.get("id")?.as_str()
}

/// A socket reply's `error` member as a refusal, with the HTTP status its
/// code has on the HTTP binding.
fn socket_refusal(error: &Value) -> Refusal {
    let status = error["error"]
        .as_str()
        .and_then(|code| REFUSALS.iter().find(|(name, _, _)| *name == code))
        .map_or(500, |&(_, status, _)| status);
    Refusal::from_answer(status, error.to_string().as_bytes())
}

fn print_frame(out: &mut impl Write, frame: &Value) -> Result<(), Failure> {
    writeln!(out, "{frame}")
        .and_then(|()| out.flush())
        .map_err(|err| Failure::Io(format!("cannot write stdout: {err}")))
}

/// Closes normally (1000) and waits for the service's echo, printing any
/// frame that arrives first; `timeout` seconds bound the wait.
fn close(socket: &mut Socket, timeout: u64, out: &mut impl Write) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(timeout.max(1));
    socket
        .close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        }))
        .map_err(|err| Failure::Transport(format!("closing the socket: {err}")))?;
    loop {
        match socket.read() {
            Ok(Message::Text(text)) => {
                if let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) {
                    print_frame(out, &frame)?;
                }
            }
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed) => return Ok(()),
            Err(tungstenite::Error::Io(err))
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && Instant::now() < deadline => {}
            Err(err) => {
                return Err(Failure::Transport(format!(
                    "closing the socket: no echo of the close: {err}"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_scopes() {
        assert_eq!(scope_labels("/").unwrap(), Vec::<String>::new());
        assert_eq!(scope_labels("").unwrap(), Vec::<String>::new());
        assert_eq!(
            scope_labels("projects/alpha").unwrap(),
            ["projects", "alpha"]
        );
        assert_eq!(
            scope_labels("/projects/alpha/").unwrap(),
            ["projects", "alpha"]
        );
        assert!(scope_labels("a//b").is_err());
    }

    #[test]
    fn replies_and_subscription_frames() {
        let reply = json!({"id": "a", "status": "ok", "contract": "2026-09-19", "result": {}});
        assert_eq!(reply_id(&reply), Some("a"));
        let frame = json!({"subscription": "sub_0", "contract": "2026-09-19",
                           "event": {"space": "x", "cutoff": 3}});
        assert_eq!(reply_id(&frame), None);
        let refusal = socket_refusal(&json!({"error": "denied", "message": "no grant"}));
        assert_eq!((refusal.status, refusal.exit_code()), (403, 6));
        assert_eq!(refusal.message.as_deref(), Some("no grant"));
        let unknown = socket_refusal(&json!({"error": "teapot", "message": "?"}));
        assert_eq!((unknown.status, unknown.exit_code()), (500, 9));
    }
}
