//! The coordination side of a split deployment: the journal is hosted by
//! another labd, which streams its advances on its management listener
//! (`GET /advances`, see [`super::feed`]). The hub follows that stream
//! only while subscriptions are open: the first subscription opens it
//! (and, when it cannot be opened, is refused `unavailable`), the end of
//! the last one closes it. A loss line gives every subscription a `gap`;
//! a stream that breaks closes every subscription with
//! `scope_unavailable`, since its scope can no longer be watched.

use super::subscription::{Journal, Reason, Subscription};
use super::{Advance, Hub, OpenError};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::net::TcpStream;

/// Longest wait for the journal's answer when opening its stream.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest line the stream may carry (an advance names one path).
const MAX_LINE: usize = 1 << 20;

/// Where to follow a remote journal's advances.
pub struct Follower {
    authority: String,
    path: String,
    /// One opening at a time.
    starting: tokio::sync::Mutex<()>,
    generation: AtomicU64,
}

impl Follower {
    /// From the base URL of the journal's management listener,
    /// `http://host:port[/prefix]`.
    pub fn parse(url: &str) -> Result<Follower> {
        let rest = url
            .strip_prefix("http://")
            .context("only http:// URLs are supported")?;
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if !matches!(authority.rsplit_once(':'), Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok())
        {
            bail!("the URL needs a host and a port");
        }
        let prefix = prefix.trim_end_matches('/');
        Ok(Follower {
            authority: authority.to_string(),
            path: if prefix.is_empty() {
                "/advances".to_string()
            } else {
                format!("/{prefix}/advances")
            },
            starting: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        })
    }

    /// Opens `subscription`, opening the stream first when none runs.
    pub(super) async fn open(
        &self,
        hub: &Arc<Hub>,
        connection: u64,
        subscription: Subscription,
    ) -> Result<(), OpenError> {
        {
            let state = hub.lock();
            Hub::admissible(&state, connection)?;
            if state.following.is_some() {
                drop(state);
                return hub.insert(connection, subscription, None);
            }
        }
        let _starting = self.starting.lock().await;
        if hub.lock().following.is_some() {
            return hub.insert(connection, subscription, None);
        }
        let body = tokio::time::timeout(CONNECT_TIMEOUT, self.connect())
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))
            .and_then(|r| r)
            .map_err(|e| {
                OpenError::Unavailable(format!(
                    "the journal's advance stream cannot be opened: {e:#}"
                ))
            })?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        hub.insert(connection, subscription, Some(generation))?;
        tokio::spawn(run(
            Arc::downgrade(hub),
            Arc::clone(&hub.idle),
            body,
            generation,
        ));
        Ok(())
    }

    /// `GET /advances` of the journal's management listener: its body once
    /// the answer's head says it is the journal's stream.
    async fn connect(&self) -> Result<Incoming> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connect to {}", self.authority))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let request = hyper::Request::get(self.path.as_str())
            .header(hyper::header::HOST, &self.authority)
            .body(Empty::<Bytes>::new())?;
        let answer = sender.send_request(request).await?;
        let service = answer.headers().get("lab-service").map(|v| v.as_bytes());
        if answer.status() != hyper::StatusCode::OK || service != Some(b"journal".as_slice()) {
            bail!(
                "{} answered {} (service {:?}), not the journal's advance stream",
                self.authority,
                answer.status(),
                service.map(String::from_utf8_lossy)
            );
        }
        Ok(answer.into_body())
    }
}

/// Why a stream stopped being followed.
enum End {
    /// No subscription is left: nothing to tell.
    Idle,
    Broken(String),
}

/// Follows one stream: its lines into the hub, until the last subscription
/// ends or the stream breaks.
async fn run(hub: Weak<Hub>, idle: Arc<tokio::sync::Notify>, mut body: Incoming, generation: u64) {
    let mut buffer: Vec<u8> = Vec::new();
    let end = loop {
        tokio::select! {
            frame = body.frame() => {
                let data = match frame {
                    None => break End::Broken("the stream ended".into()),
                    Some(Err(e)) => break End::Broken(e.to_string()),
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => data,
                        Err(_) => continue,
                    },
                };
                buffer.extend_from_slice(&data);
                let Some(hub) = hub.upgrade() else { return };
                if let Err(why) = take_lines(&hub, &mut buffer) {
                    break End::Broken(why);
                }
            }
            _ = idle.notified() => {
                let Some(hub) = hub.upgrade() else { return };
                let mut state = hub.lock();
                if !hub.listening() && state.following == Some(generation) {
                    state.following = None;
                    break End::Idle;
                }
            }
        }
    };
    let Some(hub) = hub.upgrade() else { return };
    if let End::Broken(why) = end {
        let ours = {
            let mut state = hub.lock();
            let ours = state.following == Some(generation);
            if ours {
                state.following = None;
            }
            ours
        };
        if ours {
            tracing::warn!(error = why, "the journal's advance stream broke");
            hub.close_where(Reason::ScopeUnavailable, |_| true);
        }
    }
}

/// Announces every complete line of `buffer` and keeps the rest.
fn take_lines(hub: &Hub, buffer: &mut Vec<u8>) -> Result<(), String> {
    let Some(last) = buffer.iter().rposition(|&b| b == b'\n') else {
        if buffer.len() > MAX_LINE {
            return Err("a line of the stream is too long".into());
        }
        return Ok(());
    };
    let rest = buffer.split_off(last + 1);
    let complete = std::mem::replace(buffer, rest);
    let mut advances = Vec::new();
    for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match parse_line(line)? {
            Line::Advance(advance) => advances.push(advance),
            Line::Lost => {
                hub.announce(&std::mem::take(&mut advances));
                hub.lose_all();
            }
        }
    }
    hub.announce(&advances);
    Ok(())
}

enum Line {
    Advance(Advance),
    Lost,
}

fn parse_line(line: &[u8]) -> Result<Line, String> {
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("a line of the stream: {e}"))?;
    if value.get("lost") == Some(&serde_json::Value::Bool(true)) {
        return Ok(Line::Lost);
    }
    let text = |name: &str| value[name].as_str().map(str::to_string);
    let advance = (|| {
        Some(Advance {
            journal: Journal {
                root_id: text("root_id")?,
                space_id: text("space_id")?,
                path: value["path"]
                    .as_array()?
                    .iter()
                    .map(|l| l.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()?,
            },
            cutoff: value["cutoff"].as_u64()?,
        })
    })();
    advance
        .map(Line::Advance)
        .ok_or_else(|| "a line of the stream is not an advance".to_string())
}
