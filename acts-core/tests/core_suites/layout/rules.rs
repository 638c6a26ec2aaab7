//! The import and room rules of every crate (`acts_testkit::layout`), and
//! the check itself shown to see each place an earlier, text-based check
//! was blind to: a parent and its child importing each other, an import
//! through a re-export, `May use:` lines that name each other, rooms
//! outside acts-core, and code written after a test module.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use acts_testkit::layout::Layout;

use super::{crates, workspace};

/// The crates whose layout is checked, each with its root files (a crate
/// with both a `lib.rs` and a `main.rs` is two crates).
fn roots() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for krate in crates() {
        let src = workspace().join(&krate).join("src");
        for root in ["lib.rs", "main.rs"] {
            if src.join(root).exists() {
                out.push((format!("{krate}/src/{root}"), src.join(root)));
            }
        }
    }
    out
}

#[test]
fn no_crate_has_an_import_cycle_or_a_room_that_uses_what_its_line_does_not_name() {
    let mut problems = Vec::new();
    for (name, root) in roots() {
        let layout = Layout::read_root(&root).unwrap_or_else(|e| panic!("{name}: {e}"));
        problems.extend(
            layout
                .problems()
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn rooms(krate: &str) -> Layout {
    Layout::read(&workspace().join(krate).join("src")).expect("the crate reads")
}

fn names(line: &[&str]) -> Option<BTreeSet<String>> {
    Some(line.iter().map(|s| (*s).to_owned()).collect())
}

#[test]
fn the_rooms_are_found_and_their_lines_read() {
    let core = rooms("acts-core");
    assert!(core.rooms().len() >= 15, "{:?}", core.rooms().keys());
    assert_eq!(
        core.rooms()[&vec!["engine".to_owned(), "kernel".to_owned()]],
        names(&["persist", "types"]),
        "the kernel's line is read"
    );
    assert_eq!(core.rooms()[&vec!["package".to_owned()]], names(&["model"]));
    let packages = rooms("acts-packages");
    for (room, other) in [("http", "shell"), ("shell", "http")] {
        let line = packages.rooms()[&vec![room.to_owned()]]
            .clone()
            .expect("a line");
        assert!(
            !line.contains(other),
            "{room} may not use {other}: {line:?}"
        );
    }
    let server = rooms("acts-server");
    let line = |room: &str| {
        server.rooms()[&vec![room.to_owned()]]
            .clone()
            .expect("a line")
    };
    assert!(!line("grpc").contains("routes") && line("grpc").contains("actions"));
    assert!(!line("routes").contains("grpc") && line("routes").contains("actions"));
    assert!(!line("actions").contains("grpc") && !line("actions").contains("routes"));
    assert!(rooms("acts-sim").rooms().len() >= 5);
    assert!(rooms("acts-cluster").rooms().len() >= 5);
}

/// Writes `files` (path, text) below a new temporary `src`.
fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

fn problems(dir: &Path) -> Vec<String> {
    Layout::read(dir).expect("the fixture reads").problems()
}

#[test]
fn a_parent_and_its_child_that_import_each_other_are_a_cycle() {
    // The parent calls into its child, which imports the parent's type.
    let dir = fixture(&[
        ("lib.rs", "mod a;\npub struct P;\npub fn f() { a::g(); }\n"),
        ("a.rs", "use crate::P;\npub fn g() -> Option<P> { None }\n"),
    ]);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("an import cycle: crate -> a"),
        "{found:?}"
    );
    // A parent that only declares and re-exports its children is fine,
    // and a child reaching a sibling through the parent's re-export
    // imports the sibling, not the parent.
    let dir = fixture(&[
        ("lib.rs", "mod a;\nmod b;\npub use a::A;\npub use b::B;\n"),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", "use crate::A;\npub struct B(pub A);\n"),
    ]);
    assert!(problems(dir.path()).is_empty());
    let layout = Layout::read(dir.path()).expect("reads");
    assert_eq!(
        layout.graph()[&vec!["b".to_owned()]],
        BTreeSet::from([vec!["a".to_owned()]])
    );
}

#[test]
fn an_import_through_a_re_export_counts_where_the_item_is_defined() {
    let dir = fixture(&[
        ("lib.rs", "mod engine;\n"),
        (
            "engine/mod.rs",
            "//! May use: nothing.\nmod api;\nmod kernel;\npub use api::Executor;\n",
        ),
        (
            "engine/api/mod.rs",
            "//! May use: `kernel`.\nmod executor;\npub use executor::Executor;\n",
        ),
        ("engine/api/executor.rs", "pub struct Executor;\n"),
        (
            "engine/kernel/mod.rs",
            "//! May use: nothing.\npub fn run(_: &crate::engine::Executor) {}\n",
        ),
    ]);
    let found = problems(dir.path());
    assert_eq!(
        found,
        [
            "engine::kernel uses engine::api::executor: room 'engine::kernel' may not use 'api' (see its May use: line)"
        ]
    );
}

#[test]
fn may_use_lines_that_name_each_other_are_refused() {
    let dir = fixture(&[
        ("lib.rs", "mod package;\nmod scheduler;\n"),
        ("package/mod.rs", "//! May use: `scheduler`.\n"),
        ("scheduler/mod.rs", "//! May use: `package`.\n"),
    ]);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("the May use: lines name each other in a circle"),
        "{found:?}"
    );
}

#[test]
fn a_file_with_a_may_use_line_is_a_room_and_a_folder_without_one_is_refused() {
    let dir = fixture(&[
        ("lib.rs", "mod node;\nmod call;\nmod quiet;\n"),
        ("node.rs", "pub struct Node;\n"),
        (
            "call.rs",
            "//! May use: nothing of the crate.\nuse crate::node::Node;\npub fn f(_: Node) {}\n",
        ),
        ("quiet/mod.rs", "//! No line.\n"),
    ]);
    let mut found = problems(dir.path());
    found.sort();
    assert_eq!(
        found,
        [
            "call uses node: room 'call' may not use 'node' (see its May use: line)",
            "room 'quiet' has no '//! May use:' line",
        ]
    );
}

#[test]
fn code_after_a_test_module_is_read_and_the_test_module_is_not() {
    let dir = fixture(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub struct A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\npub fn after(_: crate::b::B) {}\n",
        ),
        ("b.rs", "pub struct B(pub crate::a::A);\n"),
    ]);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("an import cycle: a -> b"), "{found:?}");
    // Only the test module imports b: no cycle.
    let dir = fixture(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub struct A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
        ),
        ("b.rs", "pub struct B(pub crate::a::A);\n"),
    ]);
    assert!(problems(dir.path()).is_empty());
}

#[test]
fn paths_in_macro_calls_and_names_bound_by_use_are_imports() {
    let dir = fixture(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub const NAMES: &[&str] = &[];\npub fn f() -> usize { crate::b::B }\n",
        ),
        (
            "b.rs",
            "pub use crate::a::NAMES;\npub const B: usize = 1;\npub fn g() -> String { format!(\"{:?}\", NAMES) }\n",
        ),
    ]);
    let found = problems(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("an import cycle"), "{found:?}");
}

/// Copies the crate `krate`'s sources into a temporary folder.
fn copy_of(krate: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("a folder") {
            let path = entry.expect("an entry").path();
            let target = to.join(path.file_name().expect("a name"));
            if path.is_dir() {
                copy(&path, &target);
            } else {
                std::fs::copy(&path, &target).expect("copy");
            }
        }
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    copy(&workspace().join(krate).join("src"), dir.path());
    dir
}

/// The file of module `m` below `src`.
fn file_of(src: &Path, m: &[String]) -> PathBuf {
    if m.is_empty() {
        return ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .find(|f| f.exists())
            .expect("a root");
    }
    let mut flat = src.to_path_buf();
    flat.extend(m);
    let file = flat.with_extension("rs");
    if file.exists() {
        file
    } else {
        flat.join("mod.rs")
    }
}

#[test]
fn a_cycle_planted_in_each_crate_with_rooms_is_found() {
    for krate in [
        "acts-core",
        "acts-packages",
        "acts-server",
        "acts-cluster",
        "acts-cli",
        "acts-sim",
    ] {
        let dir = copy_of(krate);
        let src = dir.path();
        assert!(problems(src).is_empty(), "{krate} passes before the plant");
        // An edge a -> b of the crate; b is made to import a back.
        let layout = Layout::read(src).expect("reads");
        let (a, b) = layout
            .graph()
            .iter()
            .find_map(|(a, targets)| targets.iter().next().map(|b| (a.clone(), b.clone())))
            .expect("the crate has an import");
        let a_file = file_of(src, &a);
        let b_file = file_of(src, &b);
        let mut text = std::fs::read_to_string(&a_file).expect("read");
        text.push_str("\npub(crate) fn planted_probe() {}\n");
        std::fs::write(&a_file, text).expect("write");
        let mut path = vec!["crate".to_owned()];
        path.extend(a.iter().cloned());
        path.push("planted_probe".to_owned());
        let mut text = std::fs::read_to_string(&b_file).expect("read");
        text.push_str(&format!(
            "\nfn planted_user() {{ {}(); }}\n",
            path.join("::")
        ));
        std::fs::write(&b_file, text).expect("write");
        let found = problems(src);
        assert!(
            found.iter().any(|p| p.starts_with("an import cycle")),
            "{krate}: the planted cycle {a:?} <-> {b:?} is not found: {found:?}"
        );
    }
}
