//! Finding tasks across processes: [`TaskQuery`] — the processes to look
//! in (a [`ProcessQuery`], answered from its index) and what the tasks
//! must be (state, kind, node, package, interrupt key, start time, only
//! those the caller may answer) — a page at a time with a cursor, and
//! counted. The inbox is one such query.
//!
//! Tasks come in the process query's order, and within a process in
//! creation order. A page examines at most [`MAX_PROCESSES_PER_PAGE`]
//! processes: a rare match over many processes returns a short (even an
//! empty) page with a cursor to go on, so no request walks everything.

use serde::{Deserialize, Serialize};

use crate::scheduler::{MessageType, TaskState};

use crate::engine::api::executor::Executor;
use crate::engine::api::find::{
    MAX_PAGE, ProcessQuery, count_pages, decode_cursor, encode_cursor, hex_bytes,
};
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{ProcInfo, TaskInfo};
use crate::engine::types::page::Page;

/// Most processes one page of a task query examines.
pub const MAX_PROCESSES_PER_PAGE: usize = 1000;

/// What tasks to find (every field optional; see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskQuery {
    /// The processes to look in (its order is the tasks' order; its
    /// `limit` and `cursor` are not used).
    #[serde(deserialize_with = "crate::engine::api::find::object_only")]
    pub process: ProcessQuery,
    /// In this state (`interrupt`: waiting for a client).
    pub state: Option<TaskState>,
    /// Of this kind (`workflow`, `step`, `branch`, `act`).
    pub kind: Option<MessageType>,
    /// Of this node (a step's or an act's id).
    pub node: Option<String>,
    /// Acts of this package (`acts.core.irq`).
    pub uses: Option<String>,
    /// Acts with this `params.key`.
    pub key: Option<String>,
    /// Started at or after (ms).
    pub started_after: Option<i64>,
    /// Started before (ms).
    pub started_before: Option<i64>,
    /// Only the interrupts this executor may answer (for a user: those
    /// addressed to them or one of their roles).
    pub answerable: bool,
    /// Tasks per page (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<usize>,
    /// Where the previous page ended ([`Page::next`](crate::engine::Page::next)).
    pub cursor: Option<String>,
    /// Each task's own cursor too ([`Page::cursors`](crate::engine::Page::cursors);
    /// asked by a cluster node, not part of the query's JSON): its
    /// process's own cursor, its place among the process's tasks, then
    /// the cursor a page ending with it returns — so tasks of different
    /// processes order by their processes, as the page does.
    #[serde(skip)]
    pub item_cursors: bool,
}

impl TaskQuery {
    /// Every task of every process.
    pub fn new() -> Self {
        Self::default()
    }

    /// The interrupts waiting for this executor's answer, oldest process
    /// first (what the inbox lists).
    pub fn inbox() -> Self {
        Self {
            process: ProcessQuery::new().state(TaskState::Running),
            state: Some(TaskState::Interrupt),
            answerable: true,
            ..Self::default()
        }
    }

    /// Only tasks in `state`.
    pub fn state(mut self, state: TaskState) -> Self {
        self.state = Some(state);
        self
    }

    /// Only tasks of the processes `q` finds.
    pub fn in_processes(mut self, q: ProcessQuery) -> Self {
        self.process = q;
        self
    }

    /// Pages of `n`.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// The page after the one that returned `cursor`.
    pub fn after(mut self, cursor: Option<String>) -> Self {
        self.cursor = cursor;
        self
    }

    fn matches(&self, t: &TaskInfo) -> bool {
        self.state.is_none_or(|s| t.state == s)
            && self.kind.is_none_or(|k| t.kind == k)
            && self.node.as_ref().is_none_or(|n| &t.nid == n)
            && self
                .uses
                .as_ref()
                .is_none_or(|u| t.uses.as_ref() == Some(u))
            && self.key.as_ref().is_none_or(|k| t.key.as_ref() == Some(k))
            && self
                .started_after
                .is_none_or(|a| t.start_time.is_some_and(|s| s >= a))
            && self
                .started_before
                .is_none_or(|b| t.start_time.is_some_and(|s| s < b))
    }
}

/// The place after every task of a process, in an item cursor.
const LAST_POS: u64 = 9_999_999_999;

/// Where a task page ended: the process cursor before the process it
/// ended in, and the last task returned of it. Written `P` or `P-T`: the
/// process cursor (hex) and the task's id as hex — so every text of that
/// shape names a place (the OpenAPI document's pattern,
/// [`TASK_CURSOR_PATTERN`]), not only the texts a page returned.
#[derive(Debug, Default)]
struct TaskCursor {
    p: Option<String>,
    t: Option<String>,
}

/// The shape of a task query's cursor (see [`TaskCursor`]).
pub const TASK_CURSOR_PATTERN: &str = "^([0-9a-fA-F]{2}){0,2048}(-([0-9a-fA-F]{2}){0,256})?$";

impl TaskCursor {
    fn encode(&self) -> String {
        let p = self.p.as_deref().unwrap_or_default();
        match &self.t {
            Some(t) => format!("{p}-{}", encode_cursor(t.as_bytes())),
            None => p.to_owned(),
        }
    }

    /// The cursor of task number `pos` of the process whose own cursor is
    /// `own`, when the page walked at `self` ends with it (see
    /// [`TaskQuery::item_cursors`]): `OWN.POS.CURSOR` — `.` sorts before
    /// every hex digit, so the process's part orders as its key does.
    fn item(&self, own: &str, pos: u64) -> String {
        format!("{own}.{pos:010}.{}", self.encode())
    }

    fn decode(c: &str) -> Result<Self, EngineError> {
        let refused =
            || EngineError::Query(format!("cursor '{c}' is not one a task query returned"));
        // An item's cursor ends with the page cursor it stands for.
        let page = c.rsplit('.').next().unwrap_or(c);
        let (p, t) = match page.split_once('-') {
            Some((p, t)) => (p, Some(t)),
            None => (page, None),
        };
        // A process cursor (at most 4,096 characters) and a task id.
        hex_bytes(p, 4096).ok_or_else(refused)?;
        let t = t
            .map(|t| hex_bytes(t, 512).ok_or_else(refused))
            .transpose()?
            .map(|id| String::from_utf8_lossy(&id).into_owned());
        Ok(Self {
            p: (!p.is_empty()).then(|| p.to_owned()),
            t,
        })
    }
}

impl Executor {
    /// `task().inbox` ([`TaskOps::inbox`](super::TaskOps::inbox)).
    pub(crate) async fn inbox(
        &self,
        limit: usize,
    ) -> Result<Vec<(ProcInfo, TaskInfo)>, EngineError> {
        let mut q = TaskQuery::inbox().limit(limit);
        let mut out = Vec::new();
        while out.len() < limit {
            let page = self.find_tasks(&q).await?;
            for t in page.items {
                // Tasks of one process come together: one row read each.
                let same = out
                    .last()
                    .filter(|(p, _): &&(ProcInfo, TaskInfo)| p.pid == t.pid)
                    .map(|(p, _)| p.clone());
                let info = match same {
                    Some(p) => p,
                    None => match self.rt.proc_row(&t.pid).await? {
                        Some(row) => ProcInfo::from(&row),
                        None => continue, // removed meanwhile
                    },
                };
                out.push((info, t));
            }
            match page.next {
                Some(next) => q.cursor = Some(next),
                None => break,
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    /// `task().find` ([`TaskOps::find`](super::TaskOps::find)).
    pub(crate) async fn find_tasks(&self, q: &TaskQuery) -> Result<Page<TaskInfo>, EngineError> {
        let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
        // The process query's own cursor is not used, but it is a cursor:
        // one of another shape is refused as in a process query.
        if let Some(c) = &q.process.cursor {
            decode_cursor(c)?;
        }
        let mut at = match &q.cursor {
            Some(c) => TaskCursor::decode(c)?,
            None => TaskCursor::default(),
        };
        let mut tasks = Vec::new();
        let mut own_cursors = Vec::new();
        for _ in 0..MAX_PROCESSES_PER_PAGE {
            // One process per step: its cursor is exact, whatever changes
            // between pages.
            let pq = ProcessQuery {
                limit: Some(1),
                cursor: at.p.clone(),
                item_cursors: q.item_cursors,
                ..q.process.clone()
            };
            let page = self.find_processes(&pq).await?;
            let own = page.cursors.first().cloned().unwrap_or_default();
            if let Some(p) = page.items.first() {
                let found = self
                    .rt
                    .with_process(&p.pid, |proc_| {
                        let all: Vec<_> = proc_
                            .tasks
                            .all()
                            .map(|(ix, t)| (ix, t.id.clone()))
                            .collect();
                        // Past the last task the previous page returned.
                        let from =
                            at.t.as_ref()
                                .and_then(|tid| all.iter().position(|(_, id)| id == tid))
                                .map_or(0, |i| i + 1);
                        all.iter()
                            .enumerate()
                            .skip(from)
                            .filter(|(_, (ix, _))| {
                                !q.answerable
                                    || self
                                        .principal
                                        .as_ref()
                                        .is_none_or(|who| who.may_answer(proc_, *ix))
                            })
                            .filter_map(|(pos, (ix, _))| Some((pos, TaskInfo::of(proc_, *ix)?)))
                            .filter(|(_, t)| q.matches(t))
                            .collect::<Vec<_>>()
                    })
                    .await?
                    .unwrap_or_default();
                let n = found.len();
                for (i, (pos, t)) in found.into_iter().enumerate() {
                    let here = TaskCursor {
                        p: at.p.clone(),
                        t: Some(t.tid.clone()),
                    };
                    if q.item_cursors {
                        own_cursors.push(here.item(&own, pos as u64));
                    }
                    tasks.push(t);
                    if tasks.len() == limit && i + 1 < n {
                        // More in this process: the next page goes on
                        // after the last one returned.
                        let next = if q.item_cursors {
                            here.item(&own, pos as u64)
                        } else {
                            here.encode()
                        };
                        return Ok(Page::new(tasks, Some(next)).with_cursors(own_cursors));
                    }
                }
            }
            match page.next {
                Some(next) => {
                    at = TaskCursor {
                        p: Some(next),
                        t: None,
                    }
                }
                None => return Ok(Page::new(tasks, None).with_cursors(own_cursors)),
            }
            if tasks.len() == limit {
                break;
            }
        }
        // The page is full, or the processes to examine ran out: go on
        // with the next process.
        // (with item cursors, in their order too: after every task of
        // the last process examined)
        let next = match (&at.p, q.item_cursors) {
            (Some(p), true) => at.item(p, LAST_POS),
            _ => at.encode(),
        };
        Ok(Page::new(tasks, Some(next)).with_cursors(own_cursors))
    }

    /// `task().count` ([`TaskOps::count`](super::TaskOps::count)).
    pub(crate) async fn count_tasks(&self, q: &TaskQuery) -> Result<usize, EngineError> {
        count_pages(|cursor| {
            let q = TaskQuery {
                cursor,
                limit: Some(MAX_PAGE),
                ..q.clone()
            };
            async move {
                let page = self.find_tasks(&q).await?;
                Ok((page.items.len(), page.next))
            }
        })
        .await
    }
}
