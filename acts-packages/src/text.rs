//! Byte-size helpers shared by both packages.

/// At most the last `max` bytes of `bytes` as text (lossy UTF-8), with
/// a `…` in front when something was cut.
pub(crate) fn tail(bytes: &[u8], max: usize) -> String {
    if bytes.len() <= max {
        return String::from_utf8_lossy(bytes).trim_end().to_owned();
    }
    let cut = &bytes[bytes.len() - max..];
    format!("…{}", String::from_utf8_lossy(cut).trim_end())
}

/// At most the first `max` bytes of `text`, cut on a character
/// boundary, with a `…` after when something was cut.
pub(crate) fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
