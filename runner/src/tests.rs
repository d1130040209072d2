//! The runner driven directly: the test releases of `components/tool-*`,
//! built by `host/build.rs`, under every limit, on a [`MemoryStore`].

use super::*;
use std::path::Path;

/// Compiled releases shared by every test: each is compiled once.
fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tool-test-cache")
}

fn release_wasm(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/components/wasm32-wasip2/release")
        .join(format!("lab_tool_{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn description(inputs: &[&str], outputs: &[&str], effects: &[&str], egress: &[&str]) -> String {
    serde_json::json!({
        "name": "t",
        "version": "1",
        "class": "test",
        "inputs": inputs.iter().map(|r| serde_json::json!({"role": r, "required": true})).collect::<Vec<_>>(),
        "outputs": outputs.iter().map(|r| serde_json::json!({"role": r})).collect::<Vec<_>>(),
        "effects": effects,
        "egress": egress,
        "deterministic": true,
    })
    .to_string()
}

fn limits() -> RunLimits {
    RunLimits {
        memory: 64 << 20,
        fuel: 2_000_000_000,
        wall: Duration::from_secs(30),
        outputs: 8,
        output_bytes: 4 << 20,
    }
}

struct Fixture {
    store: MemoryStore,
    runner: Runner,
    upper: String,
    hostile: String,
}

impl Fixture {
    fn new(limits: RunLimits, concurrent: u32) -> Fixture {
        let store = MemoryStore::default();
        let mut runner = runner(
            settings(limits, concurrent, vec![], Some(shared_cache())),
            &store,
        );
        let upper = runner
            .configure(
                &description(&["text"], &["text"], &[], &[]),
                &release_wasm("upper"),
            )
            .unwrap();
        let hostile = runner
            .configure(
                &description(&[], &["out"], &[], &[]),
                &release_wasm("hostile"),
            )
            .unwrap();
        Fixture {
            store,
            runner,
            upper,
            hostile,
        }
    }

    fn put(&self, bytes: &[u8]) -> Digest32 {
        self.store.put(bytes)
    }

    fn read(&self, digest: &Digest32) -> Vec<u8> {
        self.store.get(digest).expect("committed bytes").to_vec()
    }

    /// Committed blobs and outputs still being written.
    fn files(&self) -> (usize, usize) {
        (self.store.len(), self.store.open_writers())
    }

    async fn hostile(&self, recipe: &str) -> RunReport {
        self.runner
            .run(&self.hostile, vec![], format!("\"{recipe}\""))
            .await
            .expect("a run")
    }

    /// Runs `upper` on `text` and checks its one output.
    async fn upper_completes(&self, text: &[u8]) -> RunReport {
        let input = self.put(text);
        let report = self
            .runner
            .run(
                &self.upper,
                vec![RunInput {
                    role: "text".into(),
                    blob: input,
                    type_: "text/plain".into(),
                }],
                "{}".into(),
            )
            .await
            .expect("a run");
        let Outcome::Completed(outputs) = &report.outcome else {
            panic!("upper did not complete: {:?}", report.outcome);
        };
        assert_eq!(outputs.len(), 1, "{outputs:?}");
        assert_eq!((outputs[0].role.as_str(), outputs[0].ordinal), ("text", 0));
        assert_eq!(outputs[0].type_, "text/plain");
        assert_eq!(outputs[0].size, text.len() as u64);
        assert_eq!(self.read(&outputs[0].blob), text.to_ascii_uppercase());
        report
    }

    /// A hostile run ends `failed` with `reason`, names nothing, leaves no
    /// output still being written, and the next run completes.
    async fn fails_cleanly(&self, recipe: &str, reason: &str) -> RunReport {
        let before = self.files();
        let report = self.hostile(recipe).await;
        assert_eq!(
            report.outcome,
            Outcome::Failed(reason.into()),
            "recipe {recipe}"
        );
        assert_eq!(self.files(), before, "recipe {recipe} left files");
        self.upper_completes(b"after a hostile run").await;
        report
    }
}

/// A runner reading from and writing to `store`.
fn runner(settings: RunnerSettings, store: &MemoryStore) -> Runner {
    let store = Arc::new(store.clone());
    Runner::new(settings, store.clone(), store).unwrap()
}

fn settings(
    limits: RunLimits,
    concurrent: u32,
    allowed_effects: Vec<Effect>,
    cache: Option<PathBuf>,
) -> RunnerSettings {
    RunnerSettings {
        limits,
        concurrent,
        wait: Duration::from_millis(100),
        allowed_effects,
        cache,
        blob_cap: 1 << 30,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trivial_release_completes_and_reports_what_it_used() {
    let fixture = Fixture::new(limits(), 2);
    let (committed, _) = fixture.files();
    let report = fixture.upper_completes(b"hello, tools").await;
    assert_eq!(report.limits, limits());
    assert!(
        report.used.fuel > 0 && report.used.fuel < limits().fuel,
        "{report:?}"
    );
    assert!(
        report.used.peak_memory > 0 && report.used.peak_memory <= 64 << 20,
        "{report:?}"
    );
    assert!(report.used.wall > Duration::ZERO, "{report:?}");
    // The input and the output.
    assert_eq!(fixture.files(), (committed + 2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_ends_at_the_fuel_limit() {
    let fixture = Fixture::new(
        RunLimits {
            fuel: 100_000_000,
            ..limits()
        },
        2,
    );
    let report = fixture.fails_cleanly("loop", "limit: fuel").await;
    assert_eq!(report.used.fuel, 100_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_ends_at_the_wall_clock_limit_and_others_run_meanwhile() {
    let fixture = Arc::new(Fixture::new(
        RunLimits {
            fuel: u64::MAX / 2,
            wall: Duration::from_millis(1500),
            ..limits()
        },
        2,
    ));
    let looping = {
        let fixture = Arc::clone(&fixture);
        tokio::spawn(async move { fixture.hostile("loop").await })
    };
    // While the loop holds one slot, the other serves runs to completion.
    fixture.upper_completes(b"meanwhile").await;
    let report = looping.await.unwrap();
    assert_eq!(report.outcome, Outcome::Failed("limit: wall-time".into()));
    assert!(
        report.used.wall >= Duration::from_millis(1500),
        "{report:?}"
    );
    fixture.upper_completes(b"after").await;
    assert_eq!(fixture.files().1, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_ends_at_the_memory_limit() {
    let fixture = Fixture::new(
        RunLimits {
            memory: 16 << 20,
            ..limits()
        },
        2,
    );
    let report = fixture.fails_cleanly("memory", "limit: memory").await;
    assert!(report.used.peak_memory <= 16 << 20, "{report:?}");
    assert!(report.used.peak_memory > 8 << 20, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_flood_ends_at_the_output_limits() {
    let fixture = Fixture::new(limits(), 2);
    fixture.fails_cleanly("outputs", "limit: outputs").await;
    fixture
        .fails_cleanly("output-bytes", "limit: output-bytes")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_name_their_cause_and_name_nothing() {
    let fixture = Fixture::new(limits(), 2);
    fixture.fails_cleanly("fail", "tool: asked to fail").await;
    fixture
        .fails_cleanly("partial", "tool: failed after writing an output")
        .await;
    fixture
        .fails_cleanly(
            "undeclared",
            "output role `not-a-role` is not declared by the release",
        )
        .await;
    let report = fixture.hostile("trap").await;
    let Outcome::Failed(reason) = report.outcome else {
        panic!("{report:?}");
    };
    assert!(reason.starts_with("trap: "), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_concurrent_runs_waits_then_is_refused() {
    let fixture = Arc::new(Fixture::new(
        RunLimits {
            fuel: u64::MAX / 2,
            wall: Duration::from_secs(3),
            ..limits()
        },
        1,
    ));
    let looping = {
        let fixture = Arc::clone(&fixture);
        tokio::spawn(async move { fixture.hostile("loop").await })
    };
    while fixture.runner.free_slots() > 0 {
        tokio::task::yield_now().await;
    }
    let refused = fixture
        .runner
        .run(&fixture.hostile, vec![], "\"fail\"".into())
        .await;
    assert!(matches!(refused, Err(RunError::Unavailable)), "{refused:?}");
    assert_eq!(
        looping.await.unwrap().outcome,
        Outcome::Failed("limit: wall-time".into())
    );
    fixture.upper_completes(b"a slot again").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_releases_and_absent_inputs_are_no_run() {
    let fixture = Fixture::new(limits(), 1);
    let unknown = fixture
        .runner
        .run(&format!("sha256:{}", "0".repeat(64)), vec![], "{}".into())
        .await;
    assert!(
        matches!(unknown, Err(RunError::UnknownRelease)),
        "{unknown:?}"
    );
    let absent = fixture
        .runner
        .run(
            &fixture.upper,
            vec![RunInput {
                role: "text".into(),
                blob: [7; 32],
                type_: "text/plain".into(),
            }],
            "{}".into(),
        )
        .await;
    assert!(
        matches!(absent, Err(RunError::MissingInput(ref r)) if r == "text"),
        "{absent:?}"
    );
}

fn configure(allowed: &[Effect], description: &str, release: &str) -> Result<String, ReleaseError> {
    let mut runner = runner(
        settings(limits(), 1, allowed.to_vec(), Some(shared_cache())),
        &MemoryStore::default(),
    );
    runner.configure(description, &release_wasm(release))
}

#[test]
fn a_release_reaching_for_files_sockets_environment_clock_or_randomness_is_not_configured() {
    let result = configure(
        &Effect::ALL,
        &description(&[], &["out"], &["clock", "random"], &[]),
        "reach",
    );
    let Err(ReleaseError::ForeignImport(import)) = result else {
        panic!("{result:?}");
    };
    assert!(import.starts_with("wasi:"), "{import}");
}

#[test]
fn an_effect_is_granted_only_by_declaration_and_deployment() {
    // Imported, not declared.
    assert_eq!(
        configure(
            &Effect::ALL,
            &description(&[], &["out"], &["random"], &[]),
            "effects"
        ),
        Err(ReleaseError::UndeclaredEffect(Effect::Clock))
    );
    // Declared, not allowed.
    assert_eq!(
        configure(
            &[Effect::Clock],
            &description(&[], &["out"], &["clock", "random"], &[]),
            "effects"
        ),
        Err(ReleaseError::EffectNotAllowed(Effect::Random))
    );
    // Egress, whatever else.
    assert_eq!(
        configure(
            &Effect::ALL,
            &description(&[], &["out"], &[], &["example.org:443"]),
            "upper"
        ),
        Err(ReleaseError::Egress(vec!["example.org:443".into()]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_and_allowed_effect_is_linked() {
    let mut runner = runner(
        settings(limits(), 1, Effect::ALL.to_vec(), Some(shared_cache())),
        &MemoryStore::default(),
    );
    let release = runner
        .configure(
            &description(&[], &["out"], &["clock", "random"], &[]),
            &release_wasm("effects"),
        )
        .unwrap();
    let report = runner.run(&release, vec![], "{}".into()).await.unwrap();
    let Outcome::Completed(outputs) = report.outcome else {
        panic!("{report:?}");
    };
    assert_eq!(outputs.len(), 1);
}

#[test]
fn a_second_start_loads_the_compiled_release_from_the_cache() {
    let mut nonce = [0u8; 16];
    getrandom(&mut nonce);
    let dir = std::env::temp_dir().join(format!("tools-{}", hex::encode(nonce)));
    let store = MemoryStore::default();
    let cache = dir.join("cache");
    let wasm = release_wasm("upper");
    let describe = description(&["text"], &["text"], &[], &[]);

    let mut first = runner(settings(limits(), 1, vec![], Some(cache.clone())), &store);
    let digest = first.configure(&describe, &wasm).unwrap();
    assert_eq!(first.cache_counts.compiled.load(Ordering::Relaxed), 1);
    assert_eq!(first.cache_counts.from_cache.load(Ordering::Relaxed), 0);
    let entry = compile::cache_path(first.engine(), &cache, &digest);
    let written = std::fs::metadata(&entry).unwrap().modified().unwrap();
    drop(first);

    // A new engine, as at the next start.
    let mut second = runner(settings(limits(), 1, vec![], Some(cache.clone())), &store);
    assert_eq!(second.configure(&describe, &wasm).unwrap(), digest);
    assert_eq!(second.cache_counts.compiled.load(Ordering::Relaxed), 0);
    assert_eq!(second.cache_counts.from_cache.load(Ordering::Relaxed), 1);
    assert_eq!(
        std::fs::metadata(&entry).unwrap().modified().unwrap(),
        written
    );
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

/// Runners of one process configuring the same release at once into one
/// empty cache each compile it and publish the same entry; none fails.
#[test]
fn concurrent_compiles_of_one_release_share_the_cache() {
    let mut nonce = [0u8; 16];
    getrandom(&mut nonce);
    let dir = std::env::temp_dir().join(format!("tools-{}", hex::encode(nonce)));
    let cache = dir.join("cache");
    let wasm = release_wasm("upper");
    let describe = description(&["text"], &["text"], &[], &[]);
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let store = MemoryStore::default();
                let mut runner = runner(settings(limits(), 1, vec![], Some(cache.clone())), &store);
                start.wait();
                runner.configure(&describe, &wasm).unwrap();
            });
        }
    });
    // One entry, no staging file left.
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(dir);
}
