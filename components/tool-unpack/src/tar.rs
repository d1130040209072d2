//! The tar reader: POSIX ustar headers, GNU long names (`L`, `K`) and pax
//! extended headers (`x`: `path`, `linkpath`, `size`), over any [`Source`].

use crate::source::Source;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

const BLOCK: usize = 512;
/// The largest GNU long name or pax header read.
const MAX_META: u64 = 1 << 20;

/// What a member is, by its type flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    HardLink,
    Symlink,
    CharDevice,
    BlockDevice,
    Directory,
    Fifo,
    Other(u8),
}

impl Kind {
    fn of(flag: u8) -> Kind {
        match flag {
            b'0' | 0 | b'7' => Kind::File,
            b'1' => Kind::HardLink,
            b'2' => Kind::Symlink,
            b'3' => Kind::CharDevice,
            b'4' => Kind::BlockDevice,
            b'5' => Kind::Directory,
            b'6' => Kind::Fifo,
            other => Kind::Other(other),
        }
    }

    pub fn name(self) -> String {
        match self {
            Kind::File => "file".into(),
            Kind::HardLink => "hardlink".into(),
            Kind::Symlink => "symlink".into(),
            Kind::CharDevice => "char-device".into(),
            Kind::BlockDevice => "block-device".into(),
            Kind::Directory => "directory".into(),
            Kind::Fifo => "fifo".into(),
            Kind::Other(flag) => format!("type {:?}", flag as char),
        }
    }
}

/// One member's header, its long names and pax records applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub path: Vec<u8>,
    pub link: Vec<u8>,
    pub size: u64,
    pub mode: u32,
    pub kind: Kind,
}

/// Reads members in order: `next_member` answers a header, then the member's
/// data may be read with `data` before the next `next_member`.
pub struct Reader<S> {
    source: S,
    /// Data bytes of the current member not read yet, and its padding.
    remaining: u64,
    padding: usize,
    /// The member number (1-based) of the last header, for messages.
    pub number: u64,
}

impl<S: Source> Reader<S> {
    pub fn new(source: S) -> Reader<S> {
        Reader {
            source,
            remaining: 0,
            padding: 0,
            number: 0,
        }
    }

    /// The next member's header, or none at the end of the archive (a
    /// zero block, or the end of the bytes).
    pub fn next_member(&mut self) -> Result<Option<Header>, String> {
        self.skip_rest()?;
        let mut long_path = None;
        let mut long_link = None;
        let mut pax = Pax::default();
        loop {
            let mut block = [0u8; BLOCK];
            match self.source.read_full(&mut block)? {
                Ok(()) => {}
                Err(0) => return Ok(None),
                Err(_) => return Err("archive: truncated header".into()),
            }
            if block.iter().all(|&b| b == 0) {
                return Ok(None);
            }
            self.number += 1;
            let n = self.number;
            check_sum(&block).map_err(|e| format!("member {n}: {e}"))?;
            let size = number(&block[124..136]).map_err(|e| format!("member {n}: size {e}"))?;
            let flag = block[156];
            if matches!(flag, b'L' | b'K' | b'x' | b'g') {
                if size > MAX_META {
                    return Err(format!("member {n}: extended header of {size} bytes"));
                }
                let data = self.meta(size)?;
                match flag {
                    b'L' => long_path = Some(until_nul(&data).to_vec()),
                    b'K' => long_link = Some(until_nul(&data).to_vec()),
                    b'x' => pax
                        .parse(&data)
                        .map_err(|e| format!("member {n}: pax {e}"))?,
                    // A global pax header: defaults this reader ignores.
                    _ => {}
                }
                continue;
            }
            let mode = number(&block[100..108]).map_err(|e| format!("member {n}: mode {e}"))?;
            let ustar = &block[257..263] == b"ustar\0";
            let mut path = until_nul(&block[..100]).to_vec();
            let prefix = until_nul(&block[345..500]);
            if ustar && !prefix.is_empty() {
                let mut full = prefix.to_vec();
                full.push(b'/');
                full.extend_from_slice(&path);
                path = full;
            }
            let header = Header {
                path: pax.path.take().or(long_path).unwrap_or(path),
                link: pax
                    .link
                    .take()
                    .or(long_link)
                    .unwrap_or_else(|| until_nul(&block[157..257]).to_vec()),
                size: pax.size.unwrap_or(size),
                mode: (mode & 0o7777) as u32,
                kind: Kind::of(flag),
            };
            // Links, devices, directories and fifos carry no data whatever
            // their size field says, except in the pax size.
            let data = match header.kind {
                Kind::File | Kind::Other(_) => header.size,
                _ => pax.size.unwrap_or(0),
            };
            self.remaining = data;
            self.padding = padding(data);
            return Ok(Some(header));
        }
    }

    /// The source, after the archive's end.
    pub fn into_inner(self) -> S {
        self.source
    }

    /// The next up to `buf.len()` bytes of the current member's data;
    /// 0 at its end.
    pub fn data(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.source.read(&mut buf[..want])?;
        if n == 0 {
            return Err(format!("member {}: truncated data", self.number));
        }
        self.remaining -= n as u64;
        Ok(n)
    }

    /// Skips what is left of the current member's data and its padding.
    fn skip_rest(&mut self) -> Result<(), String> {
        let mut scratch = [0u8; BLOCK];
        while self.remaining > 0 {
            self.data(&mut scratch)?;
        }
        let padding = core::mem::take(&mut self.padding);
        if padding > 0 {
            self.source
                .read_full(&mut scratch[..padding])?
                .map_err(|_| format!("member {}: truncated padding", self.number))?;
        }
        Ok(())
    }

    /// The whole data of an extended header of `size` bytes, padding
    /// consumed.
    fn meta(&mut self, size: u64) -> Result<Vec<u8>, String> {
        let mut data = vec![0u8; size as usize + padding(size)];
        self.source
            .read_full(&mut data)?
            .map_err(|_| format!("member {}: truncated extended header", self.number))?;
        data.truncate(size as usize);
        Ok(data)
    }
}

fn padding(size: u64) -> usize {
    ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// A numeric field: octal digits between optional spaces and NULs, or
/// GNU base-256 (first byte's high bit set).
fn number(field: &[u8]) -> Result<u64, &'static str> {
    if field[0] & 0x80 != 0 {
        if field[0] & 0x40 != 0 {
            return Err("is negative");
        }
        let mut value: u64 = u64::from(field[0] & 0x3f);
        for &b in &field[1..] {
            value = value
                .checked_mul(256)
                .and_then(|v| v.checked_add(u64::from(b)))
                .ok_or("is too large")?;
        }
        return Ok(value);
    }
    let text = until_nul(field);
    let digits = text.trim_ascii();
    let mut value: u64 = 0;
    for &d in digits {
        if !(b'0'..=b'7').contains(&d) {
            return Err("is not an octal number");
        }
        value = value
            .checked_mul(8)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or("is too large")?;
    }
    Ok(value)
}

/// The header checksum: the sum of its bytes with the checksum field read
/// as spaces.
fn check_sum(block: &[u8; BLOCK]) -> Result<(), &'static str> {
    let stored = number(&block[148..156]).map_err(|_| "header checksum is not a number")?;
    let sum: u64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum();
    if sum != stored {
        return Err("header checksum mismatch (not a tar archive, or a corrupt one)");
    }
    Ok(())
}

/// The records of a pax extended header this reader applies.
#[derive(Default)]
struct Pax {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
}

impl Pax {
    /// Records `"<length> <key>=<value>\n"`, `length` counting the whole
    /// record.
    fn parse(&mut self, mut data: &[u8]) -> Result<(), &'static str> {
        while !data.is_empty() {
            let space = data
                .iter()
                .position(|&b| b == b' ')
                .ok_or("record without length")?;
            let length: usize = core::str::from_utf8(&data[..space])
                .ok()
                .and_then(|l| l.parse().ok())
                .ok_or("record length is not a number")?;
            if length <= space + 1 || length > data.len() || data[length - 1] != b'\n' {
                return Err("record length does not fit");
            }
            let record = &data[space + 1..length - 1];
            let eq = record
                .iter()
                .position(|&b| b == b'=')
                .ok_or("record without `=`")?;
            let (key, value) = (&record[..eq], &record[eq + 1..]);
            match key {
                b"path" => self.path = Some(value.to_vec()),
                b"linkpath" => self.link = Some(value.to_vec()),
                b"size" => {
                    let size = core::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .ok_or("size is not a number")?;
                    self.size = Some(size);
                }
                _ => {}
            }
            data = &data[length..];
        }
        Ok(())
    }
}
