//! Finding processes: [`ProcessQuery`] — by model, version, state, who
//! started them, start time, and equality or a range on one variable the
//! model declares indexed (`index: [customer, amount]`) — answered from an
//! index, a page at a time with a cursor, and counted.
//!
//! Which index a query walks: the variable index when it filters on a
//! variable (only the entries in its range are read), else the state index
//! when it filters on a state, else the model index, else the start-order
//! index. Every other filter is checked on the rows the walk reads.

use acts_store::ScanRange;
use acts_store::keys::prefix_successor;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::durable::{Collection, Filter, IndexValue, Query};
use crate::scheduler::TaskState;

use crate::engine::api::error::EngineError;
use crate::engine::api::executor::Executor;
use crate::engine::api::info::ProcInfo;
use crate::engine::persist::rows::ProcRow;
use crate::engine::persist::var_index::{indexable, var_prefix};

/// Most processes one page holds.
pub const MAX_PAGE: usize = 1000;

/// A condition on one indexed variable: `value == eq`, or `min <= value
/// <= max`; values of one kind (strings, integers or booleans).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// The bounds: `eq` for both, else `min` and `max`.
    fn bounds(&self) -> (Option<Value>, Option<Value>) {
        match &self.eq {
            Some(v) => (Some(v.clone()), Some(v.clone())),
            None => (self.min.clone(), self.max.clone()),
        }
    }
}

/// What processes to find (every field optional; see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    pub var: Option<VarFilter>,
    /// Walk the index backwards (newest, or largest value, first).
    pub descending: bool,
    /// Processes per page (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<usize>,
    /// Where the previous page ended ([`ProcessPage::next`]).
    pub cursor: Option<String>,
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

/// One page of processes (as listed: no outputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessPage {
    /// The processes, in index order. A page may hold fewer than the
    /// limit when the caller may not see every match.
    pub processes: Vec<ProcInfo>,
    /// The cursor of the next page (`None`: this was the last).
    pub next: Option<String>,
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
    let prefix = || var_prefix(mid, &filter.name);
    // The entries of this kind of value: from the kind's first key to the
    // first key past its last.
    let kind_start = kind.kind_floor().encode(prefix()).finish();
    let start = match &min {
        Some(v) => v.encode(prefix()).finish(),
        None => kind_start.clone(),
    };
    // The prefix and the kind's tag byte: its successor ends the kind.
    let kind_len = prefix().finish().len() + 1;
    let end = match &max {
        Some(v) => prefix_successor(&v.encode(prefix()).finish()),
        None => prefix_successor(&kind_start[..kind_len]),
    };
    Ok(ScanRange::new(
        std::ops::Bound::Included(start),
        end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
    ))
}

fn encode_cursor(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(c: &str) -> Result<Vec<u8>, EngineError> {
    let bad_cursor = || bad(format!("cursor '{c}' is not one a query returned"));
    if !c.len().is_multiple_of(2) || c.len() > 4096 {
        return Err(bad_cursor());
    }
    (0..c.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&c[i..i + 2], 16).map_err(|_| bad_cursor()))
        .collect()
}

impl Executor {
    /// One page of the processes matching `q` (see [`ProcessQuery`]),
    /// answered from an index: with a variable filter only the index
    /// entries in its range are read, and one row per entry. A user's
    /// page holds only the processes they may see.
    pub async fn find_processes(&self, q: &ProcessQuery) -> Result<ProcessPage, EngineError> {
        let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
        let mut query = Query::new().limit(limit);
        query.after = q.cursor.as_deref().map(decode_cursor).transpose()?;
        if let Some(m) = &q.model {
            query = query.filter(Filter::eq("mid", m.as_str()));
        }
        if let Some(r) = q.revision {
            query = query.filter(Filter::eq("rev", r));
        }
        if let Some(s) = q.state {
            query = query.filter(Filter::eq("state", s.as_str()));
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
        let procs = Collection::<ProcRow>::new(self.rt.store.clone());
        let page = match &q.var {
            Some(v) => {
                let Some(mid) = &q.model else {
                    return Err(bad(format!(
                        "variable '{}': a variable query needs the model (indexes are per model)",
                        v.name
                    )));
                };
                self.check_indexed(mid, &v.name).await?;
                // The row must still hold the value its entry says.
                let (min, max) = v.bounds();
                if let Some(min) = min {
                    query = query.filter(Filter::Ge(format!("indexed.{}", v.name), min));
                }
                if let Some(max) = max {
                    query = query.filter(Filter::Le(format!("indexed.{}", v.name), max));
                }
                procs
                    .query_index_range(var_range(mid, v)?, q.descending, &query)
                    .await?
            }
            None => {
                if q.state.is_none() && q.model.is_none() {
                    query = query.order_by("timestamp", q.descending);
                }
                procs.query(&query).await?
            }
        };
        let processes = page
            .rows
            .iter()
            .filter(|r| self.may_see_row(r))
            .map(ProcInfo::of_row)
            .collect();
        Ok(ProcessPage {
            processes,
            next: page.next.as_deref().map(encode_cursor),
        })
    }

    /// Fails unless model `mid` declares `name` in its `index:` (from the
    /// catalog in memory: no store read).
    async fn check_indexed(&self, mid: &str, name: &str) -> Result<(), EngineError> {
        let model = self.rt.model(mid).await?;
        if model.workflow.index.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(bad(format!(
            "model '{mid}' does not index '{name}' (its index: [{}]); add it to the model's `index:`",
            model.workflow.index.join(", ")
        )))
    }

    /// How many processes match `q` (its cursor and limit ignored). A
    /// query on one variable alone (with its model) counts index keys only;
    /// any other filter reads the rows the index walk yields. An operator's
    /// or admin's.
    pub async fn count_matching(&self, q: &ProcessQuery) -> Result<usize, EngineError> {
        self.need_operator("counting processes")?;
        // Only the model and the variable (order and page do not count).
        let only_var = ProcessQuery {
            model: q.model.clone(),
            var: q.var.clone(),
            descending: q.descending,
            limit: q.limit,
            cursor: q.cursor.clone(),
            ..ProcessQuery::default()
        };
        if let (Some(mid), Some(v)) = (&q.model, &q.var)
            && *q == only_var
        {
            self.check_indexed(mid, &v.name).await?;
            let mut range = var_range(mid, v)?;
            let mut n = 0;
            loop {
                let keys = self.rt.store.scan(range.clone().with_limit(4096)).await?;
                n += keys.len();
                match keys.last() {
                    Some(last) if keys.len() == 4096 => {
                        range.start = std::ops::Bound::Excluded(last.key.clone());
                    }
                    _ => return Ok(n),
                }
            }
        }
        let mut page_q = ProcessQuery {
            cursor: None,
            limit: Some(MAX_PAGE),
            ..q.clone()
        };
        let mut n = 0;
        loop {
            let page = self.find_processes(&page_q).await?;
            n += page.processes.len();
            match page.next {
                Some(c) => page_q.cursor = Some(c),
                None => return Ok(n),
            }
        }
    }
}
