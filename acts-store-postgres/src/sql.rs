//! The SQL of one namespace's table: its name, its shape, and the text of
//! each statement (a scan's text depends on its bounds and direction; each
//! text is prepared once per connection).

use std::ops::Bound;

use acts_store::{ErrorKind, ScanRange, StoreError, StoreOp};

use crate::error::BACKEND;

/// The longest namespace (the table name must stay within PostgreSQL's 63
/// bytes).
pub(crate) const MAX_NAMESPACE: usize = 48;

/// Rows one statement of an unlimited scan reads at most (a scan pages in
/// one snapshot so no statement holds a huge result).
pub(crate) const SCAN_PAGE: usize = 1000;

/// Whether a write may meet other writers of its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writers {
    /// It holds the table's writer lock (a conditional batch).
    Locked,
    /// Others may write the same keys at the same time.
    Others,
}

/// How a batch's puts are written (see [`Sql::write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    Upsert,
    UpdateThenInsert,
}

/// The statements of one namespace's table.
#[derive(Debug, Clone)]
pub(crate) struct Sql {
    /// The quoted table name.
    pub(crate) table: String,
}

impl Sql {
    /// The table of namespace `ns` (letters, digits, `_` and `-`, at most
    /// [`MAX_NAMESPACE`] characters).
    pub(crate) fn of(ns: &str) -> Result<Self, StoreError> {
        let ok = !ns.is_empty()
            && ns.len() <= MAX_NAMESPACE
            && ns
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b':');
        if !ok {
            return Err(StoreError::new(
                BACKEND,
                StoreOp::Open,
                ErrorKind::InvalidInput,
                format!(
                    "namespace '{ns}': use 1 to {MAX_NAMESPACE} letters, digits, '_', '-' or ':' (e.g. ?namespace=orders)"
                ),
            ));
        }
        Ok(Self {
            table: format!("\"acts_kv_{ns}\""),
        })
    }

    /// The table's own name, unquoted (for the catalog).
    pub(crate) fn bare(&self) -> &str {
        self.table.trim_matches('"')
    }

    pub(crate) fn create(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {} (k bytea PRIMARY KEY, v bytea NOT NULL)",
            self.table
        )
    }

    pub(crate) fn get_many(&self) -> String {
        format!("SELECT k, v FROM {} WHERE k = ANY($1)", self.table)
    }

    /// One statement that writes a batch's puts (`$1` keys, `$2` values,
    /// distinct keys) and, with `deletes`, deletes the keys of `$3` (none
    /// of them among the puts'): one statement is atomic on its own, so a
    /// batch outside a transaction is one round trip.
    ///
    /// `Upsert` is `INSERT … ON CONFLICT DO UPDATE`. `UpdateThenInsert`
    /// does the same without the upsert's speculative insertion (a second
    /// WAL record per row): the present keys updated, the others inserted
    /// — correct only while no other transaction inserts one of the keys
    /// meanwhile; it then fails with a unique violation, having written
    /// nothing, and the caller runs the upsert instead.
    pub(crate) fn write(&self, how: Write, deletes: bool) -> String {
        let t = &self.table;
        let mut with = vec![format!(
            "d AS (SELECT * FROM unnest($1::bytea[], $2::bytea[]) AS d(k, v))"
        )];
        if deletes {
            with.push(format!(
                "del AS (DELETE FROM {t} WHERE k = ANY($3::bytea[]))"
            ));
        }
        match how {
            Write::Upsert => format!(
                "WITH {} INSERT INTO {t} (k, v) SELECT d.k, d.v FROM d \
                 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                with.join(", ")
            ),
            Write::UpdateThenInsert => {
                with.push(format!(
                    "u AS (UPDATE {t} SET v = d.v FROM d WHERE {t}.k = d.k RETURNING {t}.k)"
                ));
                format!(
                    "WITH {} INSERT INTO {t} (k, v) SELECT d.k, d.v FROM d \
                     WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = d.k)",
                    with.join(", ")
                )
            }
        }
    }

    pub(crate) fn delete(&self) -> String {
        format!("DELETE FROM {} WHERE k = ANY($1)", self.table)
    }

    /// Taken by a conditional batch before it reads its conditions: it
    /// conflicts with every other writer of the table (and with itself),
    /// not with readers, so no write comes between the check and the ops.
    pub(crate) fn lock_writers(&self) -> String {
        format!("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE", self.table)
    }

    /// The text of a scan of `range` (bounds as `$1`/`$2` where present,
    /// the limit as the last parameter) and whether each bound is a
    /// parameter.
    pub(crate) fn scan(&self, range: &ScanRange) -> (String, bool, bool) {
        let mut text = format!("SELECT k, v FROM {}", self.table);
        let mut conds = Vec::new();
        let mut n = 0;
        let lower = match &range.start {
            Bound::Included(_) => Some(">="),
            Bound::Excluded(_) => Some(">"),
            Bound::Unbounded => None,
        };
        if let Some(op) = lower {
            n += 1;
            conds.push(format!("k {op} ${n}"));
        }
        let upper = match &range.end {
            Bound::Included(_) => Some("<="),
            Bound::Excluded(_) => Some("<"),
            Bound::Unbounded => None,
        };
        if let Some(op) = upper {
            n += 1;
            conds.push(format!("k {op} ${n}"));
        }
        if !conds.is_empty() {
            text.push_str(" WHERE ");
            text.push_str(&conds.join(" AND "));
        }
        text.push_str(if range.reverse {
            " ORDER BY k DESC"
        } else {
            " ORDER BY k ASC"
        });
        text.push_str(&format!(" LIMIT ${}", n + 1));
        (text, lower.is_some(), upper.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_checked_and_quoted() {
        assert_eq!(Sql::of("orders-1").unwrap().table, "\"acts_kv_orders-1\"");
        for bad in ["", "a b", "x\"; DROP TABLE y; --", &"n".repeat(49)] {
            assert_eq!(Sql::of(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn a_scan_names_only_its_bounds() {
        let sql = Sql::of("t").unwrap();
        let (text, lo, hi) = sql.scan(&ScanRange::all());
        assert_eq!(
            text,
            "SELECT k, v FROM \"acts_kv_t\" ORDER BY k ASC LIMIT $1"
        );
        assert!(!lo && !hi);
        let (text, lo, hi) = sql.scan(&ScanRange::between(b"a".to_vec(), b"b".to_vec()).reversed());
        assert_eq!(
            text,
            "SELECT k, v FROM \"acts_kv_t\" WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT $3"
        );
        assert!(lo && hi);
    }
}
