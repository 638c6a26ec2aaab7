//! The rooms of a crate and their `May use:` lines: a room is a folder
//! (its `mod.rs`), or a file whose documentation has such a line; the line
//! names, in backticks, the sibling modules (same parent) the room may use.
//! Every folder must have a line; a room uses no sibling its line does not
//! name; and the lines of sibling rooms name no circle among themselves.
//!
//! May use: `parse` (the modules and their lines), `resolve` (its cycle
//! finder).

use std::collections::{BTreeMap, BTreeSet};

use super::parse::{ModPath, Module};
use super::resolve::find_cycle;

/// A room's rule: the sibling modules its `May use:` line names (`None`: a
/// folder without a line).
pub(crate) type Rules = BTreeMap<ModPath, Option<BTreeSet<String>>>;

/// Every room of the crate and its rule.
pub(crate) fn rules(modules: &BTreeMap<ModPath, Module>) -> Rules {
    let mut out = Rules::new();
    for (path, module) in modules {
        let is_file = &module.file == path;
        if path.is_empty() || !is_file || (!module.folder && module.may_use.is_none()) {
            continue;
        }
        let parent = &path[..path.len() - 1];
        let siblings = &modules.get(parent).map(|p| &p.children);
        let names = module.may_use.as_ref().map(|line| {
            line.split('`')
                .skip(1)
                .step_by(2)
                .filter(|n| siblings.is_some_and(|s| s.contains(*n)))
                .filter(|n| Some(*n) != path.last().map(String::as_str))
                .map(str::to_owned)
                .collect()
        });
        out.insert(path.clone(), names);
    }
    out
}

/// Every folder without a line, every use of a sibling a room's line does
/// not name (from the file graph), and a circle among the lines.
pub(crate) fn violations(
    rules: &Rules,
    graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
) -> Vec<String> {
    let mut out: Vec<String> = rules
        .iter()
        .filter(|(_, names)| names.is_none())
        .map(|(room, _)| format!("room '{}' has no '//! May use:' line", room.join("::")))
        .collect();
    for (file, targets) in graph {
        for target in targets {
            let common = file.iter().zip(target).take_while(|(a, b)| a == b).count();
            if common >= file.len() || common >= target.len() {
                continue; // a parent and its child: the cycle check's business
            }
            let from = file[..=common].to_vec();
            let to = &target[common];
            if let Some(Some(allowed)) = rules.get(&from)
                && !allowed.contains(to)
            {
                out.push(format!(
                    "{} uses {}: room '{}' may not use '{}' (see its May use: line)",
                    file.join("::"),
                    target.join("::"),
                    from.join("::"),
                    to
                ));
            }
        }
    }
    let mut lines: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (room, names) in rules {
        let parent = &room[..room.len() - 1];
        for name in names.iter().flatten() {
            let mut sibling = parent.to_vec();
            sibling.push(name.clone());
            lines.entry(room.clone()).or_default().insert(sibling);
        }
    }
    if let Some(cycle) = find_cycle(&lines) {
        let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
        out.push(format!(
            "the May use: lines name each other in a circle: {}",
            names.join(" -> ")
        ));
    }
    out
}
