//! The FUSE side: each kernel request becomes one operation on the shared
//! [`Tree`], under its lock, so requests are atomic with respect to a cut.

use crate::model::{FsError, Ino, Node, Tree};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long the kernel may cache names and attributes: every change goes
/// through the kernel, so its caches never go stale while mounted.
const TTL: Duration = Duration::from_secs(1);
/// `O_DSYNC` on Linux (`O_SYNC` includes it).
const O_DSYNC: i32 = 0o10000;

pub struct PowerCutFs {
    pub tree: Arc<Mutex<Tree>>,
    /// Owner of every file: the mounting user.
    pub uid: u32,
    pub gid: u32,
    /// Every timestamp: the mount's start (times are not modelled).
    pub time: SystemTime,
}

fn errno(e: FsError) -> Errno {
    match e {
        FsError::NotFound => Errno::ENOENT,
        FsError::Exists => Errno::EEXIST,
        FsError::NotDir => Errno::ENOTDIR,
        FsError::IsDir => Errno::EISDIR,
        FsError::NotEmpty => Errno::ENOTEMPTY,
        FsError::Invalid => Errno::EINVAL,
        FsError::PoweredOff => Errno::EIO,
    }
}

impl PowerCutFs {
    fn attr(&self, tree: &Tree, ino: Ino) -> Result<FileAttr, FsError> {
        let inode = tree.get(ino)?;
        let (kind, size, nlink) = match &inode.node {
            Node::File(file) => (FileType::RegularFile, file.live.len() as u64, inode.links),
            Node::Dir(_) => (FileType::Directory, 0, 2),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.time,
            mtime: self.time,
            ctime: self.time,
            crtime: self.time,
            kind,
            perm: inode.mode,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn entry(&self, reply: ReplyEntry, op: impl FnOnce(&mut Tree) -> Result<Ino, FsError>) {
        let mut tree = self.tree.lock().unwrap();
        match op(&mut tree).and_then(|ino| self.attr(&tree, ino)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn empty(&self, reply: ReplyEmpty, op: impl FnOnce(&mut Tree) -> Result<(), FsError>) {
        match op(&mut self.tree.lock().unwrap()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }
}

impl Filesystem for PowerCutFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(reply, |tree| tree.lookup(parent.0, name));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let tree = self.tree.lock().unwrap();
        match self.attr(&tree, ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut tree = self.tree.lock().unwrap();
        let result = (|| {
            if let Some(mode) = mode {
                tree.set_mode(ino.0, (mode & 0o7777) as u16)?;
            }
            if let Some(size) = size {
                tree.truncate(ino.0, size)?;
            }
            self.attr(&tree, ino.0)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mode = (mode & !umask & 0o7777) as u16;
        self.entry(reply, |tree| tree.create(parent.0, name, mode, true));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, |tree| {
            tree.remove(parent.0, name, false)?;
            tree.collect();
            Ok(())
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, |tree| tree.remove(parent.0, name, true));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, |tree| {
            if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
                return Err(FsError::Invalid);
            }
            let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
            tree.rename(parent.0, name, newparent.0, newname, no_replace)?;
            tree.collect();
            Ok(())
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.tree.lock().unwrap().opened(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mode = (mode & !umask & 0o7777) as u16;
        let mut tree = self.tree.lock().unwrap();
        let created = tree.create(parent.0, name, mode, false).and_then(|ino| {
            tree.opened(ino)?;
            self.attr(&tree, ino)
        });
        match created {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let tree = self.tree.lock().unwrap();
        match tree.read(ino.0, offset, size) {
            Ok(bytes) => reply.data(bytes),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let synced = flags.0 & O_DSYNC != 0;
        match self.tree.lock().unwrap().write(ino.0, offset, data, synced) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let mut tree = self.tree.lock().unwrap();
        tree.released(ino.0);
        tree.collect();
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, |tree| tree.sync_file(ino.0));
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let tree = self.tree.lock().unwrap();
        let listing = (|| {
            let Node::Dir(dir) = &tree.get(ino.0)?.node else {
                return Err(FsError::NotDir);
            };
            let mut listing = vec![
                (ino.0, FileType::Directory, OsStr::new(".")),
                (dir.parent, FileType::Directory, OsStr::new("..")),
            ];
            for (name, child) in &dir.live {
                let kind = match tree.get(*child)?.node {
                    Node::Dir(_) => FileType::Directory,
                    Node::File(_) => FileType::RegularFile,
                };
                listing.push((*child, kind, name.as_os_str()));
            }
            Ok(listing)
        })();
        match listing {
            Ok(listing) => {
                for (i, (child, kind, name)) in
                    listing.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, |tree| {
            tree.sync_dir(ino.0)?;
            tree.collect();
            Ok(())
        });
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        self.empty(reply, |tree| tree.get(ino.0).map(|_| ()));
    }
}
