//! What the inspection commands print — the same on a store and through a
//! server (`--server`) — and naming a task by id or node id.

use acts::{DeliveryInfo, MessageType, ModelInfo, ModelVersionInfo, ProcInfo, TaskInfo};
use serde_json::Value;

use crate::failure::Failure;

/// Prints `items` as one line of JSON (`json`) or with `table`; the exit
/// code of a listing.
pub(crate) fn print_as<T: serde::Serialize>(
    items: &T,
    json: bool,
    table: impl FnOnce(&T),
) -> Result<u8, Failure> {
    if json {
        print_json(items)?;
    } else {
        table(items);
    }
    Ok(0)
}

/// Prints `value` as one line of JSON.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::run(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Prints what `acts deploy` deployed.
pub(crate) fn print_deployed(info: &ModelInfo) {
    if info.unchanged {
        println!(
            "unchanged: {} (revision {} has the same content)",
            info.id, info.revision
        );
    } else {
        println!("deployed {} (revision {})", info.id, info.revision);
    }
}

/// Prints what `acts start` started: its id (alone with `quiet`) and state.
pub(crate) fn print_started(info: &ProcInfo, quiet: bool) {
    if quiet {
        println!("{}", info.pid);
    } else {
        println!("{} {}", info.pid, info.state.as_str());
    }
}

/// Prints the deployed models (`acts models`).
pub(crate) fn print_models(models: &[ModelInfo]) {
    for m in models {
        println!(
            "{:<24} {:<10} rev {:<3} {}",
            m.id, m.ver, m.revision, m.name
        );
    }
}

/// Prints a migration report (`acts migrate`).
pub(crate) fn print_migration(r: &acts::MigrationReport) {
    let p = &r.plan;
    println!(
        "{} {} from version {} to {}{}",
        if r.dry_run { "dry run:" } else { "migrated:" },
        p.model,
        p.from,
        p.to,
        if r.processes.is_empty() {
            " — no running process on the old version"
        } else {
            ""
        }
    );
    for m in &r.processes {
        println!("{} {}", m.pid, m.outcome);
        if let Some(why) = &m.reason {
            println!("  why: {why}");
        }
        for t in m.moves.iter().filter(|t| t.from != t.to) {
            println!(
                "  task {} ({}): {} → {}",
                t.tid,
                t.state.as_str(),
                t.from,
                t.to
            );
        }
        if !m.kept_as_history.is_empty() {
            println!(
                "  kept as history (node gone): {}",
                m.kept_as_history.join(", ")
            );
        }
        if !m.reannounced.is_empty() {
            println!("  interrupts announced again: {}", m.reannounced.join(", "));
        }
    }
}

/// Prints a model's versions (`acts versions`).
pub(crate) fn print_versions(versions: &[ModelVersionInfo]) {
    println!(
        "{:<5} {:<10} {:<20} {:>9} {:>10}  LATEST",
        "REV", "VER", "DEPLOYED", "PROCESSES", "UNFINISHED"
    );
    for v in versions {
        println!(
            "{:<5} {:<10} {:<20} {:>9} {:>10}  {}",
            v.model.revision,
            v.model.ver,
            when(v.model.deployed_at),
            v.processes,
            v.unfinished,
            if v.latest { "yes" } else { "" }
        );
    }
}

/// Prints a process listing (`acts ps`).
pub(crate) fn print_processes(list: &[ProcInfo]) {
    println!("{:<24} {:<16} {:<18} {:>10}", "PID", "MODEL", "STATE", "MS");
    for p in list {
        let ms = match (p.start_time, p.end_time) {
            (Some(s), Some(e)) => (e - s).to_string(),
            _ => "-".into(),
        };
        // A parked process says what it waits for.
        let state = match &p.waiting_for {
            Some(w) => format!("{} ({w})", p.state.as_str()),
            None => p.state.as_str().to_owned(),
        };
        println!("{:<24} {:<16} {:<18} {:>10}", p.pid, p.model_id, state, ms);
    }
}

/// Prints a task listing (`acts tasks`).
pub(crate) fn print_tasks(list: &[TaskInfo]) {
    println!(
        "{:<24} {:<12} {:<8} {:<16} {:<12} {:<10}",
        "PID", "TID", "KIND", "NODE", "KEY", "STATE"
    );
    for t in list {
        println!(
            "{:<24} {:<12} {:<8} {:<16} {:<12} {:<10}",
            t.pid,
            t.tid,
            t.kind.as_str(),
            t.nid,
            t.key.as_deref().unwrap_or("-"),
            t.state.as_str()
        );
    }
}

/// Prints a delivery listing (`acts deliveries`).
pub(crate) fn print_deliveries(list: &[DeliveryInfo]) {
    println!(
        "{:<16} {:<24} {:<24} {:<8} {:>5} {:<20}",
        "CHANNEL", "MESSAGE", "PID", "STATE", "TRIES", "CREATED"
    );
    for d in list {
        println!(
            "{:<16} {:<24} {:<24} {:<8} {:>5} {:<20}",
            d.channel,
            d.msg_id,
            d.pid,
            d.state.as_str(),
            d.tries,
            when(d.created_at)
        );
    }
}

/// An engine time (ms since the epoch) as UTC date and time.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// Prints a process and its task tree (`acts show`).
pub(crate) fn print_process(info: &ProcInfo, tasks: &[TaskInfo]) {
    let version = if info.model_rev > 0 {
        format!(" (version {})", info.model_rev)
    } else {
        String::new()
    };
    println!(
        "process {} of model {}{version}: {}",
        info.pid,
        info.model_id,
        info.state.as_str()
    );
    if let Some(by) = &info.started_by {
        println!("started by: {by}");
    }
    if let Some(key) = &info.concurrency_key {
        println!("concurrency key: {key}");
    }
    match info.waiting_for.as_deref() {
        Some("concurrency") => println!("waiting for: a free slot of its concurrency key"),
        Some("admission") => println!("waiting for: a place under the engine's admission cap"),
        Some("gate") => println!(
            "waiting for: a task's gate (a step's or act's concurrency or rate key; `acts tasks` shows it pending)"
        ),
        Some(other) => println!("waiting for: {other}"),
        None => {}
    }
    if let Some(e) = &info.err {
        println!("error: {} {}", e.ecode, e.message);
    }
    if let Some(p) = &info.paused {
        println!(
            "paused by {} at {}{}",
            p.by.as_deref().unwrap_or("the application"),
            when(p.at),
            if p.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", p.reason)
            }
        );
    }
    fn print(tasks: &[TaskInfo], parent: Option<&str>, depth: usize) {
        for t in tasks.iter().filter(|t| t.parent.as_deref() == parent) {
            let time = match (t.start_time, t.end_time) {
                (None, _) => String::new(),
                (Some(s), None) => format!(" since {}", when(s)),
                (Some(s), Some(e)) => format!(" {} – {} ({} ms)", when(s), when(e), e - s),
            };
            let data: serde_json::Map<String, Value> = t
                .data
                .iter()
                .filter(|(k, _)| !k.starts_with("__"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let key = t
                .key
                .as_deref()
                .map(|k| format!(" [{k}]"))
                .unwrap_or_default();
            println!(
                "{}{} {}{key} {} ({}){time} {}",
                "  ".repeat(depth),
                t.kind,
                t.nid,
                t.state.as_str(),
                t.tid,
                Value::Object(data)
            );
            for e in &t.history {
                let from = e
                    .from
                    .map_or_else(String::new, |s| format!(" (was {})", s.as_str()));
                let detail = e
                    .detail
                    .as_deref()
                    .map_or_else(String::new, |d| format!(": {d}"));
                println!(
                    "{}  · {} by {} at {}{from}{detail}",
                    "  ".repeat(depth),
                    e.action,
                    e.by.as_deref().unwrap_or("the application"),
                    when(e.at)
                );
            }
            print(tasks, Some(&t.tid), depth + 1);
        }
    }
    print(tasks, None, 0);
}

/// The step task `id` names in process `pid` (what `push` acts under): a
/// task id, or the node id of exactly one running step.
pub(crate) fn pick_step(tasks: &[TaskInfo], pid: &str, id: &str) -> Result<String, Failure> {
    if tasks.iter().any(|t| t.tid == id) {
        return Ok(id.to_owned());
    }
    let running: Vec<&TaskInfo> = tasks
        .iter()
        .filter(|t| t.kind == MessageType::Step && t.nid == id && !t.state.is_terminal())
        .collect();
    match running.as_slice() {
        [one] => Ok(one.tid.clone()),
        [] => Err(Failure::input(format!(
            "process {pid} has no task '{id}' and no running step '{id}' to push an act under (`acts show {pid}` lists them)"
        ))),
        many => Err(Failure::input(format!(
            "step '{id}' of process {pid} runs {} times; name one by its task id: {}",
            many.len(),
            many.iter()
                .map(|t| t.tid.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The errored task `id` names in process `pid` (what `control retry
/// --task` runs again): a task id, or the node id of a step whose latest
/// task ended in an error.
pub(crate) fn pick_errored(tasks: &[TaskInfo], pid: &str, id: &str) -> Result<String, Failure> {
    if tasks.iter().any(|t| t.tid == id) {
        return Ok(id.to_owned());
    }
    tasks
        .iter()
        .rev()
        .find(|t| t.kind == MessageType::Step && t.nid == id)
        .filter(|t| t.state == acts::TaskState::Error)
        .map(|t| t.tid.clone())
        .ok_or_else(|| {
            Failure::input(format!(
                "process {pid} has no task '{id}' and no step '{id}' that ended in an error (`acts show {pid}` lists them)"
            ))
        })
}

/// The task `id` names in process `pid`: a task id, or the id of a node
/// with exactly one task still waiting (what the interrupt prompt shows
/// first). Several waiting tasks of the node are bad input listing them.
pub(crate) fn pick_task(tasks: &[TaskInfo], pid: &str, id: &str) -> Result<String, Failure> {
    if tasks.iter().any(|t| t.tid == id) {
        return Ok(id.to_owned());
    }
    let waiting_act = |t: &&TaskInfo| t.kind == MessageType::Act && !t.state.is_terminal();
    // An act named by its node id or key; else the waiting acts of a step
    // named by its node id (a step with `uses:` runs its act as a child).
    let mut waiting: Vec<&TaskInfo> = tasks
        .iter()
        .filter(waiting_act)
        .filter(|t| t.nid == id || t.key.as_deref() == Some(id))
        .collect();
    if waiting.is_empty() {
        let steps: Vec<&str> = tasks
            .iter()
            .filter(|t| t.nid == id && !t.state.is_terminal())
            .map(|t| t.tid.as_str())
            .collect();
        waiting = tasks
            .iter()
            .filter(waiting_act)
            .filter(|t| t.parent.as_deref().is_some_and(|p| steps.contains(&p)))
            .collect();
    }
    match waiting.as_slice() {
        [one] => Ok(one.tid.clone()),
        [] => Err(Failure::input(format!(
            "process {pid} has no task '{id}' and no waiting act with node id or key '{id}' (`acts show {pid}` lists them)"
        ))),
        many => Err(Failure::input(format!(
            "node '{id}' of process {pid} has {} waiting tasks; name one by its task id: {}",
            many.len(),
            many.iter()
                .map(|t| t.tid.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
