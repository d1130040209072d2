//! Why `labctl` stops without success, and the exit code of each reason.
//!
//! The refusal table ([`REFUSALS`]) is the one place that maps a service
//! refusal code to an exit code; `docs/labctl.md` documents the same table.
//! The other codes follow `sysexits.h`.

use std::fmt;

/// Bad arguments (EX_USAGE), including a grant that would widen its parent.
pub const EXIT_USAGE: u8 = 64;
/// A malformed input file: key, grants or JSON body (EX_DATAERR).
pub const EXIT_DATA: u8 = 65;
/// An input file that cannot be opened (EX_NOINPUT).
pub const EXIT_NO_INPUT: u8 = 66;
/// The service cannot be reached, or the connection broke (EX_UNAVAILABLE).
pub const EXIT_TRANSPORT: u8 = 69;
/// The peer does not speak the coordination protocol: no `Lab-Service:
/// coord`, a malformed HTTP answer, or an answer that is not the JSON it
/// should be (EX_SOFTWARE).
pub const EXIT_PROTOCOL: u8 = 70;
/// An output file cannot be created, e.g. a key file that exists
/// (EX_CANTCREAT).
pub const EXIT_CANT_CREATE: u8 = 73;
/// Writing the output failed (EX_IOERR).
pub const EXIT_IO: u8 = 74;

/// Each refusal code of the specification's Errors table: its HTTP status
/// and the exit code `labctl` ends with.
pub const REFUSALS: &[(&str, u16, u8)] = &[
    ("invalid", 400, 2),
    ("invalid_cursor", 400, 2),
    ("invalid_record", 400, 2),
    ("structural", 400, 2),
    ("not_found", 404, 3),
    ("exists", 409, 4),
    ("conflict", 409, 4),
    ("idempotency_mismatch", 409, 4),
    ("unresolved", 409, 4),
    ("unverified", 401, 5),
    ("denied", 403, 6),
    ("limit_exceeded", 413, 7),
    ("unavailable", 503, 8),
    ("internal", 500, 9),
    ("not_implemented", 500, 9),
];

/// The exit code of a refusal: by its code when the code is in
/// [`REFUSALS`], otherwise by the HTTP status (a proxy's answer, an unknown
/// code, a 405); a status that is no refusal at all is a protocol error.
pub fn refusal_exit_code(code: Option<&str>, status: u16) -> u8 {
    if let Some(exit) = code.and_then(|code| {
        REFUSALS
            .iter()
            .find(|(name, _, _)| *name == code)
            .map(|&(_, _, exit)| exit)
    }) {
        return exit;
    }
    match status {
        401 => 5,
        403 => 6,
        404 => 3,
        409 => 4,
        413 => 7,
        503 => 8,
        400..=499 => 2,
        500..=599 => 9,
        _ => EXIT_PROTOCOL,
    }
}

/// A refusal as it arrived: the status, the envelope's `error` and
/// `message` when the body is one, and the body.
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    pub code: Option<String>,
    pub message: Option<String>,
    /// The envelope, pretty-printed, or the body as text when it is not
    /// JSON.
    pub body: String,
}

impl Refusal {
    /// Reads a refusal from a non-2xx answer's status and body.
    pub fn from_answer(status: u16, body: &[u8]) -> Refusal {
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(value) => Refusal {
                status,
                code: value["error"].as_str().map(str::to_owned),
                message: value["message"].as_str().map(str::to_owned),
                body: serde_json::to_string_pretty(&value).unwrap_or_default(),
            },
            Err(_) => Refusal {
                status,
                code: None,
                message: None,
                body: String::from_utf8_lossy(body).into_owned(),
            },
        }
    }

    pub fn exit_code(&self) -> u8 {
        refusal_exit_code(self.code.as_deref(), self.status)
    }
}

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Data(String),
    NoInput(String),
    Transport(String),
    Protocol(String),
    CantCreate(String),
    Io(String),
    /// `health` found a failing check (the answer was 503): exit 8, like
    /// `unavailable`.
    Unhealthy(String),
    /// `verify-admission` found a check that fails: exit 5, like
    /// `unverified`.
    Unverified(String),
    Refused(Refusal),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => EXIT_USAGE,
            Failure::Data(_) => EXIT_DATA,
            Failure::NoInput(_) => EXIT_NO_INPUT,
            Failure::Transport(_) => EXIT_TRANSPORT,
            Failure::Protocol(_) => EXIT_PROTOCOL,
            Failure::CantCreate(_) => EXIT_CANT_CREATE,
            Failure::Io(_) => EXIT_IO,
            Failure::Unhealthy(_) => refusal_exit_code(Some("unavailable"), 503),
            Failure::Unverified(_) => refusal_exit_code(Some("unverified"), 401),
            Failure::Refused(refusal) => refusal.exit_code(),
        }
    }

    /// A failure to open or read the input file `path`.
    pub fn reading(path: &std::path::Path, err: std::io::Error) -> Failure {
        let text = format!("cannot read {}: {err}", path.display());
        if err.kind() == std::io::ErrorKind::NotFound
            || err.kind() == std::io::ErrorKind::PermissionDenied
        {
            Failure::NoInput(text)
        } else {
            Failure::Io(text)
        }
    }
}

impl fmt::Display for Failure {
    /// The one-line summary printed on stderr.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(text)
            | Failure::Data(text)
            | Failure::NoInput(text)
            | Failure::CantCreate(text)
            | Failure::Io(text)
            | Failure::Unhealthy(text)
            | Failure::Unverified(text) => f.write_str(text),
            Failure::Transport(text) => write!(f, "transport: {text}"),
            Failure::Protocol(text) => write!(f, "protocol error: {text}"),
            Failure::Refused(refusal) => {
                let code = refusal.code.as_deref().unwrap_or("(no refusal code)");
                write!(f, "refused: {code} (HTTP {})", refusal.status)?;
                if let Some(message) = &refusal.message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_code_has_its_exit_code() {
        let expected = [
            ("invalid", 2),
            ("invalid_cursor", 2),
            ("invalid_record", 2),
            ("structural", 2),
            ("not_found", 3),
            ("exists", 4),
            ("conflict", 4),
            ("idempotency_mismatch", 4),
            ("unresolved", 4),
            ("unverified", 5),
            ("denied", 6),
            ("limit_exceeded", 7),
            ("unavailable", 8),
            ("internal", 9),
            ("not_implemented", 9),
        ];
        assert_eq!(REFUSALS.len(), expected.len());
        for (code, exit) in expected {
            let status = REFUSALS.iter().find(|r| r.0 == code).unwrap().1;
            assert_eq!(refusal_exit_code(Some(code), status), exit, "{code}");
            // The status alone leads to the same code.
            assert_eq!(refusal_exit_code(None, status), exit, "{code} by status");
        }
    }

    #[test]
    fn unknown_codes_fall_back_to_the_status() {
        assert_eq!(refusal_exit_code(Some("teapot"), 405), 2);
        assert_eq!(refusal_exit_code(None, 502), 9);
        assert_eq!(refusal_exit_code(None, 302), EXIT_PROTOCOL);
        assert_eq!(refusal_exit_code(Some("denied"), 500), 6);
    }

    #[test]
    fn refusal_envelope_and_summary() {
        let refusal = Refusal::from_answer(
            409,
            br#"{"error":"conflict","message":"cutoff moved","details":{"expected":3,"actual":4}}"#,
        );
        assert_eq!(refusal.exit_code(), 4);
        assert_eq!(
            Failure::Refused(refusal).to_string(),
            "refused: conflict (HTTP 409): cutoff moved"
        );
        let proxy = Refusal::from_answer(413, b"<html>too large</html>");
        assert_eq!(proxy.code, None);
        assert_eq!(proxy.exit_code(), 7);
        assert_eq!(proxy.body, "<html>too large</html>");
    }

    #[test]
    fn local_failures_follow_sysexits() {
        assert_eq!(Failure::Usage(String::new()).exit_code(), 64);
        assert_eq!(Failure::Data(String::new()).exit_code(), 65);
        assert_eq!(Failure::NoInput(String::new()).exit_code(), 66);
        assert_eq!(Failure::Transport(String::new()).exit_code(), 69);
        assert_eq!(Failure::Protocol(String::new()).exit_code(), 70);
        assert_eq!(Failure::CantCreate(String::new()).exit_code(), 73);
        assert_eq!(Failure::Io(String::new()).exit_code(), 74);
        assert_eq!(Failure::Unhealthy(String::new()).exit_code(), 8);
    }
}
