//! Reads of a [`Collection`]'s indexes alone: row ids (and index values)
//! straight from the entries, no row read — what a boot count or a
//! bounded due-time scan needs.

use acts_store::ScanRange;
use acts_store::keys::KeyReader;

use super::collection::{Collection, CollectionError, IndexValue, Row};

/// Index entries read per scan by [`Collection::index_ids`] (entries are
/// small: a key and an id).
const INDEX_CHUNK: usize = 4096;

impl<T: Row> Collection<T> {
    /// The ids of the rows whose indexed `field` equals `value`, read from
    /// the index alone (no row is read), in chunks handed to `each`.
    /// `field` must be indexed (or answered by a composite index).
    pub async fn index_ids(
        &self,
        field: &str,
        value: IndexValue,
        mut each: impl FnMut(Vec<String>),
    ) -> Result<(), CollectionError> {
        let Some(prefix) = Self::eq_prefix(field, &value) else {
            return Err(Self::no_index(field));
        };
        self.scan_all(&prefix, INDEX_CHUNK, |chunk| {
            // An index entry's value is the row id.
            each(
                chunk
                    .iter()
                    .map(|p| String::from_utf8_lossy(&p.value).into())
                    .collect(),
            );
            Ok(())
        })
        .await
    }

    /// Every entry of string index `field` as `(value, row id)`, in value
    /// order, read from the index alone, in chunks handed to `each`.
    pub async fn index_str_entries(
        &self,
        field: &str,
        mut each: impl FnMut(Vec<(String, String)>),
    ) -> Result<(), CollectionError> {
        if !T::INDEXED.contains(&field) {
            return Err(Self::no_index(field));
        }
        let prefix = Self::index_prefix(field).raw(&[0x03]).finish();
        self.scan_all(&prefix, INDEX_CHUNK, |chunk| {
            let entries = chunk.into_iter().map(|pair| {
                // An index entry's value is the row id.
                let id = String::from_utf8_lossy(&pair.value).into_owned();
                let rest = pair.key.strip_prefix(prefix.as_slice());
                match rest.and_then(|r| KeyReader::new(r).str()) {
                    Some(value) => Ok((value, id)),
                    None => Err(Self::corrupt(
                        &id,
                        format!("its '{field}' entry is unreadable"),
                    )),
                }
            });
            each(entries.collect::<Result<_, _>>()?);
            Ok(())
        })
        .await
    }

    /// The ids of the rows whose indexed integer `field` is below `bound`,
    /// smallest first, at most `limit`, read from the index alone: the
    /// read stops at the bound (rows above it cost nothing).
    pub async fn index_ids_below(
        &self,
        field: &str,
        bound: i64,
        limit: usize,
    ) -> Result<Vec<String>, CollectionError> {
        if !T::INDEXED.contains(&field) {
            return Err(Self::no_index(field));
        }
        let start = Self::index_prefix(field).raw(&[0x02]).finish();
        let end = IndexValue::Int(bound)
            .encode(Self::index_prefix(field))
            .finish();
        let pairs = self
            .store
            .scan(ScanRange::between(start, end).with_limit(limit))
            .await?;
        // An index entry's value is the row id.
        Ok(pairs
            .into_iter()
            .map(|p| String::from_utf8_lossy(&p.value).into_owned())
            .collect())
    }
}
