//! The shared-store rows: the journal append and the signed `publish`
//! through two `labd` sharing one PostgreSQL store and one S3 bucket (each
//! client on one of them, alternately), beside the same rows on one `labd`
//! on LMDB and local blob files, in
//! alternating rounds of the same run. The three hosts share one root key
//! and one audience, as a deployment behind a load balancer does.
//!
//! The PostgreSQL server's own CPU is not in the labd figures; it runs on
//! the same two cores as everything else.

use super::{journal_request, load, once, world, Call, Feed, Load, Signer, PUBLISHER_SEED};
use crate::journal::{self, Api};
use crate::labd::Labd;
use crate::measure::{percent, progress, Row};
use anyhow::{Context, Result};
use lab_coord_auth::{GrantKind, Principal, SigningKey};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The shared root key's seed.
const ROOT_SEED: [u8; 32] = [11; 32];
/// The address every request is signed for.
const AUDIENCE: &str = "http://lab.bench";
/// Clients per row, and alternating rounds of each deployment per row.
const APPEND_CLIENTS: [usize; 3] = [1, 16, 64];
const PUBLISH_CLIENTS: usize = 16;
const ROUNDS: u32 = 3;

/// One deployment: its hosts, and where its rows write.
struct Deployment {
    label: &'static str,
    hosts: Vec<Labd>,
    journal: Arc<str>,
    publisher: Arc<Signer>,
}

/// Runs the rows with `binary`, under `scratch`, each row `time` per
/// deployment; one row saying why where PostgreSQL is not installed.
pub async fn run(binary: &Path, scratch: &Path, time: Duration) -> Result<Vec<Row>> {
    progress("shared store: setup");
    let dir = scratch.join("shared");
    std::fs::create_dir_all(&dir)?;
    // On this thread, a runtime worker that lives as long as the bench:
    // the server dies with the thread that started it.
    let Some(cluster) =
        lab_pgcluster::Cluster::start(&dir.join("postgres")).context("start PostgreSQL")?
    else {
        return Ok(vec![Row::new(
            "shared store rows".into(),
            "not measured: PostgreSQL is not installed".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        )]);
    };
    let root = SigningKey::from_bytes(&ROOT_SEED);
    let key_file = dir.join("root.key");
    std::fs::write(
        &key_file,
        format!(
            "ed25519-secret:{}\n",
            ROOT_SEED
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    )?;
    let common: Vec<std::ffi::OsString> = vec![
        "--coord-root-key".into(),
        Principal::of(&root).to_string().into(),
        "--coord-issuer-key-file".into(),
        key_file.into(),
        "--coord-audience".into(),
        AUDIENCE.into(),
    ];
    let s3 = crate::s3::start(&dir.join("s3"))?;
    let mut shared = common.clone();
    shared.extend([
        "--store".into(),
        cluster.url().into(),
        "--blobs".into(),
        s3.blobs_setting().into(),
    ]);
    let lmdb = Deployment::start(
        "1 labd on LMDB",
        vec![Labd::start_with(binary, &dir.join("lmdb"), &common)?],
        &root,
    )
    .await?;
    let postgres = Deployment::start(
        "2 labd on PostgreSQL and S3",
        vec![
            Labd::start_with_env(binary, &dir.join("a"), &shared, &s3.env())?,
            Labd::start_with_env(binary, &dir.join("b"), &shared, &s3.env())?,
        ],
        &root,
    )
    .await?;

    let mut rows = Vec::new();
    let round = time / ROUNDS;
    for clients in APPEND_CLIENTS {
        progress(&format!("shared store: append, c={clients}"));
        let (shared, alone) = alternate(&postgres, &lmdb, |d| d.appends(clients, round)).await?;
        rows.push(row(
            &format!("shared store: append 1 fact c={clients}, 1 journal"),
            &postgres,
            &shared,
            &lmdb,
            &alone,
        ));
    }
    progress(&format!("shared store: publish, c={PUBLISH_CLIENTS}"));
    let (shared, alone) =
        alternate(&postgres, &lmdb, |d| d.publishes(PUBLISH_CLIENTS, round)).await?;
    rows.push(row(
        &format!("shared store: signed publish c={PUBLISH_CLIENTS}"),
        &postgres,
        &shared,
        &lmdb,
        &alone,
    ));
    drop(postgres);
    drop(lmdb);
    drop(s3);
    drop(cluster);
    Ok(rows)
}

/// `measure` of `a`, then of `b`, [`ROUNDS`] times; the sums.
async fn alternate<'d, F, Fut>(
    a: &'d Deployment,
    b: &'d Deployment,
    measure: F,
) -> Result<(Load, Load)>
where
    F: Fn(&'d Deployment) -> Fut,
    Fut: std::future::Future<Output = Result<Load>>,
{
    let (mut first, mut second) = (Load::default(), Load::default());
    for _ in 0..ROUNDS {
        first.add(&measure(a).await?);
        second.add(&measure(b).await?);
    }
    Ok((first, second))
}

fn row(
    what: &str,
    figure_of: &Deployment,
    figure: &Load,
    baseline_of: &Deployment,
    baseline: &Load,
) -> Row {
    let rate = |load: &Load| load.per_second();
    Row::new(
        format!("{what}: req/s (n={})", figure.requests),
        format!(
            "{:.0} {} (labd {:.0} µs CPU/req, the hosts together)",
            rate(figure),
            figure_of.label,
            figure.labd_us()
        ),
        format!(
            "{:.0} {} (labd {:.0} µs CPU/req; n={})",
            rate(baseline),
            baseline_of.label,
            baseline.labd_us(),
            baseline.requests
        ),
        percent(rate(figure) / rate(baseline)),
        "-".into(),
    )
}

impl Deployment {
    /// The project, a publisher and a journal, made through the first host.
    async fn start(label: &'static str, hosts: Vec<Labd>, root: &SigningKey) -> Result<Deployment> {
        let coord = hosts[0].coord;
        let world = world(coord).await?;
        let signer = |key: SigningKey, kinds: &[GrantKind], path: &[String]| {
            Signer::new(coord, &world, root, key, kinds, path).map(|s| s.for_audience(AUDIENCE))
        };
        let admin = signer(root.clone(), &[GrantKind::Provision], &[])?;
        once(
            coord,
            &admin.request(&Call::create_project(super::PROJECT)?)?,
            201,
        )
        .await?;
        let publisher = signer(
            SigningKey::from_bytes(&PUBLISHER_SEED),
            &[GrantKind::Publish],
            &["projects".into(), super::PROJECT.into()],
        )?;
        // The first record creates its leaf.
        once(
            coord,
            &publisher.request(&Call::publish("first", 0, 0)?)?,
            201,
        )
        .await?;
        let ids = journal::identity(hosts[0].journal).await?;
        let mut api = Api::connect(hosts[0].journal).await?;
        let space = journal::create(&mut api, &ids, &ids.root_space, "appended").await?;
        Ok(Deployment {
            label,
            journal: ids.space_ref(&space).to_string().into(),
            publisher: Arc::new(publisher),
            hosts,
        })
    }

    /// `clients` clients, spread over the hosts, each sending requests of
    /// `feed` (given the host's index and address) to its host for `time`;
    /// the loads added up.
    async fn spread(
        &self,
        clients: usize,
        time: Duration,
        addr: impl Fn(&Labd) -> SocketAddr,
        want: u16,
        feed: impl Fn(usize, SocketAddr) -> Feed,
    ) -> Result<Load> {
        let hosts = self.hosts.len();
        // At one client, one host: the others are left out, not measured
        // idle.
        let loads = self
            .hosts
            .iter()
            .take(clients)
            .enumerate()
            .map(|(at, host)| {
                let feeds = (0..clients)
                    .filter(|client| client % hosts == at)
                    .map(|_| feed(at, addr(host)))
                    .collect::<Vec<_>>();
                load(addr(host), host.pid(), feeds, time, want, |_| Ok(()))
            });
        let mut total = Load::default();
        for measured in futures_util::future::join_all(loads).await {
            let measured = measured?;
            total.requests += measured.requests;
            total.elapsed = total.elapsed.max(measured.elapsed);
            total.labd_cpu += measured.labd_cpu;
            total.bench_cpu += measured.bench_cpu;
            total.wall = total.wall.max(measured.wall);
        }
        Ok(total)
    }

    /// Appends of one fact to the deployment's journal.
    async fn appends(&self, clients: usize, time: Duration) -> Result<Load> {
        let fact = journal::base64(&journal::fact("shared", 0));
        let journal = Arc::clone(&self.journal);
        let run = unique();
        self.spread(clients, time, |h| h.journal, 201, |host, addr| {
            let (fact, journal) = (fact.clone(), Arc::clone(&journal));
            Feed::Built(Arc::new(move |client, n| {
                let body = format!(
                    r#"{{"space":{journal},"facts":["{fact}"],"operation_id":"s{run}-{host}-{client}-{n}"}}"#
                );
                Ok(journal_request(addr, "append", &body))
            }))
        })
        .await
    }

    /// Signed publishes of a small record, signed as they are sent.
    async fn publishes(&self, clients: usize, time: Duration) -> Result<Load> {
        let publisher = Arc::clone(&self.publisher);
        let run = unique();
        self.spread(
            clients,
            time,
            |h| h.coord,
            201,
            |host, _| {
                let publisher = Arc::clone(&publisher);
                Feed::Built(Arc::new(move |client, n| {
                    let call = Call::publish(&format!("s{run}-{host}-{client}-{n}"), 0, n)?;
                    publisher.request(&call)
                }))
            },
        )
        .await
    }
}

/// A number no earlier measurement of this run used, for operation IDs.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
