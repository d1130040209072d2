//! Authentication and authorization of one request, over the pure
//! `lab-coord-auth` library: the clock is the host's, and the replay cache
//! is the host's replay table backed by the store ([`StoredReplayCache`]).

use crate::refusal::Refusal;
use crate::world::Settings;
use lab_coord_auth::{
    AuthError, Authorization, Carriage, GrantKind, KnownGrants, Principal, ReplayCache,
    RequestFacts,
};
use lab_guest::lab::platform::{clock, config, kv, replay};

/// `principal ‖ 0x00 ‖ nonce` → expiry (8 bytes, big-endian).
const PAIRS: &str = "replay";
/// `expiry (8 bytes, big-endian) ‖ principal ‖ 0x00 ‖ nonce` → empty: the
/// pairs in expiry order, so expired ones are found without a full scan.
const EXPIRY: &str = "replay-expiry";
/// Digests of grants a retirement revoked → the retirement's record entry.
/// Never removed: a revoked grant stays revoked.
const REVOKED: &str = "revoked-grants";
/// A principal provisioned for a worker → that worker's path (RFC 8785
/// JSON). Never removed: one key is one worker, for ever.
const WORKER_KEYS: &str = "worker-keys";
/// Expired pairs removed per remembered pair: more than one, so the cache
/// shrinks back after a burst.
const PRUNE_PER_INSERT: u32 = 4;

/// The start of this instance's service: proofs timestamped at or before
/// it are refused (see [`StoredReplayCache`]).
const BOOT: (&str, &[u8]) = ("boot", b"started-at");

/// The replay cache: the host's replay table, backed by the store.
///
/// Invariant: no (principal, nonce) pair is accepted twice, across
/// reloads and restarts too. Every pair is first inserted in the host's
/// table (`replay`), which outlives reloads, not restarts. A pair whose
/// proof is timestamped at or before the service's clock is then kept
/// there alone: a restart loses it, but every pair it loses has a
/// timestamp at or before the restart, and proofs timestamped at or
/// before the recorded start ([`record_start`]) are refused. Pairs the
/// restart rule does not cover are remembered durably in the store
/// before they are accepted: a proof from the future (a client clock
/// ahead), and a pair the table had no room for. A pair the table inserts
/// is looked up in the store too, so one remembered there before is
/// refused.
///
/// Of two requests racing with one pair, where the table had no room for
/// the first: the first commits the pair durably, then finds it in the
/// table if the second inserted it meanwhile, and is refused; the second
/// inserted before it read the store, so its snapshot shows the pair
/// whenever the first's commit returned before that check.
struct StoredReplayCache {
    now: u64,
}

impl StoredReplayCache {
    /// Remembers `pair` in the store (checked and written in one write
    /// transaction); false when the store holds it already. `durable`:
    /// answered once the commit is synced, and visible to every snapshot
    /// taken after.
    fn remember_in_store(&self, pair: &[u8], expires_at: u64) -> Result<bool, kv::KvError> {
        let txn = kv::begin_write()?;
        if txn.get(PAIRS, pair)?.is_some() {
            txn.abort();
            return Ok(false);
        }
        let expired = txn.scan(
            EXPIRY,
            &kv::Range {
                start: Vec::new(),
                end: Some(self.now.to_be_bytes().to_vec()),
                reverse: false,
                limit: PRUNE_PER_INSERT,
            },
        )?;
        for entry in expired {
            txn.delete(EXPIRY, &entry.key)?;
            txn.delete(PAIRS, &entry.key[8..])?;
        }
        let mut by_expiry = expires_at.to_be_bytes().to_vec();
        by_expiry.extend_from_slice(pair);
        txn.commit_with(&[
            kv::TableWrite {
                table: PAIRS.into(),
                key: pair.to_vec(),
                value: expires_at.to_be_bytes().to_vec(),
            },
            kv::TableWrite {
                table: EXPIRY.into(),
                key: by_expiry,
                value: Vec::new(),
            },
        ])?;
        Ok(true)
    }
}

impl ReplayCache for StoredReplayCache {
    type Error = String;

    fn check_and_remember(
        &mut self,
        principal: &str,
        nonce: &str,
        expires_at: u64,
    ) -> Result<bool, String> {
        let store = |e: kv::KvError| match e {
            // No room: the host's message says what is short.
            kv::KvError::Unavailable(why) => format!("replay cache: {why}"),
            e => format!("replay cache: {e:?}"),
        };
        let table = |why: String| format!("replay table: {why}");
        let timestamp = expires_at.saturating_sub(lab_coord_auth::REPLAY_RETENTION_SECONDS);
        let mut pair = principal.as_bytes().to_vec();
        pair.push(0);
        pair.extend_from_slice(nonce.as_bytes());
        match replay::check_and_insert(&pair, expires_at).map_err(table)? {
            replay::InsertOutcome::Present => Ok(false),
            replay::InsertOutcome::Inserted => {
                // One snapshot, taken after the insert: the recorded start
                // and the pairs remembered in the store.
                let txn = kv::begin_read().map_err(store)?;
                let started_at = started_at_in(&txn).map_err(|r| r.message())?;
                if timestamp <= started_at {
                    // Signed before this start: its pair may have been lost.
                    return Ok(false);
                }
                if txn.get(PAIRS, &pair).map_err(store)?.is_some() {
                    return Ok(false);
                }
                drop(txn);
                if timestamp > self.now {
                    return self.remember_in_store(&pair, expires_at).map_err(store);
                }
                Ok(true)
            }
            replay::InsertOutcome::Full => {
                let started_at = started_at().map_err(|r| r.message())?;
                if timestamp <= started_at {
                    return Ok(false);
                }
                if !self.remember_in_store(&pair, expires_at).map_err(store)? {
                    return Ok(false);
                }
                // Inserted in the table by a racing request meanwhile.
                Ok(!replay::contains(&pair).map_err(table)?)
            }
        }
    }
}

/// The host clock in Unix seconds.
pub fn now() -> u64 {
    clock::now().seconds
}

fn refusal(error: AuthError<String>) -> Refusal {
    match error {
        AuthError::Unverified(why) => Refusal::Unverified(why.to_string()),
        AuthError::Denied => Refusal::Denied,
        AuthError::ReplayCache(why) => Refusal::Unavailable(why),
        _ => Refusal::Internal("unexpected authentication outcome".into()),
    }
}

/// A carriage decoded from the `Svc-Auth` header.
pub fn carriage(header: Option<&[u8]>) -> Result<Carriage, Refusal> {
    Carriage::from_header(header).map_err(|why| Refusal::Unverified(why.to_string()))
}

/// Records, durably, that the service's host process started: proofs
/// timestamped at or before that second are refused from now on. Called
/// by `prepare`, at a start and at a reload; a reload runs in the same
/// process, where no remembered pair was lost, so it records the same
/// second and refuses nothing more. The recorded second never moves back.
pub fn record_start() -> Result<(), String> {
    let store = |e: kv::KvError| format!("store: {e:?}");
    let host_started = config::get("host-started")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(now);
    let txn = kv::begin_write().map_err(store)?;
    let recorded = txn
        .get(BOOT.0, BOOT.1)
        .map_err(store)?
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_be_bytes);
    txn.commit_with(&[kv::TableWrite {
        table: BOOT.0.into(),
        key: BOOT.1.to_vec(),
        value: host_started.max(recorded).to_be_bytes().to_vec(),
    }])
    .map_err(store)
}

/// The second the running service started at (recorded by `prepare`).
pub fn started_at() -> Result<u64, Refusal> {
    started_at_in(&kv::begin_read()?)
}

/// The recorded start, as `txn` sees it.
fn started_at_in(txn: &kv::ReadTxn) -> Result<u64, Refusal> {
    let stored = txn.get(BOOT.0, BOOT.1)?;
    let bytes: [u8; 8] = stored
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| Refusal::Unavailable("the service's start is not recorded".into()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// Steps 1 to 4: the authenticated principal.
pub fn authenticate(
    settings: &Settings,
    carriage: &Carriage,
    request: &RequestFacts<'_>,
) -> Result<Principal, Refusal> {
    let now = now();
    let mut cache = StoredReplayCache { now };
    settings
        .verifier()
        .authenticate(carriage, request, now, &mut cache)
        .map_err(refusal)
}

/// Step 5: a grant chain for `kind` on `path` (labels below the world)
/// through none of the carriage's grants `known` marks revoked
/// ([`known_grants`]).
pub fn authorize(
    settings: &Settings,
    carriage: &Carriage,
    known: &KnownGrants,
    principal: &Principal,
    kind: GrantKind,
    path: &[String],
) -> Result<Authorization, Refusal> {
    settings
        .verifier()
        .authorize_known(carriage, known, principal, kind, path, now())
        .map_err(refusal)
}

/// The digests of the carriage's grants, and which of them a retirement
/// revoked.
pub fn known_grants(carriage: &Carriage) -> Result<KnownGrants, Refusal> {
    let mut known = KnownGrants::unrevoked(&carriage.grants);
    if known.digests.is_empty() {
        return Ok(known);
    }
    let txn = kv::begin_read()?;
    known.revoked = known
        .digests
        .iter()
        .map(|digest| {
            txn.get(REVOKED, digest.as_bytes())
                .map(|found| found.is_some())
                .map_err(Refusal::from)
        })
        .collect::<Result<_, _>>()?;
    Ok(known)
}

/// Revokes grants by digest, durably (committed and synced before it
/// returns): from then on no chain through any of them authorizes.
pub fn revoke(digests: &[String], record: &[u8]) -> Result<(), Refusal> {
    let writes: Vec<kv::TableWrite> = digests
        .iter()
        .map(|digest| kv::TableWrite {
            table: REVOKED.into(),
            key: digest.as_bytes().to_vec(),
            value: record.to_vec(),
        })
        .collect();
    kv::begin_write()
        .and_then(|txn| txn.commit_with(&writes))
        .map_err(Refusal::from)
}

/// Binds `principal` to the worker at `worker` (its path), durably, unless
/// it is bound to another worker: answers whether the principal is now
/// this worker's. The check and the binding are one step, so two
/// provisionings racing for one key cannot both win it.
pub fn bind_worker_key(principal: &Principal, worker: &[String]) -> Result<bool, Refusal> {
    let path = serde_json::to_vec(worker)
        .map_err(|e| Refusal::Internal(format!("a worker path as JSON: {e}")))?;
    let txn = kv::begin_write()?;
    match txn.get(WORKER_KEYS, principal.as_bytes())? {
        Some(bound) => {
            txn.abort();
            Ok(bound == path)
        }
        None => txn
            .commit_with(&[kv::TableWrite {
                table: WORKER_KEYS.into(),
                key: principal.as_bytes().to_vec(),
                value: path,
            }])
            .map(|()| true)
            .map_err(Refusal::from),
    }
}
