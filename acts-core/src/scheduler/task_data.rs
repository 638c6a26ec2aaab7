//! The data-scope rules between the tasks of one process (the reference
//! engine's §3.7, which compatibility depends on): where a name is found
//! (the task, then its ancestors), where a write goes (fold-up to the
//! outermost holder), what a task outputs and what a script in it sees;
//! and the keys user data never writes ([`is_reserved`]).

use serde_json::Value;

use crate::model::{Variant, Vars};
use crate::script::{ScriptScope, is_private};

use super::tasks::{TaskIx, TaskTable};

/// Whether `key` is engine-owned in a process's data: `pid` (the process's
/// id) and the `$parent_*` keys of a subflow child. User data — act
/// outputs, client action options, script writes, `set` acts — never
/// writes them: client actions that try are refused, scripts' writes are
/// ignored with a warning.
pub fn is_reserved(key: &str) -> bool {
    key == "pid" || key.starts_with("$parent_")
}

impl TaskTable {
    /// The ancestors of `ix`, nearest first.
    pub fn ancestors(&self, ix: TaskIx) -> Vec<TaskIx> {
        let mut out = Vec::new();
        let mut cur = self.tasks[ix.index()].parent;
        while let Some(p) = cur {
            out.push(p);
            cur = self.tasks[p.index()].parent;
        }
        out
    }

    /// `find(name)`: the task's own value, else the nearest ancestor's.
    pub fn find(&self, ix: TaskIx, name: &str) -> Option<&Value> {
        std::iter::once(ix)
            .chain(self.ancestors(ix))
            .find_map(|t| self.tasks[t.index()].data.get(name))
    }

    /// The fold-up write: each non-private key goes to the **outermost**
    /// ancestor whose own data already holds it; then every key (private
    /// ones included) is written into the task itself. New keys therefore
    /// stay local until the task's outputs fold into its parent.
    ///
    /// Engine-owned keys ([`is_reserved`]) are never written: user data
    /// (act outputs, scripts, `set` acts) cannot change them.
    pub fn update_data(&mut self, ix: TaskIx, vars: &Vars) {
        let mut outermost_first = self.ancestors(ix);
        outermost_first.reverse();
        for (key, value) in vars {
            if is_private(key) || is_reserved(key) {
                continue;
            }
            if let Some(&holder) = outermost_first
                .iter()
                .find(|a| self.tasks[a.index()].data.contains_key(key))
            {
                self.put(holder, key, value);
            }
        }
        for (key, value) in vars {
            if !is_reserved(key) {
                self.put(ix, key, value);
            }
        }
    }

    /// A plain write of user data into the task's own data (no fold-up);
    /// engine-owned keys ([`is_reserved`]) are left as they are.
    pub fn set_user_data(&mut self, ix: TaskIx, vars: &Vars) {
        if vars.is_empty() {
            return;
        }
        for (key, value) in vars {
            if is_reserved(key) {
                tracing::warn!(key = %key, "ignored a write of an engine-owned key");
            } else {
                self.put(ix, key, value);
            }
        }
    }

    /// A plain write into the task's own data (no fold-up).
    pub fn set_data(&mut self, ix: TaskIx, vars: &Vars) {
        if vars.is_empty() {
            return;
        }
        for (key, value) in vars {
            self.put(ix, key, value);
        }
    }

    /// The task's outputs: with `exposes`, one entry per exposed name (a
    /// literal value as given; `null` looked up with [`find`](Self::find);
    /// expressions must be evaluated by the caller first); without, every
    /// non-private key of its own data.
    pub fn outputs(&self, ix: TaskIx, exposes: &[Variant]) -> Vars {
        if exposes.is_empty() {
            return self.tasks[ix.index()]
                .data
                .iter()
                .filter(|(k, _)| !is_private(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        exposes
            .iter()
            .map(|e| {
                let value = if e.value.is_null() {
                    self.find(ix, &e.name).cloned().unwrap_or(Value::Null)
                } else {
                    e.value.clone()
                };
                (e.name.clone(), value)
            })
            .collect()
    }

    /// What a script running in the task sees.
    pub fn script_scope(&self, ix: TaskIx) -> ScriptScope {
        // `$cost`: a recorded `__cost` (own, else an ancestor's), else the
        // time since the task started.
        let cost = self
            .find(ix, "__cost")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| {
                let start = self.tasks[ix.index()].start_time;
                if start > 0 { self.now() - start } else { 0 }
            });
        ScriptScope {
            cost_millis: cost.max(0) as u64,
            own: self.tasks[ix.index()].data.to_vars(),
            ancestors: self
                .ancestors(ix)
                .into_iter()
                .map(|a| self.tasks[a.index()].data.to_vars())
                .collect(),
            ..ScriptScope::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Act, Workflow};
    use crate::tree::{ModelTree, ProcessTree};
    use serde_json::json;
    use std::sync::Arc;

    fn vars(v: Value) -> Vars {
        v.as_object().cloned().unwrap_or_default()
    }

    /// Root `$` → step1 → its act, as the quick start's first step runs.
    fn quick_start() -> (TaskTable, ProcessTree, TaskIx, TaskIx, TaskIx) {
        let w = Workflow::new()
            .with_id("m")
            .with_step(|s| s.with_id("step1"))
            .with_step(|s| s.with_id("step2"));
        let mut tree = ProcessTree::new(Arc::new(ModelTree::build(&w).unwrap()));
        let step1 = tree.find("step1").unwrap();
        let act = tree.dispatch_act(step1, Act::new("acts.transform.set", json!({"a": 10})));
        let mut t = TaskTable::new();
        let root = t.create(&tree, "$".into(), tree.root(), None).unwrap();
        let s1 = t.create(&tree, "s1".into(), step1, Some(root)).unwrap();
        let a1 = t.create(&tree, "a1".into(), act, Some(s1)).unwrap();
        (t, tree, root, s1, a1)
    }

    #[test]
    fn parents_follow_levels() {
        let (mut t, tree, root, s1, a1) = quick_start();
        assert_eq!(t.get(s1).unwrap().parent, Some(root));
        assert_eq!(t.get(a1).unwrap().parent, Some(s1));
        // step2 follows step1 at the same level: same parent as step1.
        let s2 = t
            .create(&tree, "s2".into(), tree.find("step2").unwrap(), Some(s1))
            .unwrap();
        assert_eq!(t.get(s2).unwrap().parent, Some(root));
        assert_eq!(t.get(s2).unwrap().prev, Some(s1));
        assert!(
            t.create(&tree, "s2".into(), tree.root(), None).is_err(),
            "ids are unique"
        );
    }

    /// The data flow of the reference's quick start (spec §9.1).
    #[test]
    fn fold_up_writes_go_to_the_outermost_holder_and_new_keys_stay_local() {
        let (mut t, _, root, s1, a1) = quick_start();
        t.set_data(root, &vars(json!({"a": 0, "pid": "w1"})));
        t.update_data(a1, &vars(json!({"a": 10, "data": 20, "__run_as": "func"})));
        assert_eq!(
            t.get(root).unwrap().data,
            vars(json!({"a": 10, "pid": "w1"})),
            "a updated in place at the root"
        );
        assert_eq!(
            t.get(a1).unwrap().data,
            vars(json!({"a": 10, "data": 20, "__run_as": "func"}))
        );
        assert!(t.get(s1).unwrap().data.is_empty(), "new keys stay local");
        // Parent propagation: the act's outputs fold into the step.
        let outs = t.outputs(a1, &[]);
        assert_eq!(
            outs,
            vars(json!({"a": 10, "data": 20})),
            "private keys are not outputs"
        );
        t.update_data(s1, &outs);
        assert_eq!(t.get(s1).unwrap().data, vars(json!({"a": 10, "data": 20})));
        assert_eq!(t.find(a1, "pid"), Some(&json!("w1")));
        assert_eq!(t.find(a1, "nope"), None);
    }

    #[test]
    fn exposes_filter_outputs() {
        let (mut t, _, root, _, a1) = quick_start();
        t.set_data(root, &vars(json!({"region": "eu"})));
        t.set_data(a1, &vars(json!({"x": 1, "y": 2})));
        let exposes = vec![
            Variant::create("x", Value::Null),
            Variant::create("region", Value::Null),
            Variant::create("fixed", 7),
        ];
        assert_eq!(
            t.outputs(a1, &exposes),
            vars(json!({"x": 1, "region": "eu", "fixed": 7}))
        );
    }

    #[test]
    fn script_scope_sees_own_data_and_ancestors() {
        let (mut t, _, root, s1, a1) = quick_start();
        t.set_data(root, &vars(json!({"v": 1})));
        t.set_data(s1, &vars(json!({"v": 2})));
        t.set_data(a1, &vars(json!({"own": true})));
        let scope = t.script_scope(a1);
        assert_eq!(scope.find("v"), Some(&json!(2)));
        assert_eq!(scope.ancestors.len(), 2);
        assert_eq!(scope.globals()["own"], json!(true));
    }
}
