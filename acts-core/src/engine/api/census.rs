//! [`Census`]: what a store holds, counted from its indexes (no process
//! row read) — what `acts backup` and `acts restore` say of a copy.

use std::collections::BTreeMap;

use crate::engine::api::executor::Executor;
use crate::engine::types::error::EngineError;
use crate::scheduler::TaskState;

/// What a store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Census {
    /// The deployed models.
    pub models: usize,
    /// The processes.
    pub processes: usize,
    /// The processes by state (only the states some process is in).
    pub by_state: BTreeMap<String, usize>,
}

impl Executor {
    /// `proc().census` ([`ProcOps::census`](super::ProcOps::census)).
    pub(crate) async fn census(&self) -> Result<Census, EngineError> {
        let mut census = Census {
            models: self.models().await?.len(),
            ..Census::default()
        };
        // Every state (a process is never `none` or `skipped`: counted as 0).
        for state in TaskState::ALL {
            let n = self.count_processes(state).await?;
            if n > 0 {
                census.processes += n;
                census.by_state.insert(state.as_str().to_owned(), n);
            }
        }
        Ok(census)
    }
}

impl std::fmt::Display for Census {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} model(s), {} process(es)",
            self.models, self.processes
        )?;
        if !self.by_state.is_empty() {
            let states: Vec<String> = self
                .by_state
                .iter()
                .map(|(s, n)| format!("{n} {s}"))
                .collect();
            write!(f, " ({})", states.join(", "))?;
        }
        Ok(())
    }
}
