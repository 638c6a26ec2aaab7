//! The reference's listing queries (`{offset, limit, filter, order_by}`)
//! on acts' indexed, cursor-paged queries: the filters acts can answer
//! from an index become query fields, anything else is refused naming
//! the key (never silently ignored: a client that filters on a key acts
//! does not know must not read every row as a match), and an offset is
//! reached by walking pages — bounded by [`MAX_WINDOW`].
//!
//! May use: the facade `acts`, serde, the module's shapes.

use serde::Deserialize;
use serde_json::Value;

/// The furthest row a listing reaches (`offset + limit`): past it, a
/// client pages with acts' own queries (`/api/v1/processes/query`), which
/// take a cursor instead of re-walking every earlier row.
pub(crate) const MAX_WINDOW: usize = 10_000;

/// The reference's `Query`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RefQuery {
    offset: usize,
    limit: Option<usize>,
    filter: Option<RefFilter>,
    order_by: Vec<RefOrder>,
}

#[derive(Debug, Deserialize)]
struct RefFilter {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    exprs: Vec<Value>,
}

#[derive(Debug, Deserialize)]
struct RefOrder {
    field: String,
    #[serde(default)]
    order: Option<String>,
}

/// The equality conditions and order of a query, checked against what a
/// listing supports.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) offset: usize,
    pub(crate) limit: usize,
    pub(crate) descending: bool,
    eqs: Vec<(String, Value)>,
}

impl RefQuery {
    /// The query of an action's `query` option (absent: the first 100).
    pub(crate) fn of(options: &acts::Vars) -> Result<Self, String> {
        match options.get("query") {
            None | Some(Value::Null) => Ok(Self::default()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
                format!("query is not a query ({{offset, limit, filter, order_by}}): {e}")
            }),
        }
    }

    /// Its window over a listing whose filterable keys are `keys`.
    pub(crate) fn window(self, keys: &[&str]) -> Result<Window, String> {
        let limit = self.limit.unwrap_or(100).max(1);
        if self.offset.saturating_add(limit) > MAX_WINDOW {
            return Err(format!(
                "query offset {} + limit {limit} passes {MAX_WINDOW}, the furthest a listing \
                 reaches; page with a cursor through /api/v1 instead",
                self.offset
            ));
        }
        let mut eqs = Vec::new();
        if let Some(f) = self.filter {
            if f.kind.as_deref().is_some_and(|k| k != "and") && f.exprs.len() > 1 {
                return Err("query filter type 'or' is not supported (only 'and')".to_owned());
            }
            for e in f.exprs {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let op = e.get("op").and_then(Value::as_str).unwrap_or("eq");
                if key.is_empty() {
                    return Err("query filter: only {key, value, op} conditions are supported (no nested filters)".to_owned());
                }
                if op != "eq" {
                    return Err(format!(
                        "query filter on '{key}': op '{op}' is not supported (only 'eq')"
                    ));
                }
                if !keys.contains(&key) {
                    return Err(format!(
                        "query filter on '{key}' is not supported here (supported: {})",
                        keys.join(", ")
                    ));
                }
                let value = e.get("value").cloned().unwrap_or(Value::Null);
                eqs.push((key.to_owned(), value));
            }
        }
        let mut descending = false;
        for o in self.order_by {
            if !matches!(o.field.as_str(), "timestamp" | "start_time" | "create_time") {
                return Err(format!(
                    "query order_by '{}' is not supported (only timestamp, start_time, create_time)",
                    o.field
                ));
            }
            descending = o.order.as_deref() == Some("desc");
        }
        Ok(Window {
            offset: self.offset,
            limit,
            descending,
            eqs,
        })
    }
}

impl Window {
    /// The first `limit` rows, unfiltered.
    pub(crate) fn first(limit: usize) -> Self {
        Self {
            offset: 0,
            limit,
            descending: false,
            eqs: Vec::new(),
        }
    }

    /// The string the query requires `key` to equal, if it filters on it.
    pub(crate) fn eq(&self, key: &str) -> Option<String> {
        self.eqs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
    }

    /// The rows of this window out of `all` (a listing held in memory).
    pub(crate) fn slice<T>(&self, all: Vec<T>) -> Vec<T> {
        all.into_iter().skip(self.offset).take(self.limit).collect()
    }
}

/// Walks a cursor-paged query until `window` is filled: `fetch(cursor,
/// n)` answers a page of at most `n` and the next cursor.
pub(crate) async fn walk<T, F, Fut>(
    window: &Window,
    mut fetch: F,
) -> Result<Vec<T>, acts::EngineError>
where
    F: FnMut(Option<String>, usize) -> Fut,
    Fut: std::future::Future<Output = Result<acts::Page<T>, acts::EngineError>>,
{
    let end = window.offset + window.limit;
    let mut rows = Vec::new();
    let mut cursor = None;
    loop {
        let want = (end - rows.len()).min(acts::MAX_PAGE);
        let page = fetch(cursor, want).await?;
        rows.extend(page.items);
        match page.next {
            Some(next) if rows.len() < end => cursor = Some(next),
            _ => break,
        }
    }
    Ok(window.slice(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(v: Value) -> Result<Window, String> {
        let mut o = acts::Vars::new();
        o.insert("query".into(), v);
        RefQuery::of(&o)?.window(&["state", "pid"])
    }

    #[test]
    fn a_filter_on_a_key_a_listing_cannot_answer_is_refused_by_name() {
        let err = query(json!({"offset": 0, "limit": 10, "filter": {"type": "and",
            "exprs": [{"key": "owner", "value": "ann", "op": "eq"}]}, "order_by": []}))
        .unwrap_err();
        assert!(
            err.contains("'owner'") && err.contains("state, pid"),
            "{err}"
        );
        let err = query(json!({"filter": {"type": "and",
            "exprs": [{"key": "state", "value": "x", "op": "gt"}]}}))
        .unwrap_err();
        assert!(err.contains("op 'gt'"), "{err}");
    }

    #[test]
    fn an_equality_filter_and_the_order_are_read() {
        let w = query(json!({"offset": 3, "limit": 2, "filter": {"type": "and",
            "exprs": [{"key": "state", "value": "running", "op": "eq"}]},
            "order_by": [{"field": "timestamp", "order": "desc"}]}))
        .unwrap();
        assert_eq!(w.eq("state").as_deref(), Some("running"));
        assert_eq!(w.eq("pid"), None);
        assert!(w.descending);
        assert_eq!(w.slice((0..10).collect::<Vec<_>>()), vec![3, 4]);
    }

    #[test]
    fn a_window_past_the_furthest_row_is_refused() {
        let err = query(json!({"offset": MAX_WINDOW, "limit": 1})).unwrap_err();
        assert!(err.contains("cursor"), "{err}");
    }
}
