//! What query handlers answer: one page as `{FIELD: [...], "next",
//! "total"}` (`total` only when asked for with `?count=true`), one type
//! per listing so the OpenAPI document names its items.
//!
//! May use: the facade `acts`.

use acts::{BulkItem, BulkJob, DeliveryInfo, Page, ProcInfo, TaskInfo};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

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
        }

        impl $name {
            /// `page` with `total`, as the answer.
            pub(crate) fn reply(page: Page<$item>, total: Option<usize>) -> Json<Self> {
                Json(Self {
                    $field: page.items,
                    next: page.next,
                    total,
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
