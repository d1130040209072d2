//! The filesystem's state: what a process sees now (live) and what a power
//! cut would leave (durable), side by side.
//!
//! The model, deliberately simple and stricter than any real filesystem:
//! 1. A file's bytes and length become durable only by `fsync`/`fdatasync`
//!    of that file (both make the whole file durable), or, for one write,
//!    by writing through a descriptor opened with `O_SYNC`/`O_DSYNC`. A cut
//!    may also keep any of the pages written since ([`Tree::cut_keeping`]),
//!    as a disk's writeback leaves them.
//! 2. A directory's entries (create, mkdir, rename, unlink, rmdir) become
//!    durable only by `fsync` of that directory, which makes all of them
//!    durable at once. A name that is durable points at an inode; what the
//!    inode holds after a cut is that inode's own durable bytes, so a file
//!    named durably but never synced comes back empty.
//! 3. The durable image is the tree reached from the root through durable
//!    entries only. The root itself always exists.
//! 4. Metadata other than length (mode, times) is not modelled as durable:
//!    files come back with the mode they were created with.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};

/// An inode number; [`ROOT`] is the root directory.
pub type Ino = u64;
pub const ROOT: Ino = 1;

/// Bytes tracked as dirty at this granularity.
const PAGE: usize = 4096;

/// Failures of an operation, as the errno the caller sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsError {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    Invalid,
    /// The power is off: every operation after a cut fails.
    PoweredOff,
}

/// A regular file: its live bytes, its durable bytes, and the pages written
/// since the last sync.
#[derive(Default)]
pub struct FileNode {
    pub live: Vec<u8>,
    durable: Vec<u8>,
    dirty: BTreeSet<usize>,
}

impl FileNode {
    /// Makes the live bytes of `page` durable, growing the durable length
    /// to hold them; a page past the live end holds nothing to keep.
    fn keep_page(&mut self, page: usize) {
        let start = page * PAGE;
        let length = self.live.len();
        if start >= length {
            return;
        }
        let end = (start + PAGE).min(length);
        if self.durable.len() < end {
            self.durable.resize(end, 0);
        }
        self.durable[start..end].copy_from_slice(&self.live[start..end]);
    }
}

/// A directory: its live and its durable entries.
#[derive(Default)]
pub struct DirNode {
    pub live: BTreeMap<OsString, Ino>,
    durable: BTreeMap<OsString, Ino>,
    pub parent: Ino,
}

pub enum Node {
    File(FileNode),
    Dir(DirNode),
}

pub struct Inode {
    pub node: Node,
    pub mode: u16,
    /// Live names of this inode.
    pub links: u32,
    /// Open descriptors (the kernel's file handles).
    pub opened: u32,
}

/// The whole filesystem. Inode numbers are never reused.
pub struct Tree {
    pub inodes: HashMap<Ino, Inode>,
    next: Ino,
    powered: bool,
}

/// The durable state a cut leaves: a tree of directories and file bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    File {
        mode: u16,
        bytes: Vec<u8>,
    },
    Dir {
        mode: u16,
        entries: BTreeMap<OsString, Image>,
    },
}

impl Image {
    /// An empty root directory.
    pub fn empty() -> Image {
        Image::Dir {
            mode: 0o755,
            entries: BTreeMap::new(),
        }
    }
}

impl Tree {
    /// A tree whose live and durable state are both `image`.
    pub fn from_image(image: &Image) -> Tree {
        let mut tree = Tree {
            inodes: HashMap::new(),
            next: ROOT,
            powered: true,
        };
        tree.load(image, ROOT);
        tree
    }

    fn load(&mut self, image: &Image, parent: Ino) -> Ino {
        let ino = self.next;
        self.next += 1;
        let (node, mode) = match image {
            Image::File { mode, bytes } => (
                Node::File(FileNode {
                    live: bytes.clone(),
                    durable: bytes.clone(),
                    dirty: BTreeSet::new(),
                }),
                *mode,
            ),
            Image::Dir { mode, entries } => {
                let mut dir = DirNode {
                    parent,
                    ..DirNode::default()
                };
                for (name, child) in entries {
                    let child = self.load(child, ino);
                    dir.live.insert(name.clone(), child);
                }
                dir.durable = dir.live.clone();
                (Node::Dir(dir), *mode)
            }
        };
        self.inodes.insert(
            ino,
            Inode {
                node,
                mode,
                links: 1,
                opened: 0,
            },
        );
        ino
    }

    /// The power cut after the disk wrote back some of what was not
    /// synced: each unsynced page of each file whose `keep` answers true is
    /// kept (its live bytes made durable, the file's durable length grown
    /// to hold it); directory entries stay as synced.
    pub fn cut_keeping(&mut self, keep: &mut dyn FnMut() -> bool) -> Image {
        for inode in self.inodes.values_mut() {
            let Node::File(file) = &mut inode.node else {
                continue;
            };
            for page in std::mem::take(&mut file.dirty) {
                if keep() {
                    file.keep_page(page);
                }
            }
        }
        self.cut()
    }

    /// The power cut: the durable image now, and every later operation
    /// fails.
    pub fn cut(&mut self) -> Image {
        self.powered = false;
        self.image_of(ROOT)
    }

    fn image_of(&self, ino: Ino) -> Image {
        let inode = &self.inodes[&ino];
        match &inode.node {
            Node::File(file) => Image::File {
                mode: inode.mode,
                bytes: file.durable.clone(),
            },
            Node::Dir(dir) => Image::Dir {
                mode: inode.mode,
                entries: dir
                    .durable
                    .iter()
                    .map(|(name, child)| (name.clone(), self.image_of(*child)))
                    .collect(),
            },
        }
    }

    /// Fails once the power is off.
    pub fn powered(&self) -> Result<(), FsError> {
        if self.powered {
            Ok(())
        } else {
            Err(FsError::PoweredOff)
        }
    }

    pub fn get(&self, ino: Ino) -> Result<&Inode, FsError> {
        self.powered()?;
        self.inodes.get(&ino).ok_or(FsError::NotFound)
    }

    fn get_mut(&mut self, ino: Ino) -> Result<&mut Inode, FsError> {
        self.powered()?;
        self.inodes.get_mut(&ino).ok_or(FsError::NotFound)
    }

    fn dir(&self, ino: Ino) -> Result<&DirNode, FsError> {
        match &self.get(ino)?.node {
            Node::Dir(dir) => Ok(dir),
            Node::File(_) => Err(FsError::NotDir),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> Result<&mut DirNode, FsError> {
        match &mut self.get_mut(ino)?.node {
            Node::Dir(dir) => Ok(dir),
            Node::File(_) => Err(FsError::NotDir),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> Result<&mut FileNode, FsError> {
        match &mut self.get_mut(ino)?.node {
            Node::File(file) => Ok(file),
            Node::Dir(_) => Err(FsError::IsDir),
        }
    }

    pub fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Ino, FsError> {
        self.dir(parent)?
            .live
            .get(name)
            .copied()
            .ok_or(FsError::NotFound)
    }

    /// A new file or directory named `name` in `parent`.
    pub fn create(
        &mut self,
        parent: Ino,
        name: &OsStr,
        mode: u16,
        directory: bool,
    ) -> Result<Ino, FsError> {
        if self.dir(parent)?.live.contains_key(name) {
            return Err(FsError::Exists);
        }
        let ino = self.next;
        self.next += 1;
        let node = if directory {
            Node::Dir(DirNode {
                parent,
                ..DirNode::default()
            })
        } else {
            Node::File(FileNode::default())
        };
        self.inodes.insert(
            ino,
            Inode {
                node,
                mode,
                links: 1,
                opened: 0,
            },
        );
        self.dir_mut(parent)?.live.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Removes the live name; a directory must be empty.
    pub fn remove(&mut self, parent: Ino, name: &OsStr, directory: bool) -> Result<(), FsError> {
        let ino = self.lookup(parent, name)?;
        match (&self.get(ino)?.node, directory) {
            (Node::Dir(dir), true) if !dir.live.is_empty() => return Err(FsError::NotEmpty),
            (Node::Dir(_), false) => return Err(FsError::IsDir),
            (Node::File(_), true) => return Err(FsError::NotDir),
            _ => {}
        }
        self.dir_mut(parent)?.live.remove(name);
        self.unlinked(ino);
        Ok(())
    }

    /// Moves a live name, replacing a file or empty directory at the
    /// target unless `no_replace`.
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<(), FsError> {
        let ino = self.lookup(parent, name)?;
        self.dir(new_parent)?;
        let moving_dir = matches!(self.get(ino)?.node, Node::Dir(_));
        if let Ok(existing) = self.lookup(new_parent, new_name) {
            if existing == ino {
                return Ok(());
            }
            if no_replace {
                return Err(FsError::Exists);
            }
            match (&self.get(existing)?.node, moving_dir) {
                (Node::Dir(dir), true) if !dir.live.is_empty() => return Err(FsError::NotEmpty),
                (Node::Dir(_), false) => return Err(FsError::IsDir),
                (Node::File(_), true) => return Err(FsError::NotDir),
                _ => {}
            }
            self.unlinked(existing);
        }
        self.dir_mut(parent)?.live.remove(name);
        self.dir_mut(new_parent)?
            .live
            .insert(new_name.to_owned(), ino);
        if let Node::Dir(dir) = &mut self.get_mut(ino)?.node {
            dir.parent = new_parent;
        }
        Ok(())
    }

    fn unlinked(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.links = inode.links.saturating_sub(1);
        }
    }

    pub fn opened(&mut self, ino: Ino) -> Result<(), FsError> {
        self.get_mut(ino)?.opened += 1;
        Ok(())
    }

    pub fn released(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.opened = inode.opened.saturating_sub(1);
        }
    }

    pub fn read(&self, ino: Ino, offset: u64, size: u32) -> Result<&[u8], FsError> {
        match &self.get(ino)?.node {
            Node::File(file) => {
                let start = (offset as usize).min(file.live.len());
                let end = start.saturating_add(size as usize).min(file.live.len());
                Ok(&file.live[start..end])
            }
            Node::Dir(_) => Err(FsError::IsDir),
        }
    }

    /// Writes live bytes; with `synced` (an `O_DSYNC` descriptor) they are
    /// durable at once.
    pub fn write(
        &mut self,
        ino: Ino,
        offset: u64,
        data: &[u8],
        synced: bool,
    ) -> Result<(), FsError> {
        let file = self.file_mut(ino)?;
        let start = offset as usize;
        let end = start + data.len();
        if file.live.len() < end {
            file.live.resize(end, 0);
        }
        file.live[start..end].copy_from_slice(data);
        if synced {
            if file.durable.len() < end {
                file.durable.resize(end, 0);
            }
            file.durable[start..end].copy_from_slice(data);
        } else if !data.is_empty() {
            file.dirty.extend(start / PAGE..=(end - 1) / PAGE);
        }
        Ok(())
    }

    pub fn truncate(&mut self, ino: Ino, size: u64) -> Result<(), FsError> {
        let file = self.file_mut(ino)?;
        let size = size as usize;
        if size < file.live.len() {
            file.dirty.insert(size / PAGE);
        }
        file.live.resize(size, 0);
        Ok(())
    }

    pub fn set_mode(&mut self, ino: Ino, mode: u16) -> Result<(), FsError> {
        self.get_mut(ino)?.mode = mode;
        Ok(())
    }

    /// `fsync`/`fdatasync` of a file: its bytes and length are durable.
    pub fn sync_file(&mut self, ino: Ino) -> Result<(), FsError> {
        let file = self.file_mut(ino)?;
        let length = file.live.len();
        let grown_from = file.durable.len().min(length);
        file.durable.resize(length, 0);
        file.durable[grown_from..].copy_from_slice(&file.live[grown_from..]);
        for page in std::mem::take(&mut file.dirty) {
            file.keep_page(page);
        }
        Ok(())
    }

    /// `fsync` of a directory: its entries are durable.
    pub fn sync_dir(&mut self, ino: Ino) -> Result<(), FsError> {
        let dir = self.dir_mut(ino)?;
        dir.durable = dir.live.clone();
        Ok(())
    }

    /// Frees the bytes of files that are named nowhere, durably or live,
    /// and open nowhere: their state can never be seen again.
    pub fn collect(&mut self) {
        let named: BTreeSet<Ino> = self
            .inodes
            .values()
            .filter_map(|inode| match &inode.node {
                Node::Dir(dir) => Some(dir.durable.values().chain(dir.live.values())),
                Node::File(_) => None,
            })
            .flatten()
            .copied()
            .collect();
        self.inodes
            .retain(|ino, inode| *ino == ROOT || inode.opened > 0 || named.contains(ino));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    fn file(bytes: &[u8]) -> Image {
        Image::File {
            mode: 0o644,
            bytes: bytes.to_vec(),
        }
    }

    fn root_entries(image: Image) -> BTreeMap<OsString, Image> {
        match image {
            Image::Dir { entries, .. } => entries,
            Image::File { .. } => panic!("the root is a directory"),
        }
    }

    #[test]
    fn an_unsynced_create_is_undone() {
        let mut tree = Tree::from_image(&Image::empty());
        let ino = tree.create(ROOT, name("a"), 0o644, false).unwrap();
        tree.write(ino, 0, b"bytes", false).unwrap();
        tree.sync_file(ino).unwrap();
        assert!(root_entries(tree.cut()).is_empty());
    }

    #[test]
    fn a_named_file_never_synced_comes_back_empty() {
        let mut tree = Tree::from_image(&Image::empty());
        let ino = tree.create(ROOT, name("a"), 0o644, false).unwrap();
        tree.write(ino, 0, b"bytes", false).unwrap();
        tree.sync_dir(ROOT).unwrap();
        assert_eq!(root_entries(tree.cut())[name("a")], file(b""));
    }

    #[test]
    fn synced_bytes_and_entries_survive_and_later_writes_do_not() {
        let mut tree = Tree::from_image(&Image::empty());
        let ino = tree.create(ROOT, name("a"), 0o644, false).unwrap();
        let big: Vec<u8> = (0..3 * PAGE).map(|i| i as u8).collect();
        tree.write(ino, 0, &big, false).unwrap();
        tree.sync_file(ino).unwrap();
        tree.sync_dir(ROOT).unwrap();
        tree.write(ino, PAGE as u64 + 7, b"lost", false).unwrap();
        tree.write(ino, 3 * PAGE as u64, b"lost too", false)
            .unwrap();
        assert_eq!(root_entries(tree.cut())[name("a")], file(&big));
    }

    #[test]
    fn a_cut_may_keep_any_unsynced_page_and_no_unsynced_name() {
        let mut tree = Tree::from_image(&Image::empty());
        let ino = tree.create(ROOT, name("a"), 0o644, false).unwrap();
        let big = vec![b'0'; 3 * PAGE];
        tree.write(ino, 0, &big, false).unwrap();
        tree.sync_file(ino).unwrap();
        tree.sync_dir(ROOT).unwrap();
        // Pages 0 and 2 rewritten, and a fourth page past the end.
        tree.write(ino, 0, b"first", false).unwrap();
        tree.write(ino, 2 * PAGE as u64, b"third", false).unwrap();
        tree.write(ino, 3 * PAGE as u64, b"fourth", false).unwrap();
        tree.create(ROOT, name("b"), 0o644, false).unwrap();
        // Pages in order: 0 kept, 2 not, 3 kept.
        let mut answers = [true, false, true].into_iter();
        let image = tree.cut_keeping(&mut || answers.next().unwrap());
        let mut expected = big.clone();
        expected[..5].copy_from_slice(b"first");
        expected.extend_from_slice(b"fourth");
        let entries = root_entries(image);
        assert_eq!(entries.len(), 1, "the unsynced name is not kept");
        assert_eq!(entries[name("a")], file(&expected));
    }

    #[test]
    fn an_o_dsync_write_is_durable_alone() {
        let mut tree = Tree::from_image(&Image::from_file_in_root("a", b"0000"));
        let ino = tree.lookup(ROOT, name("a")).unwrap();
        tree.write(ino, 0, b"11", false).unwrap();
        tree.write(ino, 2, b"22", true).unwrap();
        assert_eq!(root_entries(tree.cut())[name("a")], file(b"0022"));
    }

    #[test]
    fn a_rename_without_a_directory_sync_is_undone() {
        let mut tree = Tree::from_image(&Image::from_file_in_root("old", b"x"));
        tree.rename(ROOT, name("old"), ROOT, name("new"), false)
            .unwrap();
        let entries = root_entries(tree.cut());
        assert_eq!(entries.keys().collect::<Vec<_>>(), [name("old")]);
    }

    #[test]
    fn a_truncation_is_durable_only_when_synced() {
        let mut tree = Tree::from_image(&Image::from_file_in_root("a", b"abcdef"));
        let ino = tree.lookup(ROOT, name("a")).unwrap();
        tree.truncate(ino, 2).unwrap();
        let mut synced = Tree::from_image(&Image::from_file_in_root("a", b"abcdef"));
        synced.truncate(ino, 2).unwrap();
        synced.sync_file(ino).unwrap();
        assert_eq!(root_entries(tree.cut())[name("a")], file(b"abcdef"));
        assert_eq!(root_entries(synced.cut())[name("a")], file(b"ab"));
    }

    #[test]
    fn nothing_works_after_the_cut() {
        let mut tree = Tree::from_image(&Image::empty());
        tree.cut();
        assert_eq!(
            tree.create(ROOT, name("a"), 0o644, false),
            Err(FsError::PoweredOff)
        );
    }

    impl Image {
        fn from_file_in_root(name: &str, bytes: &[u8]) -> Image {
            Image::Dir {
                mode: 0o755,
                entries: [(OsString::from(name), file(bytes))].into(),
            }
        }
    }
}
