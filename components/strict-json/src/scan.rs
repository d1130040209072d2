//! A strict JSON scanner that builds no tree: it validates exactly what
//! [`parse`](crate::parse()) validates and, when asked, writes the RFC 8785
//! canonical form of the value as it goes.
//!
//! Memory: the output, one offset per member of each open object, and a
//! copy of the largest object that had to be reordered, less its largest
//! member. Arrays, strings and numbers stream into the output. When not
//! writing, only the offsets.
//!
//! Refusals agree with [`parse`](crate::parse()) in kind, and in every field
//! but for [`Error::Syntax`], whose position and message are this scanner's.

use std::ops::Range;

use crate::error::Error;
use crate::jcs;

/// Told each member of the outermost object: its unescaped name and the span
/// of its value, without surrounding whitespace.
pub(crate) type OnMember<'a> = &'a mut dyn FnMut(&str, Range<usize>);

pub(crate) struct Scanner<'a> {
    /// Valid UTF-8 (checked by the caller).
    input: &'a [u8],
    pos: usize,
    /// Deepest container nesting accepted.
    limit: usize,
    /// Whether the canonical form is written to `out`.
    write_values: bool,
    /// The canonical output; empty when not writing.
    out: Vec<u8>,
    /// One per open object, outermost first; kept for reuse once closed.
    objects: Vec<OpenObject>,
    open: usize,
    /// Where the members of an object being reordered wait.
    spare: Vec<u8>,
    /// Told the outermost object's members, when set.
    on_top_member: Option<OnMember<'a>>,
}

#[derive(Default)]
struct OpenObject {
    /// Offset of each member's name (its opening quote) in `out` when
    /// writing, else in the input; in document order, which is increasing.
    names: Vec<usize>,
    /// Input offset of the object's `{`.
    input_start: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(input: &'a [u8], limit: usize, write_values: bool) -> Scanner<'a> {
        Scanner {
            input,
            pos: 0,
            limit,
            write_values,
            // Canonical output is rarely longer than its input.
            out: Vec::with_capacity(if write_values { input.len() } else { 0 }),
            objects: Vec::new(),
            open: 0,
            spare: Vec::new(),
            on_top_member: None,
        }
    }

    /// Only for a scanner that does not write.
    pub(crate) fn on_top_member(&mut self, on_member: OnMember<'a>) {
        assert!(!self.write_values, "member names are read from the input");
        self.on_top_member = Some(on_member);
    }

    /// Scans the whole input as one value and whitespace.
    pub(crate) fn document(&mut self) -> Result<(), Error> {
        self.skip_whitespace();
        self.value(0)?;
        self.skip_whitespace();
        if self.pos < self.input.len() {
            return Err(Error::TrailingData { offset: self.pos });
        }
        Ok(())
    }

    pub(crate) fn into_output(self) -> Vec<u8> {
        self.out
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.write_values {
            self.out.extend_from_slice(bytes);
        }
    }

    fn syntax(&self, offset: usize, message: &str) -> Error {
        let line_start = self.input[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        Error::Syntax {
            offset,
            line: 1 + self.input[..line_start]
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
            column: offset - line_start + 1,
            message: message.to_owned(),
        }
    }

    /// A syntax error at the current position: `eof` if the input ended,
    /// else `unexpected`.
    fn unexpected(&self, eof: &str, unexpected: &str) -> Error {
        let message = if self.pos < self.input.len() {
            unexpected
        } else {
            eof
        };
        self.syntax(self.pos, message)
    }

    /// A value inside `depth` containers, at the current position.
    fn value(&mut self, depth: usize) -> Result<(), Error> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string(self.write_values),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            _ => Err(self.unexpected("EOF while parsing a value", "expected value")),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Error> {
        for &expected in word {
            if self.peek() != Some(expected) {
                return Err(self.unexpected("EOF while parsing a value", "expected ident"));
            }
            self.pos += 1;
        }
        self.write(word);
        Ok(())
    }

    fn digits(&mut self) -> Result<(), Error> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(self.unexpected("EOF while parsing a value", "invalid number"));
        }
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        Ok(())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, and a value
    /// within the range of `f64`.
    fn number(&mut self) -> Result<(), Error> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
            if matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.syntax(self.pos, "invalid number"));
            }
        } else {
            self.digits()?;
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.digits()?;
        }
        let literal = &self.input[start..self.pos];
        let in_range = if self.write_values {
            jcs::write_number(&mut self.out, literal).is_some()
        } else {
            jcs::number_in_range(literal)
        };
        if in_range {
            Ok(())
        } else {
            Err(self.syntax(start, "number out of range"))
        }
    }

    /// The string at the current position (its opening quote), written
    /// canonically to `out` if `write`.
    fn string(&mut self, write: bool) -> Result<(), Error> {
        self.pos += 1;
        if write {
            self.out.push(b'"');
        }
        loop {
            let run = self.pos;
            while matches!(self.peek(), Some(b) if b != b'"' && b != b'\\' && b >= 0x20) {
                self.pos += 1;
            }
            if write {
                self.out.extend_from_slice(&self.input[run..self.pos]);
            }
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    if write {
                        self.out.push(b'"');
                    }
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.escape()?;
                    if write {
                        jcs::write_char(&mut self.out, c);
                    }
                }
                _ => {
                    return Err(self.unexpected(
                        "EOF while parsing a string",
                        "control character (\\u0000-\\u001F) found while parsing a string",
                    ))
                }
            }
        }
    }

    /// The character of the escape after a `\`; a UTF-16 surrogate must be
    /// the first of a pair written as two `\u` escapes.
    fn escape(&mut self) -> Result<char, Error> {
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                return self.unicode_escape();
            }
            _ => return Err(self.unexpected("EOF while parsing a string", "invalid escape")),
        };
        self.pos += 1;
        Ok(c)
    }

    /// After `\u`.
    fn unicode_escape(&mut self) -> Result<char, Error> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                let at = self.pos;
                if self.input.get(at..at + 2) != Some(b"\\u") {
                    return Err(self.syntax(at, "lone leading surrogate in hex escape"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.syntax(at, "lone leading surrogate in hex escape"));
                }
                0x10000 + ((u32::from(first) - 0xD800) << 10) + (u32::from(second) - 0xDC00)
            }
            0xDC00..=0xDFFF => {
                return Err(self.syntax(self.pos, "unexpected end of hex escape"));
            }
            _ => u32::from(first),
        };
        Ok(char::from_u32(code).expect("not a surrogate"))
    }

    fn hex4(&mut self) -> Result<u16, Error> {
        let mut value = 0u16;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b) => (b as char).to_digit(16),
                None => None,
            };
            let Some(digit) = digit else {
                return Err(self.unexpected("EOF while parsing a string", "invalid escape"));
            };
            value = value << 4 | digit as u16;
            self.pos += 1;
        }
        Ok(value)
    }

    /// Refuses a container opened `depth` deep past the limit, at the
    /// offset `parse` reports: its `serde_json` position after the opening
    /// bracket, following whitespace and an immediately closing bracket.
    fn enter(&self, depth: usize, close: u8) -> Result<(), Error> {
        if depth <= self.limit {
            return Ok(());
        }
        Err(Error::TooDeep {
            limit: self.limit,
            offset: self.visitor_error_offset(self.pos + 1, close),
        })
    }

    fn array(&mut self, depth: usize) -> Result<(), Error> {
        self.enter(depth, b']')?;
        self.pos += 1;
        self.write(b"[");
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.write(b"]");
            return Ok(());
        }
        loop {
            self.value(depth)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.write(b",");
                    self.skip_whitespace();
                }
                Some(b']') => {
                    self.pos += 1;
                    self.write(b"]");
                    return Ok(());
                }
                _ => return Err(self.unexpected("EOF while parsing a list", "expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Error> {
        self.enter(depth, b'}')?;
        let start = self.out.len();
        if self.objects.len() == self.open {
            self.objects.push(OpenObject::default());
        }
        let object = &mut self.objects[self.open];
        object.names.clear();
        object.input_start = self.pos;
        self.open += 1;
        self.pos += 1;
        self.write(b"{");
        let members = self.members(depth);
        self.open -= 1;
        match members {
            Ok(()) => self.close_object(start),
            // A duplicate name before the refusal is what `parse`, which
            // checks names as it reads them, reports instead.
            Err(error) => Err(self.duplicate_in(self.open).unwrap_or(error)),
        }
    }

    fn members(&mut self, depth: usize) -> Result<(), Error> {
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        let object = self.open - 1;
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("EOF while parsing an object", "key must be a string"));
            }
            if self.write_values && !self.objects[object].names.is_empty() {
                self.out.push(b',');
            }
            let name = if self.write_values {
                self.out.len()
            } else {
                self.pos
            };
            self.string(self.write_values)?;
            self.objects[object].names.push(name);
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.unexpected("EOF while parsing an object", "expected `:`"));
            }
            self.pos += 1;
            self.write(b":");
            self.skip_whitespace();
            let value = self.pos;
            self.value(depth)?;
            if depth == 1 {
                if let Some(on_member) = &mut self.on_top_member {
                    // Only set when not writing: `name` is in the input.
                    on_member(&jcs::name(self.input, name), value..self.pos);
                }
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {
                    return Err(
                        self.unexpected("EOF while parsing an object", "expected `,` or `}`")
                    )
                }
            }
        }
    }

    /// Finishes the object whose output began at `start`: refuses a
    /// duplicate name, and puts the members in canonical order.
    fn close_object(&mut self, start: usize) -> Result<(), Error> {
        let names = &self.objects[self.open].names;
        let text = if self.write_values {
            &self.out
        } else {
            self.input
        };
        let in_order = names
            .windows(2)
            .all(|pair| jcs::compare_names(text, pair[0], pair[1]).is_lt());
        if !in_order {
            if let Some(error) = self.duplicate_in(self.open) {
                return Err(error);
            }
        }
        if !self.write_values {
            return Ok(());
        }
        if !in_order {
            // `duplicate_in` left the names sorted.
            reorder(
                &mut self.out,
                start + 1,
                &self.objects[self.open].names,
                &mut self.spare,
            );
        }
        self.out.push(b'}');
        Ok(())
    }

    /// The refusal `parse` gives for the first member of open object
    /// `index` whose name repeats an earlier one, if there is one. Leaves
    /// that object's names sorted by name, then by position.
    fn duplicate_in(&mut self, index: usize) -> Option<Error> {
        let names = &mut self.objects[index].names;
        let text = if self.write_values {
            &self.out
        } else {
            self.input
        };
        names.sort_unstable_by(|&a, &b| jcs::compare_names(text, a, b).then(a.cmp(&b)));
        // Within a run of equal names the first pair's second is the
        // earliest repeat of that name.
        let repeat = names
            .windows(2)
            .filter(|pair| jcs::compare_names(text, pair[0], pair[1]).is_eq())
            .map(|pair| pair[1])
            .min()?;
        let member = names.iter().filter(|&&name| name < repeat).count();
        let name_end = self.member_name_end(self.objects[index].input_start, member);
        let name = jcs::name(text, repeat);
        // Each enclosing object is still reading the member it named last.
        let mut path: Vec<String> = self.objects[..index]
            .iter()
            .filter_map(|outer| outer.names.last().map(|&at| jcs::name(text, at)))
            .collect();
        path.push(name.clone());
        Some(Error::DuplicateMember {
            name,
            field: path.join("."),
            offset: self.visitor_error_offset(name_end, b'}'),
        })
    }

    /// Input offset just past the name of member `member` of the object
    /// whose `{` is at `start`; the object is valid up to there.
    fn member_name_end(&self, start: usize, member: usize) -> usize {
        let input = self.input;
        let mut at = start + 1;
        let mut index = 0;
        loop {
            at = skip_whitespace(input, at);
            at = raw_string_end(input, at);
            if index == member {
                return at;
            }
            at = skip_whitespace(input, at);
            at = skip_whitespace(input, at + 1);
            at = raw_value_end(input, at);
            at = skip_whitespace(input, at) + 1;
            index += 1;
        }
    }

    /// The offset `parse` reports for a refusal its visitor raises inside
    /// the container closed by `close`, with the deserializer at `at`:
    /// `serde_json` first tries to end the container (skipping whitespace,
    /// then eating `close`, or for an array a `,` and whitespace after it),
    /// then reports the byte before its position, or the position itself at
    /// the start of a line.
    fn visitor_error_offset(&self, at: usize, close: u8) -> usize {
        let mut at = skip_whitespace(self.input, at);
        match self.input.get(at) {
            Some(&byte) if byte == close => at += 1,
            Some(b',') if close == b']' => at = skip_whitespace(self.input, at + 1),
            _ => {}
        }
        if at > 0 && self.input[at - 1] != b'\n' {
            at - 1
        } else {
            at
        }
    }
}

/// Puts the members written in `out[body..]`, each starting at its name and
/// separated by commas, in the order of `sorted` (their name offsets).
///
/// The largest member moves once within `out`; only the others are copied
/// out to `spare` and back, so an object holding one large value costs
/// little more than its output.
fn reorder(out: &mut [u8], body: usize, sorted: &[usize], spare: &mut Vec<u8>) {
    let end = |from: usize| jcs::member_end(out, from);
    let (largest, length) = sorted
        .iter()
        .map(|&from| end(from) - from)
        .enumerate()
        .max_by_key(|&(_, length)| length)
        .expect("an object out of order has members");
    // `spare` holds the members before the largest, joined by commas, then
    // each member after it preceded by a comma.
    spare.clear();
    spare.reserve_exact(out.len() - body - length);
    for (index, &from) in sorted[..largest].iter().enumerate() {
        if index > 0 {
            spare.push(b',');
        }
        spare.extend_from_slice(&out[from..end(from)]);
    }
    let before = spare.len();
    for &from in &sorted[largest + 1..] {
        spare.push(b',');
        spare.extend_from_slice(&out[from..end(from)]);
    }
    let from = sorted[largest];
    let target = body + before + usize::from(largest > 0);
    out.copy_within(from..from + length, target);
    out[body..body + before].copy_from_slice(&spare[..before]);
    if largest > 0 {
        out[target - 1] = b',';
    }
    let after = target + length;
    out[after..after + spare.len() - before].copy_from_slice(&spare[before..]);
}

fn skip_whitespace(input: &[u8], mut at: usize) -> usize {
    while matches!(input.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Past the closing quote of the valid string opening at `at`.
fn raw_string_end(input: &[u8], mut at: usize) -> usize {
    at += 1;
    loop {
        match input[at] {
            b'"' => return at + 1,
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
}

/// Past the valid value starting at `at`.
fn raw_value_end(input: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    loop {
        match input.get(at) {
            Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') | None if depth == 0 => {
                return at
            }
            Some(b'"') => {
                at = raw_string_end(input, at);
                if depth == 0 {
                    return at;
                }
                continue;
            }
            Some(b'{' | b'[') => depth += 1,
            Some(b'}' | b']') => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
}
