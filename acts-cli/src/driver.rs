//! Driving processes to their end: following their messages, answering
//! their interrupt requests, and reporting.

use std::collections::HashMap;
use std::time::Instant;

use acts::{Engine, Executor, Message, TaskState, Vars};
use serde_json::{Value, json};
use tokio::io::{BufReader, Lines, Stdin};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::Failure;
use crate::answers::{Answer, AnswerFile, parse_typed};

/// How interrupt requests are answered.
pub enum Mode {
    /// Complete with no vars.
    Auto,
    /// From an answers file (unlisted acts are completed with no vars).
    File(AnswerFile),
    /// Asked on the terminal.
    Ask(Box<Lines<BufReader<Stdin>>>),
}

/// The outcome of one process.
#[derive(Debug)]
pub struct Report {
    /// Process id.
    pub pid: String,
    /// Model id.
    pub model: String,
    /// Final state.
    pub state: TaskState,
    /// Outputs.
    pub outputs: Vars,
    /// Error message, if it failed.
    pub error: Option<String>,
    /// The messages of it (and its subflow children), in order.
    pub messages: Vec<Value>,
}

impl Report {
    /// The `--json` form.
    pub fn to_json(&self) -> Value {
        json!({
            "pid": self.pid,
            "model": self.model,
            "state": self.state.as_str(),
            "outputs": self.outputs,
            "error": self.error,
            "messages": self.messages,
        })
    }

    /// Whether the process completed (exit code 0).
    pub fn succeeded(&self) -> bool {
        self.state.is_success()
    }
}

/// Follows processes and answers their interrupts.
pub struct Driver {
    exec: Executor,
    mode: Mode,
    json: bool,
    started: Instant,
    /// Root pid → messages of it and its children.
    messages: HashMap<String, Vec<Value>>,
}

impl Driver {
    /// A driver answering with `mode`; `json` silences progress output.
    pub fn new(exec: Executor, mode: Mode, json: bool) -> Self {
        Self {
            exec,
            mode,
            json,
            started: Instant::now(),
            messages: HashMap::new(),
        }
    }

    fn root_of<'a>(roots: &'a [String], pid: &str) -> Option<&'a String> {
        roots
            .iter()
            .find(|r| pid == r.as_str() || pid.starts_with(&format!("{r}_")))
    }

    fn progress(&self, m: &Message) {
        if self.json {
            return;
        }
        let ms = self.started.elapsed().as_millis();
        let what = match (&m.key, &m.uses) {
            (Some(k), _) => format!(" [{k}]"),
            (None, Some(u)) => format!(" ({u})"),
            _ => String::new(),
        };
        let name = if m.name.is_empty() {
            m.nid.clone()
        } else {
            format!("{} \"{}\"", m.nid, m.name)
        };
        println!("{ms:>6}ms  {:<8} {:<10} {name}{what}", m.r#type, m.state);
    }

    /// Answers the interrupt of act `tid` (node `nid`, key `key`).
    async fn answer(
        &mut self,
        pid: &str,
        tid: &str,
        nid: &str,
        key: Option<&str>,
        inputs: &Vars,
    ) -> Result<(), Failure> {
        let answer = match &mut self.mode {
            Mode::Auto => Answer::complete(),
            Mode::File(f) => f.next(key, nid).unwrap_or_else(Answer::complete),
            Mode::Ask(lines) => loop {
                eprintln!(
                    "\ninterrupt: act '{nid}'{} of process {pid} (task {tid})\n  inputs: {}\n  answer with ACTION [JSON-VARS] (complete, submit, back, cancel, abort, skip, error); Enter completes:",
                    key.map(|k| format!(" [{k}]")).unwrap_or_default(),
                    Value::Object(inputs.clone())
                );
                let line = lines
                    .next_line()
                    .await
                    .map_err(|e| Failure::run(format!("cannot read the terminal: {e}")))?;
                let Some(line) = line else {
                    return Err(Failure::run(format!(
                        "the terminal closed while act '{nid}' of process {pid} waits; `acts resume` continues it"
                    )));
                };
                match parse_typed(&line) {
                    Ok(a) => break a,
                    Err(e) => eprintln!("  {e}"),
                }
            },
        };
        let action = answer.engine_action().map_err(Failure::input)?;
        self.exec
            .act(pid, tid, action, answer.vars.clone())
            .await
            .map_err(|e| {
                Failure::run(format!(
                    "answering act '{nid}' of process {pid} with '{}' failed: {e}",
                    answer.action
                ))
            })
    }

    /// Answers the interrupts that already wait in `pid` (after a
    /// restart, their messages were sent before).
    pub async fn answer_waiting(&mut self, pid: &str) -> Result<(), Failure> {
        let tasks = self
            .exec
            .tasks(pid)
            .await
            .map_err(|e| Failure::run(e.to_string()))?;
        for t in tasks {
            if t.state == TaskState::Interrupt && t.kind == "act" {
                self.answer(pid, &t.tid, &t.nid, t.key.as_deref(), &t.data)
                    .await?;
            }
        }
        Ok(())
    }

    /// Follows `roots` until each has ended; returns their reports in the
    /// order given. Ctrl-C stops (exit 130), leaving them to `acts resume`.
    pub async fn drive(
        &mut self,
        engine: &Engine,
        rx: &mut UnboundedReceiver<Message>,
        roots: Vec<String>,
    ) -> Result<Vec<Report>, Failure> {
        // Every root is followed until its end message: the channel was
        // subscribed before the roots started (or resumed), so even a process
        // that ended at once has its messages waiting there.
        let mut open = roots.clone();
        while !open.is_empty() {
            let m = tokio::select! {
                m = rx.recv() => m,
                _ = tokio::signal::ctrl_c() => {
                    engine.close().await;
                    return Err(Failure {
                        code: 130,
                        message: "stopped; the store keeps every process: `acts resume` continues them".into(),
                    });
                }
            };
            let Some(m) = m else {
                return Err(Failure::run("the engine stopped"));
            };
            let Some(root) = Self::root_of(&roots, &m.pid).cloned() else {
                continue;
            };
            self.progress(&m);
            self.messages.entry(root.clone()).or_default().push(json!({
                "type": m.r#type,
                "key": m.key,
                "name": m.name,
                "uses": m.uses,
                "state": m.state,
                "pid": m.pid,
            }));
            if m.r#type == "act"
                && m.state == "created"
                && m.uses.as_deref() == Some("acts.core.irq")
            {
                self.answer(&m.pid, &m.tid, &m.nid, m.key.as_deref(), &m.inputs)
                    .await?;
            }
            if m.r#type == "workflow" && m.state != "created" && m.pid == root {
                open.retain(|p| *p != root);
            }
        }
        let mut reports = Vec::new();
        for pid in roots {
            let info = self
                .exec
                .process(&pid)
                .await
                .map_err(|e| Failure::run(e.to_string()))?;
            reports.push(Report {
                messages: self.messages.remove(&pid).unwrap_or_default(),
                pid,
                model: info.model_id,
                state: info.state,
                outputs: info.outputs,
                error: info.err.map(|(ecode, message)| {
                    if ecode.is_empty() {
                        message
                    } else {
                        format!("{ecode}: {message}")
                    }
                }),
            });
        }
        Ok(reports)
    }

    /// Prints a report (JSON or text); returns the exit code it maps to.
    pub fn print(&self, r: &Report) -> u8 {
        if self.json {
            println!("{}", r.to_json());
        } else {
            let ms = self.started.elapsed().as_millis();
            println!(
                "process {} ({}) {} in {ms} ms",
                r.pid,
                r.model,
                r.state.as_str()
            );
            if let Some(e) = &r.error {
                println!("error: {e}");
            }
            let outputs =
                serde_json::to_string_pretty(&Value::Object(r.outputs.clone())).unwrap_or_default();
            println!("outputs: {outputs}");
        }
        u8::from(!r.succeeded())
    }
}
