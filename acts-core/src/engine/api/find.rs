//! Finding processes: [`ProcessQuery`] — by model, version, state, who
//! started them, start time, and equality or a range on one variable the
//! model declares indexed (`index: [customer, amount]`) — answered from an
//! index, a page at a time with a cursor, and counted.
//!
//! Which index a query walks: the variable index when it filters on a
//! variable (only the entries in its range are read, in value order), else
//! the state's entries of the state-and-admission-time index when it
//! filters on a state, else the model's entries of the model-and-time
//! index, else the admission-order index — the last three in admission
//! order. Every other filter is checked on the rows the walk reads.

use acts_store::ScanRange;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::durable::{Filter, IndexValue, Query};
use crate::scheduler::TaskState;

use crate::engine::api::executor::Executor;
use crate::engine::persist::reads::{self, Walk};
use crate::engine::persist::rows::ProcRow;
use crate::engine::persist::var_index::indexable;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{ProcInfo, WaitingFor};
use crate::engine::types::numbers::whole_numbers_as_integers;
use crate::engine::types::page::Page;

/// Most processes one page holds.
pub const MAX_PAGE: usize = 1000;

/// A condition on one indexed variable: `value == eq`, or `min <= value
/// <= max`; values of one kind (strings, integers or booleans).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VarFilter {
    /// The variable (declared in the model's `index`).
    pub name: String,
    /// The value it equals (sets both bounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eq: Option<Value>,
    /// The lowest value (inclusive); `None`: no lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Value>,
    /// The highest value (inclusive); `None`: no upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Value>,
}

impl VarFilter {
    /// A condition on variable `name` with no bound yet (set `eq`, or
    /// `min` and `max`).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            eq: None,
            min: None,
            max: None,
        }
    }

    /// The bounds: `eq` for both, else `min` and `max`.
    /// (A whole number written with a fraction, `2.0`, is the integer it
    /// equals: JSON has one kind of number.)
    fn bounds(&self) -> (Option<Value>, Option<Value>) {
        let whole = |v: &Option<Value>| {
            v.clone().map(|mut v| {
                whole_numbers_as_integers(&mut v);
                v
            })
        };
        match &self.eq {
            Some(_) => (whole(&self.eq), whole(&self.eq)),
            None => (whole(&self.min), whole(&self.max)),
        }
    }
}

/// A variable condition as a JSON object (or null) only: a derived
/// struct would also read an array of its fields in order.
fn var_filter_object<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<VarFilter>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v @ Value::Object(_) => serde_json::from_value(v)
            .map(Some)
            .map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom(
            "`var` must be an object ({\"name\", \"eq\"} or {\"name\", \"min\", \"max\"})",
        )),
    }
}

/// A struct read from a JSON object only (a derived struct would also
/// read an array of its fields in order): for the queries inside other
/// requests (a bulk job's `where`, a task query's `process`).
pub(crate) fn object_only<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    match Value::deserialize(d)? {
        v @ Value::Object(_) => serde_json::from_value(v).map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom(
            "must be an object (a process query), not an array or a single value",
        )),
    }
}

/// What processes to find (every field optional; see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessQuery {
    /// Of this model (required with `var`).
    pub model: Option<String>,
    /// Running this version of the model.
    pub revision: Option<u32>,
    /// In this state.
    pub state: Option<TaskState>,
    /// Started by this principal.
    pub started_by: Option<String>,
    /// Started at or after (ms).
    pub started_after: Option<i64>,
    /// Started before (ms).
    pub started_before: Option<i64>,
    /// A condition on one indexed variable.
    #[serde(deserialize_with = "var_filter_object")]
    pub var: Option<VarFilter>,
    /// Ended with this error code (its `ecode`; e.g. the processes to
    /// retry after an outage).
    pub ecode: Option<String>,
    /// Of this concurrency key (the model's `concurrency:`, evaluated).
    pub concurrency_key: Option<String>,
    /// Waiting for this: parked (`concurrency`: its key has no free slot;
    /// `admission`: the engine is at its cap; both imply state `none`), or
    /// running with a task at a step's or act's key or rate (`gate`).
    /// With a `state` no such process can be in (`concurrency` and
    /// `running`, `gate` and `none`) nothing matches.
    pub waiting_for: Option<WaitingFor>,
    /// Walk the index backwards (newest, or largest value, first).
    pub descending: bool,
    /// Processes per page (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<usize>,
    /// Where the previous page ended ([`Page::next`](crate::engine::Page::next)).
    pub cursor: Option<String>,
    /// Each item's own cursor too ([`Page::cursors`](crate::engine::Page::cursors);
    /// asked by a cluster node, not part of the query's JSON).
    #[serde(skip)]
    pub item_cursors: bool,
}

impl ProcessQuery {
    /// Every process.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only processes of `model`.
    pub fn model(mut self, model: &str) -> Self {
        self.model = Some(model.to_owned());
        self
    }

    /// Only processes in `state`.
    pub fn state(mut self, state: TaskState) -> Self {
        self.state = Some(state);
        self
    }

    /// Only parked processes waiting for `what`.
    pub fn waiting_for(mut self, what: WaitingFor) -> Self {
        self.waiting_for = Some(what);
        self
    }

    /// Only processes that ended with error code `ecode`.
    pub fn ecode(mut self, ecode: &str) -> Self {
        self.ecode = Some(ecode.to_owned());
        self
    }

    /// Only processes of concurrency key `key`.
    pub fn concurrency_key(mut self, key: &str) -> Self {
        self.concurrency_key = Some(key.to_owned());
        self
    }

    /// Only processes whose indexed variable `name` equals `value`.
    pub fn var_eq(mut self, name: &str, value: Value) -> Self {
        self.var = Some(VarFilter {
            name: name.to_owned(),
            eq: Some(value),
            min: None,
            max: None,
        });
        self
    }

    /// Only processes whose indexed variable `name` lies in `min..=max`.
    pub fn var_range(mut self, name: &str, min: Option<Value>, max: Option<Value>) -> Self {
        self.var = Some(VarFilter {
            name: name.to_owned(),
            eq: None,
            min,
            max,
        });
        self
    }

    /// Pages of `n`.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// The page after the one that returned `cursor`.
    pub fn after(mut self, cursor: Option<String>) -> Self {
        self.cursor = cursor;
        self
    }
}

fn bad(message: String) -> EngineError {
    EngineError::Query(message)
}

/// The encoded key range of `filter` on model `mid`'s variable index.
fn var_range(mid: &str, filter: &VarFilter) -> Result<ScanRange, EngineError> {
    let value = |v: &Option<Value>| -> Result<Option<IndexValue>, EngineError> {
        v.as_ref()
            .map(|v| {
                indexable(v).ok_or_else(|| {
                    bad(format!(
                        "variable '{}': {v} cannot be looked up in an index (use a string, an integer or a boolean)",
                        filter.name
                    ))
                })
            })
            .transpose()
    };
    let (min, max) = filter.bounds();
    let (min, max) = (value(&min)?, value(&max)?);
    let tag = |v: &IndexValue| std::mem::discriminant(v);
    let kind = match (&min, &max) {
        (Some(a), Some(b)) if tag(a) != tag(b) => {
            return Err(bad(format!(
                "variable '{}': the bounds are of different kinds",
                filter.name
            )));
        }
        (Some(a), _) | (None, Some(a)) => a.clone(),
        (None, None) => {
            return Err(bad(format!(
                "variable '{}': give a value or at least one bound",
                filter.name
            )));
        }
    };
    Ok(reads::var_range(
        mid,
        &filter.name,
        &kind,
        min.as_ref(),
        max.as_ref(),
    ))
}

/// How many items the pages of a paged query hold, from the first page to
/// the last: `page(cursor)` answers one page's length and the next cursor.
pub(super) async fn count_pages<Fut>(
    mut page: impl FnMut(Option<String>) -> Fut,
) -> Result<usize, EngineError>
where
    Fut: std::future::Future<Output = Result<(usize, Option<String>), EngineError>>,
{
    let mut n = 0;
    let mut cursor = None;
    loop {
        let (len, next) = page(cursor).await?;
        n += len;
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(n),
        }
    }
}

/// `key` as lowercase hex: the form of every query cursor (safe in a URL
/// and in JSON; `acts-cluster` wraps its merged cursors the same way).
pub fn encode_cursor(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// The shape of a process, delivery or bulk job query's cursor: hex of a
/// key (every such text names a place: the page after that key), at most
/// 4,096 characters.
pub const CURSOR_PATTERN: &str = "^([0-9a-fA-F]{2}){0,2048}$";

/// The bytes of `hex` ([`encode_cursor`]'s form), if it is hex of at most
/// `max` characters.
pub fn hex_bytes(hex: &str, max: usize) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2)
        || hex.len() > max
        || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

pub(super) fn decode_cursor(c: &str) -> Result<Vec<u8>, EngineError> {
    hex_bytes(c, 4096).ok_or_else(|| bad(format!("cursor '{c}' is not one a query returned")))
}

impl Executor {
    /// `proc().list` ([`ProcOps::list`](super::ProcOps::list)).
    pub(crate) async fn processes(
        &self,
        state: Option<TaskState>,
        model: Option<&str>,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        // Page by page through the state's or the model's index (only the
        // matching rows are read): see `find_processes`.
        let mut q = ProcessQuery {
            state,
            model: model.map(str::to_owned),
            limit: Some(MAX_PAGE),
            ..Default::default()
        };
        let mut all = Vec::new();
        loop {
            let page = self.find_processes(&q).await?;
            all.extend(page.items);
            match page.next {
                Some(next) => q.cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// `proc().find` ([`ProcOps::find`](super::ProcOps::find)).
    pub(crate) async fn find_processes(
        &self,
        q: &ProcessQuery,
    ) -> Result<Page<ProcInfo>, EngineError> {
        let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
        let mut query = Query::new().limit(limit);
        query.after = q.cursor.as_deref().map(decode_cursor).transpose()?;
        if let Some(m) = &q.model {
            query = query.filter(Filter::eq("mid", m.as_str()));
        }
        if let Some(r) = q.revision {
            query = query.filter(Filter::eq("rev", r));
        }
        // Waiting for anything: parked. A parked process has no task at a
        // gate, and a process in any other state than `none` waits for
        // nothing: such a query matches nothing (an empty last page).
        let state = match (q.state, q.waiting_for) {
            (Some(TaskState::None), Some(WaitingFor::Gate)) => return Ok(Page::new(vec![], None)),
            (s, Some(WaitingFor::Gate)) => s,
            (Some(s), Some(_)) if s != TaskState::None => return Ok(Page::new(vec![], None)),
            (_, Some(_)) => Some(TaskState::None),
            (s, None) => s,
        };
        if let Some(s) = state {
            query = query.filter(Filter::eq("state", s.as_str()));
        }
        if let Some(k) = &q.concurrency_key {
            query = query.filter(Filter::eq("slot.key", k.as_str()));
        }
        if let Some(e) = &q.ecode {
            query = query.filter(Filter::eq("err.ecode", e.as_str()));
        }
        if let Some(b) = &q.started_by {
            query = query.filter(Filter::eq("started_by", b.as_str()));
        }
        if let Some(a) = q.started_after {
            query = query.filter(Filter::Ge("start_time".into(), a.into()));
        }
        if let Some(b) = q.started_before {
            query = query.filter(Filter::Lt("start_time".into(), b.into()));
        }
        let walk = match &q.var {
            Some(v) => {
                let Some(mid) = &q.model else {
                    return Err(bad(format!(
                        "variable '{}': a variable query needs the model (indexes are per model)",
                        v.name
                    )));
                };
                // The request's own rules first (400), then what is
                // deployed (409).
                let range = var_range(mid, v)?;
                self.check_indexed(mid, &v.name).await?;
                // The row must still hold the value its entry says.
                let (min, max) = v.bounds();
                if let Some(min) = min {
                    query = query.filter(Filter::Ge(format!("indexed.{}", v.name), min));
                }
                if let Some(max) = max {
                    query = query.filter(Filter::Le(format!("indexed.{}", v.name), max));
                }
                Some(Walk::ProcVar(range))
            }
            // In admission order, through the composite index of the state
            // or the model (only the entries of that state or model are
            // read), else the admission-order index.
            None => match (&state, &q.model) {
                // Only the processes with gated tasks (a sparse index).
                _ if q.waiting_for == Some(WaitingFor::Gate) => Some(Walk::ProcsGated),
                (Some(st), _) => Some(Walk::ProcsInState(*st)),
                (None, Some(m)) => Some(Walk::ProcsOfModel(m)),
                (None, None) => {
                    query = query.order_by("timestamp", q.descending);
                    None
                }
            },
        };
        let page = self
            .rt
            .reads()
            .page::<ProcRow>(walk, q.descending, &query)
            .await?;
        let (processes, keys): (Vec<ProcInfo>, Vec<&Vec<u8>>) = page
            .rows
            .iter()
            .zip(&page.keys)
            .filter(|(r, _)| self.may_see_row(r))
            .map(|(r, key)| {
                let mut info = ProcInfo::from(r);
                let gated = r.gates.iter().any(|g| !g.open);
                info.waiting_for = self.rt.waiting_for(&r.id, r.state, r.slot.is_some(), gated);
                (info, key)
            })
            .filter(|(info, _)| {
                q.waiting_for
                    .is_none_or(|w| info.waiting_for.as_deref() == Some(w.as_str()))
            })
            .unzip();
        let out = Page::new(processes, page.next.as_deref().map(encode_cursor));
        // (encoded only when asked: every listing walks this)
        Ok(if q.item_cursors {
            out.with_cursors(keys.into_iter().map(|k| encode_cursor(k)).collect())
        } else {
            out
        })
    }

    /// Fails unless model `mid` declares `name` in its `index:` (from the
    /// catalog in memory: no store read).
    async fn check_indexed(&self, mid: &str, name: &str) -> Result<(), EngineError> {
        let model = self.rt.catalog().model(mid).await?;
        if model.declaration().index.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(EngineError::Conflict(format!(
            "model '{mid}' does not index '{name}' (its index: [{}]); add it to the model's `index:`",
            model.declaration().index.join(", ")
        )))
    }

    /// `proc().count_matching` ([`ProcOps::count_matching`](super::ProcOps::count_matching)).
    pub(crate) async fn count_matching(&self, q: &ProcessQuery) -> Result<usize, EngineError> {
        let sees_all = self.principal.as_ref().is_none_or(|p| p.is_operator());
        // Filters an index walk alone cannot answer (order and page do not
        // count): with none of them, the keys of one index range are the
        // matches.
        let rows_needed = q.revision.is_some()
            || q.concurrency_key.is_some()
            || q.ecode.is_some()
            || q.waiting_for.is_some()
            || q.started_by.is_some()
            || q.started_after.is_some()
            || q.started_before.is_some()
            || (q.var.is_some() && q.state.is_some())
            || !sees_all;
        if !rows_needed {
            let walk = match (&q.var, &q.state, &q.model) {
                (Some(v), None, Some(mid)) => {
                    // The request's own rules first (400), then what is
                    // deployed (409).
                    let range = var_range(mid, v)?;
                    self.check_indexed(mid, &v.name).await?;
                    Some(Walk::ProcVar(range))
                }
                (None, Some(st), None) => Some(Walk::ProcsInState(*st)),
                (None, None, Some(m)) => Some(Walk::ProcsOfModel(m)),
                (None, None, None) => Some(Walk::Procs),
                _ => None,
            };
            if let Some(walk) = walk {
                return Ok(self.rt.reads().count(walk).await?);
            }
        }
        count_pages(|cursor| {
            let q = ProcessQuery {
                cursor,
                limit: Some(MAX_PAGE),
                ..q.clone()
            };
            async move {
                let page = self.find_processes(&q).await?;
                Ok((page.items.len(), page.next))
            }
        })
        .await
    }
}
