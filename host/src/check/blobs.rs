//! Blob files: each committed file's bytes hash to its name; nothing else
//! lies among them; staging files are orphans (no labd runs).

use super::Findings;
use crate::backup::{blob_name, hash_file};
use crate::blobstore::{committed_files, Found};
use anyhow::{Context, Result};
use std::fs;
use std::path::Path;

pub fn check(dir: &Path, repair: bool, findings: &mut Findings) -> Result<()> {
    let mut blobs = 0;
    let mut bytes = 0;
    for found in committed_files(dir).context("list the blob files")? {
        match found {
            Found::Blob(digest, size, path) => {
                blobs += 1;
                bytes += size;
                let (actual, read) =
                    hash_file(&path).with_context(|| format!("read {}", path.display()))?;
                if read != size || actual != digest {
                    findings.problem(format!(
                        "blob {}: the file {} holds {read} bytes hashing to {} (its length on \
                         record is {size}): its bytes are not the blob it is named for",
                        blob_name(&digest),
                        path.display(),
                        blob_name(&actual),
                    ));
                }
            }
            Found::Stray(path) => findings.problem(format!(
                "blobs: {} is not a blob file (a name other than sha256/<2 hex>/<64 hex>)",
                path.display()
            )),
        }
    }
    findings.count("blobs", blobs);
    findings.count("blob bytes", bytes);

    let staging = dir.join("staging");
    let orphans: Vec<_> = match fs::read_dir(&staging) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("list {}", staging.display())),
    };
    for path in orphans {
        if repair {
            fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
            findings.note(format!(
                "removed the orphaned staging file {}",
                path.display()
            ));
        } else {
            findings.note(format!(
                "orphaned staging file {} (a write cut short; `--repair` or the next start \
                 removes it)",
                path.display()
            ));
        }
    }
    if repair {
        crate::durable::sync_dir(&staging).ok();
    }
    Ok(())
}
