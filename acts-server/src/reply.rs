//! What query handlers answer: one page as `{FIELD: [...], "next",
//! "total"}` (`total` only when asked for with `?count=true`), one type
//! per listing so the OpenAPI document names its items.
//!
//! May use: the facade `acts`.

use acts::{BulkItem, BulkJob, DeliveryInfo, Page, ProcInfo, TaskInfo};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// The header a cluster node sets on a listing it merges (any value):
/// the page then carries each item's own cursor (`cursors`), which order
/// as the items do, so the node can merge its partitions' pages into one
/// order with an exact limit.
pub const ITEM_CURSORS: &str = "x-acts-item-cursors";

/// Whether a listing's caller asked for each item's cursor.
pub(crate) fn wants_item_cursors(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key(ITEM_CURSORS)
}

/// Declares a page type: its items under `$field`, the next cursor and
/// the total.
macro_rules! page_type {
    ($(#[$meta:meta])* $name:ident, $field:ident: $item:ty) => {
        $(#[$meta])*
        #[derive(Debug, Serialize, ToSchema)]
        pub(crate) struct $name {
            /// The items of this page.
            $field: Vec<$item>,
            /// The cursor of the next page (pass it as `cursor`); `null`
            /// on the last.
            next: Option<String>,
            /// Every match, when counted (`count=true`); else `null`.
            total: Option<usize>,
            /// Each item's own cursor, when a cluster node asked for them
            /// ([`ITEM_CURSORS`]); absent otherwise.
            #[serde(skip_serializing_if = "Vec::is_empty")]
            cursors: Vec<String>,
        }

        impl $name {
            /// `page` with `total`, as the answer.
            pub(crate) fn reply(page: Page<$item>, total: Option<usize>) -> Json<Self> {
                Json(Self {
                    $field: page.items,
                    next: page.next,
                    total,
                    cursors: page.cursors,
                })
            }
        }
    };
}

page_type!(
    /// One page of processes.
    ProcessPage, processes: ProcInfo
);
page_type!(
    /// One page of tasks.
    TaskPage, tasks: TaskInfo
);
page_type!(
    /// One page of deliveries.
    DeliveryPage, deliveries: DeliveryInfo
);
page_type!(
    /// One page of bulk jobs (`total` is always `null`).
    BulkJobPage, jobs: BulkJob
);
page_type!(
    /// One page of a bulk job's report (`total` is always `null`).
    BulkItemPage, items: BulkItem
);
