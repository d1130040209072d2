//! The limits one run is held to, and the memory limiter that enforces
//! its memory limit and measures its peak.

use std::time::Duration;

/// Per-run limits (the deployment's `--tool-…` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Bytes of linear memory (all the run's memories together).
    pub memory: usize,
    /// Fuel: WebAssembly instructions, roughly.
    pub fuel: u64,
    /// Wall-clock time from instantiation to the end of `run`.
    pub wall: Duration,
    /// Outputs the run may create.
    pub outputs: u32,
    /// Bytes all its outputs together may hold.
    pub output_bytes: u64,
}

/// A limit a run went past: its name is the run's reason, `limit: <name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Memory,
    Fuel,
    WallTime,
    Outputs,
    OutputBytes,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::Fuel => "fuel",
            Limit::WallTime => "wall-time",
            Limit::Outputs => "outputs",
            Limit::OutputBytes => "output-bytes",
        }
    }

    /// The `reason` of a run that ended at this limit.
    pub fn reason(self) -> String {
        format!("limit: {}", self.name())
    }
}

/// Table elements one run may hold (function references of its tables).
const MAX_TABLE_ELEMENTS: usize = 1 << 16;

/// Holds a run's memories together under `max` bytes; remembers the
/// largest total they reached and whether a growth was denied.
pub struct RunMemory {
    max: usize,
    total: usize,
    pub peak: usize,
    pub denied: bool,
}

impl RunMemory {
    pub fn new(max: usize) -> RunMemory {
        RunMemory {
            max,
            total: 0,
            peak: 0,
            denied: false,
        }
    }
}

impl wasmtime::ResourceLimiter for RunMemory {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.total - current.min(self.total) + desired;
        if total > self.max {
            self.denied = true;
            return Ok(false);
        }
        self.total = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
