//! The engine's side of the store: how transitions reach the `KvStore`.
//!
//! - [`GroupCommitWriter`]: the single ordered writer with group commit.
//! - [`Collection`]: typed rows with a schema version (older rows upgraded
//!   on read), secondary indexes written in the same batch as the row, and
//!   queries with filters, ordering by indexed fields and exhaustive paging.
//!
//! The engine's row types (models, procs, tasks, vars, ops, ...) live in
//! `crate::engine::persist` and implement [`Row`] through `impl_row!`,
//! which keeps each indexed field's name next to the value it indexes.
//!
//! May use: nothing else of the crate (only the store contract,
//! `acts-store`).

mod collection;
mod index_reads;
mod query;
mod writer;
mod writer_stats;

pub use collection::{Collection, CollectionError, Filter, IndexValue, Page, Query, Row};
pub use writer::{GroupCommitWriter, WriteBatch, WriteError, WriteOutcome, WriterConfig};
pub use writer_stats::{COMMIT_MICROS_BOUNDS, GROUP_SIZE_BOUNDS, WriterStats};

/// Implements [`Row`] for a row type: its collection, schema version, id,
/// and each indexed field's name paired with the value indexed under it —
/// written once, so `INDEXED` and `index_values` cannot drift apart. With
/// `fill = f`, `f(id, json)` puts back what the stored value leaves out
/// because the id holds it ([`Row::fill_from_id`]); with `consts = { .. }`,
/// the items go into the impl (e.g. [`Row::EQ_BY_PAIR`], [`Row::RETIRED`]).
///
/// ```ignore
/// impl_row!(ModelRow, "models", version = 1, |r| r.id.clone(), {
///     "deployed_at" => IndexValue::Int(r.deployed_at),
/// });
/// ```
macro_rules! impl_row {
    ($ty:ty, $collection:literal, version = $version:literal, |$r:ident| $id:expr, {
        $($field:literal => $value:expr),* $(,)?
    }) => {
        $crate::durable::impl_row!($ty, $collection, version = $version, |$r| $id, {
            $($field => $value),*
        }, fill = |_id, _row| {});
    };
    ($ty:ty, $collection:literal, version = $version:literal, |$r:ident| $id:expr, {
        $($field:literal => $value:expr),* $(,)?
    }, fill = $fill:expr) => {
        $crate::durable::impl_row!($ty, $collection, version = $version, |$r| $id, {
            $($field => $value),*
        }, fill = $fill, consts = {});
    };
    ($ty:ty, $collection:literal, version = $version:literal, |$r:ident| $id:expr, {
        $($field:literal => $value:expr),* $(,)?
    }, consts = { $($item:item)* }) => {
        $crate::durable::impl_row!($ty, $collection, version = $version, |$r| $id, {
            $($field => $value),*
        }, fill = |_id, _row| {}, consts = { $($item)* });
    };
    ($ty:ty, $collection:literal, version = $version:literal, |$r:ident| $id:expr, {
        $($field:literal => $value:expr),* $(,)?
    }, fill = $fill:expr, consts = { $($item:item)* }) => {
        impl $crate::durable::Row for $ty {
            $($item)*
            const COLLECTION: &'static str = $collection;
            const VERSION: u32 = $version;
            const INDEXED: &'static [&'static str] = &[$($field),*];

            fn id(&self) -> String {
                let $r = self;
                $id
            }

            #[allow(unused_variables)]
            fn index_values(&self) -> Vec<$crate::durable::IndexValue> {
                let $r = self;
                vec![$($value),*]
            }

            fn fill_from_id(id: &str, row: &mut serde_json::Value) {
                let fill: fn(&str, &mut serde_json::Value) = $fill;
                fill(id, row);
            }
        }
    };
}
pub(crate) use impl_row;
