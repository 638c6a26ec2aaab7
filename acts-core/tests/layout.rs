//! The layout rules of the workspace, checked on the sources: no two files
//! of any crate import each other in a circle (through `crate::` or
//! `super::` paths); no source file (below a crate's `src/`; tests are not
//! held to it) is longer than 600 lines; and every room (folder) of
//! acts-core says in its `mod.rs` which of its sibling rooms it may use
//! (`//! May use: \`types\`, \`persist\`.`) — and uses no other.

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
    import_graph_of(src, |text| text.to_owned())
}

/// `text` without its comment lines (a doc link is not an import).
fn code_only(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`import_graph`] of each file's text as `prepare` leaves it.
fn import_graph_of(
    src: &Path,
    prepare: impl Fn(&str) -> String,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let me = module_of(src, file);
        let text = prepare(&std::fs::read_to_string(file).expect("a readable source file"));
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

/// The rooms of the crate in `src` (folders with a `mod.rs`, as module
/// paths) and, for each, the sibling rooms its `May use:` line names
/// (`None`: it has no such line).
fn room_rules(src: &Path) -> BTreeMap<Vec<String>, Option<BTreeSet<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let rooms: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "mod.rs"))
        .map(|f| module_of(src, f))
        .collect();
    let mut out = BTreeMap::new();
    for room in &rooms {
        let parent = &room[..room.len() - 1];
        let siblings: BTreeSet<&String> = rooms
            .iter()
            .filter(|r| r.len() == room.len() && r[..r.len() - 1] == *parent && r != &room)
            .map(|r| r.last().expect("a room has a name"))
            .collect();
        let mut path = src.to_path_buf();
        path.extend(room);
        let text = std::fs::read_to_string(path.join("mod.rs")).expect("a readable mod.rs");
        let line = text
            .lines()
            .skip_while(|l| !l.starts_with("//! May use:"))
            .take_while(|l| l.starts_with("//!") && l.trim() != "//!")
            .collect::<Vec<_>>()
            .join(" ");
        let names = (!line.is_empty()).then(|| {
            line.split('`')
                .skip(1)
                .step_by(2)
                .filter(|n| siblings.iter().any(|s| s.as_str() == *n))
                .map(str::to_owned)
                .collect()
        });
        out.insert(room.clone(), names);
    }
    out
}

/// Every import of the crate in `src` that crosses from one room into a
/// sibling room its `May use:` line does not name, and every room without
/// such a line.
fn room_violations(src: &Path) -> Vec<String> {
    let rules = room_rules(src);
    let mut out: Vec<String> = rules
        .iter()
        .filter(|(_, names)| names.is_none())
        .map(|(room, _)| format!("room '{}' has no '//! May use:' line", room.join("::")))
        .collect();
    for (file, targets) in import_graph_of(src, code_only) {
        for target in targets {
            let common = file.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common >= file.len() || common >= target.len() {
                continue;
            }
            let (from, to) = (file[..=common].to_vec(), target[..=common].to_vec());
            let (Some(Some(allowed)), true) = (rules.get(&from), rules.contains_key(&to)) else {
                continue;
            };
            if !allowed.contains(&to[common]) {
                out.push(format!(
                    "{} uses {}: room '{}' may not use '{}' (see its May use: line)",
                    file.join("::"),
                    target.join("::"),
                    from.join("::"),
                    to[common]
                ));
            }
        }
    }
    out
}

#[test]
fn every_room_of_acts_core_uses_only_what_its_may_use_line_names() {
    let src = workspace().join("acts-core").join("src");
    let rules = room_rules(&src);
    assert!(rules.len() >= 13, "the rooms are found: {rules:?}");
    let kernel = vec!["engine".to_owned(), "kernel".to_owned()];
    assert_eq!(
        rules[&kernel],
        Some(["persist".to_owned(), "types".to_owned()].into()),
        "the kernel's line is read"
    );
    let violations = room_violations(&src);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_two_packages_of_acts_packages_do_not_use_each_other() {
    let src = workspace().join("acts-packages").join("src");
    let rules = room_rules(&src);
    assert_eq!(rules.len(), 2, "http and shell: {rules:?}");
    assert!(
        rules
            .values()
            .all(|names| names.as_ref().is_some_and(|n| n.is_empty())),
        "{rules:?}"
    );
    let violations = room_violations(&src);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_room_check_finds_a_use_its_line_does_not_name() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path();
    for room in ["low", "high", "quiet"] {
        std::fs::create_dir(src.join(room)).expect("mkdir");
    }
    std::fs::write(src.join("lib.rs"), "mod low;\nmod high;\nmod quiet;\n").expect("write");
    std::fs::write(
        src.join("low/mod.rs"),
        "//! Low.\n//!\n//! May use: nothing.\n",
    )
    .expect("write");
    std::fs::write(
        src.join("high/mod.rs"),
        "//! High.\n//!\n//! May use: `low`.\nmod a;\n",
    )
    .expect("write");
    std::fs::write(src.join("high/a.rs"), "use crate::low::X;\n").expect("write");
    std::fs::write(src.join("quiet/mod.rs"), "//! No line.\n").expect("write");
    assert_eq!(
        room_violations(src),
        ["room 'quiet' has no '//! May use:' line"]
    );
    // The low room reaching up into the high one: refused.
    std::fs::write(
        src.join("low/b.rs"),
        "// crate::high in a comment is no import\nuse crate::high::a::A;\n",
    )
    .expect("write");
    std::fs::write(
        src.join("low/mod.rs"),
        "//! Low.\n//!\n//! May use: nothing.\nmod b;\n",
    )
    .expect("write");
    let found = room_violations(src);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[1].starts_with("low::b uses high::a: room 'low' may not use 'high'"),
        "{found:?}"
    );
}

#[test]
fn no_crate_that_ships_depends_on_the_testkit_outside_its_tests() {
    for krate in crates() {
        if matches!(krate.as_str(), "acts-testkit" | "acts-sim" | "benches") {
            continue;
        }
        let manifest = std::fs::read_to_string(workspace().join(&krate).join("Cargo.toml"))
            .expect("a crate manifest");
        let deps = manifest
            .split("[dependencies]")
            .nth(1)
            .map(|rest| rest.split("\n[").next().unwrap_or_default())
            .unwrap_or_default();
        assert!(
            !deps.contains("acts-testkit"),
            "{krate} depends on acts-testkit outside its dev-dependencies"
        );
    }
}

/// The engine room (`types`, `kernel`, ...) a file of `acts-core/src`
/// belongs to, or the top-level folder outside the engine.
fn room_of(src: &Path, file: &Path) -> String {
    let m = module_of(src, file);
    match m.first().map(String::as_str) {
        Some("engine") if m.len() >= 2 => format!("engine::{}", m[1]),
        Some(first) => first.to_owned(),
        None => String::new(),
    }
}

/// The type an inherent `impl` line is for (`impl<'a> On<'a> {` gives
/// `On`; a trait impl gives `None`).
fn inherent_impl(line: &str) -> Option<String> {
    let rest = line.strip_prefix("impl")?;
    let rest = if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        })?;
        &rest[end + 1..]
    } else {
        rest
    };
    let rest = rest.trim_start();
    if rest.contains(" for ") || !rest.trim_end().ends_with('{') {
        return None;
    }
    let path: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let name = path.rsplit("::").next().unwrap_or_default().to_owned();
    (!name.is_empty()).then_some(name)
}

#[test]
fn every_inherent_impl_is_in_the_room_of_its_type_and_the_kernel_has_no_public_field() {
    let src = workspace().join("acts-core").join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Type name → the rooms defining a type of that name.
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut impls: Vec<(String, String, PathBuf)> = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let room = room_of(&src, f);
        for line in text.lines() {
            for kind in [
                "pub struct ",
                "pub(crate) struct ",
                "struct ",
                "pub enum ",
                "pub(crate) enum ",
            ] {
                if let Some(rest) = line.strip_prefix(kind) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    defined.entry(name).or_default().insert(room.clone());
                }
            }
            if let Some(ty) = inherent_impl(line) {
                impls.push((ty, room.clone(), f.clone()));
            }
        }
    }
    assert_eq!(
        defined.get("Kernel"),
        Some(&BTreeSet::from(["engine::kernel".to_owned()]))
    );
    assert_eq!(inherent_impl("impl<'k> On<'k> {").as_deref(), Some("On"));
    assert_eq!(
        inherent_impl("impl crate::engine::kernel::shared::Kernel {").as_deref(),
        Some("Kernel")
    );
    assert_eq!(
        inherent_impl("impl ServiceHooks<Kernel> for Services {"),
        None
    );
    for (ty, room, file) in &impls {
        if let Some(homes) = defined.get(ty) {
            assert!(
                homes.contains(room),
                "{}: an impl of {ty} outside its room ({homes:?})",
                file.display()
            );
        }
    }
    let shared = std::fs::read_to_string(src.join("engine/kernel/shared.rs")).expect("shared.rs");
    let body = shared
        .split("pub(crate) struct Kernel {")
        .nth(1)
        .and_then(|b| b.split("\n}\n").next())
        .expect("the Kernel struct");
    for line in body.lines().map(str::trim) {
        assert!(
            !(line.starts_with("pub ") || line.starts_with("pub(crate) ")),
            "a field of the kernel visible outside its room: {line}"
        );
    }
}

#[test]
fn the_api_room_reads_the_store_only_through_the_kernel_or_persist() {
    let api = workspace().join("acts-core/src/engine/api");
    let mut files = Vec::new();
    rust_files(&api, &mut files);
    assert!(files.len() >= 5, "the api room's files are found");
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        let code = code_only(text.split("#[cfg(test)]").next().unwrap_or_default());
        for forbidden in ["Collection", ".scan(", ".get_many(", "keys::"] {
            assert!(
                !code.contains(forbidden),
                "{}: '{forbidden}' — the api room reads rows through persist (`Reads`) or the kernel",
                f.display()
            );
        }
        // Only the engine's own accessor hands the store to the embedder.
        if !f.ends_with("engine.rs") {
            assert!(
                !code.contains(".store()"),
                "{}: the store itself — read it through persist (`Reads`) or the kernel",
                f.display()
            );
        }
    }
}
