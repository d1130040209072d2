//! The LMDB store's write-ahead log: one sequential write and one flush per
//! group, where an LMDB commit with its own syncs writes every page it
//! dirtied and flushes twice ("Key-value store" 11 in `docs/design.md`).
//!
//! Files, beside LMDB's in its directory:
//! - `log.0`, `log.1`: the records of even and odd epochs, each a group's
//!   writes, in a preallocated file;
//! - `checkpoint`: the two meta pages of a synced LMDB state, and the epoch
//!   of the records that follow that state;
//! - `log-overflow.<epoch>.<offset>`: a group's writes too large for a file.
//!
//! Invariants:
//! 1. A group's record is written and flushed before LMDB commits the group
//!    (without a sync), so no reader sees a write the log does not hold,
//!    and no request hears "committed" before its record is durable.
//! 2. `checkpoint` names a state C that LMDB synced. While C is the
//!    checkpoint, the writer holds a read transaction on C, so LMDB never
//!    reuses a page of C: on disk, C stays whole whatever later unsynced
//!    writes reach the file, and so do its meta pages' copies in
//!    `checkpoint`. A checkpoint is begun by the writer, which reads the
//!    meta pages of the state D it is at and takes a read transaction on
//!    it, and finished in the background: the data file synced, then
//!    `checkpoint` replaced. Only then does the writer let C go. One is
//!    under way at a time.
//! 3. The records after C are those of C's epoch, then those of the next:
//!    every group committed after C, in commit order, each file from offset
//!    0, each record naming its LMDB transaction; a group that wrote
//!    nothing is aborted, not committed. A checkpoint begun while the last
//!    one is finished starts the next epoch, in the other file (whose
//!    records are two epochs old); one begun after a checkpoint failed
//!    names the epoch being written, which began before its state. A
//!    record is valid when it carries the epoch and its digest matches;
//!    the first invalid one ends its file (each record is flushed before
//!    the next is written).
//! 4. Recovery writes C's meta pages back, opens LMDB at C and applies the
//!    records in order. Writes are absolute (a put or a delete of a key),
//!    so applying them on C gives the state of the last one, and so does
//!    applying them on a later state the first of them led to. A data file
//!    whose newest transaction is past the last record's was committed to
//!    by another program, with LMDB's syncs: it is kept as it is, and the
//!    log set aside.
//! 5. A record whose group LMDB then failed to commit is voided (its header
//!    zeroed and flushed) before the group is refused; the next record takes
//!    its place.

use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const LOG: &str = "log";
const CHECKPOINT: &str = "checkpoint";
const RECORD_MAGIC: &[u8; 4] = b"LABW";
const CHECKPOINT_MAGIC: &[u8; 4] = b"LABC";
/// Magic, epoch, LMDB transaction, payload length, digest.
const HEADER: usize = 4 + 8 + 8 + 4 + 16;
/// A payload's first octet: the writes themselves, or the digest of the
/// file that holds them.
const INLINE: u8 = b'W';
const OVERFLOW: u8 = b'O';
const PUT: u8 = b'p';
const DELETE: u8 = b'd';
/// Zeros written at a time while preallocating.
const FILL_CHUNK: usize = 1 << 20;

/// One write of a group, as recovery applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Put {
        namespace: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        namespace: String,
        key: Vec<u8>,
    },
}

/// A group's writes, encoded as they are applied.
#[derive(Default)]
pub struct Record {
    bytes: Vec<u8>,
}

impl Record {
    pub fn put(&mut self, namespace: &str, key: &[u8], value: &[u8]) {
        self.op(PUT, namespace, key);
        self.bytes
            .extend_from_slice(&(value.len() as u32).to_be_bytes());
        self.bytes.extend_from_slice(value);
    }

    pub fn delete(&mut self, namespace: &str, key: &[u8]) {
        self.op(DELETE, namespace, key);
    }

    fn op(&mut self, kind: u8, namespace: &str, key: &[u8]) {
        if self.bytes.is_empty() {
            self.bytes.push(INLINE);
        }
        self.bytes.push(kind);
        self.bytes.push(namespace.len() as u8);
        self.bytes.extend_from_slice(namespace.as_bytes());
        self.bytes
            .extend_from_slice(&(key.len() as u16).to_be_bytes());
        self.bytes.extend_from_slice(key);
    }

    /// Appends another record's writes after this one's.
    pub fn extend(&mut self, other: Record) {
        if self.bytes.is_empty() {
            self.bytes = other.bytes;
        } else if !other.bytes.is_empty() {
            self.bytes.extend_from_slice(&other.bytes[1..]);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Decodes an inline payload's writes; `None` when malformed.
fn decode(payload: &[u8]) -> Option<Vec<Write>> {
    let (&first, mut rest) = payload.split_first()?;
    if first != INLINE {
        return None;
    }
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
        *rest = tail;
        Some(head)
    }
    let mut writes = Vec::new();
    while !rest.is_empty() {
        let kind = take(&mut rest, 1)?[0];
        let length = take(&mut rest, 1)?[0] as usize;
        let namespace = String::from_utf8(take(&mut rest, length)?.to_vec()).ok()?;
        let length = u16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?) as usize;
        let key = take(&mut rest, length)?.to_vec();
        writes.push(match kind {
            PUT => {
                let length = u32::from_be_bytes(take(&mut rest, 4)?.try_into().ok()?) as usize;
                let value = take(&mut rest, length)?.to_vec();
                Write::Put {
                    namespace,
                    key,
                    value,
                }
            }
            DELETE => Write::Delete { namespace, key },
            _ => return None,
        });
    }
    Some(writes)
}

fn digest(epoch: u64, txnid: u64, payload: &[u8]) -> [u8; 16] {
    let mut hash = Sha256::new();
    hash.update(epoch.to_be_bytes());
    hash.update(txnid.to_be_bytes());
    hash.update((payload.len() as u32).to_be_bytes());
    hash.update(payload);
    hash.finalize()[..16].try_into().expect("16 of 32 octets")
}

/// Octets of a boot's identity in a checkpoint.
const BOOT: usize = 36;

/// The identity of the running kernel's boot: unsynced writes outlive a
/// process's crash, not the boot they were made in.
fn boot_id() -> [u8; BOOT] {
    let mut id = [0; BOOT];
    if let Ok(text) = fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let text = text.trim().as_bytes();
        let n = text.len().min(BOOT);
        id[..n].copy_from_slice(&text[..n]);
    }
    id
}

/// A synced LMDB state: its meta pages, the epoch of the records after it,
/// and the boot of the host that writes them.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub epoch: u64,
    boot: [u8; BOOT],
    pub metas: Vec<u8>,
}

impl Checkpoint {
    fn read(dir: &Path) -> io::Result<Option<Checkpoint>> {
        let bytes = match fs::read(dir.join(CHECKPOINT)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let corrupt = || io::Error::other(format!("{} is corrupt", dir.join(CHECKPOINT).display()));
        if bytes.len() < 4 + 8 + BOOT + 32 || &bytes[..4] != CHECKPOINT_MAGIC {
            return Err(corrupt());
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if Sha256::digest(body).as_slice() != sum {
            return Err(corrupt());
        }
        Ok(Some(Checkpoint {
            epoch: u64::from_be_bytes(body[4..12].try_into().expect("8 octets")),
            boot: body[12..12 + BOOT].try_into().expect("the boot's octets"),
            metas: body[12 + BOOT..].to_vec(),
        }))
    }

    /// Replaces the checkpoint file: written aside, flushed, renamed, and
    /// the directory flushed.
    fn write(&self, dir: &Path) -> io::Result<()> {
        let mut body = CHECKPOINT_MAGIC.to_vec();
        body.extend_from_slice(&self.epoch.to_be_bytes());
        body.extend_from_slice(&self.boot);
        body.extend_from_slice(&self.metas);
        let sum = Sha256::digest(&body);
        body.extend_from_slice(&sum);
        write_durably(dir, CHECKPOINT, &body)
    }
}

/// Writes `name` in `dir` through a file aside, so a crash leaves the old
/// bytes or the new, never a mix.
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let aside = dir.join(format!("{name}.new"));
    let file = File::create(&aside)?;
    file.write_all_at(bytes, 0)?;
    file.sync_data()?;
    fs::rename(&aside, dir.join(name))?;
    crate::durable::sync_dir(dir)
}

/// What the log held at open: the last checkpoint and the writes of every
/// group committed after it, in order.
pub struct Recovered {
    pub checkpoint: Option<Checkpoint>,
    pub writes: Vec<Write>,
    /// Valid records found.
    pub records: u64,
    /// The LMDB transaction of the last one, or of the checkpoint.
    pub last_txnid: Option<u64>,
}

/// The file holding the records of `epoch`: the two alternate.
fn log_name(epoch: u64) -> String {
    format!("{LOG}.{}", epoch % 2)
}

/// Reads the checkpoint and the records of its epoch, then those of the
/// next (written while a checkpoint naming it was under way).
pub fn recover(dir: &Path) -> io::Result<Recovered> {
    let checkpoint = Checkpoint::read(dir)?;
    let mut recovered = Recovered {
        last_txnid: checkpoint.as_ref().and_then(|c| meta_txnid(&c.metas)),
        checkpoint: checkpoint.clone(),
        writes: Vec::new(),
        records: 0,
    };
    let Some(checkpoint) = checkpoint else {
        return Ok(recovered);
    };
    for epoch in [checkpoint.epoch, checkpoint.epoch + 1] {
        let before = recovered.records;
        recover_epoch(dir, epoch, &mut recovered)?;
        if recovered.records == before {
            break;
        }
    }
    Ok(recovered)
}

/// Adds the valid records of `epoch` to `recovered`.
fn recover_epoch(dir: &Path, epoch: u64, recovered: &mut Recovered) -> io::Result<()> {
    let mut log = Vec::new();
    match File::open(dir.join(log_name(epoch))) {
        Ok(mut file) => file.read_to_end(&mut log)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut offset = 0;
    while let Some((txnid, payload)) = record_at(&log, offset, epoch) {
        let malformed = || {
            io::Error::other(format!(
                "the key-value store's log holds a malformed record at {offset}"
            ))
        };
        let writes = match payload.first() {
            Some(&OVERFLOW) => {
                let name = overflow_name(epoch, offset as u64);
                let bytes = fs::read(dir.join(&name))?;
                if Sha256::digest(&bytes).as_slice() != &payload[1..] {
                    return Err(io::Error::other(format!(
                        "{name} does not match its record"
                    )));
                }
                decode(&bytes)
            }
            _ => decode(payload),
        };
        recovered.writes.extend(writes.ok_or_else(malformed)?);
        recovered.records += 1;
        recovered.last_txnid = Some(txnid);
        offset += HEADER + payload.len();
    }
    Ok(())
}

/// The LMDB transaction and payload of the valid record of `epoch` at
/// `offset`, if any.
fn record_at(log: &[u8], offset: usize, epoch: u64) -> Option<(u64, &[u8])> {
    let header = log.get(offset..offset + HEADER)?;
    if &header[..4] != RECORD_MAGIC || header[4..12] != epoch.to_be_bytes() {
        return None;
    }
    let txnid = u64::from_be_bytes(header[12..20].try_into().ok()?);
    let length = u32::from_be_bytes(header[20..24].try_into().ok()?) as usize;
    let payload = log.get(offset + HEADER..offset + HEADER + length)?;
    (header[24..] == digest(epoch, txnid, payload)).then_some((txnid, payload))
}

/// LMDB's meta page: its magic and its transaction, at their offsets in
/// the page (after the 16-octet page header) on 64-bit hosts.
const META_MAGIC: (usize, u32) = (16, 0xBEEF_C0DE);
const META_TXNID: usize = 16 + 128;

/// The newest transaction of two meta pages, as LMDB picks it at open.
pub fn meta_txnid(metas: &[u8]) -> Option<u64> {
    let (first, second) = metas.split_at(metas.len() / 2);
    [first, second]
        .into_iter()
        .filter(|meta| {
            meta.get(META_MAGIC.0..META_MAGIC.0 + 4)
                .is_some_and(|m| m == META_MAGIC.1.to_ne_bytes())
        })
        .filter_map(|meta| meta.get(META_TXNID..META_TXNID + 8))
        .map(|id| u64::from_ne_bytes(id.try_into().expect("8 octets")))
        .max()
}

fn overflow_name(epoch: u64, offset: u64) -> String {
    format!("{LOG}-overflow.{epoch}.{offset}")
}

/// Whether a process other than this one has LMDB's lock file in `dir`
/// open (LMDB holds a POSIX lock on it in every process that opened the
/// environment). This process must not have it open itself.
pub fn store_in_use(dir: &Path) -> io::Result<bool> {
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("lock.mdb"))
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    use rustix::fs::{fcntl_lock, FlockOperation};
    match fcntl_lock(&file, FlockOperation::NonBlockingLockExclusive) {
        // Closing the file releases the lock.
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::ACCESS) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// Whether the data file in `dir` may not be whole as it stands: its log
/// holds records after its checkpoint, written in an earlier boot (a
/// power cut may have kept any part of their unsynced pages). Within the
/// boot they were written in, the files read whole, whether or not their
/// labd still runs.
pub fn unrecovered(dir: &Path) -> io::Result<bool> {
    let recovered = recover(dir)?;
    Ok(recovered.records > 0
        && recovered
            .checkpoint
            .is_some_and(|checkpoint| checkpoint.boot != boot_id()))
}

/// The two meta pages at the head of LMDB's data file, `page` octets each.
pub fn read_metas(dir: &Path, page: usize) -> io::Result<Vec<u8>> {
    let mut metas = vec![0; 2 * page];
    File::open(dir.join("data.mdb"))?.read_exact_at(&mut metas, 0)?;
    Ok(metas)
}

/// Writes a checkpoint's meta pages back at the head of the data file and
/// flushes them (invariant 4).
pub fn restore_metas(dir: &Path, metas: &[u8]) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(dir.join("data.mdb"))?;
    file.write_all_at(metas, 0)?;
    file.sync_data()
}

/// The log, open for writing records of one epoch.
pub struct Log {
    dir: PathBuf,
    /// The files of even and odd epochs.
    files: [File; 2],
    /// Each file's size.
    capacity: u64,
    /// The epoch records are written in.
    epoch: u64,
    /// The epoch the checkpoint file names: `epoch`, or the one before
    /// while a checkpoint is under way or after one failed.
    durable: u64,
    /// Where the next record goes.
    offset: u64,
    /// Where the last record went, until the next.
    last: Option<u64>,
}

/// A checkpoint begun: its epoch and the meta pages of its state, to be
/// made durable by [`Checkpoint::finish`] once the data file is synced.
pub struct Begun {
    pub epoch: u64,
    metas: Vec<u8>,
}

impl Begun {
    /// Writes the checkpoint file; the data file must have been synced
    /// since the state was read.
    pub fn finish(self, dir: &Path) -> io::Result<u64> {
        let boot = boot_id();
        Checkpoint {
            epoch: self.epoch,
            boot,
            metas: self.metas,
        }
        .write(dir)?;
        Ok(self.epoch)
    }
}

impl Log {
    /// Opens the log's two files in `dir`, each preallocated to half of
    /// `size` octets (written once, so a record's flush never waits on
    /// allocation), past the epochs `checkpoint` left records in, and
    /// checkpoints `metas`, a synced state.
    pub fn open(
        dir: &Path,
        size: u64,
        checkpoint: Option<&Checkpoint>,
        metas: Vec<u8>,
    ) -> io::Result<Log> {
        let capacity = size / 2;
        let open = |parity: u64| -> io::Result<File> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(dir.join(log_name(parity)))?;
            let mut length = file.metadata()?.len();
            if length < capacity {
                let zeros = vec![0; FILL_CHUNK];
                while length < capacity {
                    let n = (capacity - length).min(FILL_CHUNK as u64) as usize;
                    file.write_all_at(&zeros[..n], length)?;
                    length += n as u64;
                }
                file.sync_all()?;
            }
            Ok(file)
        };
        let files = [open(0)?, open(1)?];
        crate::durable::sync_dir(dir)?;
        // Both files may hold records of the last two epochs.
        let epoch = checkpoint.map_or(0, |c| c.epoch + 2);
        let mut log = Log {
            dir: dir.to_path_buf(),
            files,
            capacity,
            epoch,
            durable: epoch,
            offset: 0,
            last: None,
        };
        let begun = Begun { epoch, metas };
        log.finished(begun.finish(dir)?);
        Ok(log)
    }

    /// Begins a checkpoint of the state LMDB holds now, whose meta pages
    /// are `metas`: records go to the next epoch's file from here, unless
    /// the last checkpoint failed, in which case this one names the epoch
    /// being written (records already in its state are applied again at
    /// recovery, which leaves it as it is: `log` 4).
    pub fn begin(&mut self, metas: Vec<u8>) -> Begun {
        if self.durable == self.epoch {
            self.epoch += 1;
            self.offset = 0;
            self.last = None;
        }
        Begun {
            epoch: self.epoch,
            metas,
        }
    }

    /// The checkpoint naming `epoch` is durable: the records before it
    /// are no longer needed.
    pub fn finished(&mut self, epoch: u64) {
        self.durable = epoch;
        self.remove_overflows(epoch);
    }

    /// Whether the checkpoint file names the epoch being written, so that
    /// the next checkpoint may begin a new one.
    pub fn settled(&self) -> bool {
        self.durable == self.epoch
    }

    /// Whether a record of `length` payload octets fits after the last.
    pub fn fits(&self, record: &Record) -> bool {
        self.offset + (HEADER + record.bytes.len()) as u64 <= self.capacity
    }

    /// The ring's size, in octets.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Octets of the ring in use.
    pub fn used(&self) -> u64 {
        self.offset
    }

    /// Writes and flushes `record` after the last one. A record that does
    /// not fit must follow a checkpoint ([`Log::fits`]); one larger than the
    /// whole ring goes to a file of its own, named by a record in the ring.
    pub fn append(&mut self, record: &Record, txnid: u64) -> io::Result<()> {
        let overflow;
        let payload = if self.fits(record) {
            &record.bytes[..]
        } else if self.offset == 0 {
            let name = overflow_name(self.epoch, 0);
            write_durably(&self.dir, &name, &record.bytes)?;
            let mut marker = vec![OVERFLOW];
            marker.extend_from_slice(&Sha256::digest(&record.bytes));
            overflow = marker;
            &overflow[..]
        } else {
            return Err(io::Error::other("a log record past the ring's end"));
        };
        let mut bytes = Vec::with_capacity(HEADER + payload.len());
        bytes.extend_from_slice(RECORD_MAGIC);
        bytes.extend_from_slice(&self.epoch.to_be_bytes());
        bytes.extend_from_slice(&txnid.to_be_bytes());
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&digest(self.epoch, txnid, payload));
        bytes.extend_from_slice(payload);
        let file = &self.files[(self.epoch % 2) as usize];
        file.write_all_at(&bytes, self.offset)?;
        file.sync_data()?;
        self.last = Some(self.offset);
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Voids the last record, whose group was not committed (invariant 5).
    pub fn void_last(&mut self) -> io::Result<()> {
        let Some(at) = self.last.take() else {
            return Ok(());
        };
        let file = &self.files[(self.epoch % 2) as usize];
        file.write_all_at(&[0; HEADER], at)?;
        file.sync_data()?;
        self.offset = at;
        Ok(())
    }

    /// Removes the overflow files of epochs before `epoch`, which its
    /// checkpoint made unneeded; one left behind is only space.
    fn remove_overflows(&self, epoch: u64) {
        let prefix = format!("{LOG}-overflow.");
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let older = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.split('.').next())
                .and_then(|e| e.parse::<u64>().ok())
                .is_some_and(|e| e < epoch);
            if older {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "kv-log-{name}-{}",
            hex::encode(crate::blobstore::random_16())
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A write as the tests name it: namespace, key, value or deletion.
    type Named<'a> = (&'a str, &'a [u8], Option<&'a [u8]>);

    fn record(writes: &[Named<'_>]) -> Record {
        let mut record = Record::default();
        for (namespace, key, value) in writes {
            match value {
                Some(value) => record.put(namespace, key, value),
                None => record.delete(namespace, key),
            }
        }
        record
    }

    #[test]
    fn records_come_back_in_order_after_their_checkpoint() {
        let dir = temp_dir("order");
        let mut log = Log::open(&dir, 1 << 16, None, vec![7; 64]).unwrap();
        log.append(&record(&[("a", b"k1", Some(b"v1"))]), 1)
            .unwrap();
        let mut both = record(&[("b", b"k2", None)]);
        both.extend(record(&[("a", b"k3", Some(b""))]));
        log.append(&both, 2).unwrap();
        let recovered = recover(&dir).unwrap();
        assert_eq!(recovered.checkpoint.unwrap().metas, vec![7; 64]);
        assert_eq!(recovered.records, 2);
        assert_eq!(
            recovered.writes,
            vec![
                Write::Put {
                    namespace: "a".into(),
                    key: b"k1".to_vec(),
                    value: b"v1".to_vec()
                },
                Write::Delete {
                    namespace: "b".into(),
                    key: b"k2".to_vec()
                },
                Write::Put {
                    namespace: "a".into(),
                    key: b"k3".to_vec(),
                    value: Vec::new()
                },
            ]
        );
        fs::remove_dir_all(dir).unwrap();
    }

    /// A checkpoint begun and finished at once.
    fn checkpoint(log: &mut Log, dir: &Path, metas: Vec<u8>) {
        let begun = log.begin(metas);
        log.finished(begun.finish(dir).unwrap());
    }

    #[test]
    fn a_checkpoint_under_way_keeps_the_records_before_it() {
        let dir = temp_dir("epoch");
        let mut log = Log::open(&dir, 1 << 16, None, vec![1; 8]).unwrap();
        for n in 0..3u8 {
            log.append(&record(&[("a", &[n], Some(b"old"))]), 1)
                .unwrap();
        }
        // Begun, not finished: records go to the next file, and recovery
        // reads both, from the checkpoint before.
        let begun = log.begin(vec![2; 8]);
        log.append(&record(&[("a", b"new", Some(b"x"))]), 2)
            .unwrap();
        let recovered = recover(&dir).unwrap();
        assert_eq!(recovered.checkpoint.unwrap().metas, vec![1; 8]);
        assert_eq!((recovered.records, recovered.last_txnid), (4, Some(2)));
        // Finished: only the records after it.
        log.finished(begun.finish(&dir).unwrap());
        let recovered = recover(&dir).unwrap();
        assert_eq!(recovered.checkpoint.unwrap().metas, vec![2; 8]);
        assert_eq!(recovered.records, 1);
        // The next epoch writes the first file again: the old records
        // still in it are not of its epoch.
        checkpoint(&mut log, &dir, vec![3; 8]);
        log.append(&record(&[("a", b"newer", Some(b"y"))]), 3)
            .unwrap();
        let recovered = recover(&dir).unwrap();
        assert_eq!((recovered.records, recovered.last_txnid), (1, Some(3)));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_checkpoint_that_failed_is_followed_by_one_naming_the_same_epoch() {
        let dir = temp_dir("failed");
        let mut log = Log::open(&dir, 1 << 16, None, vec![1; 8]).unwrap();
        log.append(&record(&[("a", b"1", Some(b"before"))]), 1)
            .unwrap();
        let failed = log.begin(vec![2; 8]);
        drop(failed);
        assert!(!log.settled());
        log.append(&record(&[("a", b"2", Some(b"during"))]), 2)
            .unwrap();
        // The retry stays in the epoch being written: the records of the
        // one before are still the checkpoint's.
        let retry = log.begin(vec![3; 8]);
        log.append(&record(&[("a", b"3", Some(b"after"))]), 3)
            .unwrap();
        assert_eq!(recover(&dir).unwrap().records, 3);
        log.finished(retry.finish(&dir).unwrap());
        assert!(log.settled());
        // Its epoch's records, from its start: the one before the retry
        // began too, which its state already holds.
        assert_eq!(recover(&dir).unwrap().records, 2);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_torn_or_voided_record_ends_the_log() {
        let dir = temp_dir("torn");
        let mut log = Log::open(&dir, 1 << 16, None, vec![1; 8]).unwrap();
        log.append(&record(&[("a", b"1", Some(b"kept"))]), 1)
            .unwrap();
        let second = log.offset;
        log.append(&record(&[("a", b"2", Some(b"torn"))]), 1)
            .unwrap();
        log.append(&record(&[("a", b"3", Some(b"after"))]), 1)
            .unwrap();
        // A byte of the second record's payload lost.
        let file = OpenOptions::new()
            .write(true)
            .open(dir.join(log_name(log.epoch)))
            .unwrap();
        file.write_all_at(b"X", second + HEADER as u64 + 3).unwrap();
        assert_eq!(recover(&dir).unwrap().records, 1);

        log.void_last().unwrap();
        log.void_last().unwrap();
        log.append(&record(&[("a", b"4", Some(b"in its place"))]), 3)
            .unwrap();
        log.void_last().unwrap();
        assert_eq!(recover(&dir).unwrap().records, 1);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn records_of_an_earlier_boot_leave_the_store_unrecovered() {
        let dir = temp_dir("boot");
        let mut log = Log::open(&dir, 1 << 16, None, vec![1; 8]).unwrap();
        assert!(!unrecovered(&dir).unwrap(), "no record yet");
        log.append(&record(&[("a", b"k", Some(b"v"))]), 2).unwrap();
        assert!(!unrecovered(&dir).unwrap(), "written in this boot");
        // The same checkpoint, as if written before the host booted again.
        let mut earlier = Checkpoint::read(&dir).unwrap().unwrap();
        earlier.boot = [b'x'; BOOT];
        earlier.write(&dir).unwrap();
        assert!(unrecovered(&dir).unwrap());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_record_larger_than_the_ring_goes_to_its_own_file() {
        let dir = temp_dir("overflow");
        let mut log = Log::open(&dir, 8192, None, vec![1; 8]).unwrap();
        let large = vec![9u8; 10_000];
        let record = record(&[("a", b"large", Some(&large))]);
        assert!(!log.fits(&record));
        log.append(&record, 1).unwrap();
        let recovered = recover(&dir).unwrap();
        assert_eq!(recovered.records, 1);
        assert!(matches!(&recovered.writes[0], Write::Put { value, .. } if *value == large));
        let name = overflow_name(log.epoch, 0);
        assert!(dir.join(&name).exists());
        // The next checkpoint removes it.
        checkpoint(&mut log, &dir, vec![2; 8]);
        assert!(!dir.join(name).exists());
        fs::remove_dir_all(dir).unwrap();
    }
}
