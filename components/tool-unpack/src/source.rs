//! Byte sources the tar reader pulls from: the run's input, a slice (for
//! tests), and gzip decompression over another source.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

/// A sequence of bytes, read front to back.
pub trait Source {
    /// Fills the front of `buf`; answers how many bytes, 0 only at the end.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, String>;

    /// Fills all of `buf`; false when the source ended first (after
    /// `filled` bytes).
    fn read_full(&mut self, buf: &mut [u8]) -> Result<Result<(), usize>, String> {
        let mut filled = 0;
        while filled < buf.len() {
            let n = self.read(&mut buf[filled..])?;
            if n == 0 {
                return Ok(Err(filled));
            }
            filled += n;
        }
        Ok(Ok(()))
    }
}

/// A source over bytes in memory.
pub struct Slice<'a>(pub &'a [u8]);

impl Source for Slice<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let n = buf.len().min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// A source that puts back bytes already read (the magic sniffed first).
pub struct Prefixed<S> {
    pub prefix: Vec<u8>,
    pub inner: S,
}

impl<S: Source> Source for Prefixed<S> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        if self.prefix.is_empty() {
            return self.inner.read(buf);
        }
        let n = buf.len().min(self.prefix.len());
        buf[..n].copy_from_slice(&self.prefix[..n]);
        self.prefix.drain(..n);
        Ok(n)
    }
}

/// The gzip magic (RFC 1952).
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

const CHUNK: usize = 64 << 10;

/// One gzip member (RFC 1952) decompressed; its CRC-32 and length are
/// checked at its end. Bytes after the member are not read.
pub struct Gunzip<S> {
    inner: S,
    state: alloc::boxed::Box<InflateState>,
    input: Vec<u8>,
    start: usize,
    end: usize,
    crc: u32,
    length: u32,
    done: bool,
}

impl<S: Source> Gunzip<S> {
    /// Reads and checks the gzip header of `inner`.
    pub fn new(mut inner: S) -> Result<Gunzip<S>, String> {
        let mut header = [0u8; 10];
        inner
            .read_full(&mut header)?
            .map_err(|_| String::from("gzip: truncated header"))?;
        if header[..2] != GZIP_MAGIC || header[2] != 8 {
            return Err("gzip: not a deflate-compressed gzip stream".into());
        }
        let flags = header[3];
        if flags & 0xe0 != 0 {
            return Err("gzip: reserved header flags are set".into());
        }
        let mut byte = [0u8; 1];
        let mut next = |inner: &mut S| -> Result<u8, String> {
            inner
                .read_full(&mut byte)?
                .map_err(|_| String::from("gzip: truncated header"))?;
            Ok(byte[0])
        };
        if flags & 0x04 != 0 {
            let extra = usize::from(next(&mut inner)?) | usize::from(next(&mut inner)?) << 8;
            for _ in 0..extra {
                next(&mut inner)?;
            }
        }
        for flag in [0x08, 0x10] {
            if flags & flag != 0 {
                while next(&mut inner)? != 0 {}
            }
        }
        if flags & 0x02 != 0 {
            next(&mut inner)?;
            next(&mut inner)?;
        }
        Ok(Gunzip {
            inner,
            state: InflateState::new_boxed(DataFormat::Raw),
            input: vec![0; CHUNK],
            start: 0,
            end: 0,
            crc: 0,
            length: 0,
            done: false,
        })
    }

    /// Checks the trailer: CRC-32 and length modulo 2^32.
    fn finish(&mut self) -> Result<(), String> {
        let mut trailer = [0u8; 8];
        let buffered = (self.end - self.start).min(8);
        trailer[..buffered].copy_from_slice(&self.input[self.start..self.start + buffered]);
        self.start += buffered;
        self.inner
            .read_full(&mut trailer[buffered..])?
            .map_err(|_| String::from("gzip: truncated trailer"))?;
        let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let length = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        if crc != self.crc {
            return Err("gzip: CRC-32 mismatch".into());
        }
        if length != self.length {
            return Err("gzip: length mismatch".into());
        }
        Ok(())
    }
}

impl<S: Source> Source for Gunzip<S> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        if buf.is_empty() {
            return Ok(0);
        }
        while !self.done {
            if self.start == self.end {
                self.start = 0;
                self.end = self.inner.read(&mut self.input)?;
            }
            let result = inflate(
                &mut self.state,
                &self.input[self.start..self.end],
                buf,
                MZFlush::None,
            );
            self.start += result.bytes_consumed;
            let written = &buf[..result.bytes_written];
            self.crc = crc32(self.crc, written);
            self.length = self.length.wrapping_add(written.len() as u32);
            match result.status {
                Ok(MZStatus::StreamEnd) => {
                    self.done = true;
                    self.finish()?;
                }
                Ok(_) => {}
                Err(MZError::Buf) if self.end == 0 => {
                    return Err("gzip: truncated deflate stream".into())
                }
                Err(MZError::Buf) => {}
                Err(e) => return Err(format!("gzip: corrupt deflate stream ({e:?})")),
            }
            if !written.is_empty() {
                return Ok(written.len());
            }
            if self.start == self.end && self.end == 0 && !self.done {
                return Err("gzip: truncated deflate stream".into());
            }
        }
        Ok(0)
    }
}

/// CRC-32 (IEEE 802.3, reflected) of `bytes`, continuing from `crc`.
pub fn crc32(crc: u32, bytes: &[u8]) -> u32 {
    let mut crc = !crc;
    for &b in bytes {
        crc = (crc >> 8) ^ CRC_TABLE[usize::from(crc as u8 ^ b)];
    }
    !crc
}

/// The CRC-32 of each byte value.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = (c >> 1) ^ (0xedb8_8320 & (c & 1).wrapping_neg());
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};
