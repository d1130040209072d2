//! Names made durable. A file's bytes survive a power loss once the file
//! is fsynced; its name, and a directory's, only once the directory that
//! holds the name is fsynced too.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Fsyncs `dir`: every name in it now survives a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Like [`fs::create_dir_all`], and each directory it creates is durable
/// before it returns: its parent is fsynced after the creation.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    create_dir_all(parent)?;
    match fs::create_dir(dir) {
        Ok(()) => {}
        // Created meanwhile by someone else, who syncs it.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    sync_dir(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_every_missing_ancestor() {
        let base = std::env::temp_dir().join(format!(
            "durable-{}",
            hex::encode(crate::blobstore::random_16())
        ));
        let deep = base.join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all(&deep).unwrap();
        fs::remove_dir_all(base).unwrap();
    }
}
