//! CSV records (RFC 4180): fields split by one ASCII delimiter, records by
//! CRLF or LF, fields optionally quoted with `"` (a quote inside written
//! `""`; delimiters and line breaks allowed inside).

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Reads records from UTF-8 text.
pub struct Records<'a> {
    text: &'a str,
    at: usize,
    delimiter: u8,
    /// The 1-based line the next record starts on, for messages.
    line: usize,
}

impl<'a> Records<'a> {
    pub fn new(text: &'a str, delimiter: u8) -> Records<'a> {
        Records {
            text,
            at: 0,
            delimiter,
            line: 1,
        }
    }

    /// The next record, or none at the end. A final line break ends the
    /// last record and starts none.
    pub fn next_record(&mut self) -> Result<Option<Vec<Cow<'a, str>>>, String> {
        let bytes = self.text.as_bytes();
        if self.at >= bytes.len() {
            return Ok(None);
        }
        let start_line = self.line;
        let mut fields = Vec::new();
        loop {
            let (field, end) = self
                .field()
                .map_err(|e| format!("line {start_line}: {e}"))?;
            fields.push(field);
            match bytes.get(end) {
                None => {
                    self.at = end;
                    return Ok(Some(fields));
                }
                Some(&b) if b == self.delimiter => self.at = end + 1,
                Some(b'\n') => {
                    self.at = end + 1;
                    self.line += 1;
                    return Ok(Some(fields));
                }
                Some(b'\r') if bytes.get(end + 1) == Some(&b'\n') => {
                    self.at = end + 2;
                    self.line += 1;
                    return Ok(Some(fields));
                }
                Some(_) => {
                    return Err(format!(
                        "line {}: a quoted field is followed by something other than a delimiter or a line break",
                        self.line
                    ))
                }
            }
        }
    }

    /// The field at `self.at` and the index just past it.
    fn field(&mut self) -> Result<(Cow<'a, str>, usize), String> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        if bytes.get(start) != Some(&b'"') {
            let mut end = start;
            while end < bytes.len() {
                match bytes[end] {
                    b if b == self.delimiter => break,
                    b'\n' => break,
                    b'\r' if bytes.get(end + 1) == Some(&b'\n') => break,
                    b'"' => return Err("a quote inside an unquoted field".into()),
                    _ => end += 1,
                }
            }
            return Ok((Cow::Borrowed(&self.text[start..end]), end));
        }
        let mut value: Option<String> = None;
        let mut run = start + 1;
        let mut i = start + 1;
        loop {
            match bytes.get(i) {
                None => return Err("a quoted field is not closed".into()),
                Some(b'"') if bytes.get(i + 1) == Some(&b'"') => {
                    let owned = value.get_or_insert_with(String::new);
                    owned.push_str(&self.text[run..=i]);
                    i += 2;
                    run = i;
                }
                Some(b'"') => {
                    let field = match value {
                        Some(mut owned) => {
                            owned.push_str(&self.text[run..i]);
                            Cow::Owned(owned)
                        }
                        None => Cow::Borrowed(&self.text[run..i]),
                    };
                    return Ok((field, i + 1));
                }
                Some(b'\n') => {
                    self.line += 1;
                    i += 1;
                }
                Some(_) => i += 1,
            }
        }
    }
}
