//! The step globals of a script (`first.a`, `first.a = v`,
//! `first.data()`, `first.inputs()`: the reference's §1.8): for each step
//! the script names by id, a view of that step's latest task.
//!
//! Built only for the steps a script's text names (a word of it, or a
//! quoted string: `globalThis['my-step']`), so a script that names none
//! pays one scan of its text.

use crate::model::{NodeKind, Vars};
use crate::script::{StepView, named_ids};

use super::super::tasks::{TaskIx, TaskTable};
use super::Process;

impl Process {
    /// The views of the steps `source` names that have a task.
    pub(super) fn step_views(&self, source: &str) -> Vec<StepView> {
        let mut views: Vec<StepView> = Vec::new();
        for id in named_ids(source) {
            if views.iter().any(|v| v.id == id) {
                continue;
            }
            let Some(node) = self.tree.find(id) else {
                continue;
            };
            if self.tree.node(node).map(|n| n.content.kind()) != Some(NodeKind::Step) {
                continue;
            }
            let Some(ix) = latest_task(&self.tasks, node) else {
                continue;
            };
            let Some(task) = self.tasks.get(ix) else {
                continue;
            };
            views.push(StepView {
                id: id.to_owned(),
                task: task.id.clone(),
                data: task.data.to_vars(),
                visible: visible(&self.tasks, ix),
                ended: task.state.is_terminal(),
            });
        }
        views
    }
}

/// The latest task of `node` (the most recently created: a step runs its
/// tasks one after another).
fn latest_task(tasks: &TaskTable, node: crate::tree::NodeIx) -> Option<TaskIx> {
    (0..tasks.len())
        .rev()
        .map(TaskTable::ix_at)
        .find(|ix| tasks.get(*ix).is_some_and(|t| t.node == node))
}

/// What task `ix` sees: its own data over its ancestors', nearer ones
/// first (the `find` order).
fn visible(tasks: &TaskTable, ix: TaskIx) -> Vars {
    let mut all = Vars::new();
    for t in std::iter::once(ix).chain(tasks.ancestors(ix)) {
        if let Some(task) = tasks.get(t) {
            for (k, v) in task.data.to_vars() {
                all.entry(k).or_insert(v);
            }
        }
    }
    all
}
