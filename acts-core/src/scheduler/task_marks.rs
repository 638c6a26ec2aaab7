//! What a [`TaskTable`] keeps so that a transition touches only what it
//! changed and what is still open: the tasks marked dirty (listed as they
//! are first marked), the tasks that have not ended, and those that ended
//! since the last look (the spans of a traced process).

use super::scope::Scope;
use super::tasks::{Dirty, Task, TaskIx, TaskTable};

impl TaskTable {
    /// The tasks that ended since the last call, each once, in the order
    /// they ended (a task that ended, ran again and ended again: at its
    /// last end).
    pub fn take_ended(&mut self) -> Vec<TaskIx> {
        let mut ended = std::mem::take(&mut self.ended);
        if ended.len() > 1 {
            let mut seen = std::collections::HashSet::new();
            let mut last_first: Vec<TaskIx> =
                ended.drain(..).rev().filter(|t| seen.insert(*t)).collect();
            last_first.reverse();
            ended = last_first;
        }
        ended
    }

    /// The task at `ix` for a lifecycle change (marks it dirty).
    pub(super) fn task_mut(&mut self, ix: TaskIx) -> &mut Task {
        self.mark(
            ix,
            Dirty {
                lifecycle: true,
                vars: false,
            },
        );
        &mut self.tasks[ix.index()]
    }

    /// The task at `ix` for a change of its data (marks its scope dirty).
    pub(super) fn data_mut(&mut self, ix: TaskIx) -> &mut Scope {
        self.mark(
            ix,
            Dirty {
                lifecycle: false,
                vars: true,
            },
        );
        &mut self.tasks[ix.index()].data
    }

    /// Marks what changed in task `ix`, listing it once.
    fn mark(&mut self, ix: TaskIx, what: Dirty) {
        let d = &mut self.dirty[ix.index()];
        if !d.lifecycle && !d.vars {
            self.dirty_list.push(ix);
        }
        d.lifecycle |= what.lifecycle;
        d.vars |= what.vars;
    }

    /// The tasks that have not ended, in creation order.
    pub fn open(&self) -> impl Iterator<Item = (TaskIx, &Task)> {
        self.open.iter().map(|&ix| (ix, &self.tasks[ix.index()]))
    }

    /// Whether any task changed since the last [`take_dirty`](Self::take_dirty).
    pub fn is_dirty(&self) -> bool {
        !self.dirty_list.is_empty()
    }

    /// The tasks changed since the last call, with what changed, in
    /// creation order; clears the marks.
    pub fn take_dirty(&mut self) -> Vec<(TaskIx, Dirty)> {
        let mut list = std::mem::take(&mut self.dirty_list);
        list.sort_unstable();
        list.into_iter()
            .map(|ix| (ix, std::mem::take(&mut self.dirty[ix.index()])))
            .collect()
    }
}
