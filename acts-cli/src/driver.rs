//! Driving processes to their end: following their messages, answering
//! their interrupt requests one at a time, moving a virtual clock in
//! scripted runs, and reporting.
//!
//! The loop: take every message that arrived; apply at most one answer
//! that is due; otherwise wait until the engine is idle (nothing in
//! flight for any process). When idle with nothing to answer, a scripted
//! run moves its virtual clock to the next delayed answer or the next
//! timer of one of its processes; if there is none, the process is
//! *stalled*. Runs on the real clock wait for the timer instead.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use acts::{
    Action, Engine, Executor, ManualClock, Message, MessageState, MessageType, TaskError,
    TaskState, Vars,
};
use serde_json::Value;
use tokio::io::{BufReader, Lines, Stdin};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::answers::{Answer, AnswerFile, Verb, parse_typed};
use crate::failure::Failure;
use crate::report::{
    RefusedAnswer, Report, ReportError, human_duration, print_report, report_message,
};

/// How interrupt requests are answered.
pub enum Mode {
    /// Complete with no vars.
    Auto,
    /// From a script (unlisted acts are completed with no vars).
    Script(AnswerFile),
    /// Asked on the terminal.
    Ask(Box<Lines<BufReader<Stdin>>>),
}

/// An interrupt waiting for its answer.
#[derive(Debug, Clone)]
struct Interrupt {
    pid: String,
    tid: String,
    nid: String,
    key: Option<String>,
    inputs: Vars,
    /// When it arrived (engine clock).
    at: i64,
    /// Still waiting after an answer that did not end it (`set_vars`,
    /// `push`): the next answer is for the same interrupt.
    again: bool,
}

/// Follows processes and answers their interrupts.
pub struct Driver {
    exec: Executor,
    mode: Mode,
    json: bool,
    /// The virtual clock of a scripted run.
    clock: Option<ManualClock>,
    /// The clock the engine uses.
    now: Box<dyn Fn() -> i64 + Send>,
    started: Instant,
    /// The engine clock when the driver started.
    started_at: i64,
    messages: HashMap<String, Vec<Value>>,
    /// Most recent act seen per key and per node id.
    seen: HashMap<String, (String, String)>,
    answered: HashSet<(String, String)>,
    waiting: Vec<Interrupt>,
    delayed: Vec<(i64, Interrupt, Answer)>,
    pids: HashSet<String>,
    /// Answers the engine refused, per process.
    refused: HashMap<String, Vec<RefusedAnswer>>,
    /// Answers marked `refused: true` that the engine took, per process.
    taken: HashMap<String, Vec<String>>,
}

/// What applying an answer came to.
enum Applied {
    /// The engine took it.
    Taken,
    /// The engine refused it (why).
    Refused(String),
}

impl Driver {
    /// A driver for `engine`; `clock` is the virtual clock of a scripted
    /// run (the engine must use it), `None` on the real clock.
    pub fn new(engine: &Engine, mode: Mode, json: bool, clock: Option<ManualClock>) -> Self {
        let c = engine.runtime().clock();
        Self {
            exec: engine.executor(),
            mode,
            json,
            clock,
            started_at: c.now_millis(),
            now: Box::new(move || c.now_millis()),
            started: Instant::now(),
            messages: HashMap::new(),
            seen: HashMap::new(),
            answered: HashSet::new(),
            waiting: Vec::new(),
            delayed: Vec::new(),
            pids: HashSet::new(),
            refused: HashMap::new(),
            taken: HashMap::new(),
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
        let at = human_duration(m.time - self.started_at);
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
        println!("{at:>8}  {:<8} {:<10} {name}{what}", m.r#type, m.state);
    }

    /// Records a message; queues an interrupt it announces.
    fn on_message(&mut self, root: &str, m: &Message) {
        self.progress(m);
        self.pids.insert(m.pid.clone());
        self.messages
            .entry(root.to_owned())
            .or_default()
            .push(report_message(m));
        if m.r#type == MessageType::Act {
            let at = (m.pid.clone(), m.tid.clone());
            if let Some(k) = &m.key {
                self.seen.insert(k.clone(), at.clone());
            }
            self.seen.insert(m.nid.clone(), at);
        }
        if m.r#type == MessageType::Act
            && m.state == MessageState::Created
            && m.uses.as_deref() == Some("acts.core.irq")
        {
            self.waiting.push(Interrupt {
                pid: m.pid.clone(),
                tid: m.tid.clone(),
                nid: m.nid.clone(),
                key: m.key.clone(),
                inputs: m.inputs.clone(),
                at: (self.now)(),
                again: false,
            });
        }
    }

    /// The answer for an interrupt (asking on the terminal if need be).
    async fn decide(&mut self, i: &Interrupt) -> Result<Answer, Failure> {
        match &mut self.mode {
            Mode::Auto => Ok(Answer::complete()),
            Mode::Script(f) => Ok(if i.again {
                f.next_unused(i.key.as_deref(), &i.nid)
            } else {
                f.next(i.key.as_deref(), &i.nid)
            }
            .unwrap_or_else(Answer::complete)),
            Mode::Ask(lines) => loop {
                eprintln!(
                    "\ninterrupt: act '{}'{} of process {} (task {})\n  inputs: {}\n  answer with ACTION [JSON-VARS] (complete, submit, back, cancel, abort, skip, error, remove, set_vars, push, ignore); Enter completes:",
                    i.nid,
                    i.key
                        .as_ref()
                        .map(|k| format!(" [{k}]"))
                        .unwrap_or_default(),
                    i.pid,
                    i.tid,
                    Value::Object(i.inputs.clone())
                );
                let line = tokio::select! {
                    l = lines.next_line() => l.map_err(|e| Failure::run(format!("cannot read the terminal: {e}")))?,
                    _ = tokio::signal::ctrl_c() => return Err(stopped()),
                };
                let Some(line) = line else {
                    return Err(Failure::run(format!(
                        "the terminal closed while act '{}' of process {} waits; `acts resume` continues it",
                        i.nid, i.pid
                    )));
                };
                match parse_typed(&line) {
                    Ok(a) => break Ok(a),
                    Err(e) => eprintln!("  {e}"),
                }
            },
        }
    }

    /// Applies `answer` to interrupt `i`; an answer to `i` itself that
    /// leaves it waiting (`set_vars`, `push`) queues `i` again for its
    /// next answer, once the engine has settled. An answer the engine
    /// refuses is reported (stderr, the report's `refused`) and `i` waits
    /// for its next answer, as a client of acts 0.25 goes on with its next
    /// call.
    async fn apply(&mut self, i: &Interrupt, answer: &Answer) -> Result<(), Failure> {
        let act = i.key.clone().unwrap_or_else(|| i.nid.clone());
        let refused = match self.apply_once(i, answer).await? {
            Applied::Taken => {
                if answer.refused {
                    self.taken.entry(i.pid.clone()).or_default().push(format!(
                        "the answer '{}' to act '{act}' was expected to be refused, but was taken",
                        answer.action
                    ));
                }
                false
            }
            Applied::Refused(message) => {
                if !self.json && !answer.refused {
                    eprintln!(
                        "acts: the answer '{}' to act '{act}' of process {} was refused: {message}; \
                         the next answer follows",
                        answer.action, i.pid
                    );
                }
                self.refused
                    .entry(i.pid.clone())
                    .or_default()
                    .push(RefusedAnswer {
                        act,
                        action: answer.action.clone(),
                        message,
                        expected: answer.refused,
                    });
                true
            }
        };
        let keeps_waiting = matches!(
            answer.verb(),
            Ok(Verb::Push | Verb::Act(Action::SetProcessVars))
        );
        if refused || (keeps_waiting && answer.target.is_none()) {
            self.waiting.push(Interrupt {
                again: true,
                at: (self.now)(),
                ..i.clone()
            });
        }
        Ok(())
    }

    async fn apply_once(&mut self, i: &Interrupt, answer: &Answer) -> Result<Applied, Failure> {
        let verb = answer.verb().map_err(Failure::input)?;
        let (pid, tid) = match &answer.target {
            Some(t) => self.seen.get(t).cloned().ok_or_else(|| {
                Failure::run(format!(
                    "answer for '{}': no act with key or id '{t}' was seen yet",
                    i.key.as_deref().unwrap_or(&i.nid)
                ))
            })?,
            None => (i.pid.clone(), i.tid.clone()),
        };
        let outcome = |r: Result<(), acts::EngineError>| match r {
            Ok(()) => Applied::Taken,
            Err(e) => Applied::Refused(e.to_string()),
        };
        Ok(match verb {
            Verb::Ignore => Applied::Taken,
            Verb::Act(action) => outcome(
                self.exec
                    .act()
                    .apply(&pid, &tid, action, answer.vars.clone())
                    .await,
            ),
            Verb::Push => match self.exec.task().get(&i.pid, &i.tid).await {
                Err(e) => Applied::Refused(e.to_string()),
                Ok(act) => match act.parent {
                    None => Applied::Refused(format!("act '{}' has no step to push to", i.nid)),
                    Some(step) => outcome(
                        self.exec
                            .act()
                            .push(&i.pid, &step, answer.vars.clone())
                            .await,
                    ),
                },
            },
        })
    }

    /// Answers the interrupts that already wait in `pid` (after a
    /// restart, their messages were sent before).
    pub async fn answer_waiting(&mut self, pid: &str) -> Result<(), Failure> {
        let tasks = self
            .exec
            .task()
            .list(pid)
            .await
            .map_err(|e| Failure::run(e.to_string()))?;
        self.pids.insert(pid.to_owned());
        for t in tasks {
            if t.state == TaskState::Interrupt && t.kind == "act" {
                self.waiting.push(Interrupt {
                    pid: pid.to_owned(),
                    tid: t.tid.clone(),
                    nid: t.nid.clone(),
                    key: t.key.clone(),
                    inputs: t.data.clone(),
                    at: (self.now)(),
                    again: false,
                });
            }
        }
        Ok(())
    }

    /// Takes one step of answering: the next waiting interrupt is decided
    /// (and applied now, delayed, or ignored), or a delayed answer that is
    /// due is applied. Returns whether it did something.
    async fn answer_one(&mut self) -> Result<bool, Failure> {
        let now = (self.now)();
        if let Some(pos) = self.delayed.iter().position(|(due, _, _)| *due <= now) {
            let (_, i, a) = self.delayed.remove(pos);
            self.apply(&i, &a).await?;
            return Ok(true);
        }
        while !self.waiting.is_empty() {
            let i = self.waiting.remove(0);
            // An interrupt is answered once per announcement (its
            // re-announcement after `set_vars` is already queued `again`).
            if !i.again && !self.answered.insert((i.pid.clone(), i.tid.clone())) {
                continue;
            }
            let a = self.decide(&i).await?;
            match (a.verb(), a.delay_ms) {
                (Ok(Verb::Ignore), _) => continue,
                (_, Some(ms)) if ms > 0 => {
                    self.delayed.push((i.at + ms as i64, i, a));
                    continue;
                }
                _ => {
                    self.apply(&i, &a).await?;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Follows `roots` until each has ended (or stalled); returns their
    /// reports in the order given. Ctrl-C stops (exit 130), leaving them
    /// to `acts resume`.
    pub async fn drive(
        &mut self,
        engine: &Engine,
        rx: &mut UnboundedReceiver<Message>,
        roots: Vec<String>,
    ) -> Result<Vec<Report>, Failure> {
        // Every root is followed until its end message: the channel was
        // subscribed before the roots started (or resumed), so even a
        // process that ended at once has its messages waiting there.
        let mut open = roots.clone();
        let mut stalled: Vec<String> = Vec::new();
        let mut failed: Option<String> = None;
        let mut spins = 0u32;
        self.pids.extend(roots.iter().cloned());
        while !open.is_empty() {
            // 1. Everything that arrived.
            let mut got = false;
            while let Ok(m) = rx.try_recv() {
                got = true;
                let Some(root) = Self::root_of(&roots, &m.pid).cloned() else {
                    continue;
                };
                self.on_message(&root, &m);
                if m.r#type == MessageType::Workflow
                    && m.state != MessageState::Created
                    && m.state != MessageState::Stuck
                    && m.pid == root
                {
                    open.retain(|p| *p != root);
                }
            }
            if open.is_empty() {
                break;
            }
            if got {
                continue;
            }
            // 2. One answer at a time, once the engine has settled.
            if !engine.runtime().is_idle() {
                spins += 1;
                if spins < 64 {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                continue;
            }
            spins = 0;
            match self.answer_one().await {
                Ok(true) => continue,
                Ok(false) => {}
                // A refused answer ends the run: the report says why.
                Err(f) if f.code == 1 => {
                    failed = Some(f.message);
                    break;
                }
                Err(f) => return Err(f),
            }
            // 3. Idle, nothing to answer now: time must move.
            let next_timer = self
                .pids
                .iter()
                .filter_map(|p| engine.runtime().next_timer_of(p))
                .min();
            let next_delay = self.delayed.iter().map(|(d, _, _)| *d).min();
            let next = [next_timer, next_delay].into_iter().flatten().min();
            match (&self.clock, next) {
                (Some(clock), Some(t)) => clock.set(t),
                (Some(_), None) => {
                    // Nothing to answer, wait for or do: stalled.
                    stalled = open.clone();
                    break;
                }
                (None, Some(t)) => {
                    // Real time: wait for the timer (or a message).
                    let wait = Duration::from_millis((t - (self.now)()).clamp(1, 1000) as u64);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = tokio::signal::ctrl_c() => {
                            engine.close().await;
                            return Err(stopped());
                        }
                    }
                }
                (None, None) => {
                    stalled = open.clone();
                    break;
                }
            }
        }
        let mut reports = Vec::new();
        for pid in roots {
            let info = self
                .exec
                .proc()
                .get(&pid)
                .await
                .map_err(|e| Failure::run(e.to_string()))?;
            let state = if stalled.contains(&pid) {
                "stalled".to_owned()
            } else {
                info.state.as_str().to_owned()
            };
            let answer_failed = failed.clone().filter(|_| !info.state.is_terminal());
            let error = match info.err {
                Some(TaskError { ecode, message, .. }) => Some(ReportError { ecode, message }),
                None => match answer_failed {
                    Some(message) => Some(ReportError::uncoded(message)),
                    None if state == "stalled" => Some(ReportError::uncoded(
                        "nothing left to answer or wait for, and nothing is scheduled",
                    )),
                    None => None,
                },
            };
            let mut outputs = info.outputs;
            outputs.remove("pid");
            let ended = info.end_time.unwrap_or_else(|| (self.now)());
            let refused = self.refused.remove(&pid).unwrap_or_default();
            let taken_but_expected_refused = self.taken.remove(&pid).unwrap_or_default();
            reports.push(Report {
                messages: self.messages.remove(&pid).unwrap_or_default(),
                pid,
                model: info.model_id,
                state,
                outputs,
                error,
                engine_ms: ended - self.started_at,
                refused,
                taken_but_expected_refused,
            });
        }
        Ok(reports)
    }

    /// Prints a report (JSON or text); returns the exit code it maps to.
    pub fn print(&self, r: &Report) -> u8 {
        print_report(r, self.json, self.clock.is_some(), self.started);
        r.exit_code()
    }
}

fn stopped() -> Failure {
    Failure::stopped()
}
