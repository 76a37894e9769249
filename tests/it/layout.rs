//! The module import graph: data flows one way. Within each crate (the ABI crate, the host
//! library, the `hermes` binary) no two modules import each other, directly or round a
//! circle. A module and the modules inside it count as one, so a child's `use super::X` is
//! not a circle; what is checked is every pair of modules side by side, at every depth
//! (`gateway::emit` and `gateway::handler`, `plugins` and `registry`).
//!
//! The same check anyone can run by hand: `cargo test -p hermes-tests --test it layout`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hermes_tests::support::workspace;

type Module = Vec<String>;

/// Every module file of the crate whose root is `src/<root>.rs`, by module path (the root
/// is the empty path, `x/mod.rs` is `x`), with its text. `skip` drops top-level modules that
/// belong to the other crate root in the same directory.
fn modules(src: &Path, root: &str, skip: &[&str]) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts == ["main"] {
                if parts[0] != root {
                    continue;
                }
                parts.clear();
            }
            if parts.first().is_some_and(|p| skip.contains(&p.as_str())) {
                continue;
            }
            out.insert(parts, std::fs::read_to_string(&path).unwrap());
        }
    }
    out
}

/// The code of `text` without comments (so doc examples and prose do not count).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths after `crate::` and `super::` in `text`, resolved from module `here`; a
/// `{a, b::c}` group gives one path per item.
fn references(text: &str, here: &Module) -> Vec<Module> {
    let text = code(text);
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let at = &bytes[i..];
        let word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let (base, skip) = if word_start && at.starts_with(b"crate::") {
            (Vec::new(), "crate::".len())
        } else if word_start && at.starts_with(b"super::") {
            let mut n = 0;
            while bytes[i + n * 7..].starts_with(b"super::") {
                n += 1;
            }
            (
                here[..here.len().saturating_sub(n)].to_vec(),
                n * "super::".len(),
            )
        } else {
            i += 1;
            continue;
        };
        let tail = &text[i + skip..];
        if let Some(group) = tail.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push([base.clone(), path_of(item.trim())].concat());
            }
        } else {
            out.push([base.clone(), path_of(tail)].concat());
        }
        i += skip;
    }
    out
}

/// The leading `a::b::c` of `text`, as segments.
fn path_of(text: &str) -> Module {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    text[..end]
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The circles among sibling modules of one crate, each as its modules.
fn circles(modules: &BTreeMap<Module, String>) -> Vec<Vec<Module>> {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (here, text) in modules {
        for reference in references(text, here) {
            let Some(target) = (0..=reference.len())
                .rev()
                .map(|k| reference[..k].to_vec())
                .find(|m| modules.contains_key(m))
            else {
                continue;
            };
            if target.starts_with(here) || here.starts_with(&target) {
                continue;
            }
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            edges
                .entry(here[..=common].to_vec())
                .or_default()
                .insert(target[..=common].to_vec());
        }
    }
    // Every module that can reach itself, grouped by the set it goes round with.
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let mut found: Vec<Vec<Module>> = Vec::new();
    for m in edges.keys() {
        let from_m = reach(m);
        if !from_m.contains(m) {
            continue;
        }
        let circle: Vec<Module> = from_m
            .iter()
            .filter(|other| reach(other).contains(m))
            .cloned()
            .collect();
        if !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

fn check(crate_name: &str, src: &str, root: &str, skip: &[&str]) -> Vec<String> {
    let found = circles(&modules(&workspace().join(src), root, skip));
    found
        .iter()
        .map(|c| {
            let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
            format!("{crate_name}: {}", names.join(" <-> "))
        })
        .collect()
}

#[test]
fn no_two_modules_import_each_other_in_any_crate() {
    let mut found = check("hermes-hooks-abi", "hermes-hooks-abi/src", "lib", &[]);
    // One directory, two crate roots: the library, and the binary (`main.rs`, `cli`, `app`).
    let host = "hermes-host/src";
    found.extend(check("hermes-host (library)", host, "lib", &["cli", "app"]));
    let library_modules: Vec<String> = modules(&workspace().join(host), "lib", &["cli", "app"])
        .into_keys()
        .filter_map(|m| m.first().cloned())
        .collect();
    let library_modules: Vec<&str> = library_modules.iter().map(String::as_str).collect();
    found.extend(check("hermes (binary)", host, "main", &library_modules));
    assert!(
        found.is_empty(),
        "modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_circle_when_there_is_one() {
    let mut modules = BTreeMap::new();
    modules.insert(Vec::new(), "mod a; mod b;".to_string());
    modules.insert(vec!["a".to_string()], "use crate::b::thing;".to_string());
    modules.insert(vec!["b".to_string()], "use super::a::{x, y};".to_string());
    assert_eq!(
        circles(&modules),
        [vec![vec!["a".to_string()], vec!["b".to_string()]]]
    );
    // A child using its parent is no circle.
    modules.insert(
        vec!["b".to_string()],
        "// use crate::a::x;\nfn f() {}".to_string(),
    );
    modules.insert(
        vec!["a".to_string(), "c".to_string()],
        "use super::Thing;".to_string(),
    );
    assert!(circles(&modules).is_empty());
}
