//! The layout check: a crate's sources read with a Rust parser, every path
//! its code names resolved to the module that defines what it names, and
//! the rules of the workspace checked on the result (docs/ARCHITECTURE.md,
//! "Rooms and the layout test").
//!
//! - **No import cycle between files**, a parent and its child included: a
//!   `mod.rs` that declares and re-exports its children is no import, but
//!   one that calls into a child that imports it back is a cycle.
//! - **Through re-exports**: `crate::engine::Executor` counts as an import
//!   of the file that defines `Executor`, not of `engine/mod.rs`.
//! - **Rooms**: a folder, or a file with a `May use:` line, uses only the
//!   sibling modules its line names in backticks; every folder has a line;
//!   the lines of siblings name no circle among themselves.
//! - **Whole files**: only items marked `#[cfg(test)]` are left out.
//!
//! May use: `parse`, `resolve`, `rules`, `error`.

mod error;
mod parse;
mod resolve;
mod rules;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use error::LayoutError;
pub use parse::ModPath;

/// A module's name in a message (the crate root is `crate`).
fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".to_owned()
    } else {
        m.join("::")
    }
}

/// One crate's modules, read and resolved.
pub struct Layout {
    graph: BTreeMap<ModPath, BTreeSet<ModPath>>,
    /// (file, file it imports) → the first path of the file that does.
    why: BTreeMap<(ModPath, ModPath), String>,
    rules: rules::Rules,
    /// File → every name its code uses (path segments, methods called).
    names: BTreeMap<ModPath, BTreeSet<String>>,
}

impl Layout {
    /// Reads the crate whose sources are in `src` (its `lib.rs`, else its
    /// `main.rs`, and every module file they declare).
    pub fn read(src: &Path) -> Result<Self, LayoutError> {
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .find(|f| f.exists())
            .ok_or_else(|| LayoutError::NoRoot(src.to_path_buf()))?;
        Self::read_root(&root)
    }

    /// Reads the crate whose root file is `root` (a `lib.rs`, `main.rs` or
    /// a `bin/` file) and every module file it declares.
    pub fn read_root(root: &Path) -> Result<Self, LayoutError> {
        let modules = parse::read_crate(root)?;
        let edges = resolve::Resolver { modules: &modules }.graph();
        let mut graph = BTreeMap::new();
        let mut why = BTreeMap::new();
        for (file, targets) in edges {
            let set: &mut BTreeSet<ModPath> = graph.entry(file.clone()).or_default();
            for (target, path) in targets {
                set.insert(target.clone());
                why.insert((file.clone(), target), path);
            }
        }
        let rules = rules::rules(&modules);
        let mut names: BTreeMap<ModPath, BTreeSet<String>> = BTreeMap::new();
        for module in modules.values() {
            let set = names.entry(module.file.clone()).or_default();
            set.extend(module.refs.iter().flatten().cloned());
            set.extend(module.methods.iter().cloned());
        }
        Ok(Self {
            graph,
            why,
            rules,
            names,
        })
    }

    /// File → the files it imports from (module paths; the root is empty).
    pub fn graph(&self) -> &BTreeMap<ModPath, BTreeSet<ModPath>> {
        &self.graph
    }

    /// The import cycles between files, one through each group of files
    /// that import each other, named `a::b -> c -> a::b` (the crate root
    /// is `crate`).
    pub fn import_cycles(&self) -> Vec<String> {
        resolve::all_cycles(&self.graph)
            .iter()
            .map(|cycle| {
                let mut text = name(&cycle[0]);
                for pair in cycle.windows(2) {
                    let path = self.why.get(&(pair[0].clone(), pair[1].clone()));
                    text.push_str(&format!(
                        " -> {} (`{}`)",
                        name(&pair[1]),
                        path.map_or("?", String::as_str)
                    ));
                }
                text
            })
            .collect()
    }

    /// Every name the code of `file` uses (outside `#[cfg(test)]` items):
    /// each segment of the paths it names — its own `use` lines', another
    /// crate's, a macro call's — and each method it calls. What a rule
    /// such as "only persist touches the store" looks for.
    pub fn names(&self, file: &ModPath) -> Option<&BTreeSet<String>> {
        self.names.get(file)
    }

    /// The files read (module paths; the root is empty).
    pub fn files(&self) -> impl Iterator<Item = &ModPath> {
        self.names.keys()
    }

    /// The first path by which `file` imports from `target`, if it does.
    pub fn why(&self, file: &ModPath, target: &ModPath) -> Option<&str> {
        self.why
            .get(&(file.clone(), target.clone()))
            .map(String::as_str)
    }

    /// The rooms (module paths) and the siblings each one's line names
    /// (`None`: a folder without a line).
    pub fn rooms(&self) -> &BTreeMap<ModPath, Option<BTreeSet<String>>> {
        &self.rules
    }

    /// Every broken room rule, one sentence each.
    pub fn room_violations(&self) -> Vec<String> {
        rules::violations(&self.rules, &self.graph)
    }

    /// Every broken rule of the crate: its import cycle and its rooms'.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .import_cycles()
            .iter()
            .map(|c| format!("an import cycle: {c}"))
            .collect();
        out.extend(self.room_violations());
        out
    }
}
