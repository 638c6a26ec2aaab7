//! [`Chunked`]: a growable array stored in fixed-size chunks.
//!
//! A `Vec` doubles its buffer as it grows: a table of 20,001 entries holds
//! room for 32,768, and while it grows the old and the new buffer are both
//! alive. A process's task table and its dynamic nodes grow one entry at a
//! time for as long as the process runs, so they keep their entries in
//! chunks of [`CHUNK`] instead: the slack is at most one chunk, and growing
//! never copies what is stored.

use std::ops::{Index, IndexMut};

/// Entries per chunk.
pub const CHUNK: usize = 1024;

/// A growable array of `T` in chunks of [`CHUNK`] entries, indexed like a
/// slice (an index past the end panics, as a slice's does).
#[derive(Debug, Clone, PartialEq)]
pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    /// An empty array.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `value`. The first chunk grows as a `Vec` does (a small
    /// table stays small); every later one is allocated whole.
    pub fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(value),
            Some(_) => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                self.chunks.push(chunk);
            }
            None => self.chunks.push(vec![value]),
        }
        self.len += 1;
    }

    /// The entry at `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<'a, T> IntoIterator for &'a Chunked<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Self::new();
        for v in iter {
            out.push(v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_indexes_iterates_and_grows_like_a_vec_across_chunks() {
        let n = CHUNK * 2 + 7;
        let mut c: Chunked<usize> = (0..n).collect();
        let v: Vec<usize> = (0..n).collect();
        assert_eq!(c.len(), n);
        assert!(c.iter().eq(v.iter()));
        assert!(c.iter().rev().eq(v.iter().rev()));
        for i in [0, CHUNK - 1, CHUNK, 2 * CHUNK, n - 1] {
            assert_eq!((c[i], c.get(i)), (i, Some(&i)));
        }
        assert_eq!(c.get(n), None);
        c[CHUNK] = 0;
        c[1] = 5;
        assert_eq!((c[0], c[1], c[CHUNK], c[CHUNK + 1]), (0, 5, 0, CHUNK + 1));
        assert!((&c).into_iter().eq(c.iter()));
        // Growing never reallocates a full chunk: one chunk of slack.
        assert_eq!(c.chunks.len(), 3);
        assert!(c.chunks.iter().all(|ch| ch.capacity() == CHUNK));
        // A small array is as small as a `Vec`.
        let small: Chunked<u64> = (0..3).collect();
        assert!(small.chunks[0].capacity() < 8);
        assert!(Chunked::<u8>::new().is_empty());
    }
}
