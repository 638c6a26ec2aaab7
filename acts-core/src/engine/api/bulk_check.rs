//! What a bulk job's request must be: a filter or `all: true`, a valid
//! id, pace and reason, and only the options its action takes (the same
//! rules the OpenAPI document states, in acts-server's `contract`).

use crate::engine::api::bulk::{BulkAction, BulkRequest, MAX_BULK_RATE, MAX_BULK_REASON};
use crate::engine::api::find::{ProcessQuery, decode_cursor};
use crate::engine::types::error::EngineError;

impl BulkRequest {
    /// Fails with what is missing or wrong for this action.
    pub(super) fn check(&self) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::Query(m));
        let action = self.action.as_str();
        let unfiltered = ProcessQuery {
            limit: None,
            cursor: None,
            descending: false,
            ..self.query.clone()
        } == ProcessQuery::default();
        if unfiltered && !self.all {
            return bad(format!(
                "a bulk {action} with no filter acts on every process: give a filter in `where` (model, state, ecode, ...) or `all: true`"
            ));
        }
        // The query's cursor is not used, but it is a cursor: one of
        // another shape is refused as in a process query.
        if let Some(c) = &self.query.cursor {
            decode_cursor(c)?;
        }
        if let Some(id) = &self.id
            && (id.is_empty()
                || id.len() > 64
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)))
        {
            return bad(format!(
                "the job id '{id}' must be 1 to 64 letters, digits, '-' or '_'"
            ));
        }
        let rate = self.rate();
        if rate == 0 || rate > MAX_BULK_RATE {
            return bad(format!(
                "per_second is {rate}: give 1 to {MAX_BULK_RATE} processes per second"
            ));
        }
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_BULK_REASON)
        {
            return bad(format!(
                "the reason is longer than {MAX_BULK_REASON} characters"
            ));
        }
        let uses = |given: bool, field: &str, actions: &str| {
            if given {
                bad(format!(
                    "a bulk {action} takes no `{field}` (only {actions} do)"
                ))
            } else {
                Ok(())
            }
        };
        let takes_vars = matches!(
            self.action,
            BulkAction::Retry | BulkAction::Rewind | BulkAction::Migrate
        );
        uses(
            !self.vars.is_empty() && !takes_vars,
            "vars",
            "retry, rewind, migrate",
        )?;
        let takes_reason = matches!(self.action, BulkAction::Pause | BulkAction::Terminate);
        uses(
            self.reason.is_some() && !takes_reason,
            "reason",
            "pause, terminate",
        )?;
        uses(
            self.step.is_some() && self.action != BulkAction::Rewind,
            "step",
            "rewind",
        )?;
        let migrate = self.action == BulkAction::Migrate;
        uses(self.version.is_some() && !migrate, "version", "migrate")?;
        uses(!self.map.is_empty() && !migrate, "map", "migrate")?;
        match self.action {
            BulkAction::Rewind if self.step.as_deref().is_none_or(str::is_empty) => {
                bad("a bulk rewind needs `step`: the step to go back to".into())
            }
            BulkAction::Migrate if self.version.is_none() => {
                bad("a bulk migrate needs `version`: the version to move to".into())
            }
            _ => Ok(()),
        }
    }
}
