//! What query handlers answer: one page as `{FIELD: [...], "next",
//! "total"}` (`total` only when asked for with `?count=true`).

use acts::Page;
use axum::Json;
use serde::Serialize;
use serde_json::{Value, json};

/// `page` under `field`, with its next cursor and `total`.
pub(crate) fn page_json<T: Serialize>(
    field: &str,
    page: Page<T>,
    total: Option<usize>,
) -> Json<Value> {
    let mut out = json!({"next": page.next, "total": total});
    out[field] = json!(page.items);
    Json(out)
}
