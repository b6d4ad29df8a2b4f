//! The single-process reference for each job: the plainest implementation,
//! sharing no code with the engine, that its results are checked against.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::Output;

/// Calls `visit` with each word of `input` and the id of its document.
fn for_each_word<'a>(input: &'a [u8], mut visit: impl FnMut(u32, &'a str)) -> io::Result<()> {
    let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
    let text = std::str::from_utf8(input).map_err(|_| invalid())?;
    for line in text.lines() {
        let mut tokens = line.split_ascii_whitespace();
        if let Some(id) = tokens.next() {
            let id = id.parse().map_err(|_| invalid())?;
            tokens.for_each(|word| visit(id, word));
        }
    }
    Ok(())
}

/// Every word and the number of times it occurs, sorted by word.
///
/// # Errors
///
/// `EINVAL` if the input is not UTF-8 or a line does not start with an id.
pub fn word_count(input: &[u8]) -> io::Result<Output<u64>> {
    let mut counts = BTreeMap::<&str, u64>::new();
    for_each_word(input, |_, word| *counts.entry(word).or_default() += 1)?;
    Ok(counts
        .into_iter()
        .map(|(word, count)| (word.as_bytes().to_vec(), count))
        .collect())
}

/// Every word and the ids of the documents it occurs in, sorted by word.
///
/// # Errors
///
/// As [`word_count`].
pub fn inverted_index(input: &[u8]) -> io::Result<Output<Vec<u32>>> {
    let mut index = BTreeMap::<&str, BTreeSet<u32>>::new();
    for_each_word(input, |id, word| {
        index.entry(word).or_default().insert(id);
    })?;
    Ok(index
        .into_iter()
        .map(|(word, ids)| (word.as_bytes().to_vec(), ids.into_iter().collect()))
        .collect())
}
