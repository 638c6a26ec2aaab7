//! The layout rules of the workspace, checked on the sources: no two files
//! of any crate import each other in a circle (through `crate::` or
//! `super::` paths), and no source file (below a crate's `src/`; tests
//! are not held to it) is longer than 600 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file (`engine::kernel::shared`; the crate root is
/// the empty path).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("below src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The module paths named after `prefix` in `text` (`crate::a::b::Item`
/// gives `a::b::Item`), test modules left out.
fn paths_after<'a>(text: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let boundary = rest[..i]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[i + prefix.len()..];
        if !boundary {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        out.push(rest[..end].split("::").filter(|p| !p.is_empty()).collect());
    }
    out
}

/// The longest known module that `path` starts with.
fn resolve(modules: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// Import edges between the files of the crate in `src` (a parent's edges
/// to its own children are declarations and re-exports, not imports).
fn import_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let me = module_of(src, file);
        let text = std::fs::read_to_string(file).expect("a readable source file");
        // `super::` names the parent of the file's module (for `mod.rs` too).
        let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
        let mut edges = BTreeSet::new();
        for p in paths_after(&text, "crate::") {
            let p: Vec<String> = p.iter().map(|s| s.to_string()).collect();
            if let Some(t) = resolve(&modules, &p) {
                edges.insert(t);
            }
        }
        for p in paths_after(&text, "super::") {
            let mut full = parent.clone();
            full.extend(p.iter().map(|s| s.to_string()));
            if let Some(t) = resolve(&modules, &full) {
                edges.insert(t);
            }
        }
        edges.retain(|t| t != &me && !t.is_empty() && !t.starts_with(&me));
        graph.insert(me, edges);
    }
    graph
}

/// A cycle of the graph, if it has one.
fn find_cycle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        node: &Vec<String>,
        stack: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle: Vec<String> = stack[i..].iter().map(|m| m.join("::")).collect();
            cycle.push(node.join("::"));
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

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate of the workspace (the members of its `Cargo.toml`).
fn crates() -> Vec<String> {
    let manifest =
        std::fs::read_to_string(workspace().join("Cargo.toml")).expect("the workspace manifest");
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|m| m.split(']').next())
        .expect("a members list");
    let out: Vec<String> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(out.len() >= 12, "the workspace lists its crates: {out:?}");
    out
}

#[test]
fn no_two_files_of_a_crate_import_each_other_in_a_circle() {
    for krate in crates() {
        let graph = import_graph(&workspace().join(&krate).join("src"));
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{krate}: an import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_check_finds_a_cycle_when_there_is_one() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").expect("write");
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").expect("write");
    std::fs::write(src.join("b.rs"), "use super::a::A;\npub struct B;\n").expect("write");
    let cycle = find_cycle(&import_graph(src)).expect("a cycle");
    assert!(cycle.contains(&"a".to_owned()) && cycle.contains(&"b".to_owned()));
}

#[test]
fn no_source_file_of_any_crate_is_longer_than_600_lines() {
    let mut files = Vec::new();
    for krate in crates() {
        rust_files(&workspace().join(krate).join("src"), &mut files);
    }
    for f in files {
        let lines = std::fs::read_to_string(&f)
            .expect("readable")
            .lines()
            .count();
        assert!(lines <= 600, "{} has {lines} lines", f.display());
    }
}
