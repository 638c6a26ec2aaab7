//! The facade's public items, kept in `acts/public-api.txt`: what `acts`
//! exports (its own items and everything it re-exports, by name) must be
//! exactly that list. A new export fails this test until the list is
//! updated on purpose (`ACTS_UPDATE_PUBLIC_API=1 cargo test -p acts --test
//! public_api`), so nothing of the engine's insides becomes API by
//! accident — and no `pub use acts_core` can come back.

use std::collections::BTreeSet;
use std::path::Path;

/// The leaf names of a `use` tree (`a::{B, c::{D as E}}` gives `B`, `E`).
fn leaves(tree: &str, out: &mut BTreeSet<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let inner = &tree[open + 1..tree.rfind('}').expect("a closing brace")];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    leaves(&inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        leaves(&inner[start..], out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    let name = match tree.split_once(" as ") {
        Some((_, alias)) => alias.trim(),
        None => tree.rsplit("::").next().unwrap_or(tree).trim(),
    };
    out.insert(name.to_owned());
}

/// Every public item of the crate root in `text`: what its `pub use`
/// statements export and its own `pub` items (`kind name`); items behind
/// `#[cfg(doctest)]` or `#[cfg(test)]` are not API.
fn public_items(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut skip_next = false;
    let mut statement: Option<String> = None;
    for line in text.lines() {
        if let Some(s) = &mut statement {
            s.push(' ');
            s.push_str(line.trim());
            if line.trim_end().ends_with(';') {
                let mut names = BTreeSet::new();
                leaves(
                    s.trim_start_matches("pub use").trim_end_matches(';'),
                    &mut names,
                );
                out.extend(names.into_iter().map(|n| format!("use {n}")));
                statement = None;
            }
            continue;
        }
        if line.starts_with("#[cfg(doctest)]") || line.starts_with("#[cfg(test)]") {
            skip_next = true;
            continue;
        }
        if line.starts_with("#[") || line.starts_with("///") {
            continue;
        }
        let skip = std::mem::take(&mut skip_next);
        if skip {
            continue;
        }
        if line.starts_with("pub use ") {
            statement = Some(line.trim().to_owned());
            if line.trim_end().ends_with(';') {
                let s = statement.take().expect("just set");
                let mut names = BTreeSet::new();
                leaves(
                    s.trim_start_matches("pub use").trim_end_matches(';'),
                    &mut names,
                );
                out.extend(names.into_iter().map(|n| format!("use {n}")));
            }
            continue;
        }
        for kind in [
            "fn", "async fn", "struct", "enum", "trait", "const", "static", "mod", "type",
        ] {
            if let Some(rest) = line.strip_prefix(&format!("pub {kind} ")) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(format!("{kind} {name}"));
            }
        }
    }
    out
}

/// The facade's public items: its root (`lib.rs`) and what the root
/// re-exports of its own modules (`pub use family::...` names them).
fn facade_items() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let root = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut items = public_items(&root);
    // A `pub mod` would export a whole module: list it too.
    for entry in std::fs::read_dir(&src).expect("src") {
        let path = entry.expect("an entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if stem != "lib" && root.contains(&format!("pub mod {stem}")) {
            let text = std::fs::read_to_string(&path).expect("a module");
            items.extend(
                public_items(&text)
                    .into_iter()
                    .map(|i| format!("{stem}::{i}")),
            );
        }
    }
    items
}

/// The types whose methods are listed too: the client API, grouped into
/// handles by concern (a method moved between handles, or a new one,
/// changes the listing).
const LISTED_METHODS_OF: [&str; 13] = [
    "Engine",
    "ChannelOps",
    "StorageOps",
    "RuntimeOps",
    "Executor",
    "ModelOps",
    "ProcOps",
    "TaskOps",
    "ActOps",
    "TriggerOps",
    "DeliveryOps",
    "PackageOps",
    "BulkOps",
];

/// `Type::method` for every public method of the types in
/// [`LISTED_METHODS_OF`], read from acts-core's api room (`impl Type {`
/// and `impl Type<'_> {` blocks; methods behind `#[cfg(...)]` features
/// are listed as well: they are API when the feature is on).
fn method_items() -> BTreeSet<String> {
    let api = Path::new(env!("CARGO_MANIFEST_DIR")).join("../acts-core/src/engine/api");
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(&api).expect("the api room") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a file of the api room");
        let mut current: Option<&str> = None;
        for line in text.lines() {
            if line.starts_with("impl") {
                current = LISTED_METHODS_OF.iter().copied().find(|t| {
                    line == format!("impl {t} {{")
                        || line == format!("impl {t}<'_> {{")
                        || line == format!("impl<'a> {t}<'a> {{")
                });
                continue;
            }
            if line == "}" {
                current = None;
                continue;
            }
            let Some(ty) = current else { continue };
            for prefix in ["    pub fn ", "    pub async fn "] {
                if let Some(rest) = line.strip_prefix(prefix) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(format!("method {ty}::{name}"));
                }
            }
        }
    }
    out
}

#[test]
fn the_facade_exports_exactly_the_listed_items() {
    let listing = Path::new(env!("CARGO_MANIFEST_DIR")).join("public-api.txt");
    let mut now: Vec<String> = facade_items().into_iter().collect();
    let methods = method_items();
    assert!(
        methods.contains("method ModelOps::deploy_yaml")
            && methods.contains("method Executor::proc")
            && !methods.contains("method Executor::deploy_yaml"),
        "the client API's methods are read, grouped: {methods:?}"
    );
    now.extend(methods);
    assert!(
        now.iter().any(|i| i == "use Engine") && now.iter().any(|i| i == "async fn open_store"),
        "the items are read: {now:?}"
    );
    assert!(
        !now.iter().any(|i| i.contains("acts_core")),
        "acts-core is not re-exported whole"
    );
    if std::env::var_os("ACTS_UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&listing, now.join("\n") + "\n").expect("write the listing");
        return;
    }
    let kept = std::fs::read_to_string(&listing).expect("acts/public-api.txt");
    let kept: Vec<String> = kept.lines().map(str::to_owned).collect();
    let added: Vec<&String> = now.iter().filter(|i| !kept.contains(i)).collect();
    let removed: Vec<&String> = kept.iter().filter(|i| !now.contains(i)).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the facade's public items changed: added {added:?}, removed {removed:?}; if that is \
         meant, run ACTS_UPDATE_PUBLIC_API=1 cargo test -p acts --test facade_suites -- public_api:: and commit \
         acts/public-api.txt"
    );
}

#[test]
fn the_listing_reads_renames_nesting_and_skips_test_items() {
    let text = "pub use a::{B, c::{D as E}, F};\npub use x::Y as Z;\n#[cfg(doctest)]\npub struct Hidden;\npub async fn go() {}\npub use acts_core;\n";
    let items: Vec<String> = public_items(text).into_iter().collect();
    assert_eq!(
        items,
        [
            "async fn go",
            "use B",
            "use E",
            "use F",
            "use Z",
            "use acts_core"
        ]
    );
}
