//! Resolving the paths a module names to the module that defines what
//! they name — through `use` bindings, re-exports and glob imports — and
//! the import graph between files that follows.
//!
//! May use: `parse` (the modules it resolves in).

use std::collections::{BTreeMap, BTreeSet};

use super::parse::{ModPath, Module};

/// How deep a chain of re-exports is followed before it is taken for a
/// loop.
const MAX_DEPTH: usize = 48;

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A module.
    Module(ModPath),
    /// An item defined in this module (a type, function, constant, ...).
    Item(ModPath),
}

impl Target {
    fn module(&self) -> &ModPath {
        match self {
            Target::Module(m) | Target::Item(m) => m,
        }
    }
}

/// The modules of one crate, for resolving paths in.
pub(crate) struct Resolver<'m> {
    pub(crate) modules: &'m BTreeMap<ModPath, Module>,
}

impl Resolver<'_> {
    /// What `path`, written in module `from`, names; `None` for another
    /// crate's items, local names and what the crate does not define.
    pub(crate) fn resolve(&self, from: &ModPath, path: &[String], depth: usize) -> Option<Target> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut current = Target::Module(from.clone());
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => {
                current = Target::Module(Vec::new());
                rest = &path[1..];
            }
            Some("self") => rest = &path[1..],
            Some("super") => {
                let mut m = from.clone();
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop()?;
                    rest = &rest[1..];
                }
                current = Target::Module(m);
            }
            Some("Self") | None => return None,
            Some(_) => {}
        }
        for segment in rest {
            current = match current {
                Target::Module(m) => self.lookup(&m, segment, depth + 1)?,
                Target::Item(_) => break,
            };
        }
        Some(current)
    }

    /// What `name` stands for inside module `scope`.
    fn lookup(&self, scope: &ModPath, name: &str, depth: usize) -> Option<Target> {
        if depth > MAX_DEPTH {
            return None;
        }
        let module = self.modules.get(scope)?;
        if module.children.contains(name) {
            let mut child = scope.clone();
            child.push(name.to_owned());
            return Some(Target::Module(child));
        }
        if module.items.contains(name) {
            return Some(Target::Item(scope.clone()));
        }
        if let Some(binding) = module.bindings.get(name) {
            return self.resolve(scope, &binding.path, depth + 1);
        }
        module
            .globs
            .iter()
            .find_map(|glob| match self.resolve(scope, glob, depth + 1)? {
                Target::Module(m) if &m != scope => self.lookup(&m, name, depth + 1),
                _ => None,
            })
    }

    /// The file a target is written in (an inline module's file).
    pub(crate) fn file_of(&self, target: &Target) -> Option<&ModPath> {
        self.modules.get(target.module()).map(|m| &m.file)
    }

    /// File → the files it imports from, each with the first path that
    /// imports it: every path named by the file's code (and its own `use`
    /// lines, not its re-exports), resolved to the file that defines the
    /// item it names.
    /// A file's edges to itself are left out.
    pub(crate) fn graph(&self) -> BTreeMap<ModPath, BTreeMap<ModPath, String>> {
        let mut graph: BTreeMap<ModPath, BTreeMap<ModPath, String>> = BTreeMap::new();
        for (path, module) in self.modules {
            let edges = graph.entry(module.file.clone()).or_default();
            for r in &module.refs {
                // Only an item is imported: naming a module (`pub(crate)`,
                // `use a::b;` whose items are then named) is not.
                let Some(target @ Target::Item(_)) = self.resolve(path, r, 0) else {
                    continue;
                };
                if let Some(file) = self.file_of(&target)
                    && file != &module.file
                {
                    edges.entry(file.clone()).or_insert_with(|| r.join("::"));
                }
            }
        }
        graph
    }
}

/// A cycle of `graph` (its nodes in order, the first repeated at the
/// end), if it has one.
pub(crate) fn find_cycle<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Option<Vec<N>> {
    fn visit<N: Ord + Clone>(
        graph: &BTreeMap<N, BTreeSet<N>>,
        node: &N,
        stack: &mut Vec<N>,
        done: &mut BTreeSet<N>,
    ) -> Option<Vec<N>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(graph, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(graph, n, &mut Vec::new(), &mut done))
}

/// One cycle through each group of nodes that reach each other (each
/// strongly connected component of more than one node), in node order.
pub(crate) fn all_cycles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    let reach = |from: &N| -> BTreeSet<N> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for next in graph.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<N, BTreeSet<N>> = graph.keys().map(|n| (n.clone(), reach(n))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for node in graph.keys() {
        if placed.contains(node) || !reaches[node].contains(node) {
            continue;
        }
        let group: BTreeSet<N> = reaches[node]
            .iter()
            .filter(|m| reaches.get(*m).is_some_and(|r| r.contains(node)))
            .cloned()
            .collect();
        let sub: BTreeMap<N, BTreeSet<N>> = group
            .iter()
            .map(|m| {
                let next = graph
                    .get(m)
                    .into_iter()
                    .flatten()
                    .filter(|x| group.contains(*x));
                (m.clone(), next.cloned().collect())
            })
            .collect();
        if let Some(cycle) = find_cycle(&sub) {
            out.push(cycle);
        }
        placed.extend(group);
    }
    out
}
