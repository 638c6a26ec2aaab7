//! [`EngineError`]: every way an engine call can fail, with messages that
//! say what to do.

use std::sync::Arc;
use std::time::Duration;

use crate::durable::{CollectionError, WriteError};
use crate::model::ModelError;
use crate::package::PackageError;
use crate::scheduler::ActionError;

/// Why an engine call failed. Nothing was changed unless the variant says
/// otherwise.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The model does not parse or does not validate.
    #[error(transparent)]
    Model(Arc<ModelError>),
    /// No deployed model has that id.
    #[error("model '{0}' is not deployed (deploy it first, or check the id)")]
    ModelNotFound(String),
    /// The model has no such version.
    #[error("model '{model}' has no version {revision} (`acts versions {model}` lists them)")]
    VersionNotFound {
        /// The model.
        model: String,
        /// The revision asked for.
        revision: u32,
    },
    /// A version cannot be removed: unfinished processes run on it, or it
    /// is the model's latest. Nothing was removed.
    #[error("model '{model}': version {revision} cannot be removed: {reason}")]
    VersionInUse {
        /// The model.
        model: String,
        /// The revision.
        revision: u32,
        /// Why (and what to do).
        reason: String,
    },
    /// A query that cannot be answered as asked (what is wrong, and how
    /// to ask instead); nothing was read.
    #[error("query: {0}")]
    Query(String),
    /// A well-formed request that does not fit what is deployed or stored
    /// (a variable the model does not index, a migration map naming a
    /// step the version lacks, a migration to the version the processes
    /// are on); nothing changed.
    #[error("{0}")]
    Conflict(String),
    /// No process has that id.
    #[error("cannot find process '{0}'")]
    ProcessNotFound(String),
    /// No bulk job has that id.
    #[error("cannot find bulk job '{0}' (list the jobs with `acts bulk ls` or GET /api/v1/bulk)")]
    BulkJobNotFound(String),
    /// A bulk job cannot be removed while it runs.
    #[error(
        "bulk job '{0}' is running: cancel it first (acts bulk cancel, POST /api/v1/bulk/{0}/cancel)"
    )]
    BulkJobRunning(String),
    /// A bulk job start named the id of a job with another request.
    #[error(
        "bulk job '{0}' exists with another request: give another id (the same request returns that job)"
    )]
    BulkJobExists(String),
    /// No task of the process has that id.
    #[error("process '{pid}': cannot find task '{tid}'")]
    TaskNotFound {
        /// The process.
        pid: String,
        /// The task asked for.
        tid: String,
    },
    /// A process with that id exists already.
    #[error("process '{0}' is duplicated in the running process list (pick another pid)")]
    Duplicated(String),
    /// An external process id that cannot be used.
    #[error("invalid process id '{pid}': {message}")]
    BadPid {
        /// The id.
        pid: String,
        /// What is wrong.
        message: String,
    },
    /// Start options that do not match the model's `inputs`.
    #[error("model '{model}': inputs validation error: {message}")]
    Inputs {
        /// The model.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// The action was refused (unknown task, wrong state, bad options).
    #[error(transparent)]
    Action(#[from] ActionError),
    /// A package could not be registered.
    #[error(transparent)]
    Package(#[from] PackageError),
    /// Reading the store failed (never reported as "not found").
    #[error("store read failed: {0}")]
    Store(Arc<CollectionError>),
    /// Writing the transition failed: it was not applied; the process is
    /// reloaded from the store on its next use.
    #[error("process '{pid}': the transition was not committed: {source}")]
    Commit {
        /// The process.
        pid: String,
        /// The writer's error.
        source: WriteError,
    },
    /// This node no longer owns the store: another node took it over (a
    /// higher epoch), and the store refuses every write of this one. It
    /// has stepped down; nothing it does is applied.
    #[error("this engine node was fenced off the store and stepped down: {0}")]
    Fenced(String),
    /// Another node holds the store's lease and it has not expired.
    #[error(
        "the store is owned by node '{owner}' (epoch {epoch}), whose lease runs for another {:.1} s unless renewed; start after that, or stop '{owner}' cleanly to hand it over", *.remaining_ms as f64 / 1000.0
    )]
    LeaseHeld {
        /// The node holding it.
        owner: String,
        /// Its epoch.
        epoch: u64,
        /// When its lease expires unless renewed (ms on the engine clock).
        until: i64,
        /// How long that is from now (ms).
        remaining_ms: i64,
    },
    /// The store was written by a newer acts, in a format this one cannot
    /// read; refused at open, before anything was written.
    #[error(
        "the store holds format {found} (recorded by acts {written_by}); this acts ({this}) reads formats up to {supported}: run acts {written_by} or later on it, or restore the copy of the store taken before the upgrade (docs/OPERATIONS.md, \"Upgrading acts\")"
    )]
    StoreFormatTooNew {
        /// The store's format.
        found: u64,
        /// The acts version that recorded it.
        written_by: String,
        /// The newest format this acts reads.
        supported: u64,
        /// This acts's version.
        this: &'static str,
    },
    /// A stored process could not be rebuilt.
    #[error("{0}")]
    Corrupt(String),
    /// A channel operation that cannot be done.
    #[error("channel: {0}")]
    Channel(String),
    /// A delivery that does not exist.
    #[error("channel '{channel}': no delivery of message '{msg_id}'")]
    DeliveryNotFound {
        /// The channel.
        channel: String,
        /// The message id.
        msg_id: String,
    },
    /// No deployed model has a trigger of that id.
    #[error(
        "trigger '{0}' does not exist (ids are <model id>:<trigger id>; `acts models` lists the models)"
    )]
    TriggerNotFound(String),
    /// A trigger that cannot fire as asked.
    #[error("trigger '{id}': {message}")]
    Trigger {
        /// The event id (`<model>:<trigger>`).
        id: String,
        /// What is wrong.
        message: String,
    },
    /// A sealed-data operation that cannot be done.
    #[error("{0}")]
    Seal(String),
    /// The JavaScript runtime could not check or run a script.
    #[error("{0}")]
    Script(String),
    /// The executor's principal may not do this; nothing changed.
    #[error("'{principal}' may not do this: {reason}")]
    Denied {
        /// Who asked.
        principal: String,
        /// Why not (what role or address would allow it).
        reason: String,
    },
    /// The engine was closed.
    #[error("the engine is closed")]
    Closed,
    /// The process was removed while this call was under way; nothing of
    /// the call was written.
    #[error("process '{0}' was removed; nothing was written")]
    Removed(String),
    /// The resident set stayed full while the call waited for a slot for
    /// an in-flight process; nothing was done.
    #[error(
        "process '{pid}' is not resident and the engine is at its cache cap ({cap} processes): no slot freed within {waited:?}; try again, or raise the cache cap"
    )]
    Busy {
        /// The process.
        pid: String,
        /// The cap.
        cap: usize,
        /// How long the call waited.
        waited: Duration,
    },
    /// A finished process cannot be taken back into flight now: its
    /// concurrency key has no free slot.
    #[error(
        "process '{pid}' cannot run again now: its concurrency key '{key}' has all its {limit} slot(s) taken; try again when a process of that key ends"
    )]
    KeyBusy {
        /// The process.
        pid: String,
        /// Its concurrency key.
        key: String,
        /// The key's limit.
        limit: u32,
    },
    /// An input is larger than its configured limit; nothing was done.
    #[error("{what} is {size} bytes, more than the limit of {limit} bytes ({setting})")]
    TooLarge {
        /// What was too large.
        what: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
        /// The setting that holds the limit.
        setting: &'static str,
    },
}

impl EngineError {
    /// Whether the store's data is damaged (a corrupt file or row): no
    /// retry helps; the data must be restored.
    pub fn is_damaged_store(&self) -> bool {
        use crate::durable::CollectionError;
        match self {
            EngineError::Corrupt(_) => true,
            EngineError::Store(c) => match &**c {
                CollectionError::Store(e) => e.kind() == acts_store::ErrorKind::Corruption,
                CollectionError::Corrupt { .. } => true,
                CollectionError::BadQuery { .. } => false,
            },
            _ => false,
        }
    }
}

impl From<CollectionError> for EngineError {
    fn from(e: CollectionError) -> Self {
        EngineError::Store(Arc::new(e))
    }
}

impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        EngineError::Model(Arc::new(e))
    }
}

impl From<acts_store::StoreError> for EngineError {
    fn from(e: acts_store::StoreError) -> Self {
        EngineError::Store(Arc::new(CollectionError::Store(e)))
    }
}
