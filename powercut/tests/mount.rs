//! The model through the kernel: files written with std, a cut, a remount.

use lab_powercut::{Image, Mounted};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

fn mountpoint(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("powercut-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn mount(dir: &Path, image: &Image) -> Mounted {
    Mounted::mount(dir, image).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn only_what_was_synced_survives_a_cut() {
    let dir = mountpoint("synced");
    let mounted = mount(&dir, &Image::empty());
    // Durable: a file synced, renamed into a synced directory.
    fs::create_dir(dir.join("d")).unwrap();
    File::open(&dir).unwrap().sync_all().unwrap();
    let mut kept = File::create(dir.join("d/kept.part")).unwrap();
    kept.write_all(b"kept bytes").unwrap();
    kept.sync_all().unwrap();
    fs::rename(dir.join("d/kept.part"), dir.join("d/kept")).unwrap();
    File::open(dir.join("d")).unwrap().sync_all().unwrap();
    // Not durable: bytes appended after the sync, a file never synced whose
    // name is, and a name never synced.
    OpenOptions::new()
        .append(true)
        .open(dir.join("d/kept"))
        .unwrap()
        .write_all(b" and more")
        .unwrap();
    fs::write(dir.join("d/unsynced"), b"lost").unwrap();
    File::open(dir.join("d")).unwrap().sync_all().unwrap();
    let mut unnamed = File::create(dir.join("unnamed")).unwrap();
    unnamed.write_all(b"synced, named nowhere durable").unwrap();
    unnamed.sync_all().unwrap();
    drop((kept, unnamed));
    assert_eq!(
        fs::read(dir.join("d/kept")).unwrap(),
        b"kept bytes and more"
    );

    let image = mounted.cut();
    assert_eq!(
        fs::read(dir.join("d/kept")).unwrap_err().raw_os_error(),
        Some(5),
        "after the cut, operations fail with EIO"
    );
    mounted.unmount().unwrap();
    let mounted = mount(&dir, &image);
    assert_eq!(fs::read(dir.join("d/kept")).unwrap(), b"kept bytes");
    assert_eq!(fs::read(dir.join("d/unsynced")).unwrap(), b"");
    assert!(!dir.join("unnamed").exists());
    assert!(!dir.join("d/kept.part").exists());
    mounted.unmount().unwrap();
}
