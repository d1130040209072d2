//! The fuzz property under plain `cargo test`: no input makes the decoder
//! panic, and whatever decodes re-encodes to exactly the input. Inputs are
//! deterministic mutations of the vectors plus encodings of random values.

#[allow(dead_code)] // The vector notation is unused here.
mod common;

use lab_values::{decode, decode_fact, encode, Int, Map, Value};

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes that start heads the decoder treats specially.
const INTERESTING: [u8; 20] = [
    0x00, 0x17, 0x18, 0x19, 0x1b, 0x1f, 0x20, 0x3b, 0x40, 0x5f, 0x60, 0x7f, 0x80, 0x9f, 0xa0, 0xbf,
    0xd8, 0x27, 0xf6, 0xff,
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, donors: &[Vec<u8>]) {
    match rng.below(8) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 => {
            let i = rng.below(input.len() + 1);
            input.insert(i, rng.next() as u8);
        }
        3 if !input.is_empty() => {
            input.remove(rng.below(input.len()));
        }
        4 => {
            let keep = rng.below(input.len() + 1);
            input.truncate(keep);
        }
        5 => {
            let donor = &donors[rng.below(donors.len())];
            let at = rng.below(input.len() + 1);
            input.splice(at..at, donor.iter().copied());
        }
        6 if !input.is_empty() => {
            let from = rng.below(input.len());
            let to = from + rng.below(input.len() - from) + 1;
            let copy = input[from..to].to_vec();
            input.splice(to..to, copy);
        }
        _ => {
            // Wrap in a one-element tuple or a one-entry map.
            if rng.below(2) == 0 {
                input.insert(0, 0x81);
            } else {
                input.splice(0..0, [0xa1, 0x00]);
            }
        }
    }
}

fn check(input: &[u8]) -> bool {
    let decoded = decode(input);
    if let Ok(value) = &decoded {
        assert_eq!(encode(value), input, "re-encoding of {input:02x?}");
    }
    let fact = decode_fact(input);
    if let Ok(value) = &fact {
        assert!(value.as_fact().is_some());
        assert_eq!(Some(value), decoded.as_ref().ok());
    }
    decoded.is_ok()
}

#[test]
fn mutated_vectors_never_break_the_round_trip() {
    let donors: Vec<Vec<u8>> = common::vectors()
        .iter()
        .map(|v| hex::decode(&v.hex).unwrap())
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    let rounds = 20_000;
    for _ in 0..rounds {
        let mut input = donors[rng.below(donors.len())].clone();
        for _ in 0..=rng.below(4) {
            mutate(&mut rng, &mut input, &donors);
        }
        if check(&input) {
            accepted += 1;
        }
    }
    // Both paths must be exercised for the property to mean anything.
    assert!(accepted > rounds / 20, "only {accepted} mutants decoded");
    assert!(accepted < rounds, "every mutant decoded");
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth >= 6 { 6 } else { 8 };
    match rng.below(kinds) {
        0 => {
            let n = rng.next();
            let n = match rng.below(3) {
                0 => n % 30,
                1 => n % 70_000,
                _ => n,
            };
            Value::Int(Int::from_cbor(rng.below(2) == 0, n))
        }
        1 => Value::Bytes((0..rng.below(30)).map(|_| rng.next() as u8).collect()),
        2 => Value::Label((0..rng.below(30)).map(|_| rng.next() as u8).collect()),
        3 => {
            let chars = ['a', 'z', 'é', '€', '😀', '\0', '\u{301}'];
            Value::Text(
                (0..rng.below(30))
                    .map(|_| chars[rng.below(chars.len())])
                    .collect(),
            )
        }
        4 => [Value::Bool(false), Value::Bool(true)][rng.below(2)].clone(),
        5 => Value::Null,
        6 => Value::Tuple(
            (0..rng.below(5))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Map(
            (0..rng.below(5))
                .map(|_| (random_value(rng, depth + 1), random_value(rng, depth + 1)))
                .collect::<Map>(),
        ),
    }
}

#[test]
fn random_values_round_trip() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for _ in 0..5_000 {
        let value = random_value(&mut rng, 0);
        let bytes = encode(&value);
        assert_eq!(decode(&bytes).as_ref(), Ok(&value));
        assert!(check(&bytes));
    }
}
