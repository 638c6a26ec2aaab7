//! One order over every partition's page of a listing: each partition's
//! page carries each item's own cursor (`acts_server::ITEM_CURSORS`),
//! which order as the items do, so the pages merge like sorted runs — a
//! k-way merge that takes exactly `limit` items, never one a partition
//! could still have an earlier item than (a partition whose page ended
//! before its walk did bounds what may be taken), and leaves each
//! partition's cursor right after the last of its items taken.
//!
//! Pure: no I/O (the fan-out asks the partitions).

use serde_json::Value;

/// One partition's page: its items, their cursors (same length), and
/// where its walk stopped (`None`: it has no more).
pub(crate) struct Run {
    pub(crate) partition: u32,
    pub(crate) items: Vec<Value>,
    pub(crate) cursors: Vec<String>,
    pub(crate) next: Option<String>,
}

/// What a merge took, and where each partition goes on.
#[derive(Debug, PartialEq)]
pub(crate) struct Merged {
    pub(crate) items: Vec<Value>,
    /// Per partition: `Some(None)` it is done, `Some(Some(c))` it goes on
    /// after `c`, `None` it took nothing (its cursor stays as it was).
    pub(crate) after: Vec<(u32, Option<Option<String>>)>,
}

/// Merges `runs` in cursor order (`descending`: largest first), at most
/// `limit` items.
pub(crate) fn merge(runs: Vec<Run>, limit: usize, descending: bool) -> Merged {
    // Before `a` in the listing's order.
    let before = |a: &str, b: &str| if descending { a > b } else { a < b };
    // No item past the earliest point a partition's walk stopped at may
    // be taken: that partition may hold more before it.
    let bound: Option<&str> = runs
        .iter()
        .filter_map(|r| r.next.as_deref())
        .reduce(|a, b| if before(b, a) { b } else { a });
    let mut heads = vec![0usize; runs.len()];
    let mut items = Vec::new();
    while items.len() < limit {
        let pick = runs
            .iter()
            .enumerate()
            .filter(|(i, r)| heads[*i] < r.items.len())
            .min_by(|(i, a), (j, b)| {
                let (x, y) = (&a.cursors[heads[*i]], &b.cursors[heads[*j]]);
                if before(x, y) {
                    std::cmp::Ordering::Less
                } else if before(y, x) {
                    std::cmp::Ordering::Greater
                } else {
                    a.partition.cmp(&b.partition)
                }
            })
            .map(|(i, _)| i);
        let Some(i) = pick else { break };
        let cursor = &runs[i].cursors[heads[i]];
        if bound.is_some_and(|b| before(b, cursor)) {
            break;
        }
        items.push(runs[i].items[heads[i]].clone());
        heads[i] += 1;
    }
    let after = runs
        .iter()
        .zip(&heads)
        .map(|(r, &took)| {
            let at = if took == r.items.len() {
                // All of its page: it goes on where its walk stopped.
                Some(r.next.clone())
            } else if took > 0 {
                Some(Some(r.cursors[took - 1].clone()))
            } else {
                None
            };
            (r.partition, at)
        })
        .collect();
    Merged { items, after }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(partition: u32, keys: &[&str], next: Option<&str>) -> Run {
        Run {
            partition,
            items: keys.iter().map(|k| json!(k)).collect(),
            cursors: keys.iter().map(|k| (*k).to_owned()).collect(),
            next: next.map(str::to_owned),
        }
    }

    #[test]
    fn pages_merge_into_one_order_with_an_exact_limit() {
        let m = merge(
            vec![
                run(0, &["a", "d", "e"], Some("e")),
                run(1, &["b"], None),
                run(2, &["c", "f", "g"], Some("g")),
            ],
            3,
            false,
        );
        assert_eq!(m.items, vec![json!("a"), json!("b"), json!("c")]);
        assert_eq!(
            m.after,
            vec![
                (0, Some(Some("a".into()))),
                (1, Some(None)),
                (2, Some(Some("c".into())))
            ]
        );
    }

    #[test]
    fn nothing_is_taken_past_where_a_short_page_stopped() {
        // Partition 1 stopped at "b" with fewer items than asked (its
        // caller may not see some): it may still hold "c".
        let m = merge(
            vec![run(0, &["a", "d"], Some("d")), run(1, &[], Some("b"))],
            2,
            false,
        );
        assert_eq!(m.items, vec![json!("a")]);
        assert_eq!(
            m.after,
            vec![(0, Some(Some("a".into()))), (1, Some(Some("b".into())))]
        );
    }

    #[test]
    fn a_descending_listing_merges_largest_first() {
        let m = merge(
            vec![run(0, &["e", "a"], None), run(1, &["d", "c"], None)],
            3,
            true,
        );
        assert_eq!(m.items, vec![json!("e"), json!("d"), json!("c")]);
        assert_eq!(m.after, vec![(0, Some(Some("e".into()))), (1, Some(None))]);
    }
}
