//! The layout rules of the workspace, checked on the sources: in every
//! crate, no two files import each other in a circle (a parent and its
//! child too; imports resolved through re-exports to where the item is
//! defined) and every room uses only what its `May use:` line names
//! (`layout/rules.rs`, with `acts_testkit::layout`); no source file (below
//! a crate's `src/`; tests are not held to it) is longer than 600 lines;
//! the engine's types keep their impls in their rooms; the api, the kernel
//! and the services read and write rows only through persist.

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

/// `text` without its comment lines (a doc link is not an import).
fn code_only(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
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

#[path = "layout/rules.rs"]
mod rules;

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
                "pub(super) struct ",
                "struct ",
                "pub enum ",
                "pub(crate) enum ",
                "pub(super) enum ",
                "enum ",
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

/// What only persist (and `durable`, below it) may name: the collections
/// and their index reads, the store's raw reads and conditional batch, and
/// its key encoding.
const ROW_ACCESS: [&str; 7] = [
    "Collection",
    "batch_if",
    "scan",
    "get_many",
    "KeyBuilder",
    "KeyReader",
    "index_ids",
];

/// The names of `ROW_ACCESS` the files of `rooms` (module paths below
/// `engine`) use — however they reach them: a `use` line, a glob, an
/// alias, a method call — one line each; and how many files were read.
fn row_access_outside_persist(src: &Path, rooms: &[&str]) -> (Vec<String>, usize) {
    let layout = acts_testkit::layout::Layout::read(src).expect("the crate reads");
    let mut found = Vec::new();
    let mut seen = 0;
    for file in layout.files() {
        let in_room = file.first().is_some_and(|f| f == "engine")
            && file.get(1).is_some_and(|r| rooms.contains(&r.as_str()));
        if !in_room {
            continue;
        }
        seen += 1;
        let names = layout.names(file).expect("a file read");
        for n in ROW_ACCESS.iter().filter(|n| names.contains(**n)) {
            found.push(format!("{}: names `{n}`", file.join("::")));
        }
    }
    (found, seen)
}

#[test]
fn only_persist_touches_rows_and_keys_the_api_the_kernel_and_the_services_go_through_it() {
    let src = workspace().join("acts-core").join("src");
    let (found, seen) = row_access_outside_persist(&src, &["api", "kernel", "services"]);
    assert!(seen >= 40, "the rooms' files are read ({seen})");
    assert!(
        found.is_empty(),
        "rows are read and written through persist's row stores (`Reads`, `ProcRows`, \
         `DeliveryRows`, ...), not collections or the raw store:\n{}",
        found.join("\n")
    );
    // Only the engine's own accessor hands the store to the embedder
    // (`engine.storage().store()`: `engine.rs` and its handle in
    // `engine_ops.rs`).
    let api = src.join("engine/api");
    let mut files = Vec::new();
    rust_files(&api, &mut files);
    for f in files
        .iter()
        .filter(|f| !f.ends_with("engine.rs") && !f.ends_with("engine_ops.rs"))
    {
        let text = std::fs::read_to_string(f).expect("readable");
        let code = code_only(text.split("#[cfg(test)]").next().unwrap_or_default());
        assert!(
            !code.contains(".store()"),
            "{}: the store itself — read it through persist (`Reads`) or the kernel",
            f.display()
        );
    }
}

#[test]
fn the_row_access_rule_sees_a_method_call_a_glob_and_an_alias() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let src = dir.path();
    let files = [
        ("lib.rs", "mod durable;\nmod engine;\n"),
        (
            "durable/mod.rs",
            "mod collection;\npub use collection::*;\n",
        ),
        ("durable/collection.rs", "pub struct Collection;\n"),
        (
            "engine/mod.rs",
            "mod kernel;\nmod persist;\nmod services;\nmod api;\n",
        ),
        ("engine/persist.rs", "use crate::durable::Collection;\n"),
        (
            "engine/kernel/mod.rs",
            "//! May use: `persist`.\nmod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\nmod g;\n",
        ),
        ("engine/kernel/a.rs", "fn f(s: &S) { s.batch_if(); }\n"),
        (
            "engine/kernel/b.rs",
            "use crate::durable::*;\nfn f(_: Collection) {}\n",
        ),
        (
            "engine/kernel/c.rs",
            "use crate::durable::Collection as Rows;\nfn f(_: Rows) {}\n",
        ),
        (
            "engine/kernel/d.rs",
            "fn f() { let _ = acts_store::keys::KeyBuilder::new(); }\n",
        ),
        (
            "engine/kernel/e.rs",
            "#[cfg(test)]\nmod tests { fn f(s: &S) { s.scan(); } }\nfn g(s: &S) { s.get_many(); }\n",
        ),
        (
            "engine/kernel/f.rs",
            "#[cfg(test)]\nmod tests { fn f(s: &S) { s.scan(); } }\n",
        ),
        ("engine/kernel/g.rs", "fn f(s: &S) { s.get(); }\n"),
        (
            "engine/services/mod.rs",
            "//! May use: `kernel`.\nmod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\nmod g;\n",
        ),
        ("engine/services/a.rs", ""),
        ("engine/services/b.rs", ""),
        ("engine/services/c.rs", ""),
        ("engine/services/d.rs", ""),
        ("engine/services/e.rs", ""),
        ("engine/services/f.rs", ""),
        ("engine/services/g.rs", ""),
        ("engine/api/mod.rs", "//! May use: `kernel`.\n"),
    ];
    for (name, text) in files {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
        std::fs::write(path, text).expect("written");
    }
    let (found, seen) = row_access_outside_persist(src, &["api", "kernel", "services"]);
    assert_eq!(seen, 17, "every file of the three rooms is read");
    let text = found.join("\n");
    assert!(
        text.contains("engine::kernel::a: names `batch_if`"),
        "{text}"
    );
    assert!(
        text.contains("engine::kernel::b: names `Collection`"),
        "{text}"
    );
    assert!(
        text.contains("engine::kernel::c: names `Collection`"),
        "{text}"
    );
    assert!(
        text.contains("engine::kernel::d: names `KeyBuilder`"),
        "{text}"
    );
    assert!(
        text.contains("engine::kernel::e: names `get_many`"),
        "{text}"
    );
    assert!(
        !text.contains("engine::kernel::f"),
        "a test module is not code: {text}"
    );
    assert!(!text.contains("engine::kernel::g"), "{text}");
    assert!(!text.contains("persist"), "persist may: {text}");
}

#[test]
fn the_services_reach_the_kernel_only_through_on() {
    let layout = acts_testkit::layout::Layout::read(&workspace().join("acts-core/src"))
        .expect("the crate reads");
    let shared: Vec<String> = ["engine", "kernel", "shared"].map(str::to_owned).into();
    let mut seen = 0;
    for file in layout
        .files()
        .filter(|f| f.starts_with(&["engine".to_owned(), "services".to_owned()]))
    {
        seen += 1;
        let names = layout.names(file).expect("a file read");
        let name = file.join("::");
        assert!(
            !names.contains("Deref"),
            "{name}: a Deref in the services' room (they reach the kernel through `On`'s methods)"
        );
        // `on.rs` holds the kernel; `hooks.rs` names it as the hooks' type.
        if file.last().is_some_and(|l| l == "on" || l == "hooks") {
            continue;
        }
        let imports = layout.graph().get(file);
        assert!(
            !names.contains("Kernel") && !imports.is_some_and(|i| i.contains(&shared)),
            "{name}: uses the kernel itself ({}); the services use what `services/on.rs` hands out",
            layout.why(file, &shared).unwrap_or("Kernel")
        );
    }
    assert!(seen >= 8, "the services' files are read ({seen})");
}

#[test]
fn the_kernels_parts_reach_the_engine_only_through_their_capability_traits() {
    let layout = acts_testkit::layout::Layout::read(&workspace().join("acts-core/src"))
        .expect("the crate reads");
    let kernel: Vec<String> = ["engine", "kernel"].map(str::to_owned).into();
    // The parts whose logic moved off `Kernel`, each reaching the engine
    // through the host trait it defines (implemented in kernel/hosts.rs).
    for (part, host) in [
        ("gates", "GateHost"),
        ("recovery", "RecoveryHost"),
        ("catalog", "CatalogHost"),
    ] {
        let mut room = kernel.clone();
        room.push(part.to_owned());
        let Some(Some(allowed)) = layout.rooms().get(&room) else {
            panic!("engine::kernel::{part} is a room with a May use: line");
        };
        for coordinator in [
            "shared",
            "hosts",
            "transition",
            "loading",
            "start",
            "follow_up",
        ] {
            assert!(
                !allowed.contains(coordinator),
                "engine::kernel::{part} may use `{coordinator}`: a part reaches the engine \
                 through {host}, not the kernel's own files"
            );
        }
        let mut files = 0;
        for file in layout.files().filter(|f| f.starts_with(&room)) {
            files += 1;
            let names = layout.names(file).expect("a file read");
            assert!(
                !names.contains("Kernel"),
                "{}: names the kernel; a part uses {host}",
                file.join("::")
            );
        }
        assert!(
            files >= 2,
            "engine::kernel::{part}'s files are read ({files})"
        );
        let defines = layout
            .files()
            .filter(|f| f.starts_with(&room))
            .any(|f| layout.names(f).is_some_and(|n| n.contains(host)));
        assert!(
            defines,
            "engine::kernel::{part} names its capability {host}"
        );
    }
}
