//! Integers in -2^64 ..= 2^64-1, held the way CBOR heads hold them.

use std::cmp::Ordering;
use std::fmt;

/// An integer in -2^64 ..= 2^64-1.
///
/// Held as a sign and the CBOR argument: non-negative `n` is `(false, n)`,
/// negative `n` is `(true, -1 - n)`. Every pair is a distinct integer and
/// every integer in the range has exactly one pair, so derived equality is
/// numeric equality.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Int {
    negative: bool,
    arg: u64,
}

impl Int {
    /// The least integer, -2^64.
    pub const MIN: Int = Int {
        negative: true,
        arg: u64::MAX,
    };
    /// The greatest integer, 2^64-1.
    pub const MAX: Int = Int {
        negative: false,
        arg: u64::MAX,
    };
    /// Zero.
    pub const ZERO: Int = Int {
        negative: false,
        arg: 0,
    };

    /// The integer a CBOR head of major type 0 (`negative` false) or 1
    /// (`negative` true) with argument `arg` stands for.
    pub const fn from_cbor(negative: bool, arg: u64) -> Int {
        Int { negative, arg }
    }

    /// Whether the integer is below zero.
    pub const fn is_negative(self) -> bool {
        self.negative
    }

    /// The CBOR argument: the value itself, or `-1 - value` when negative.
    pub const fn cbor_argument(self) -> u64 {
        self.arg
    }

    /// The integer as an `i128`; every `Int` fits.
    pub const fn to_i128(self) -> i128 {
        if self.negative {
            -1 - self.arg as i128
        } else {
            self.arg as i128
        }
    }

    /// The `Int` equal to `n`, or `None` outside -2^64 ..= 2^64-1.
    pub fn from_i128(n: i128) -> Option<Int> {
        if n >= 0 {
            u64::try_from(n).ok().map(Int::from)
        } else {
            u64::try_from(-1 - n)
                .ok()
                .map(|arg| Int::from_cbor(true, arg))
        }
    }

    /// The integer as a `u64`, when it is non-negative.
    pub fn to_u64(self) -> Option<u64> {
        (!self.negative).then_some(self.arg)
    }

    /// The integer as an `i64`, when it fits.
    pub fn to_i64(self) -> Option<i64> {
        i64::try_from(self.to_i128()).ok()
    }
}

impl From<u64> for Int {
    fn from(n: u64) -> Int {
        Int::from_cbor(false, n)
    }
}

impl From<i64> for Int {
    fn from(n: i64) -> Int {
        if n >= 0 {
            Int::from_cbor(false, n.unsigned_abs())
        } else {
            // -1 - n is in 0 ..= 2^63-1 for every negative i64.
            Int::from_cbor(true, (-1 - n).unsigned_abs())
        }
    }
}

impl From<u32> for Int {
    fn from(n: u32) -> Int {
        Int::from(u64::from(n))
    }
}

impl From<i32> for Int {
    fn from(n: i32) -> Int {
        Int::from(i64::from(n))
    }
}

impl From<usize> for Int {
    fn from(n: usize) -> Int {
        // usize is at most 64 bits on every supported target.
        Int::from(n as u64)
    }
}

/// Refusal of an `i128` outside -2^64 ..= 2^64-1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntOutOfRange;

impl fmt::Display for IntOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("integer outside -2^64 ..= 2^64-1")
    }
}

impl std::error::Error for IntOutOfRange {}

impl TryFrom<i128> for Int {
    type Error = IntOutOfRange;
    fn try_from(n: i128) -> Result<Int, IntOutOfRange> {
        Int::from_i128(n).ok_or(IntOutOfRange)
    }
}

impl From<Int> for i128 {
    fn from(n: Int) -> i128 {
        n.to_i128()
    }
}

impl Ord for Int {
    fn cmp(&self, other: &Int) -> Ordering {
        self.to_i128().cmp(&other.to_i128())
    }
}

impl PartialOrd for Int {
    fn partial_cmp(&self, other: &Int) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_i128(), f)
    }
}

impl fmt::Debug for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_round_trip_through_i128() {
        for n in [
            0i128,
            1,
            -1,
            23,
            -24,
            i64::MIN as i128,
            u64::MAX as i128,
            -(1i128 << 64),
        ] {
            let int = Int::from_i128(n).unwrap();
            assert_eq!(int.to_i128(), n);
        }
        assert_eq!(Int::from_i128(1i128 << 64), None);
        assert_eq!(Int::from_i128(-(1i128 << 64) - 1), None);
        assert_eq!(Int::from_i128(-(1i128 << 64)), Some(Int::MIN));
        assert_eq!(Int::from_i128(u64::MAX as i128), Some(Int::MAX));
    }

    #[test]
    fn conversions_agree() {
        assert_eq!(Int::from(-1i64), Int::from_cbor(true, 0));
        assert_eq!(Int::from(i64::MIN).to_i128(), i64::MIN as i128);
        assert_eq!(Int::from(i64::MAX).to_i128(), i64::MAX as i128);
        assert_eq!(Int::from(5u64).to_i64(), Some(5));
        assert_eq!(Int::MAX.to_i64(), None);
        assert_eq!(Int::from(-3i32).to_u64(), None);
        assert!(Int::MIN < Int::from(-1i64));
        assert!(Int::from(-1i64) < Int::ZERO);
        assert_eq!(Int::MIN.to_string(), "-18446744073709551616");
    }
}
