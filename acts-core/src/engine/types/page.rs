//! [`Page`]: one page of a query's matches and where the next begins —
//! the one answer of every query (processes, tasks, deliveries).

use serde::{Deserialize, Serialize};

/// One page of a query's matches, in the query's order. A page may hold
/// fewer items than the limit (a user's page holds only what they may
/// see) and still have a next one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Page<T> {
    /// The matches on this page.
    pub items: Vec<T>,
    /// The cursor of the next page (`None`: this was the last); pass it
    /// back as the query's `cursor`.
    pub next: Option<String>,
    /// Each item's own cursor, when the query asked for them (its
    /// `item_cursors`): where a page ending with that item would go on.
    /// They order as their items do (as byte strings; reversed for a
    /// descending query): a cluster merges its partitions' pages by them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cursors: Vec<String>,
}

impl<T> Page<T> {
    pub(crate) fn new(items: Vec<T>, next: Option<String>) -> Self {
        Self {
            items,
            next,
            cursors: Vec::new(),
        }
    }

    /// The page with each item's own cursor.
    pub(crate) fn with_cursors(mut self, cursors: Vec<String>) -> Self {
        self.cursors = cursors;
        self
    }
}
