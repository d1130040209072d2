//! Hot swap under load: a component file `labd` loads, a different build
//! of it to swap in, and clients whose requests overlap the reload.
#![allow(dead_code)]

use crate::support::{eventually, name_of, temp_dir, Client};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

/// The built component `name` copied to a file of its own, and a second
/// build of it: the same component with a custom section appended, so its
/// digest differs.
pub struct SwapFiles {
    dir: PathBuf,
    pub path: PathBuf,
    pub swapped: Vec<u8>,
}

impl SwapFiles {
    pub fn new(name: &str) -> SwapFiles {
        let dir = temp_dir(&format!("swap-{name}"));
        let path = dir.join(format!("{name}.wasm"));
        let original = std::fs::read(crate::support::built_component(name)).unwrap();
        std::fs::write(&path, &original).unwrap();
        let mut swapped = original;
        let section_name = b"lab-test-build";
        let payload = b"second";
        swapped.push(0);
        swapped.push((1 + section_name.len() + payload.len()) as u8);
        swapped.push(section_name.len() as u8);
        swapped.extend_from_slice(section_name);
        swapped.extend_from_slice(payload);
        SwapFiles { dir, path, swapped }
    }

    /// The path, for `--<service>-component`.
    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// Writes the second build and reloads it through `management`;
    /// asserts the reload answered with its digest.
    pub fn swap(&self, management: Client) {
        std::fs::write(&self.path, &self.swapped).unwrap();
        let reload = management.post("/reload", None, b"");
        assert_eq!(
            reload.status,
            200,
            "{}",
            String::from_utf8_lossy(&reload.body)
        );
        assert_eq!(reload.json()["digest"], name_of(&self.swapped));
    }
}

impl Drop for SwapFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What clients did around a reload.
#[derive(Debug)]
pub struct AcrossReload {
    /// Requests that started before the reload ended and ended after it
    /// started.
    pub overlapping: usize,
    /// Requests that started after the reload had answered.
    pub after: usize,
}

/// Runs `request(worker, n)` on `workers` threads, each in a loop, and
/// `reload` once every worker has had a request answered; the load goes on
/// until every worker has had a request answered that started after the
/// reload returned. `request` asserts its own answer.
pub fn across_reload(
    workers: usize,
    request: impl Fn(usize, usize) + Sync,
    reload: impl FnOnce(),
) -> AcrossReload {
    let stop = AtomicBool::new(false);
    let started = AtomicUsize::new(0);
    let reload_span: std::sync::OnceLock<(Instant, Instant)> = std::sync::OnceLock::new();
    let spans: Vec<Vec<(Instant, Instant)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (stop, started, request, reload_span) =
                    (&stop, &started, &request, &reload_span);
                scope.spawn(move || {
                    let mut spans = Vec::new();
                    let mut after = false;
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) && after {
                            break;
                        }
                        let begin = Instant::now();
                        request(w, n);
                        let end = Instant::now();
                        if n == 0 {
                            started.fetch_add(1, Ordering::SeqCst);
                        }
                        after |= reload_span.get().is_some_and(|(_, done)| begin > *done);
                        spans.push((begin, end));
                    }
                    spans
                })
            })
            .collect();
        eventually("every client had an answer", || {
            started.load(Ordering::SeqCst) == workers
        });
        let begin = Instant::now();
        reload();
        reload_span.set((begin, Instant::now())).unwrap();
        stop.store(true, Ordering::SeqCst);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (begin, done) = *reload_span.get().unwrap();
    let all = spans.iter().flatten();
    AcrossReload {
        overlapping: all
            .clone()
            .filter(|(start, end)| *start < done && *end > begin)
            .count(),
        after: all.filter(|(start, _)| *start > done).count(),
    }
}

/// A request whose head and first half are written, the rest held back:
/// open across whatever happens until [`HalfSent::finish`].
pub struct HalfSent {
    stream: TcpStream,
    rest: Vec<u8>,
}

impl HalfSent {
    /// `request` (head and body as bytes, `body_len` of them the body).
    pub fn start(address: SocketAddr, request: &[u8], body_len: usize) -> HalfSent {
        let split = request.len() - body_len / 2;
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(&request[..split]).unwrap();
        HalfSent {
            stream,
            rest: request[split..].to_vec(),
        }
    }

    /// Sends the rest and reads the answer.
    pub fn finish(mut self) -> crate::support::Response {
        self.stream.write_all(&self.rest).unwrap();
        crate::support::read_response(&mut self.stream)
    }
}
