//! Where answers go: stdout, or a file that appears only once it is
//! complete (written beside it under a temporary name, then renamed).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::failure::Failure;

/// An output being written.
pub struct Sink {
    target: Target,
}

enum Target {
    Stdout(io::Stdout),
    File {
        file: File,
        temp: PathBuf,
        path: PathBuf,
        committed: bool,
    },
}

impl Sink {
    /// Stdout, or a new temporary file beside `path`.
    pub fn open(path: Option<&Path>) -> Result<Sink, Failure> {
        let target = match path {
            None => Target::Stdout(io::stdout()),
            Some(path) => {
                let temp = temp_path(path);
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&temp)
                    .map_err(|err| {
                        Failure::CantCreate(format!("cannot create {}: {err}", temp.display()))
                    })?;
                Target::File {
                    file,
                    temp,
                    path: path.to_owned(),
                    committed: false,
                }
            }
        };
        Ok(Sink { target })
    }

    /// What the output is called in messages.
    pub fn name(&self) -> String {
        match &self.target {
            Target::Stdout(_) => "stdout".into(),
            Target::File { path, .. } => path.display().to_string(),
        }
    }

    /// A write failure on this output.
    pub fn failed(&self, err: io::Error) -> Failure {
        Failure::Io(format!("cannot write {}: {err}", self.name()))
    }

    /// Finishes the output: flushes stdout, or syncs the file and renames it
    /// into place.
    pub fn commit(mut self) -> Result<(), Failure> {
        let name = self.name();
        let io = |err: io::Error| Failure::Io(format!("cannot write {name}: {err}"));
        match &mut self.target {
            Target::Stdout(out) => out.flush().map_err(io),
            Target::File {
                file,
                temp,
                path,
                committed,
            } => {
                file.sync_all().map_err(io)?;
                std::fs::rename(&*temp, &*path).map_err(io)?;
                *committed = true;
                Ok(())
            }
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.target {
            Target::Stdout(out) => out.write(buf),
            Target::File { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.target {
            Target::Stdout(out) => out.flush(),
            Target::File { file, .. } => file.flush(),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Target::File {
            temp,
            committed: false,
            ..
        } = &self.target
        {
            let _ = std::fs::remove_file(temp);
        }
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.labctl-{}.part", std::process::id()))
}

/// Writes `bytes` to the file `path`, replacing it whole.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut sink = Sink::open(Some(path))?;
    sink.write_all(bytes).map_err(|err| sink.failed(err))?;
    sink.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_appears_only_when_committed() {
        let dir = std::env::temp_dir().join(format!("labctl-output-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.bin");
        let mut sink = Sink::open(Some(&path)).unwrap();
        sink.write_all(b"part").unwrap();
        assert!(!path.exists());
        drop(sink);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

        write_file(&path, b"one").unwrap();
        write_file(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
