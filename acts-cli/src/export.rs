//! `acts export` and `acts import`: moving everything a store holds to a
//! store of another backend (redb → PostgreSQL, say).
//!
//! The file is store-neutral: every backend keeps the same pairs (the
//! `KvStore` contract every backend passes), so an export is the store's
//! pairs — models and their versions, processes with their tasks and
//! scopes, deliveries, channels, triggers' state, the indexes, the store's
//! format fact — one JSON object a line, streamed:
//!
//! ```text
//! {"acts_export":1,"id":"…","written_by":"acts 0.1.0","source":"redb:…","created_at":…}
//! {"k":"<base64 key>","v":"<base64 value>"}            (one per pair, in key order)
//! {"end":{"pairs":N,"bytes":B,"sha256":"…","holds":{"models":…,"processes":…,"by_state":{…}}}}
//! ```
//!
//! An export reads a store nobody serves (an engine that resumes nothing
//! holds it meanwhile) and is written to `.NAME.partial` beside it (as a
//! backup is), synced, and renamed when whole. An import fills an empty store; each batch records how far it
//! got (a pair of its own in the target), so an import cut short (Ctrl-C,
//! a crash, a store outage) goes on from there when run again with the
//! same file. At the end the pair count and checksum are compared, the
//! record removed, and the store opened and counted: it must hold what the
//! source held.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use acts::{Clock, SystemClock};
use acts_store::backup::{partial_path, sync_parent};
use acts_store::keys::KeyBuilder;
use acts_store::{BatchOp, KvStore, ScanRange};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::failure::Failure;
use crate::session::open_engine;

/// The version of the file this acts writes (and the newest it reads).
const VERSION: u64 = 1;
/// Pairs read from the store, or written to it, per batch.
const CHUNK_PAIRS: usize = 1024;
/// Bytes written to the target per batch (a batch ends at either bound).
const CHUNK_BYTES: usize = 4 << 20;
/// The longest line an import reads (a pair's key and value, base64): a
/// longer one is damage, not a pair.
const MAX_LINE: u64 = 96 << 20;

/// The file's first line.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    acts_export: u64,
    /// Names this export (an import goes on only with the same file).
    id: String,
    written_by: String,
    source: String,
    created_at: i64,
}

/// A pair.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PairLine {
    k: String,
    v: String,
}

/// What the last line says of the whole.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct End {
    pairs: u64,
    bytes: u64,
    sha256: String,
    holds: acts::Census,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndLine {
    end: End,
}

/// How far an import got: the pair of its own it keeps in the target.
#[derive(Debug, Serialize, Deserialize)]
struct Progress {
    id: String,
    pairs: u64,
}

fn progress_key() -> Vec<u8> {
    KeyBuilder::new().str("import").str("progress").finish()
}

/// The running checksum of the pairs: each key and value with its length.
struct Checksum(Sha256);

impl Checksum {
    fn new() -> Self {
        Self(Sha256::new())
    }

    fn add(&mut self, key: &[u8], value: &[u8]) {
        self.0.update((key.len() as u64).to_be_bytes());
        self.0.update(key);
        self.0.update((value.len() as u64).to_be_bytes());
        self.0.update(value);
    }

    fn hex(self) -> String {
        self.0
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// `acts export --to PATH`: every pair of the store into a new file.
pub(crate) async fn export(url: &str, to: &Path, json_out: bool) -> Result<u8, Failure> {
    if to.exists() {
        return Err(Failure::input(format!(
            "{} exists: an export never writes over a file (choose another path, or remove it)",
            to.display()
        )));
    }
    // An engine that resumes nothing checks that nobody serves the store
    // (its lease, its owner record) and counts it; then the pairs are read
    // with nothing running.
    let packages = acts_packages::PackagesConfig::default();
    let engine = open_engine(url, None, &packages).await?;
    let holds = engine.executor().proc().census().await;
    let store = engine.storage().store();
    engine.close().await;
    drop(engine);
    let started = Instant::now();
    let written = match holds {
        Ok(holds) => write_export(&store, holds, url, to).await,
        Err(e) => Err(Failure::run(format!(
            "cannot count what the store holds: {e}"
        ))),
    };
    drop(store);
    crate::owner::release();
    let end = written.inspect_err(|_| {
        let _ = std::fs::remove_file(partial_path(to));
    })?;
    let millis = started.elapsed().as_millis();
    report(
        json_out,
        json!({"path": to, "pairs": end.pairs, "bytes": end.bytes, "millis": millis, "holds": end.holds}),
        format!(
            "exported {} pairs ({} bytes) to {} in {millis} ms; it holds {}",
            end.pairs,
            end.bytes,
            to.display(),
            end.holds
        ),
    );
    Ok(0)
}

async fn write_export(
    store: &Arc<dyn KvStore>,
    holds: acts::Census,
    url: &str,
    to: &Path,
) -> Result<End, Failure> {
    let partial = partial_path(to);
    let io = |e: std::io::Error| Failure::run(format!("cannot write {}: {e}", partial.display()));
    let file = std::fs::File::create(&partial).map_err(io)?;
    let mut out = BufWriter::new(file);
    let header = Header {
        acts_export: VERSION,
        id: nanoid::nanoid!(),
        written_by: format!("acts {}", env!("CARGO_PKG_VERSION")),
        source: acts::redacted_url(url),
        created_at: SystemClock.now_millis(),
    };
    line(&mut out, &header).map_err(io)?;
    let mut sum = Checksum::new();
    let (mut pairs, mut bytes) = (0u64, 0u64);
    let mut range = ScanRange::all().with_limit(CHUNK_PAIRS);
    loop {
        let page = store
            .scan(range.clone())
            .await
            .map_err(|e| Failure::run(format!("cannot read the store: {e}")))?;
        for p in &page {
            sum.add(&p.key, &p.value);
            pairs += 1;
            bytes += (p.key.len() + p.value.len()) as u64;
            let pair = PairLine {
                k: B64.encode(&p.key),
                v: B64.encode(&p.value),
            };
            line(&mut out, &pair).map_err(io)?;
        }
        match page.last() {
            Some(last) if page.len() == CHUNK_PAIRS => {
                range.start = std::ops::Bound::Excluded(last.key.clone());
            }
            _ => break,
        }
    }
    let end = End {
        pairs,
        bytes,
        sha256: sum.hex(),
        holds,
    };
    line(&mut out, &json!({ "end": end })).map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&partial, to)
        .and_then(|()| sync_parent(to))
        .map_err(|e| Failure::run(format!("cannot put the export at {}: {e}", to.display())))?;
    Ok(end)
}

fn line(out: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

fn report(json_out: bool, object: Value, text: String) {
    if json_out {
        println!("{object}");
    } else {
        println!("{text}");
    }
}

/// Reads the file's lines, each at most [`MAX_LINE`] bytes.
struct Lines {
    reader: BufReader<std::fs::File>,
    path: PathBuf,
    number: u64,
}

impl Lines {
    fn open(path: &Path) -> Result<Self, Failure> {
        let file = std::fs::File::open(path).map_err(|e| {
            Failure::input(format!("cannot read the export {}: {e}", path.display()))
        })?;
        Ok(Self {
            reader: BufReader::new(file),
            path: path.to_path_buf(),
            number: 0,
        })
    }

    fn damaged(&self, what: impl std::fmt::Display) -> Failure {
        Failure::input(format!(
            "{}: line {}: {what} (is it a file `acts export` wrote, whole?)",
            self.path.display(),
            self.number
        ))
    }

    /// The next line (`None`: the file ended).
    fn next_line(&mut self) -> Result<Option<String>, Failure> {
        self.number += 1;
        let mut buf = Vec::new();
        let read = (&mut self.reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| self.damaged(format!("cannot read: {e}")))?;
        if read == 0 {
            return Ok(None);
        }
        if buf.last() != Some(&b'\n') {
            return Err(if buf.len() as u64 > MAX_LINE {
                self.damaged(format!("longer than {MAX_LINE} bytes"))
            } else {
                self.damaged("it ends inside a line")
            });
        }
        buf.pop();
        String::from_utf8(buf)
            .map(Some)
            .map_err(|_| self.damaged("not UTF-8"))
    }

    fn parse<T: serde::de::DeserializeOwned>(&self, text: &str, what: &str) -> Result<T, Failure> {
        serde_json::from_str(text).map_err(|e| self.damaged(format!("not {what}: {e}")))
    }
}

/// One line after the header: a pair, or the end.
enum Item {
    Pair(Vec<u8>, Vec<u8>),
    End(End),
}

fn next_item(lines: &mut Lines) -> Result<Item, Failure> {
    let Some(text) = lines.next_line()? else {
        return Err(lines.damaged("the file ends before its end line: the export is incomplete"));
    };
    if text.starts_with("{\"end\"") {
        let end: EndLine = lines.parse(&text, "the end line")?;
        return Ok(Item::End(end.end));
    }
    let pair: PairLine = lines.parse(&text, "a pair")?;
    let decode = |s: &str| {
        B64.decode(s)
            .map_err(|e| lines.damaged(format!("not base64: {e}")))
    };
    Ok(Item::Pair(decode(&pair.k)?, decode(&pair.v)?))
}

/// `acts import --from PATH`: the export's pairs into an empty store (or
/// on from where an import of the same file stopped).
pub(crate) async fn import(url: &str, from: &Path, json_out: bool) -> Result<u8, Failure> {
    let mut lines = Lines::open(from)?;
    let header = match lines.next_line()? {
        Some(text) => lines.parse::<Header>(&text, "an export's first line")?,
        None => return Err(lines.damaged("the file is empty")),
    };
    if header.acts_export > VERSION {
        return Err(Failure::input(format!(
            "{} is an export of version {} (written by {}); this acts reads versions up to {VERSION}: import it with that acts or a later one",
            from.display(),
            header.acts_export,
            header.written_by
        )));
    }
    let store = crate::session::open_store(url).await?;
    crate::owner::hold(url);
    let started = Instant::now();
    let imported = fill(&store, &mut lines, &header).await;
    drop(store);
    crate::owner::release();
    let (end, skipped) = imported?;
    let millis = started.elapsed().as_millis();
    // Opened as any start opens it, and counted.
    let holds = acts::census_of(url)
        .await
        .map_err(|e| Failure::run(format!("the imported store is not usable: {e}")))?;
    if holds != end.holds {
        return Err(Failure::run(format!(
            "the imported store holds {holds}, the export says {}: the copy is not whole",
            end.holds
        )));
    }
    report(
        json_out,
        json!({"from": from, "pairs": end.pairs, "bytes": end.bytes, "resumed_after": skipped, "millis": millis, "holds": holds}),
        format!(
            "imported {} pairs ({} bytes) from {}{} in {millis} ms; it holds {holds}",
            end.pairs,
            end.bytes,
            from.display(),
            if skipped > 0 {
                format!(" (going on after pair {skipped})")
            } else {
                String::new()
            }
        ),
    );
    Ok(0)
}

/// Where an import into `store` starts: after the pairs an earlier import
/// of the same export wrote, or at the first into an empty store.
async fn resume_point(store: &Arc<dyn KvStore>, header: &Header) -> Result<u64, Failure> {
    let read = |e: acts_store::StoreError| Failure::run(format!("cannot read the store: {e}"));
    if let Some(bytes) = store.get(&progress_key()).await.map_err(read)? {
        let p: Progress = serde_json::from_slice(&bytes)
            .map_err(|e| Failure::run(format!("the store's import record is unreadable: {e}")))?;
        if p.id != header.id {
            return Err(Failure::input(format!(
                "the store holds part of another export ({}): finish that import, or import into an empty store",
                p.id
            )));
        }
        return Ok(p.pairs);
    }
    let any = store
        .scan(ScanRange::all().with_limit(1))
        .await
        .map_err(read)?;
    if !any.is_empty() {
        return Err(Failure::input(
            "the store is not empty: an import fills an empty store (a new file, namespace or database)",
        ));
    }
    Ok(0)
}

async fn fill(
    store: &Arc<dyn KvStore>,
    lines: &mut Lines,
    header: &Header,
) -> Result<(End, u64), Failure> {
    let skip = resume_point(store, header).await?;
    let write = |e: acts_store::StoreError| {
        Failure::run(format!(
            "cannot write to the store: {e} (run the same import again to go on)"
        ))
    };
    let mut sum = Checksum::new();
    let (mut pairs, mut bytes) = (0u64, 0u64);
    let mut batch: Vec<BatchOp> = Vec::new();
    let mut batch_bytes = 0usize;
    let end = loop {
        match next_item(lines)? {
            Item::Pair(k, v) => {
                sum.add(&k, &v);
                pairs += 1;
                bytes += (k.len() + v.len()) as u64;
                if pairs <= skip {
                    continue;
                }
                batch_bytes += k.len() + v.len();
                batch.push(BatchOp::put(k, v));
                if batch.len() >= CHUNK_PAIRS || batch_bytes >= CHUNK_BYTES {
                    batch.push(progress_op(header, pairs));
                    store
                        .batch(std::mem::take(&mut batch))
                        .await
                        .map_err(write)?;
                    batch_bytes = 0;
                }
            }
            Item::End(end) => break end,
        }
    };
    let sha256 = sum.hex();
    if end.pairs != pairs || end.bytes != bytes || end.sha256 != sha256 {
        return Err(lines.damaged(format!(
            "the file holds {pairs} pairs ({bytes} bytes, sha256 {sha256}); its end line says {} ({} bytes, sha256 {}): it was changed or cut",
            end.pairs, end.bytes, end.sha256
        )));
    }
    if pairs < skip {
        return Err(lines.damaged("the store's import record is past the file's end"));
    }
    batch.push(BatchOp::delete(progress_key()));
    store.batch(batch).await.map_err(write)?;
    Ok((end, skip))
}

fn progress_op(header: &Header, pairs: u64) -> BatchOp {
    let record = Progress {
        id: header.id.clone(),
        pairs,
    };
    // A struct of a string and a number always serializes.
    BatchOp::put(
        progress_key(),
        serde_json::to_vec(&record).unwrap_or_default(),
    )
}
