//! What a [`Collection`](super::Collection) query asks for: filters, order,
//! pages, and the values indexes hold.

use std::cmp::Ordering;

use acts_store::keys::KeyBuilder;
use serde_json::Value;

/// A value an index orders by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum IndexValue {
    /// A boolean (false first).
    Bool(bool),
    /// A signed integer (times, counters).
    Int(i64),
    /// A string.
    Str(String),
    /// A string then two integers, ordered by the string first: a
    /// composite index whose entries of one string (a state, a model) lie
    /// together in integer order (a time, then a sequence number within
    /// it).
    Pair(String, i64, i64),
    /// No entry: the row is not in this (sparse) index, e.g. a process
    /// that is not quiet is not in the `quiet` index.
    Absent,
}

impl IndexValue {
    /// The smallest value of the same kind (where its kind's keys start).
    pub(crate) fn kind_floor(&self) -> Self {
        match self {
            IndexValue::Bool(_) => IndexValue::Bool(false),
            IndexValue::Int(_) => IndexValue::Int(i64::MIN),
            IndexValue::Str(_) => IndexValue::Str(String::new()),
            IndexValue::Pair(..) => IndexValue::Pair(String::new(), i64::MIN, i64::MIN),
            IndexValue::Absent => IndexValue::Absent,
        }
    }

    pub(crate) fn encode(&self, key: KeyBuilder) -> KeyBuilder {
        match self {
            IndexValue::Bool(b) => key.raw(&[0x01, u8::from(*b)]),
            IndexValue::Int(i) => key.raw(&[0x02]).i64(*i),
            IndexValue::Str(s) => key.raw(&[0x03]).str(s),
            IndexValue::Pair(s, i, j) => key.raw(&[0x04]).str(s).i64(*i).i64(*j),
            // Never encoded: `index_keys` leaves absent values out.
            IndexValue::Absent => key.raw(&[0x00]),
        }
    }

    /// The index value a JSON filter operand stands for (`None` if it has
    /// no index form).
    pub(super) fn from_json(v: &Value) -> Option<Self> {
        match v {
            Value::Bool(b) => Some(IndexValue::Bool(*b)),
            Value::Number(n) => n.as_i64().map(IndexValue::Int),
            Value::String(s) => Some(IndexValue::Str(s.clone())),
            _ => None,
        }
    }
}

/// A condition on a row's fields (compared as JSON: numbers with numbers,
/// strings with strings).
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `field == value`.
    Eq(String, Value),
    /// `field != value`.
    Ne(String, Value),
    /// `field` is one of the values.
    In(String, Vec<Value>),
    /// `field < value`.
    Lt(String, Value),
    /// `field <= value`.
    Le(String, Value),
    /// `field > value`.
    Gt(String, Value),
    /// `field >= value`.
    Ge(String, Value),
    /// All of them.
    And(Vec<Filter>),
    /// Any of them.
    Or(Vec<Filter>),
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

impl Filter {
    /// `field == value`.
    pub fn eq(field: &str, value: impl Into<Value>) -> Self {
        Filter::Eq(field.into(), value.into())
    }

    pub(super) fn matches(&self, row: &Value) -> bool {
        // A field, or a dotted path into nested objects (`indexed.customer`).
        let get = |f: &str| {
            row.get(f)
                .or_else(|| f.split('.').try_fold(row, |v, k| v.get(k)))
                .unwrap_or(&Value::Null)
        };
        let ord = |f: &str, v: &Value| compare(get(f), v);
        match self {
            Filter::Eq(f, v) => get(f) == v,
            Filter::Ne(f, v) => get(f) != v,
            Filter::In(f, vs) => vs.contains(get(f)),
            Filter::Lt(f, v) => ord(f, v) == Some(Ordering::Less),
            Filter::Le(f, v) => matches!(ord(f, v), Some(Ordering::Less | Ordering::Equal)),
            Filter::Gt(f, v) => ord(f, v) == Some(Ordering::Greater),
            Filter::Ge(f, v) => matches!(ord(f, v), Some(Ordering::Greater | Ordering::Equal)),
            Filter::And(all) => all.iter().all(|x| x.matches(row)),
            Filter::Or(any) => any.iter().any(|x| x.matches(row)),
        }
    }
}

/// What to read: filters, an order, a page size and where to continue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// Every row must match all of these.
    pub filters: Vec<Filter>,
    /// Order by this indexed field; `true` for descending.
    pub order_by: Option<(String, bool)>,
    /// Rows per page (`None`: everything in one page).
    pub limit: Option<usize>,
    /// Continue after this cursor (from a previous [`Page`]).
    pub after: Option<Vec<u8>>,
}

impl Query {
    /// Every row.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a filter.
    pub fn filter(mut self, f: Filter) -> Self {
        self.filters.push(f);
        self
    }

    /// Orders by an indexed field.
    pub fn order_by(mut self, field: &str, descending: bool) -> Self {
        self.order_by = Some((field.into(), descending));
        self
    }

    /// Sets the page size.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
}

/// One page of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The rows, in query order.
    pub rows: Vec<T>,
    /// Where the next page starts; `None` when there is no more.
    pub next: Option<Vec<u8>>,
    /// The key each row was found at (its index entry, or the row), in
    /// order: where a page ending with that row would go on.
    pub keys: Vec<Vec<u8>>,
}
