//! Test support: a filesystem on which a power cut can be simulated.
//!
//! [`Mounted::mount`] serves, through FUSE, an in-memory filesystem that
//! tracks, beside what processes see, what a sudden power loss would leave
//! (the rules are in [`model`]: bytes are durable after an fsync of their
//! file, names after an fsync of their directory). [`Mounted::cut`] is the
//! power loss: from that instant every operation fails with `EIO`, and the
//! durable [`Image`] is all that remains; mounting that image again is the
//! reboot.
//!
//! Mounting needs `/dev/fuse` and the right to mount (root, or a
//! `fusermount3` helper); [`Mounted::mount`] reports why it could not.

mod fs;
pub mod model;

pub use model::Image;

use fs::PowerCutFs;
use model::Tree;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Why a mount failed.
#[derive(Debug)]
pub struct MountError {
    pub mountpoint: PathBuf,
    pub source: std::io::Error,
}

impl std::fmt::Display for MountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot mount the power-cut filesystem on {}: {} \
             (it needs /dev/fuse and root, or the fuse3 package's fusermount3)",
            self.mountpoint.display(),
            self.source
        )
    }
}

impl std::error::Error for MountError {}

/// A mounted power-cut filesystem. Dropped, it unmounts.
pub struct Mounted {
    tree: Arc<Mutex<Tree>>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

impl Mounted {
    /// Mounts `image` (live and durable) on the existing directory
    /// `mountpoint`.
    pub fn mount(mountpoint: &Path, image: &Image) -> Result<Mounted, MountError> {
        let error = |source| MountError {
            mountpoint: mountpoint.to_path_buf(),
            source,
        };
        let owner = std::fs::metadata(mountpoint).map_err(error)?;
        let tree = Arc::new(Mutex::new(Tree::from_image(image)));
        let fs = PowerCutFs {
            tree: Arc::clone(&tree),
            uid: owner.uid(),
            gid: owner.gid(),
            time: SystemTime::now(),
        };
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("lab-powercut".into()),
            fuser::MountOption::DefaultPermissions,
        ];
        let session = fuser::spawn_mount(fs, mountpoint, &config).map_err(error)?;
        Ok(Mounted {
            tree,
            session: Some(session),
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    /// The power cut: returns the durable image at this instant; every
    /// later operation on the mount fails with `EIO`. The mount stays
    /// until [`Mounted::unmount`] (end the processes using it first).
    pub fn cut(&self) -> Image {
        self.tree.lock().unwrap().cut()
    }

    /// The power cut after the disk wrote back the unsynced pages `keep`
    /// answers true for ([`model::Tree::cut_keeping`]).
    pub fn cut_keeping(&self, keep: &mut dyn FnMut() -> bool) -> Image {
        self.tree.lock().unwrap().cut_keeping(keep)
    }

    /// Unmounts; fails if a process still holds a file open in it.
    pub fn unmount(mut self) -> std::io::Result<()> {
        match self.session.take() {
            Some(session) => match session.umount_and_join() {
                // Once the unmount is done, the kernel may end the session's
                // connection as aborted rather than disconnected (its read of
                // the device answers ECONNABORTED): the same end. A process
                // holding a file open fails the unmount itself.
                Err(ended) if ended.kind() == std::io::ErrorKind::ConnectionAborted => Ok(()),
                other => other,
            },
            None => Ok(()),
        }
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}
