//! Changing `config.yaml` without losing anything: under a lock, through a unique temporary
//! file, and, for `plugins enable` / `disable`, as a targeted edit of the two lists that
//! keeps every other byte of the file (comments, anchors, quoting, key order) as it was.
//!
//! Fifty `plugins enable` run at once used to lose about half their changes: each read the
//! file, parsed it, and wrote a re-serialised copy through one fixed temporary name, so
//! writers removed each other's temporary files and the last rename won. Here every change
//! is a read-modify-write under an exclusive `flock` on `config.yaml.lock`. The result of
//! an edit is parsed again and compared with what was asked for: anything else in the
//! document changing, or a list shaped so that it cannot be edited safely, refuses the
//! edit and names the line.

use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use yaml_serde::Value;

use crate::{
    config::{Config, ConfigError},
    home::Home,
};

/// Reads `config.yaml` (empty when missing), hands its text to `change`, and writes what
/// `change` returns in its place, atomically and with mode 0600, all under the file's
/// lock. Returns what `change` returned beside the text. Nothing is written when the text
/// is unchanged.
///
/// # Errors
///
/// The lock, the read or the write failed, or `change` refused (its message, which should
/// name the line).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let home = hermes_host::home::Home::at(dir.path());
/// std::fs::write(home.config_path(), "# mine\nmodel: x\n").unwrap();
/// hermes_host::config_edit::update(&home, |text| Ok((format!("{text}extra: 1\n"), ()))).unwrap();
/// assert_eq!(std::fs::read_to_string(home.config_path()).unwrap(), "# mine\nmodel: x\nextra: 1\n");
/// ```
pub fn update<T>(
    home: &Home,
    change: impl FnOnce(&str) -> Result<(String, T), String>,
) -> Result<T, ConfigError> {
    let path = home.config_path();
    let err = |message: String| ConfigError {
        path: path.clone(),
        message,
    };
    std::fs::create_dir_all(home.root()).map_err(|e| err(e.to_string()))?;
    let lock_path = lock_path(&path);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| err(format!("{}: {e}", lock_path.display())))?;
    loop {
        // SAFETY: flock on a descriptor owned by this function for the whole change; the
        // lock goes when `lock` is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(err(format!("{}: {e}", lock_path.display())));
        }
    }
    // A dotfiles `config.yaml` is a link: the edit goes to the file it names, which stays
    // where it is (replacing the link with a copy would silently fork the user's config).
    let target = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(&path)
            .map_err(|e| err(format!("it is a link that does not resolve: {e}")))?,
        _ => path.clone(),
    };
    remove_orphan_temporaries(&target);
    let text = match crate::private_file::read_regular(&target) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| err("it is not UTF-8 text".into()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(err(e.to_string())),
    };
    let (new_text, out) = change(&text).map_err(err)?;
    if new_text != text {
        writable(&target).map_err(err)?;
        write_atomically(&target, &new_text).map_err(err)?;
    }
    drop(lock);
    Ok(out)
}

/// Adds `name` to `plugins.enabled` and removes it from `plugins.disabled` (`enable`), or
/// the other way round, editing only those entries of `config.yaml`. Returns whether
/// anything changed.
///
/// # Errors
///
/// As [`update`]; and when `config.yaml` does not parse, or its `plugins:` is shaped so that
/// the lists cannot be edited in place (written inline, a list that is not a list of names):
/// the message names the line and says what to write instead.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let home = hermes_host::home::Home::at(dir.path());
/// std::fs::write(home.config_path(), "plugins:\n  enabled: [a]  # the guard: DO NOT REMOVE\n  x: &n 010\n").unwrap();
/// assert!(hermes_host::config_edit::set_plugin(&home, "b", true).unwrap());
/// assert_eq!(
///     std::fs::read_to_string(home.config_path()).unwrap(),
///     "plugins:\n  enabled: [a, b]  # the guard: DO NOT REMOVE\n  x: &n 010\n"
/// );
/// ```
pub fn set_plugin(home: &Home, name: &str, enable: bool) -> Result<bool, ConfigError> {
    update(home, |text| {
        let before = Config::parse(text)?;
        let mut wanted = before.clone();
        let changed = if enable {
            wanted.enable_plugin(name)
        } else {
            wanted.disable_plugin(name)
        };
        if !changed {
            return Ok((text.to_string(), false));
        }
        let (add_to, remove_from) = if enable {
            ("enabled", "disabled")
        } else {
            ("disabled", "enabled")
        };
        let edited = remove_item(text, remove_from, name)?;
        let edited = add_item(&edited, add_to, name)?;
        let after = Config::parse(&edited).map_err(|e| {
            format!("editing plugins.{add_to} would break the file ({e}); edit it by hand")
        })?;
        if !same_but_lists(&after, &wanted) {
            return Err(format!(
                "plugins.{add_to} and plugins.{remove_from} cannot be edited in place without changing something else; edit them by hand"
            ));
        }
        Ok((edited, true))
    })
}

/// Sets the value at `path` in `config.yaml`, creating the mappings on the way, and edits
/// only that key's lines: every other byte of the file (comments, anchors, quoting, key
/// order) stays as it was. Returns whether anything changed. A Python plugin's
/// `ctx.set_config` writes through this, under `plugins.entries.<plugin>.settings`.
///
/// # Errors
///
/// As [`update`]; and when `config.yaml` does not parse, or a mapping on the way is written
/// on its key's line (`entries: {a: 1}`) or is not a mapping: the message names the line and
/// says to edit it by hand.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let home = hermes_host::home::Home::at(dir.path());
/// std::fs::write(home.config_path(), "# mine\nplugins:\n  enabled: [audit]  # keep\n").unwrap();
/// let path = ["plugins", "entries", "audit", "settings", "level"];
/// assert!(hermes_host::config_edit::set_value(&home, &path, &serde_json::json!("high")).unwrap());
/// assert_eq!(
///     std::fs::read_to_string(home.config_path()).unwrap(),
///     "# mine\nplugins:\n  enabled: [audit]  # keep\n  entries:\n    audit:\n      settings:\n        level: high\n"
/// );
/// ```
pub fn set_value(
    home: &Home,
    path: &[&str],
    value: &serde_json::Value,
) -> Result<bool, ConfigError> {
    update(home, |text| {
        let before = Config::parse(text)?;
        let edited = set_path(text, path, value)?;
        if edited == text {
            return Ok((edited, false));
        }
        let dotted = path.join(".");
        let after = Config::parse(&edited)
            .map_err(|e| format!("setting {dotted} would break the file ({e}); edit it by hand"))?;
        let mut wanted = Value::Mapping(before.root().clone());
        let value: Value = yaml_serde::from_str(&yaml_value(value)).unwrap_or(Value::Null);
        if !put(&mut wanted, path, value) || wanted != Value::Mapping(after.root().clone()) {
            return Err(format!(
                "{dotted} cannot be set in place without changing something else; edit it by hand"
            ));
        }
        Ok((edited, true))
    })
}

/// Sets `path` in a parsed document, as the text edit should have; false when a step on the
/// way holds something other than a mapping (or nothing).
fn put(root: &mut Value, path: &[&str], value: Value) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut node = root;
    for key in parents {
        if node.is_null() {
            *node = Value::Mapping(Default::default());
        }
        let Value::Mapping(map) = node else {
            return false;
        };
        node = map
            .entry(Value::String((*key).to_string()))
            .or_insert(Value::Null);
    }
    if node.is_null() {
        *node = Value::Mapping(Default::default());
    }
    let Value::Mapping(map) = node else {
        return false;
    };
    map.insert(Value::String((*last).to_string()), value);
    true
}

/// A value as YAML on one line: a plain scalar when it reads back as the same string, JSON
/// otherwise (JSON is YAML's flow style).
fn yaml_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => scalar(s),
        other => other.to_string(),
    }
}

/// The entries of one mapping written as a block: lines `lo..hi`, keys at `indent`.
struct Span {
    lo: usize,
    hi: usize,
    indent: usize,
}

/// A `key: value` line, trimmed at the start: its key (unquoted) and where its colon is.
fn entry_key(line: &str) -> Option<(String, usize)> {
    let key_end = match line.chars().next()? {
        q @ ('"' | '\'') => line[1..].find(q)? + 2,
        _ => 0,
    };
    let colon = key_end
        + line[key_end..]
            .match_indices(':')
            .map(|(i, _)| i)
            .find(|&i| {
                let after = &line[key_end + i + 1..];
                after.is_empty() || after.starts_with(' ')
            })?;
    let raw = line[..colon].trim_end();
    let key = yaml_serde::from_str::<String>(raw).unwrap_or_else(|_| raw.to_string());
    Some((key, colon))
}

/// The line of entry `key` among `span`'s, and its colon.
fn find_key(all: &[Line<'_>], span: &Span, key: &str) -> Option<(usize, usize)> {
    (span.lo..span.hi).find_map(|i| {
        let l = all[i].text;
        if indent(l) != span.indent || blank_or_comment(l) {
            return None;
        }
        let (k, colon) = entry_key(l.trim_start())?;
        (k == key).then_some((i, indent(l) + colon))
    })
}

/// The lines that belong to the entry on line `at` (deeper ones, with the blank and
/// comment lines between them), up to `hi`.
fn children(all: &[Line<'_>], at: usize, hi: usize) -> Span {
    let own = indent(all[at].text);
    let mut last = at + 1;
    for (i, l) in all.iter().enumerate().take(hi).skip(at + 1) {
        if blank_or_comment(l.text) {
            continue;
        }
        if indent(l.text) <= own {
            break;
        }
        last = i + 1;
    }
    let indent_of = (at + 1..last)
        .find(|&i| !blank_or_comment(all[i].text))
        .map_or(own + 2, |i| indent(all[i].text));
    Span {
        lo: at + 1,
        hi: last,
        indent: indent_of,
    }
}

/// `text` with `path` set to `value`.
fn set_path(text: &str, path: &[&str], value: &serde_json::Value) -> Result<String, String> {
    let all = lines(text);
    let rendered = yaml_value(value);
    let mut span = Span {
        lo: 0,
        hi: all.len(),
        indent: 0,
    };
    for (depth, key) in path.iter().enumerate() {
        let Some((at, colon)) = find_key(&all, &span, key) else {
            // Missing from here on: the rest of the path goes after the mapping's last line.
            let mut new = String::new();
            for (j, k) in path[depth..].iter().enumerate() {
                new.push_str(&" ".repeat(span.indent + 2 * j));
                new.push_str(&scalar(k));
                new.push(':');
                if depth + j + 1 == path.len() {
                    new.push(' ');
                    new.push_str(&rendered);
                }
                new.push('\n');
            }
            let offset = if span.hi > span.lo {
                all[span.hi - 1].end
            } else if span.lo > 0 {
                all[span.lo - 1].end
            } else {
                text.len()
            };
            let before = &text[..offset];
            let sep = if before.is_empty() || before.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            return Ok(format!("{before}{sep}{new}{}", &text[offset..]));
        };
        let line = all[at].text;
        let (current, comment) = split_comment(line[colon + 1..].trim_start());
        if depth + 1 == path.len() {
            // The key's line takes the value; a block that was its value goes with it.
            let inner = children(&all, at, span.hi);
            let last = &all[inner.hi - 1];
            let (end, newline) = (last.end, &text[last.start + last.text.len()..last.end]);
            return Ok(format!(
                "{}{}: {rendered}{comment}{newline}{}",
                &text[..all[at].start],
                &line[..colon],
                &text[end..]
            ));
        }
        match current {
            "" => {}
            "{}" | "null" | "~" => {
                // An empty mapping on the key's line: made a block that can hold the entry.
                let edited = replace_line(text, &all[at], &format!("{}:{comment}", &line[..colon]));
                return set_path(&edited, path, value);
            }
            other => {
                return Err(format!(
                    "line {}: {} has its value on the same line ({other}); write it as a block, or set {} by hand",
                    at + 1,
                    path[..=depth].join("."),
                    path.join(".")
                ));
            }
        }
        span = children(&all, at, span.hi);
    }
    Err("the path is empty".into())
}

/// Whether `a` and `b` have the same plugin lists and agree on everything else.
fn same_but_lists(a: &Config, b: &Config) -> bool {
    let rest = |c: &Config| {
        let mut root = c.root().clone();
        if let Some(Value::Mapping(plugins)) = root.get_mut("plugins") {
            plugins.remove("enabled");
            plugins.remove("disabled");
        }
        root
    };
    a.plugins_enabled() == b.plugins_enabled()
        && a.plugins_disabled() == b.plugins_disabled()
        && rest(a) == rest(b)
}

/// Refuses to replace a file its owner made read-only, or one in a read-only directory
/// (by the mode bits, which root would otherwise ignore), saying which of the two it is.
fn writable(target: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(target) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o200 == 0 {
            return Err(format!(
                "{} is read-only (mode {mode:04o}); make it writable (`chmod u+w {}`) to let hermes change it, or edit it by hand",
                target.display(),
                target.display()
            ));
        }
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    if let Ok(meta) = std::fs::metadata(dir) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o200 == 0 {
            return Err(format!(
                "the directory {} is read-only (mode {mode:04o}), so {} cannot be replaced; make the directory writable (`chmod u+w {}`)",
                dir.display(),
                target
                    .file_name()
                    .map_or("the file".into(), |n| n.to_string_lossy()),
                dir.display()
            ));
        }
    }
    Ok(())
}

fn lock_path(config: &Path) -> PathBuf {
    let mut name = config.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// Writes `text` to a new temporary file beside `path` (a name no other writer uses),
/// private to the user, flushed to disk, then renamed over `path`.
fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".config.yaml.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", tmp.display()));
    }
    Ok(())
}

/// Under the lock no writer is running: temporary files of earlier writers are orphans.
fn remove_orphan_temporaries(config: &Path) {
    let Some(dir) = config.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".config.yaml.") && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// One line of the file: its text without the line break, and where it starts.
struct Line<'a> {
    text: &'a str,
    start: usize,
    end: usize,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in text.split_inclusive('\n') {
        let end = start + piece.len();
        out.push(Line {
            text: piece.trim_end_matches(['\n', '\r']),
            start,
            end,
        });
        start = end;
    }
    out
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// `value  # comment` -> (`value`, `  # comment`): a comment starts at a `#` after a space.
fn split_comment(rest: &str) -> (&str, &str) {
    let bytes = rest.as_bytes();
    let (mut quote, mut i) = (None, 0);
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (None, q @ (b'"' | b'\'')) => quote = Some(q),
            (Some(q), c) if c == q => quote = None,
            (None, b'#') if i == 0 || bytes[i - 1] == b' ' => {
                let value = rest[..i].trim_end();
                return (value, &rest[value.len()..]);
            }
            _ => {}
        }
        i += 1;
    }
    (rest.trim_end(), &rest[rest.trim_end().len()..])
}

/// Where the lists live: the line index of `plugins:`, and the indentation of its entries.
struct Block {
    key_line: usize,
    end: usize,
    child_indent: usize,
}

fn plugins_block(all: &[Line<'_>]) -> Result<Option<Block>, String> {
    let Some(key_line) = all.iter().position(|l| {
        l.text
            .strip_prefix("plugins")
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
    }) else {
        return Ok(None);
    };
    let rest = all[key_line].text["plugins".len()..].trim_start()[1..].trim_start();
    let (value, _) = split_comment(rest);
    if !value.is_empty() {
        return Err(format!(
            "line {}: `plugins:` has its value on the same line ({value}); write it as a block (`plugins:`, then `  enabled: [...]` on the next line), or edit plugins.enabled by hand",
            key_line + 1
        ));
    }
    let mut end = key_line + 1;
    while end < all.len() && (blank_or_comment(all[end].text) || indent(all[end].text) > 0) {
        end += 1;
    }
    let child_indent = all[key_line + 1..end]
        .iter()
        .find(|l| !blank_or_comment(l.text))
        .map_or(2, |l| indent(l.text));
    Ok(Some(Block {
        key_line,
        end,
        child_indent,
    }))
}

/// Where list `key` is: its line, and the lines of its block items (empty for a flow list).
struct List {
    key_line: usize,
    items: Vec<usize>,
}

fn find_list(all: &[Line<'_>], block: &Block, key: &str) -> Option<List> {
    let at = (block.key_line + 1..block.end).find(|&i| {
        let l = all[i].text;
        indent(l) == block.child_indent
            && l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
    })?;
    let mut items = Vec::new();
    let mut i = at + 1;
    while i < block.end {
        let l = all[i].text;
        if blank_or_comment(l) {
            i += 1;
            continue;
        }
        let deeper = indent(l) > block.child_indent;
        let same_dash = indent(l) == block.child_indent && l.trim_start().starts_with("- ");
        if deeper || same_dash {
            items.push(i);
            i += 1;
        } else {
            break;
        }
    }
    Some(List {
        key_line: at,
        items,
    })
}

/// The value after `key:` on its line, and the line's comment.
fn inline_value<'a>(line: &'a str, key: &str) -> (&'a str, &'a str) {
    let rest = &line.trim_start()[key.len()..];
    let rest = rest.trim_start()[1..].trim_start();
    split_comment(rest)
}

/// A plugin name as a YAML scalar: plain when it reads back as the same string.
fn scalar(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.'))
        && name.chars().any(|c| c.is_ascii_alphabetic())
        && !matches!(
            name.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain {
        name.to_string()
    } else {
        serde_json::Value::String(name.to_string()).to_string()
    }
}

/// The names of a one-line flow list such as `[a, "b"]`, or why it is not one.
fn flow_items(value: &str, line_no: usize, key: &str) -> Result<Vec<String>, String> {
    let refuse = || {
        format!(
            "line {line_no}: plugins.{key} is not a one-line list of names (`{key}: [a, b]` or one `- name` per line); edit it by hand"
        )
    };
    if !(value.starts_with('[') && value.ends_with(']')) {
        return Err(refuse());
    }
    match yaml_serde::from_str::<Value>(value) {
        Ok(Value::Sequence(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(refuse()),
            })
            .collect(),
        _ => Err(refuse()),
    }
}

fn replace_line(text: &str, line: &Line<'_>, new: &str) -> String {
    let newline = &text[line.start + line.text.len()..line.end];
    format!("{}{new}{newline}{}", &text[..line.start], &text[line.end..])
}

fn add_item(text: &str, key: &str, name: &str) -> Result<String, String> {
    let all = lines(text);
    let Some(block) = plugins_block(&all)? else {
        let sep = if text.is_empty() || text.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        return Ok(format!(
            "{text}{sep}plugins:\n  {key}: [{}]\n",
            scalar(name)
        ));
    };
    let pad = " ".repeat(block.child_indent);
    let Some(list) = find_list(&all, &block, key) else {
        // A new entry, first in the block.
        let after = &all[block.key_line];
        let at = after.end;
        let sep = if text[..at].ends_with('\n') { "" } else { "\n" };
        return Ok(format!(
            "{}{sep}{pad}{key}: [{}]\n{}",
            &text[..at],
            scalar(name),
            &text[at..]
        ));
    };
    let key_line = &all[list.key_line];
    let (value, comment) = inline_value(key_line.text, key);
    if list.items.is_empty() {
        let mut names = if value.is_empty() || value == "null" || value == "~" {
            Vec::new()
        } else {
            flow_items(value, list.key_line + 1, key)?
        };
        names.push(name.to_string());
        let joined: Vec<String> = names.iter().map(|n| scalar(n)).collect();
        let new = format!("{pad}{key}: [{}]{comment}", joined.join(", "));
        return Ok(replace_line(text, key_line, &new));
    }
    if !value.is_empty() {
        return Err(format!(
            "line {}: plugins.{key} has a value and lines under it; edit it by hand",
            list.key_line + 1
        ));
    }
    // A block list: one more `- name` line after the last item, indented as it is.
    let last = &all[*list.items.last().unwrap_or(&list.key_line)];
    let item_pad = " ".repeat(indent(last.text));
    for &i in &list.items {
        let item = all[i].text.trim_start();
        if !item.starts_with("- ")
            || item[2..]
                .trim_start()
                .starts_with(['[', '{', '-', '|', '>'])
        {
            return Err(format!(
                "line {}: plugins.{key} has an entry that is not a name; edit it by hand",
                i + 1
            ));
        }
    }
    let at = last.end;
    let sep = if text[..at].ends_with('\n') { "" } else { "\n" };
    Ok(format!(
        "{}{sep}{item_pad}- {}\n{}",
        &text[..at],
        scalar(name),
        &text[at..]
    ))
}

fn remove_item(text: &str, key: &str, name: &str) -> Result<String, String> {
    let all = lines(text);
    let Some(block) = plugins_block(&all)? else {
        return Ok(text.to_string());
    };
    let Some(list) = find_list(&all, &block, key) else {
        return Ok(text.to_string());
    };
    let key_line = &all[list.key_line];
    let (value, comment) = inline_value(key_line.text, key);
    if list.items.is_empty() {
        if value.is_empty() || value == "null" || value == "~" {
            return Ok(text.to_string());
        }
        let names = flow_items(value, list.key_line + 1, key)?;
        if !names.iter().any(|n| n == name) {
            return Ok(text.to_string());
        }
        let kept: Vec<String> = names
            .iter()
            .filter(|n| *n != name)
            .map(|n| scalar(n))
            .collect();
        let pad = " ".repeat(block.child_indent);
        let new = format!("{pad}{key}: [{}]{comment}", kept.join(", "));
        return Ok(replace_line(text, key_line, &new));
    }
    // A block list: drop the `- name` lines.
    let mut out = text.to_string();
    for &i in list.items.iter().rev() {
        let (item, _) = split_comment(all[i].text.trim_start());
        let Some(scalar_text) = item.strip_prefix("- ") else {
            continue;
        };
        let is_it = yaml_serde::from_str::<Value>(scalar_text.trim())
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .is_some_and(|s| s == name);
        if is_it {
            out.replace_range(all[i].start..all[i].end, "");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, path: &[&str], value: serde_json::Value) -> Result<String, String> {
        set_path(text, path, &value)
    }

    #[test]
    fn set_path_replaces_a_value_in_place_keeping_its_comment_and_everything_else() {
        let text = "# top\nplugins:\n  enabled: [a]\n  entries:\n    a:\n      settings:\n        level: low   # why\n        other: 1\nmodel: x\n";
        let out = set(
            text,
            &["plugins", "entries", "a", "settings", "level"],
            "high".into(),
        )
        .unwrap();
        assert_eq!(
            out,
            text.replace("level: low   # why", "level: high   # why")
        );
    }

    #[test]
    fn set_path_creates_what_is_missing_after_the_mappings_last_line() {
        let text = "plugins:\n  enabled: [a]\n\n# a comment before the next key\nmodel: x\n";
        let out = set(
            text,
            &["plugins", "entries", "a", "settings", "retry", "tries"],
            3.into(),
        )
        .unwrap();
        assert_eq!(
            out,
            "plugins:\n  enabled: [a]\n  entries:\n    a:\n      settings:\n        retry:\n          tries: 3\n\n# a comment before the next key\nmodel: x\n"
        );
        assert_eq!(
            set("", &["a", "b"], "c d".into()).unwrap(),
            "a:\n  b: \"c d\"\n"
        );
        assert_eq!(set("x: 1", &["a"], true.into()).unwrap(), "x: 1\na: true\n");
    }

    #[test]
    fn set_path_follows_the_files_indentation_and_quoted_keys() {
        let text = "\"plugins\":\n    entries:\n        a: {}\n";
        let out = set(
            text,
            &["plugins", "entries", "a", "settings"],
            serde_json::json!({"k": [1, "two"]}),
        )
        .unwrap();
        assert_eq!(
            out,
            "\"plugins\":\n    entries:\n        a:\n          settings: {\"k\":[1,\"two\"]}\n"
        );
    }

    #[test]
    fn set_path_replaces_a_block_value_whole() {
        let text = "a:\n  b:\n    - 1\n    - 2\n  c: 3\n";
        assert_eq!(
            set(text, &["a", "b"], "x".into()).unwrap(),
            "a:\n  b: x\n  c: 3\n"
        );
    }

    #[test]
    fn set_path_refuses_an_inline_mapping_on_the_way_naming_the_line() {
        let err = set(
            "plugins: {enabled: [a]}\n",
            &["plugins", "entries", "a"],
            1.into(),
        )
        .unwrap_err();
        assert!(
            err.contains("line 1: plugins has its value on the same line"),
            "{err}"
        );
    }

    fn edit(text: &str, name: &str, enable: bool) -> Result<String, String> {
        let (add_to, remove_from) = if enable {
            ("enabled", "disabled")
        } else {
            ("disabled", "enabled")
        };
        let edited = remove_item(text, remove_from, name)?;
        add_item(&edited, add_to, name)
    }

    #[test]
    fn edits_keep_every_other_byte() {
        let text = "# top\nmodel: &m gpt  # anchor\nplugins:\n  # the guard: DO NOT REMOVE\n  enabled:\n    - guard   # keep\n    - '010'\n  disabled: [old]\n  settings:\n    guard: {x: 1}\nother: *m\n";
        assert_eq!(
            edit(text, "new", true).unwrap(),
            "# top\nmodel: &m gpt  # anchor\nplugins:\n  # the guard: DO NOT REMOVE\n  enabled:\n    - guard   # keep\n    - '010'\n    - new\n  disabled: [old]\n  settings:\n    guard: {x: 1}\nother: *m\n"
        );
        assert_eq!(
            edit(text, "old", true).unwrap(),
            "# top\nmodel: &m gpt  # anchor\nplugins:\n  # the guard: DO NOT REMOVE\n  enabled:\n    - guard   # keep\n    - '010'\n    - old\n  disabled: []\n  settings:\n    guard: {x: 1}\nother: *m\n"
        );
        assert_eq!(
            edit(text, "guard", false).unwrap(),
            "# top\nmodel: &m gpt  # anchor\nplugins:\n  # the guard: DO NOT REMOVE\n  enabled:\n    - '010'\n  disabled: [old, guard]\n  settings:\n    guard: {x: 1}\nother: *m\n"
        );
        assert_eq!(edit("", "a", true).unwrap(), "plugins:\n  enabled: [a]\n");
        assert_eq!(
            edit("model: x", "a", true).unwrap(),
            "model: x\nplugins:\n  enabled: [a]\n"
        );
        assert_eq!(
            edit("plugins:\n  python: /usr/bin/python3\n", "a", true).unwrap(),
            "plugins:\n  enabled: [a]\n  python: /usr/bin/python3\n"
        );
        assert_eq!(scalar("010"), "\"010\"");
        assert_eq!(scalar("yes"), "\"yes\"");
    }

    #[test]
    fn shapes_that_cannot_be_edited_are_refused_by_line() {
        let inline = edit("a: 1\nplugins: {enabled: [x]}\n", "y", true).unwrap_err();
        assert!(
            inline.starts_with("line 2: `plugins:` has its value on the same line"),
            "{inline}"
        );
        let scalar_list = edit("plugins:\n  enabled: everything\n", "y", true).unwrap_err();
        assert!(
            scalar_list.starts_with("line 2: plugins.enabled is not"),
            "{scalar_list}"
        );
    }
}
