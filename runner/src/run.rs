//! The store data of one run and the host side of the tool world's
//! imports: inputs read from committed bytes, outputs streamed into the
//! sink's writers, log lines, and the effects.

use crate::bindings::lab::tool::{clock, inputs, log, outputs, random};
use crate::limits::{Limit, RunMemory};
use crate::store::{InputBytes, OutputSink, OutputWriter, WriteError};
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::Result;

/// Largest read of an input in one call.
const MAX_READ: u32 = 1 << 20;
/// Log lines one run may emit; later ones are dropped.
const MAX_LOG_LINES: u32 = 1024;
/// Longest log line kept, in bytes.
const MAX_LOG_LINE: usize = 4096;

/// An input bound for the run.
pub struct BoundInput {
    pub role: String,
    pub type_: String,
    pub reader: Box<dyn InputBytes>,
}

/// An output the run created: written, not yet named.
pub struct PendingOutput {
    pub role: String,
    pub ordinal: u32,
    pub type_: String,
    pub writer: Box<dyn OutputWriter>,
}

/// The guest's handle of an output: its index in [`RunState::outputs`].
pub struct OutputSlot(usize);

/// Where a run's outputs go and how far they may grow.
pub struct OutputRules {
    /// The release's output roles.
    pub roles: Arc<[String]>,
    pub max_outputs: u32,
    pub max_bytes: u64,
    pub sink: Arc<dyn OutputSink>,
    /// The deployment's blob cap: no output is larger.
    pub blob_cap: u64,
}

/// What one run holds.
pub struct RunState {
    pub table: ResourceTable,
    pub memory: RunMemory,
    pub inputs: Vec<BoundInput>,
    pub recipe: String,
    /// In creation order.
    pub outputs: Vec<PendingOutput>,
    /// The limit a host call found passed (memory is in `memory.denied`).
    pub passed: Option<Limit>,
    /// An output role the release does not declare, when it created one.
    pub undeclared_role: Option<String>,
    rules: OutputRules,
    output_bytes: u64,
    /// The release's component digest, for its log lines.
    release: Arc<str>,
    log_lines: u32,
}

/// How a host call ends the run: a trap whose cause the state recorded.
fn end_run(why: &str) -> wasmtime::Error {
    wasmtime::format_err!("{why}")
}

impl RunState {
    pub fn new(
        memory: RunMemory,
        inputs: Vec<BoundInput>,
        recipe: String,
        rules: OutputRules,
        release: Arc<str>,
    ) -> RunState {
        RunState {
            table: ResourceTable::new(),
            memory,
            inputs,
            recipe,
            outputs: Vec::new(),
            passed: None,
            undeclared_role: None,
            rules,
            output_bytes: 0,
            release,
            log_lines: 0,
        }
    }
}

impl inputs::Host for RunState {
    async fn bound(&mut self) -> Result<Vec<inputs::Input>> {
        Ok(self
            .inputs
            .iter()
            .map(|i| inputs::Input {
                role: i.role.clone(),
                type_: i.type_.clone(),
                size: i.reader.size(),
            })
            .collect())
    }

    async fn read(&mut self, role: String, offset: u64, length: u32) -> Result<Option<Vec<u8>>> {
        let Some(input) = self.inputs.iter().find(|i| i.role == role) else {
            return Ok(None);
        };
        let left = input.reader.size().saturating_sub(offset);
        let length = u64::from(length.min(MAX_READ)).min(left) as usize;
        let mut bytes = vec![0u8; length];
        let read = input.reader.read_at(offset, &mut bytes)?;
        bytes.truncate(read);
        Ok(Some(bytes))
    }

    async fn recipe(&mut self) -> Result<String> {
        Ok(self.recipe.clone())
    }
}

impl outputs::Host for RunState {
    async fn create(&mut self, role: String, type_: String) -> Result<Resource<OutputSlot>> {
        if !self.rules.roles.contains(&role) {
            self.undeclared_role = Some(role);
            return Err(end_run("an undeclared output role"));
        }
        if self.outputs.len() >= self.rules.max_outputs as usize {
            self.passed = Some(Limit::Outputs);
            return Err(end_run("output count limit"));
        }
        let ordinal = self.outputs.iter().filter(|o| o.role == role).count() as u32;
        let cap = self.rules.blob_cap.min(self.rules.max_bytes);
        let writer = self.rules.sink.writer(cap)?;
        self.outputs.push(PendingOutput {
            role,
            ordinal,
            type_,
            writer,
        });
        Ok(self.table.push(OutputSlot(self.outputs.len() - 1))?)
    }
}

impl outputs::HostOutput for RunState {
    async fn write(&mut self, output: Resource<OutputSlot>, bytes: Vec<u8>) -> Result<()> {
        let index = self.table.get(&output)?.0;
        let total = self.output_bytes + bytes.len() as u64;
        if total > self.rules.max_bytes {
            self.passed = Some(Limit::OutputBytes);
            return Err(end_run("output bytes limit"));
        }
        match self.outputs[index].writer.write(&bytes) {
            Ok(()) => {}
            // The blob cap is below the output bytes limit.
            Err(WriteError::TooLarge) => {
                self.passed = Some(Limit::OutputBytes);
                return Err(end_run("output bytes limit (the blob cap)"));
            }
            Err(WriteError::Io(e)) => return Err(e.into()),
        }
        self.output_bytes = total;
        Ok(())
    }

    async fn drop(&mut self, output: Resource<OutputSlot>) -> Result<()> {
        // The output stays in `outputs`: dropping the handle ends writing,
        // not the output.
        self.table.delete(output)?;
        Ok(())
    }
}

impl log::Host for RunState {
    async fn emit(&mut self, level: log::Level, mut message: String) -> Result<()> {
        if self.log_lines >= MAX_LOG_LINES {
            return Ok(());
        }
        self.log_lines += 1;
        if message.len() > MAX_LOG_LINE {
            let mut end = MAX_LOG_LINE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        let release = &*self.release;
        match level {
            log::Level::Trace => tracing::trace!(release, "{message}"),
            log::Level::Debug => tracing::debug!(release, "{message}"),
            log::Level::Info => tracing::info!(release, "{message}"),
            log::Level::Warn => tracing::warn!(release, "{message}"),
            log::Level::Error => tracing::error!(release, "{message}"),
        }
        Ok(())
    }
}

impl clock::Host for RunState {
    async fn now(&mut self) -> Result<clock::Instant> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(clock::Instant {
            seconds: now.as_secs(),
            nanoseconds: now.subsec_nanos(),
        })
    }
}

impl random::Host for RunState {
    async fn bytes(&mut self, n: u8) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; usize::from(n)];
        getrandom(&mut bytes);
        Ok(bytes)
    }
}

/// Fills `buf` from the kernel's random source, opened once per process.
pub fn getrandom(buf: &mut [u8]) {
    use std::io::Read;
    static SOURCE: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    let source = SOURCE.get_or_init(|| {
        std::fs::File::open("/dev/urandom").expect("the kernel's random source is readable")
    });
    // Reads of one open device are independent: no lock is needed.
    (&*source)
        .read_exact(buf)
        .expect("the kernel's random source is readable");
}
