//! [`census_of`]: what a store at a URL holds, counted without running
//! anything — how `acts backup` and `acts restore` check a copy (it opens,
//! its rows read, and this many models and processes are in it).

use acts_core::engine::{Census, Engine, EngineError};

use crate::{OpenStoreError, open_store};

/// Why [`census_of`] could not count a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CensusError {
    /// The store did not open.
    #[error("it does not open: {0}")]
    Open(#[from] OpenStoreError),
    /// The engine could not start on it or read it (a newer store
    /// format, damaged rows).
    #[error("it cannot be read: {0}")]
    Engine(#[from] EngineError),
}

/// Opens the store at `url` with an engine that resumes nothing, counts
/// its models and processes (from the indexes), and closes it. A store
/// written before formats were recorded is upgraded on the way (as any
/// start does).
pub async fn census_of(url: &str) -> Result<Census, CensusError> {
    let store = open_store(url).await?;
    let engine = Engine::builder()
        .store(store)
        .resume_on_start(false)
        .start()
        .await?;
    let census = engine.executor().proc().census().await;
    engine.close().await;
    Ok(census?)
}
