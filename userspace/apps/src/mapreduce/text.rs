//! The input: generated documents, one a line, and cutting them into
//! splits at line boundaries.
//!
//! A document is a line holding its id and its words, separated by ASCII
//! whitespace: `17\tlorem ipsum ipsum`.

use std::collections::HashSet;
use std::io;

use crate::rng::SplitMix64;

/// The most input [`generate`] makes: 4 GiB.
pub const MAX_SIZE: usize = 4 << 30;

/// Room past `size` for the last line: an id and at most 16 words of at
/// most 10 letters fit.
const LAST_LINE: usize = 256;

/// Number of distinct words the generator draws from.
pub const VOCABULARY: usize = 4000;

/// Words per generated document: uniform in this range.
const WORDS_PER_DOCUMENT: std::ops::RangeInclusive<u64> = 4..=16;

/// Letters per generated word: uniform in this range.
const LETTERS_PER_WORD: std::ops::RangeInclusive<u64> = 2..=10;

/// At least `size` bytes of documents (whole lines: at most one line more),
/// the same for the same `seed`. Document ids count from 0; words follow a
/// Zipf distribution (the `k`-th most frequent word is drawn with weight
/// `1/k`) over [`VOCABULARY`] generated words, like natural text.
///
/// # Errors
///
/// `EINVAL` if `size` is above [`MAX_SIZE`]; `ENOMEM` if the text does not
/// fit in memory.
pub fn generate(size: usize, seed: u64) -> io::Result<Vec<u8>> {
    if size > MAX_SIZE {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // Allocated once, up front: a size too large fails here, not mid-way.
    let mut text = Vec::new();
    text.try_reserve_exact(size + LAST_LINE)
        .map_err(|_| io::Error::from_raw_os_error(libc::ENOMEM))?;
    let mut rng = SplitMix64(seed);
    let vocabulary = vocabulary(&mut rng);
    let mut cumulative = Vec::with_capacity(vocabulary.len());
    let mut total = 0.0;
    for k in 1..=vocabulary.len() {
        total += 1.0 / k as f64;
        cumulative.push(total);
    }
    let mut id = 0u32;
    while text.len() < size {
        text.extend_from_slice(id.to_string().as_bytes());
        text.push(b'\t');
        for n in 0..rng.in_range(WORDS_PER_DOCUMENT) {
            if n > 0 {
                text.push(b' ');
            }
            let drawn = rng.unit() * total;
            // The first word whose cumulative weight passes the draw (the
            // last, should rounding leave the draw past them all).
            let k = cumulative
                .partition_point(|&c| c <= drawn)
                .min(VOCABULARY - 1);
            // PANIC: `k < VOCABULARY`, the vocabulary's length.
            text.extend_from_slice(vocabulary[k].as_bytes());
        }
        text.push(b'\n');
        id = id.wrapping_add(1);
    }
    Ok(text)
}

/// [`VOCABULARY`] distinct lowercase words, most frequent first.
fn vocabulary(rng: &mut SplitMix64) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut words = Vec::with_capacity(VOCABULARY);
    while words.len() < VOCABULARY {
        let word: String = (0..rng.in_range(LETTERS_PER_WORD))
            .map(|_| char::from(b'a' + rng.in_range(0..=25) as u8))
            .collect();
        if seen.insert(word.clone()) {
            words.push(word);
        }
    }
    words
}

/// Cuts `text` into `parts` consecutive pieces of about equal size, each
/// made of whole lines (a piece may be empty).
pub fn split_at_lines(text: &[u8], parts: usize) -> Vec<&[u8]> {
    let mut pieces = Vec::with_capacity(parts);
    let mut start = 0;
    for k in 1..=parts {
        let end = if k == parts {
            text.len()
        } else {
            line_start_at_or_after(text, share(text.len(), k, parts).max(start))
        };
        // PANIC: `start <= end <= text.len()`: `end` is a line start at or
        // after `start`, or the end of the text.
        pieces.push(&text[start..end]);
        start = end;
    }
    pieces
}

/// `len * k / parts`, rounded down, for `1 <= k <= parts`.
fn share(len: usize, k: usize, parts: usize) -> usize {
    // Widened, as `len * k` may not fit in a usize; the quotient is at most
    // `len`, so it does.
    let share = len as u128 * k as u128 / parts as u128;
    usize::try_from(share).unwrap_or(len)
}

/// The first position at or after `pos` where a line starts (or the end).
fn line_start_at_or_after(text: &[u8], pos: usize) -> usize {
    let Some(before) = pos.checked_sub(1) else {
        return 0;
    };
    // A line starts just after the first newline at or after `pos - 1`.
    match text
        .get(before..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
    {
        Some(newline) => pos + newline,
        None => text.len(),
    }
}

/// One document of `line`: its id and an iterator over its words; `None`
/// for a blank line.
///
/// # Errors
///
/// `EINVAL` if the line does not start with a document id.
pub fn parse_document(line: &[u8]) -> io::Result<Option<(u32, impl Iterator<Item = &[u8]>)>> {
    let mut tokens = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|token| !token.is_empty());
    let Some(id) = tokens.next() else {
        return Ok(None);
    };
    let id = std::str::from_utf8(id)
        .ok()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(Some((id, tokens)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic_and_writes_numbered_lines() {
        let text = generate(50_000, 7).unwrap();
        assert_eq!(text, generate(50_000, 7).unwrap());
        assert_ne!(text, generate(50_000, 8).unwrap());
        assert!(text.len() >= 50_000 && text.len() < 50_000 + 200);
        assert_eq!(text.last(), Some(&b'\n'));
        let lines: Vec<&[u8]> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        for (n, line) in lines.iter().enumerate() {
            let (id, words) = parse_document(line).unwrap().unwrap();
            assert_eq!(id as usize, n);
            assert!(WORDS_PER_DOCUMENT.contains(&(words.count() as u64)));
        }
        assert!(generate(0, 7).unwrap().is_empty());
        let too_big = generate(MAX_SIZE + 1, 7).unwrap_err();
        assert_eq!(too_big.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn word_frequencies_are_skewed() {
        let text = generate(200_000, 1).unwrap();
        let mut counts = std::collections::HashMap::new();
        for line in text.split(|&b| b == b'\n') {
            if let Some((_, words)) = parse_document(line).unwrap() {
                words.for_each(|w| *counts.entry(w).or_insert(0u32) += 1);
            }
        }
        let mut counts: Vec<u32> = counts.into_values().collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let total: u32 = counts.iter().sum();
        // With weights 1/k over 4000 words, the top word is ~11% of all.
        assert!(
            counts[0] > total / 20 && counts[0] < total / 5,
            "{} of {total}",
            counts[0]
        );
        assert!(counts.len() > 1000);
    }

    #[test]
    fn splits_are_whole_lines_and_cover_the_text() {
        let generated = generate(10_000, 3).unwrap();
        let texts: [&[u8]; 5] = [&generated, b"", b"0 a\n", b"0 a\n1 b", b"\n\n0 a\n\n"];
        for text in texts {
            for parts in 1..=7 {
                let pieces = split_at_lines(text, parts);
                assert_eq!(pieces.len(), parts);
                assert_eq!(pieces.concat(), text);
                // Every cut is at the start, the end, or just after a newline.
                let mut cut = 0;
                for piece in &pieces {
                    assert!(cut == 0 || cut == text.len() || text[cut - 1] == b'\n');
                    cut += piece.len();
                }
            }
        }
        let pieces = split_at_lines(&generated, 4);
        for piece in &pieces {
            assert!(piece.len() > generated.len() / 4 - 200, "{}", piece.len());
        }
    }

    #[test]
    fn a_line_must_start_with_its_id() {
        assert!(parse_document(b"  \t ").unwrap().is_none());
        let (id, words) = parse_document(b"42\tx  y\r").unwrap().unwrap();
        assert_eq!((id, words.collect::<Vec<_>>()), (42, vec![&b"x"[..], b"y"]));
        for bad in [&b"x 1"[..], b"-1 a", b"99999999999 a"] {
            let err = parse_document(bad).err().unwrap();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        }
    }
}
