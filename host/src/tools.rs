//! The tool sandbox as `labd` hosts it: the runner of `lab-tool-runner`
//! (`contracts/coordination/TOOLS.md`, design.md "Tool runs") reading its
//! inputs from the blob store and committing its outputs there.

pub use lab_tool_runner::{
    Effect, Outcome, RunError, RunInput, RunLimits, RunReport, Runner, RunnerSettings,
};

use crate::blobstore::{BlobReader, BlobStore, BlobWriter, Digest32, WriteError};
use lab_tool_runner::{InputBytes, InputSource, OutputSink, OutputWriter};
use std::io;
use std::sync::Arc;

/// A runner on `blobs`: inputs are committed blobs; an output is a staging
/// blob until the run completes, then committed (fsynced and renamed into
/// its name), and removed when the run fails.
pub fn runner(settings: RunnerSettings, blobs: &Arc<BlobStore>) -> wasmtime::Result<Runner> {
    Runner::new(
        settings,
        Arc::new(BlobInputs(Arc::clone(blobs))),
        Arc::new(BlobOutputs(Arc::clone(blobs))),
    )
}

struct BlobInputs(Arc<BlobStore>);

impl InputSource for BlobInputs {
    fn open(&self, digest: &Digest32) -> io::Result<Option<Box<dyn InputBytes>>> {
        Ok(self
            .0
            .open_blob(digest)?
            .map(|reader| Box::new(BlobInput(reader)) as Box<dyn InputBytes>))
    }
}

struct BlobInput(BlobReader);

impl InputBytes for BlobInput {
    fn size(&self) -> u64 {
        self.0.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_at(offset, buf)
    }
}

struct BlobOutputs(Arc<BlobStore>);

impl OutputSink for BlobOutputs {
    fn writer(&self, cap: u64) -> io::Result<Box<dyn OutputWriter>> {
        Ok(Box::new(BlobOutput(self.0.writer(cap))))
    }
}

struct BlobOutput(BlobWriter);

fn write_error(e: WriteError) -> lab_tool_runner::WriteError {
    match e {
        WriteError::TooLarge => lab_tool_runner::WriteError::TooLarge,
        WriteError::Unavailable(e) => lab_tool_runner::WriteError::Io(std::io::Error::other(e)),
        WriteError::Io(e) => lab_tool_runner::WriteError::Io(e),
    }
}

impl OutputWriter for BlobOutput {
    fn write(&mut self, bytes: &[u8]) -> Result<(), lab_tool_runner::WriteError> {
        self.0.write(bytes).map_err(write_error)
    }

    fn commit(self: Box<Self>) -> Result<(Digest32, u64), lab_tool_runner::WriteError> {
        self.0.commit().map_err(write_error)
    }
}
