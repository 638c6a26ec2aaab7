//! Order-preserving key encodings.
//!
//! Every backend orders keys by their bytes, so the engine builds keys whose
//! byte order is the order it wants to scan in: big-endian integers, signed
//! integers with the sign bit flipped, and strings escaped so that a shorter
//! string sorts before any longer string it is a prefix of, even inside a
//! composite key (`("a", 2)` < `("a\0", 1)` < `("ab", 0)`).
//!
//! [`KeyBuilder`] writes composite keys, [`KeyReader`] reads them back, and
//! [`prefix_successor`] gives the exclusive end of a prefix scan.

/// The smallest key greater than every key that starts with `prefix`, or
/// `None` when there is none (the prefix is empty or all `0xFF`), in which case
/// a prefix scan runs to the end of the key space.
///
/// ```
/// use acts_store::keys::prefix_successor;
/// assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
/// assert_eq!(prefix_successor(b"a\xff\xff"), Some(b"b".to_vec()));
/// assert_eq!(prefix_successor(b"\xff"), None);
/// ```
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut succ = prefix[..=last].to_vec();
    succ[last] += 1;
    Some(succ)
}

/// `v` as 8 big-endian bytes: byte order equals numeric order.
pub fn encode_u64(v: u64) -> [u8; 8] {
    v.to_be_bytes()
}

/// Reads a value written by [`encode_u64`]; `None` unless `bytes` has 8 bytes.
pub fn decode_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// `v` as 8 bytes whose byte order equals numeric order (negative first).
pub fn encode_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

/// Reads a value written by [`encode_i64`]; `None` unless `bytes` has 8 bytes.
pub fn decode_i64(bytes: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 63)) as i64)
}

/// A timestamp in milliseconds since the Unix epoch (negative before it),
/// encoded so that earlier times sort first.
pub fn encode_timestamp_millis(millis: i64) -> [u8; 8] {
    encode_i64(millis)
}

/// Reads a timestamp written by [`encode_timestamp_millis`].
pub fn decode_timestamp_millis(bytes: &[u8]) -> Option<i64> {
    decode_i64(bytes)
}

/// Builds a composite key from typed components, each encoded so that the
/// byte order of the whole key is the lexicographic order of the components.
///
/// Strings and byte strings are written with `0x00` escaped as `0x00 0xFF`
/// and terminated by `0x00 0x01`, so they may hold any byte, and a string
/// sorts before every longer string it is a prefix of, whatever component
/// follows it. Integers are fixed
/// width. Read a key back with [`KeyReader`] using the same component types.
///
/// ```
/// use acts_store::keys::{KeyBuilder, KeyReader};
/// let key = KeyBuilder::new().str("tasks").str("pid-1").u64(7).finish();
/// let mut r = KeyReader::new(&key);
/// assert_eq!(r.str().as_deref(), Some("tasks"));
/// assert_eq!(r.str().as_deref(), Some("pid-1"));
/// assert_eq!(r.u64(), Some(7));
/// assert!(r.is_done());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyBuilder {
    buf: Vec<u8>,
}

impl KeyBuilder {
    /// An empty key.
    pub fn new() -> Self {
        // Room for a typical key (a collection, a field and an id or two)
        // without growing.
        Self {
            buf: Vec::with_capacity(64),
        }
    }

    /// Appends a string component.
    pub fn str(self, s: &str) -> Self {
        self.bytes(s.as_bytes())
    }

    /// Appends a byte-string component (escaped and terminated).
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.push_escaped(b);
        self.buf.extend_from_slice(&[0, 1]);
        self
    }

    fn push_escaped(&mut self, b: &[u8]) {
        // Runs without a 0x00 are copied whole (ids and names have none).
        self.buf.reserve(b.len() + 2);
        let mut runs = b.split(|&byte| byte == 0);
        if let Some(first) = runs.next() {
            self.buf.extend_from_slice(first);
        }
        for run in runs {
            self.buf.extend_from_slice(&[0, 0xFF]);
            self.buf.extend_from_slice(run);
        }
    }

    /// Appends the *start* of a string component: `s` escaped like
    /// [`str`](Self::str) but not terminated. The key so far is then a byte
    /// prefix of every key whose next component begins with `s` — a scan
    /// prefix ("every id starting with `pid/`").
    pub fn str_prefix(mut self, s: &str) -> Self {
        self.push_escaped(s.as_bytes());
        self
    }

    /// Appends an unsigned integer component.
    pub fn u64(mut self, v: u64) -> Self {
        self.buf.extend_from_slice(&encode_u64(v));
        self
    }

    /// Appends a signed integer component (also used for timestamps).
    pub fn i64(mut self, v: i64) -> Self {
        self.buf.extend_from_slice(&encode_i64(v));
        self
    }

    /// Appends raw bytes with no escaping: only for a last component, or
    /// for a key that is to be used as a scan prefix.
    pub fn raw(mut self, b: &[u8]) -> Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// The key bytes so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The finished key.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a key written by [`KeyBuilder`], component by component. Each read
/// returns `None` when the remaining bytes are not a well-formed component of
/// that type (the key is from another layout, or corrupt).
#[derive(Debug, Clone)]
pub struct KeyReader<'a> {
    rest: &'a [u8],
}

impl<'a> KeyReader<'a> {
    /// A reader at the start of `key`.
    pub fn new(key: &'a [u8]) -> Self {
        Self { rest: key }
    }

    /// Reads a byte-string component.
    pub fn bytes(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let byte = *self.rest.get(i)?;
            if byte == 0 {
                match *self.rest.get(i + 1)? {
                    0xFF => {
                        out.push(0);
                        i += 2;
                        continue;
                    }
                    1 => {
                        self.rest = &self.rest[i + 2..];
                        return Some(out);
                    }
                    _ => return None,
                }
            }
            out.push(byte);
            i += 1;
        }
    }

    /// Reads a string component (`None` if it is not UTF-8).
    pub fn str(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }

    /// Reads an unsigned integer component.
    pub fn u64(&mut self) -> Option<u64> {
        let (head, tail) = self.rest.split_at_checked(8)?;
        self.rest = tail;
        decode_u64(head)
    }

    /// Reads a signed integer component.
    pub fn i64(&mut self) -> Option<i64> {
        let (head, tail) = self.rest.split_at_checked(8)?;
        self.rest = tail;
        decode_i64(head)
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Whether the whole key has been read.
    pub fn is_done(&self) -> bool {
        self.rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
    enum Part {
        Bytes(Vec<u8>),
        Int(i64),
    }

    fn encode(parts: &[Part]) -> Vec<u8> {
        parts
            .iter()
            .fold(KeyBuilder::new(), |k, p| match p {
                Part::Bytes(b) => k.bytes(b),
                Part::Int(i) => k.i64(*i),
            })
            .finish()
    }

    fn bytes_strategy() -> impl Strategy<Value = Vec<u8>> {
        // Bias towards the bytes that matter for escaping and ordering.
        prop::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()],
            0..6,
        )
    }

    fn str_strategy() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![Just('\0'), Just('a'), Just('/'), any::<char>()],
            0..5,
        )
        .prop_map(|c| c.into_iter().collect())
    }

    proptest! {
        #[test]
        fn str_prefix_is_a_key_prefix_exactly_when_the_string_starts_with_it(
            prefix in str_strategy(),
            s in str_strategy(),
        ) {
            let key = KeyBuilder::new().str("c").str(&s).u64(1).finish();
            let scan = KeyBuilder::new().str("c").str_prefix(&prefix).finish();
            prop_assert_eq!(key.starts_with(&scan), s.starts_with(&prefix));
        }

        #[test]
        fn u64_order_is_numeric_order(a: u64, b: u64) {
            prop_assert_eq!(a.cmp(&b), encode_u64(a).cmp(&encode_u64(b)));
            prop_assert_eq!(decode_u64(&encode_u64(a)), Some(a));
        }

        #[test]
        fn i64_order_is_numeric_order(a: i64, b: i64) {
            prop_assert_eq!(a.cmp(&b), encode_i64(a).cmp(&encode_i64(b)));
            prop_assert_eq!(decode_i64(&encode_i64(a)), Some(a));
        }

        #[test]
        fn composite_keys_sort_like_their_components(
            a in prop::collection::vec(bytes_strategy(), 1..4),
            b in prop::collection::vec(bytes_strategy(), 1..4),
            n in any::<i64>(),
            m in any::<i64>(),
        ) {
            let mut pa: Vec<Part> = a.into_iter().map(Part::Bytes).collect();
            let mut pb: Vec<Part> = b.into_iter().map(Part::Bytes).collect();
            pa.push(Part::Int(n));
            pb.push(Part::Int(m));
            // Same layout when both have the same number of byte components.
            if pa.len() == pb.len() {
                prop_assert_eq!(pa.cmp(&pb), encode(&pa).cmp(&encode(&pb)));
            }
        }

        #[test]
        fn composite_keys_round_trip(parts in prop::collection::vec(bytes_strategy(), 0..4), n: u64) {
            let key = parts.iter().fold(KeyBuilder::new(), |k, p| k.bytes(p)).u64(n).finish();
            let mut r = KeyReader::new(&key);
            for p in &parts {
                prop_assert_eq!(r.bytes(), Some(p.clone()));
            }
            prop_assert_eq!(r.u64(), Some(n));
            prop_assert!(r.is_done());
        }

        #[test]
        fn prefix_successor_bounds_exactly_the_prefixed_keys(
            prefix in bytes_strategy(),
            key in bytes_strategy(),
        ) {
            let has_prefix = key.starts_with(&prefix);
            let below_succ = match prefix_successor(&prefix) {
                Some(s) => key < s,
                None => true,
            };
            prop_assert_eq!(has_prefix, key >= prefix && below_succ);
        }
    }

    #[test]
    fn reader_rejects_truncated_components() {
        assert_eq!(KeyReader::new(b"abc").bytes(), None);
        assert_eq!(KeyReader::new(&[1, 2, 3]).u64(), None);
        assert_eq!(KeyReader::new(b"a\0\x02").bytes(), None);
        let mut r = KeyReader::new(b"a\0\xff\0\x01rest");
        assert_eq!(r.bytes(), Some(b"a\0".to_vec()));
        assert_eq!(r.rest(), b"rest");
    }
}
