//! Crashes of a running `labd`: `kill -9`, after which the operating
//! system's page cache survives, or a power cut, after which what was made
//! durable (fsync of a file for its bytes, fsync of a directory for its
//! names) survives, with a random part of the pages written and not synced.
//!
//! For a power cut, the state directory is a `lab-powercut` filesystem
//! mounted over FUSE: the cut keeps its durable image, `labd` is killed,
//! and the image is mounted again before `labd` restarts. A test that asks
//! for a power cut fails, with the reason, where FUSE cannot be mounted.
//!
//! Clients racing a crash classify each request by [`Exchange`]: a request
//! written in full before the crash began and not acknowledged was in
//! flight at the crash.
#![allow(dead_code)]

use crate::support::{try_read_response, Labd, Response};
use lab_powercut::{Image, Mounted};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// SIGKILL: writes in the page cache survive.
    Kill9,
    /// Power loss: what was synced survives, and any part of what was not
    /// (a random half of the unsynced pages, as a disk's writeback left it).
    PowerCut,
}

/// A `labd` that can be crashed and restarted on the same state.
pub struct Crashable {
    labd: Option<Labd>,
    mounted: Option<Mounted>,
    data_dir: PathBuf,
    args: Vec<String>,
    watch: Watch,
}

/// What clients racing a crash share: whether it began, and how many
/// requests are written and unanswered.
#[derive(Clone, Default)]
pub struct Watch {
    crashing: Arc<AtomicBool>,
    waiting: Arc<AtomicUsize>,
}

fn mount(state: &std::path::Path, image: &Image) -> Mounted {
    Mounted::mount(state, image).unwrap_or_else(|e| panic!("a power-cut test needs FUSE: {e}"))
}

impl Crashable {
    /// Starts `labd` with `args`, its state on a power-cut filesystem when
    /// `crash` is a power cut.
    pub fn start(name: &str, args: &[&str], crash: Crash) -> Crashable {
        let data_dir = crate::support::temp_dir(name);
        let mounted = (crash == Crash::PowerCut).then(|| {
            let state = data_dir.join("state");
            std::fs::create_dir_all(&state).unwrap();
            mount(&state, &Image::empty())
        });
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let labd = Labd::start_in(data_dir.clone(), args.clone());
        Crashable {
            labd: Some(labd),
            mounted,
            data_dir,
            args,
            watch: Watch::default(),
        }
    }

    /// The clients' view of the crash.
    pub fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// The crash: the power cut (its durable image kept) or nothing, then
    /// SIGKILL; the state directory then holds what survived.
    pub fn crash(&mut self) {
        self.watch.crashing.store(true, Ordering::SeqCst);
        let mut bits = random_threshold(0, usize::MAX) as u64 | 1;
        let mut coin = move || {
            // xorshift64: a fresh sequence each crash.
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            bits & 1 == 1
        };
        let image = self.mounted.as_ref().map(|m| m.cut_keeping(&mut coin));
        let labd = self.labd.take().expect("labd is running");
        labd.kill();
        if let (Some(mounted), Some(image)) = (self.mounted.take(), image) {
            let state = mounted.mountpoint().to_path_buf();
            mounted.unmount().expect("unmount after the power cut");
            self.mounted = Some(mount(&state, &image));
        }
    }

    /// A new `labd` on the state the crash left.
    pub fn restart(&mut self) {
        assert!(self.labd.is_none(), "labd is still running");
        self.watch.crashing.store(false, Ordering::SeqCst);
        self.labd = Some(Labd::start_in(self.data_dir.clone(), self.args.clone()));
    }

    pub fn crash_and_restart(&mut self) {
        self.crash();
        self.restart();
    }
}

impl Deref for Crashable {
    type Target = Labd;
    fn deref(&self) -> &Labd {
        self.labd.as_ref().expect("labd is running")
    }
}

impl Drop for Crashable {
    fn drop(&mut self) {
        if let Some(labd) = self.labd.take() {
            labd.kill();
        }
        if let Some(mounted) = self.mounted.take() {
            let _ = mounted.unmount();
        }
        crate::support::discard(&self.data_dir);
    }
}

/// One request of a client racing a crash, and what became of it.
pub struct Exchange {
    /// Written in full before the crash began.
    pub written_before_crash: bool,
    /// The answer; an error when the transport broke.
    pub answer: std::io::Result<Response>,
}

impl Watch {
    /// Sends `request` (head and body, as bytes) to `address`, noting
    /// whether it was written before the crash began.
    pub fn exchange(&self, address: SocketAddr, request: &[u8]) -> Exchange {
        let mut written_before_crash = false;
        let answer = (|| {
            let mut stream = TcpStream::connect(address)?;
            stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
            stream.set_nodelay(true)?;
            stream.write_all(request)?;
            // Read before the request counts as waiting, so a request that
            // `crash_under_load` saw waiting was written before the crash.
            written_before_crash = !self.crashing.load(Ordering::SeqCst);
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let answer = try_read_response(&mut stream);
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            answer
        })();
        Exchange {
            written_before_crash,
            answer,
        }
    }
}

impl Exchange {
    /// The answer, when it has `status`.
    pub fn answered(&self, status: u16) -> Option<&Response> {
        self.answer.as_ref().ok().filter(|r| r.status == status)
    }

    /// Written before the crash and not answered with `status`.
    pub fn in_flight(&self, status: u16) -> bool {
        self.written_before_crash && self.answered(status).is_none()
    }
}

/// A POST of `body` with `content_type`, as bytes on the wire.
pub fn post_bytes(target: &str, content_type: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {target} HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        request.push_str(&format!("content-type: {ct}\r\n"));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Runs `attempt`, a crash under load that answers whether a request was
/// in flight at its crash (having made every check of it either way),
/// until one was, at most three times. A crash may come when every request
/// written before it was already answered (a group's answers leave
/// together, a client reads its answer late), and then tests none in
/// flight.
pub fn until_one_in_flight(what: &str, mut attempt: impl FnMut() -> bool) {
    const ATTEMPTS: usize = 3;
    assert!(
        (0..ATTEMPTS).any(|_| attempt()),
        "no {what} was in flight at any of {ATTEMPTS} crashes"
    );
}

/// A number of acknowledgements in `low..high` that differs between runs:
/// the instant of the crash.
pub fn random_threshold(low: usize, high: usize) -> usize {
    let mut seed = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
        .unwrap();
    low + (u64::from_le_bytes(seed) as usize) % (high - low)
}

/// Waits until `acknowledged` reaches `threshold` with two requests written
/// and unanswered, then crashes `labd`.
pub fn crash_under_load(labd: &mut Crashable, acknowledged: &AtomicUsize, threshold: usize) {
    let waiting = Arc::clone(&labd.watch.waiting);
    // Two waiting: a client may not have read an answer already sent, so
    // one alone may be answered at the crash; both rarely are.
    crate::support::eventually("acknowledged requests and two in flight", || {
        acknowledged.load(Ordering::SeqCst) >= threshold && waiting.load(Ordering::SeqCst) >= 2
    });
    labd.crash();
}
