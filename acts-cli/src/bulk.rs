//! `acts bulk`: one operator action on every process a query matches, as
//! a durable job (the engine's bulk jobs) — preview it, start it and
//! follow it with a progress bar, list, report, cancel. Written once
//! against [`Acts`]: on a store the job runs in this process while the
//! command follows it; through a server, on the server.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use acts::{BulkAction, BulkJob, BulkOutcome, BulkRequest, BulkState, ProcessQuery};

use crate::answers::parse_vars;
use crate::api::Acts;
use crate::cli_bulk::{BulkCommand, BulkRun, ProcessFilter};
use crate::failure::Failure;
use crate::output::{print_as, print_json, print_processes};

/// How often a followed job's progress is read.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Runs `command` through `acts`.
pub(crate) async fn bulk(acts: &impl Acts, command: BulkCommand) -> Result<u8, Failure> {
    let (action, run) = match command {
        BulkCommand::Pause(r) => (BulkAction::Pause, r),
        BulkCommand::Resume(r) => (BulkAction::Resume, r),
        BulkCommand::Terminate(r) => (BulkAction::Terminate, r),
        BulkCommand::Retry(r) => (BulkAction::Retry, r),
        BulkCommand::Rewind(r) => (BulkAction::Rewind, r),
        BulkCommand::Migrate(r) => (BulkAction::Migrate, r),
        BulkCommand::Remove(r) => (BulkAction::Remove, r),
        BulkCommand::Status { job, json } => {
            let job = acts.bulk_job(&job).await?;
            return print_as(&job, json, print_job);
        }
        BulkCommand::Ls { json } => {
            let jobs =
                crate::query::all_pages(|c| async move { acts.bulk_jobs(c.as_deref()).await })
                    .await?;
            return print_as(&jobs, json, |jobs| print_jobs(jobs));
        }
        BulkCommand::Wait { job } => {
            acts.resume_bulk(&job).await?;
            return follow(acts, &job).await;
        }
        BulkCommand::Rm { job } => {
            acts.remove_bulk(&job).await?;
            println!("removed: {job}");
            return Ok(0);
        }
        BulkCommand::Cancel { job } => {
            let job = acts.cancel_bulk(&job).await?;
            print_job(&job);
            return Ok(0);
        }
        BulkCommand::Report { job, outcome, json } => {
            let outcome = outcome.as_deref().map(parse_outcome).transpose()?;
            let items = crate::query::all_pages(|c| {
                let job = job.clone();
                async move { acts.bulk_items(&job, outcome, c.as_deref()).await }
            })
            .await?;
            return print_as(&items, json, |items| {
                println!("{:<24} {:<8} REASON", "PID", "OUTCOME");
                for i in items {
                    let reason = i.reason.as_deref().unwrap_or("-");
                    println!("{:<24} {:<8} {reason}", i.pid, i.outcome.as_str());
                }
            });
        }
    };
    let request = request(action, &run)?;
    if run.dry_run {
        let preview = acts.bulk_preview(&request).await?;
        return print_as(&preview, run.json, |p| {
            println!(
                "would {} {} process(es); the first {}:",
                action.as_str(),
                p.count,
                p.sample.len()
            );
            print_processes(&p.sample);
        });
    }
    let job = acts.bulk_start(request).await?;
    if run.detach {
        return print_as(&job, run.json, |j| println!("started: {}", j.id));
    }
    if !run.json {
        eprintln!(
            "started: {} (Ctrl-C stops following; `acts bulk status {}` shows it later)",
            job.id, job.id
        );
    }
    let code = follow(acts, &job.id).await?;
    if run.json {
        print_json(&acts.bulk_job(&job.id).await?)?;
    }
    Ok(code)
}

/// The request of `acts bulk ACTION`.
fn request(action: BulkAction, run: &BulkRun) -> Result<BulkRequest, Failure> {
    let query = process_query(&run.filter)?;
    if query == ProcessQuery::new() && !run.all {
        return Err(Failure::input(format!(
            "acts bulk {}: give a filter (--model, --state, --ecode, --where, ...) or --all to act on every process",
            action.as_str()
        )));
    }
    let mut r = BulkRequest::new(action, query).vars(parse_vars(&run.vars)?);
    r.all = run.all;
    r.reason = run.reason.clone();
    r.step = run.step.clone();
    r.version = run.to_version;
    r.per_second = run.per_second;
    if let Some(path) = &run.map {
        r.map = crate::query::migration_plan("", 0, 0, Some(path), &[])?.map;
    }
    Ok(r)
}

/// The query of a bulk job's filters.
fn process_query(f: &ProcessFilter) -> Result<ProcessQuery, Failure> {
    let mut q = crate::query::where_query(f.model.as_deref(), f.state.as_deref(), &f.wheres)?;
    q.revision = f.version;
    q.ecode = f.ecode.clone();
    q.concurrency_key = f.key.clone();
    q.started_by = f.started_by.clone();
    q.waiting_for = f
        .waiting_for
        .as_deref()
        .map(crate::query::parse_waiting_for)
        .transpose()?;
    q.started_after = f.started_after.as_deref().map(instant).transpose()?;
    q.started_before = f.started_before.as_deref().map(instant).transpose()?;
    Ok(q)
}

/// A time as ms since the epoch: RFC 3339 or a number of ms.
fn instant(text: &str) -> Result<i64, Failure> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            Failure::input(format!(
                "'{text}' is not a time: give RFC 3339 (2026-12-04T00:00:00Z) or ms since the epoch ({e})"
            ))
        })
}

fn parse_outcome(text: &str) -> Result<BulkOutcome, Failure> {
    match text {
        "done" => Ok(BulkOutcome::Done),
        "skipped" => Ok(BulkOutcome::Skipped),
        "failed" => Ok(BulkOutcome::Failed),
        other => Err(Failure::input(format!(
            "--outcome '{other}': give done, skipped or failed"
        ))),
    }
}

/// Follows job `id` to its end, drawing its progress on stderr; exit 0
/// when it is done, 1 when it failed or was cancelled.
async fn follow(acts: &impl Acts, id: &str) -> Result<u8, Failure> {
    let tty = std::io::stderr().is_terminal();
    let mut last_line = String::new();
    loop {
        let job = acts.bulk_job(id).await?;
        let line = progress(&job);
        if tty {
            eprint!("\r{line}\x1b[K");
            let _ = std::io::stderr().flush();
        } else if line != last_line {
            eprintln!("{line}");
        }
        last_line = line;
        if job.state.is_final() {
            if tty {
                eprintln!();
            }
            if job.failed > 0 {
                eprintln!(
                    "{} failed: `acts bulk report {id} --outcome failed` says why",
                    job.failed
                );
            }
            return match job.state {
                BulkState::Done => Ok(0),
                BulkState::Failed => Err(Failure::run(format!(
                    "bulk job {id} failed: {}",
                    job.error.as_deref().unwrap_or("no reason recorded")
                ))),
                _ => Err(Failure::run(format!("bulk job {id} was cancelled"))),
            };
        }
        if !job.active {
            return Err(Failure::run(format!(
                "bulk job {id} is running but nobody works on it: it goes on when the store is served (`acts serve`) or with `acts bulk wait {id}`"
            )));
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

/// One line of a job's progress: a bar, the counts, the state.
fn progress(job: &BulkJob) -> String {
    let handled = job.done + job.skipped + job.failed;
    let bar = match job.total {
        Some(total) if total > 0 => {
            let filled = ((handled.min(total) * 30) / total) as usize;
            format!(
                "[{}{}] {handled}/{total}",
                "#".repeat(filled),
                ".".repeat(30 - filled)
            )
        }
        _ => format!("{handled} handled"),
    };
    format!(
        "{} {bar}  done {}  skipped {}  failed {}  ({})",
        job.id,
        job.done,
        job.skipped,
        job.failed,
        job.state.as_str()
    )
}

fn print_job(job: &BulkJob) {
    let r = &job.request;
    println!("job:      {}", job.id);
    println!("action:   {}", r.action.as_str());
    // The filters given (the query's unset fields left out).
    let mut filters = serde_json::to_value(&r.query).unwrap_or_default();
    if let Some(map) = filters.as_object_mut() {
        map.retain(|_, v| !v.is_null() && *v != serde_json::Value::Bool(false));
    }
    println!("where:    {filters}");
    println!(
        "state:    {}{}",
        job.state.as_str(),
        if job.active { " (working)" } else { "" }
    );
    if let Some(by) = &job.by {
        println!("by:       {by}");
    }
    println!("progress: {}", progress(job));
    if let Some(e) = &job.error {
        println!("error:    {e}");
    }
}

fn print_jobs(jobs: &[BulkJob]) {
    println!(
        "{:<16} {:<10} {:<10} {:>8} {:>8} {:>8} {:>8}",
        "JOB", "ACTION", "STATE", "TOTAL", "DONE", "SKIPPED", "FAILED"
    );
    for j in jobs {
        let total = j.total.map_or("-".into(), |t| t.to_string());
        println!(
            "{:<16} {:<10} {:<10} {:>8} {:>8} {:>8} {:>8}",
            j.id,
            j.request.action.as_str(),
            j.state.as_str(),
            total,
            j.done,
            j.skipped,
            j.failed
        );
    }
}
