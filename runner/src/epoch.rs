//! The engine's epoch: advanced every [`EPOCH_TICK`] while any store of
//! the engine lives, and not at all once none has for about [`IDLE`].
//!
//! Invariants:
//! 1. A store's epoch deadline is only as good as the ticks that reach it,
//!    so every store is created under a [`Ticking`] held as long as the
//!    store: while one is held the ticker never parks.
//! 2. The ticker parks only after [`IDLE`] of ticks that each found no
//!    guard held, so a server under load never pays for waking it, one
//!    serving a request now and then wakes it at most once a second, and
//!    an idle one wakes no thread at all.
//! 3. No wake is lost: the ticker marks itself parked and checks for held
//!    guards under the lock, and a guard taken while it is parked notifies
//!    it under the same lock.
//! 4. The thread ends once its engine is dropped or its [`EpochTicker`] is
//!    (whichever first), parked or not.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use wasmtime::error::Context;
use wasmtime::{Engine, Result};

/// How often the engine's epoch advances: the granularity of compute limits
/// and of a busy instance yielding its thread.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);
/// How long the ticker goes on with no store alive before it parks.
pub const IDLE: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Shared {
    /// Guards held now.
    held: AtomicUsize,
    parked: AtomicBool,
    stopped: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Shared {
    fn notify(&self) {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_one();
    }
}

/// The ticker of one engine; cloned handles share it, and the last one
/// dropped stops it.
#[derive(Clone)]
pub struct EpochTicker(Arc<Handle>);

/// What the handles share; stops the thread when the last one goes (4).
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.stopped.store(true, SeqCst);
        self.0.notify();
    }
}

/// Held while a store of the engine lives (1).
pub struct Ticking(Arc<Shared>);

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, SeqCst);
    }
}

impl EpochTicker {
    /// Starts the ticker of `engine`.
    pub fn start(engine: &Engine) -> Result<EpochTicker> {
        let shared = Arc::new(Shared::default());
        let engine = engine.weak();
        let ticker = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("epoch-ticker".into())
            .spawn(move || run(&ticker, &engine))
            .context("start the epoch ticker")?;
        Ok(EpochTicker(Arc::new(Handle(shared))))
    }

    /// Keeps the epoch advancing until the guard is dropped.
    pub fn ticking(&self) -> Ticking {
        let shared = &self.0 .0;
        shared.held.fetch_add(1, SeqCst);
        if shared.parked.load(SeqCst) {
            shared.notify();
        }
        Ticking(Arc::clone(shared))
    }

    /// Whether the ticker is parked now.
    #[cfg(test)]
    fn is_parked(&self) -> bool {
        self.0 .0.parked.load(SeqCst)
    }
}

fn run(shared: &Shared, engine: &wasmtime::EngineWeak) {
    let idle_ticks = IDLE.as_millis() / EPOCH_TICK.as_millis();
    let mut idle = 0;
    while !shared.stopped.load(SeqCst) {
        let Some(engine) = engine.upgrade() else {
            return;
        };
        engine.increment_epoch();
        drop(engine);
        std::thread::sleep(EPOCH_TICK);
        if shared.held.load(SeqCst) > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < idle_ticks {
            continue;
        }
        let mut lock = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
        shared.parked.store(true, SeqCst);
        while shared.held.load(SeqCst) == 0 && !shared.stopped.load(SeqCst) {
            lock = shared.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
        }
        shared.parked.store(false, SeqCst);
        idle = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use wasmtime::{Config, Module, Store, Trap};

    fn engine() -> Engine {
        let mut config = Config::new();
        config.epoch_interruption(true);
        Engine::new(&config).unwrap()
    }

    /// Waits, by polling, until `ticker` is parked or `limit` has passed.
    fn parked_within(ticker: &EpochTicker, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !ticker.is_parked() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(EPOCH_TICK);
        }
        true
    }

    /// A module whose `spin` never returns: `loop br 0 end`.
    fn spinning(engine: &Engine) -> Module {
        let wasm = [
            0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
            0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
            0x03, 0x02, 0x01, 0x00, // func 0 of type 0
            0x07, 0x08, 0x01, 0x04, b's', b'p', b'i', b'n', 0x00, 0x00, // export "spin"
            0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop br 0
        ];
        Module::new(engine, wasm).unwrap()
    }

    #[test]
    fn an_idle_ticker_parks_and_a_store_created_after_is_still_interrupted() {
        let engine = engine();
        let ticker = EpochTicker::start(&engine).unwrap();
        assert!(
            parked_within(&ticker, IDLE * 10),
            "the ticker did not park with no store alive"
        );
        let ticking = ticker.ticking();
        let module = spinning(&engine);
        let (done, outcome) = std::sync::mpsc::channel();
        let spinner = engine.clone();
        std::thread::spawn(move || {
            let mut store = Store::new(&spinner, ());
            store.set_epoch_deadline(3);
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
            let spin = instance
                .get_typed_func::<(), ()>(&mut store, "spin")
                .unwrap();
            let error = spin.call(&mut store, ()).unwrap_err();
            let _ = done.send(error.downcast_ref::<Trap>().copied());
        });
        let trap = outcome
            .recv_timeout(IDLE * 10)
            .expect("the spinning guest was never interrupted");
        assert_eq!(trap, Some(Trap::Interrupt));
        assert!(!ticker.is_parked(), "parked while a guard is held");
        drop(ticking);
        assert!(parked_within(&ticker, IDLE * 10));
    }

    #[test]
    fn the_thread_ends_with_its_last_handle() {
        let engine = engine();
        let ticker = EpochTicker::start(&engine).unwrap();
        assert!(parked_within(&ticker, IDLE * 10));
        let shared = Arc::clone(&ticker.0 .0);
        drop(ticker);
        // The thread holds no reference of its own: only the test's is left
        // once the thread has returned.
        let deadline = Instant::now() + IDLE * 10;
        while Arc::strong_count(&shared) > 1 {
            assert!(Instant::now() < deadline, "the ticker thread did not end");
            std::thread::sleep(EPOCH_TICK);
        }
    }
}
