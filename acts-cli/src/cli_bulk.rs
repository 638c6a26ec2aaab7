//! The flags of `acts bulk`: the action and its options, the query that
//! picks the processes (the filters of `acts ps`, and more), and the
//! commands that follow, report on and cancel a job.

use clap::{Args, Subcommand};

/// `acts bulk ...`.
#[derive(Debug, Subcommand)]
pub enum BulkCommand {
    /// Pause every matching process (--reason).
    Pause(BulkRun),
    /// Resume every matching paused process.
    Resume(BulkRun),
    /// Terminate every matching process (--reason).
    Terminate(BulkRun),
    /// Retry every matching process that ended in an error (--var).
    Retry(BulkRun),
    /// Rewind every matching process to --step (--var).
    Rewind(BulkRun),
    /// Move every matching process to --version of its model (--map,
    /// --var).
    Migrate(BulkRun),
    /// Remove every matching process and every row of it.
    Remove(BulkRun),
    /// Show a job and its progress.
    Status {
        /// The job's id.
        job: String,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the jobs, newest first.
    Ls {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Follow a job to its end with a progress bar (on a store: work on
    /// it here if nobody does).
    Wait {
        /// The job's id.
        job: String,
    },
    /// Cancel a job: it stops after the processes it is acting on now;
    /// what it did stays done.
    Cancel {
        /// The job's id.
        job: String,
    },
    /// Remove a job that ended, and its report (the processes keep what
    /// it did).
    Rm {
        /// The job's id.
        job: String,
    },
    /// What a job did to each process, in pid order.
    Report {
        /// The job's id.
        job: String,
        /// Only this outcome: done, skipped or failed.
        #[arg(long)]
        outcome: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
}

/// A bulk job to run: which processes, the action's options, how.
#[derive(Debug, Clone, Args)]
pub struct BulkRun {
    /// Which processes.
    #[command(flatten)]
    pub filter: ProcessFilter,
    /// Every process, when no filter is given (a bulk action on every
    /// process is never the default).
    #[arg(long)]
    pub all: bool,
    /// Count the matches and show the first 20; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Why (pause, terminate; kept in each process's history).
    #[arg(long)]
    pub reason: Option<String>,
    /// A process variable to set, KEY=JSON (retry, rewind, migrate);
    /// repeatable.
    #[arg(long = "var", value_name = "KEY=JSON")]
    pub vars: Vec<String>,
    /// The step to go back to (rewind).
    #[arg(long, value_name = "STEP")]
    pub step: Option<String>,
    /// The version to move to (migrate).
    #[arg(long, value_name = "REVISION")]
    pub to_version: Option<u32>,
    /// A YAML or JSON file mapping old node ids to new ones (migrate).
    #[arg(long, value_name = "FILE")]
    pub map: Option<std::path::PathBuf>,
    /// The job's pace, processes per second (default 1,000): its own
    /// budget beside live traffic.
    #[arg(long, value_name = "N")]
    pub per_second: Option<u32>,
    /// Start the job and return its id; do not follow it.
    #[arg(long)]
    pub detach: bool,
    /// Print the preview or the job as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Which processes a bulk job acts on (every filter given must hold).
#[derive(Debug, Clone, Default, Args)]
pub struct ProcessFilter {
    /// Of this model.
    #[arg(long)]
    pub model: Option<String>,
    /// Running this version of the model.
    #[arg(long, value_name = "REVISION")]
    pub version: Option<u32>,
    /// In this state (running, completed, error, aborted, ...).
    #[arg(long)]
    pub state: Option<String>,
    /// Ended with this error code.
    #[arg(long)]
    pub ecode: Option<String>,
    /// Of this concurrency key.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Waiting for this: concurrency or admission (parked), or gate (a
    /// task at a step's or act's key or rate).
    #[arg(long, value_name = "WHAT")]
    pub waiting_for: Option<String>,
    /// Started by this principal.
    #[arg(long, value_name = "ID")]
    pub started_by: Option<String>,
    /// Started at or after this time (RFC 3339, e.g. 2026-12-04T00:00:00Z,
    /// or ms since the epoch).
    #[arg(long, value_name = "TIME")]
    pub started_after: Option<String>,
    /// Started before this time (RFC 3339 or ms).
    #[arg(long, value_name = "TIME")]
    pub started_before: Option<String>,
    /// An indexed variable's condition: VAR=VALUE, VAR>=VALUE, VAR<=VALUE
    /// (as `acts ps --where`; needs --model); repeatable on one variable.
    #[arg(long = "where", value_name = "CONDITION")]
    pub wheres: Vec<String>,
}
