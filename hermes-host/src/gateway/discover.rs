//! Finding hook directories under `$HERMES_HOME/hooks` and reading their `HOOK.yaml`.
//!
//! Reads files only: nothing is loaded or run here. The result is one [`DirOutcome`] per
//! directory, in the order the reference walks them (`sorted(HOOKS_DIR.iterdir())`), so the
//! `[hooks] ...` lines come out in the reference's order once the handlers are loaded.
//!
//! The rules, as reference §2.1 states them:
//!
//! 1. no hooks directory: nothing, no message;
//! 2. entries in byte order of their names, non-directories skipped;
//! 3. a directory without `HOOK.yaml`, or without a handler, is skipped silently;
//! 4. a `HOOK.yaml` that is empty, falsy or not a mapping:
//!    `[hooks] Skipping <dirname>: invalid HOOK.yaml`;
//! 5. `name` defaults to the directory name; falsy `events`:
//!    `[hooks] Skipping <name>: no events declared`;
//! 6. a YAML syntax error or unreadable file: `[hooks] Error loading hook <dirname>: <error>`.
//!
//! Where this port differs on purpose: a handler is one of three kinds (see
//! [`HandlerSource`]), not only `handler.py`; a single string under `events` is one event
//! (the reference iterates it character by character); a `name` that is null or empty
//! falls back to the directory name (the reference would call the hook `None` or ``).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use yaml_serde::Value;

use crate::config::yaml_type_name;
use crate::plugins::library_file;
use crate::trust::{self, Policy, Role};

/// How long one handler call may take unless `HOOK.yaml` says `timeout:`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Which handler a hook directory holds, in the order they are looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerSource {
    /// A native library built on `hermes-hooks-abi`: `library:` in `HOOK.yaml`, or the one
    /// `lib*.so` / `lib*.dylib` file in the directory.
    Native(PathBuf),
    /// An executable file named `handler`, in any language.
    Executable(PathBuf),
    /// `handler.py` with `handle(event_type, context)`.
    Python(PathBuf),
}

/// A hook directory whose `HOOK.yaml` passed the checks; its handler is not loaded yet.
#[derive(Clone, Debug)]
pub struct HookSpec {
    /// The directory.
    pub dir: PathBuf,
    /// The directory's name (used in `Error loading hook <dirname>` lines).
    pub dir_name: String,
    /// `name`, default the directory name.
    pub name: String,
    /// `description`, default empty.
    pub description: String,
    /// The events it subscribes to, in declared order (duplicates kept, as the reference).
    pub events: Vec<String>,
    /// `events` as Python's `repr` prints it, for the `Loaded hook` line.
    pub events_repr: String,
    /// The handler it holds.
    pub source: HandlerSource,
    /// `timeout:` in seconds, default [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// `config:`, as JSON (`{}` when absent): the hook's own settings.
    pub config: serde_json::Value,
    /// Ownership and permission problems `hooks.strict_permissions: false` let through
    /// (see [`crate::trust`]).
    pub warnings: Vec<String>,
}

/// What became of one directory under the hooks directory.
#[derive(Clone, Debug)]
pub enum DirOutcome {
    /// Its `HOOK.yaml` is fine; the handler is still to be loaded.
    Found(HookSpec),
    /// Skipped.
    Skipped(Skip),
}

/// A directory that was not loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// The directory.
    pub dir: PathBuf,
    /// The hook's name when `HOOK.yaml` got far enough to say it.
    pub name: Option<String>,
    /// Why, in words for `hermes gateway hooks`.
    pub reason: String,
    /// The `[hooks] ...` line printed for it; `None` when the reference skips silently.
    pub line: Option<String>,
}

/// Reads every directory under `hooks_dir`, in sorted order. A hook whose directory or
/// handler others can write (see [`crate::trust`]) is skipped with its reason, or,
/// with a lenient `policy`, found with a warning.
///
/// ```
/// use hermes_host::gateway::discover::{scan, DirOutcome};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir(dir.path().join("x")).unwrap();
/// std::fs::write(dir.path().join("x/HOOK.yaml"), "events: [agent:start]\n").unwrap();
/// std::fs::write(dir.path().join("x/handler.py"), "def handle(e, c): pass\n").unwrap();
/// match &scan(dir.path(), &hermes_host::trust::Policy::STRICT)[0] {
///     DirOutcome::Found(spec) => assert_eq!((spec.name.as_str(), spec.events_repr.as_str()), ("x", "['agent:start']")),
///     DirOutcome::Skipped(skip) => panic!("{skip:?}"),
/// }
/// ```
pub fn scan(hooks_dir: &Path, policy: &Policy) -> Vec<DirOutcome> {
    // Handlers run in their own directory, so every path handed on must be absolute.
    let hooks_dir = std::path::absolute(hooks_dir).unwrap_or_else(|_| hooks_dir.to_path_buf());
    crate::home::sorted_subdirs(&hooks_dir)
        .into_iter()
        .map(|(name, dir)| match read_dir(&name, &dir) {
            DirOutcome::Found(spec) => trusted(&hooks_dir, spec, policy),
            skipped => skipped,
        })
        .collect()
}

/// The ownership and permission check of everything from the home down to the handler.
fn trusted(hooks_dir: &Path, mut spec: HookSpec, policy: &Policy) -> DirOutcome {
    let handler = match &spec.source {
        HandlerSource::Native(p) | HandlerSource::Executable(p) | HandlerSource::Python(p) => p,
    };
    let mut paths: Vec<(&Path, Role)> = Vec::new();
    paths.extend(hooks_dir.parent().map(|home| (home, Role::Root)));
    paths.push((hooks_dir, Role::Root));
    paths.push((&spec.dir, Role::GatewayHookDir));
    paths.push((handler, Role::GatewayHandler));
    match policy.check(&paths) {
        Ok(warnings) => {
            spec.warnings = warnings;
            DirOutcome::Found(spec)
        }
        Err(reason) => DirOutcome::Skipped(Skip {
            line: Some(format!(
                "[hooks] Error loading hook {}: {reason}",
                spec.dir_name
            )),
            dir: spec.dir,
            name: Some(spec.name),
            reason,
        }),
    }
}

fn read_dir(dir_name: &str, dir: &Path) -> DirOutcome {
    let silent = |reason: String| {
        DirOutcome::Skipped(Skip {
            dir: dir.to_path_buf(),
            name: None,
            reason,
            line: None,
        })
    };
    let manifest_path = dir.join("HOOK.yaml");
    if !manifest_path.is_file() {
        return silent("no HOOK.yaml".into());
    }
    let error = |name: Option<String>, reason: String| {
        DirOutcome::Skipped(Skip {
            dir: dir.to_path_buf(),
            name,
            line: Some(format!("[hooks] Error loading hook {dir_name}: {reason}")),
            reason,
        })
    };
    let text = match std::fs::read_to_string(&manifest_path) {
        Ok(text) => text,
        Err(e) => return error(None, e.to_string()),
    };
    // The handler is looked for before HOOK.yaml is parsed: the reference skips a directory
    // without handler.py silently, whatever its HOOK.yaml says.
    let parsed = crate::nesting::check_yaml(&text)
        .and_then(|()| yaml_serde::from_str::<Value>(&text).map_err(|e| e.to_string()));
    let map = match parsed {
        Ok(Value::Mapping(map)) if !map.is_empty() => Ok(map),
        Ok(_) => Err(None),
        Err(e) => Err(Some(e)),
    };
    let library_key = map.as_ref().ok().and_then(|m| m.get("library")).map(py_str);
    let source = match find_handler(dir, library_key.as_deref()) {
        Ok(Some(source)) => source,
        Ok(None) => {
            return silent(
                "no handler (add handler.py, an executable `handler`, or a native library)".into(),
            );
        }
        Err(reason) => return error(None, reason),
    };
    let map = match map {
        Ok(map) => map,
        Err(Some(yaml_error)) => return error(None, yaml_error),
        Err(None) => {
            return DirOutcome::Skipped(Skip {
                dir: dir.to_path_buf(),
                name: None,
                reason: "invalid HOOK.yaml (it must be a non-empty mapping)".into(),
                line: Some(format!("[hooks] Skipping {dir_name}: invalid HOOK.yaml")),
            });
        }
    };
    let name = match map.get("name") {
        None | Some(Value::Null) => dir_name.to_string(),
        Some(v) => Some(py_str(v))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| dir_name.to_string()),
    };
    let raw_events = map
        .get("events")
        .cloned()
        .unwrap_or(Value::Sequence(Vec::new()));
    if !py_truthy(&raw_events) {
        return DirOutcome::Skipped(Skip {
            dir: dir.to_path_buf(),
            name: Some(name.clone()),
            reason: "no events declared".into(),
            line: Some(format!("[hooks] Skipping {name}: no events declared")),
        });
    }
    let (events, events_repr) = match &raw_events {
        Value::Sequence(items) => (
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            py_repr(&raw_events),
        ),
        Value::Mapping(m) => (
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect(),
            py_repr(&raw_events),
        ),
        Value::String(s) => (
            vec![s.clone()],
            py_repr(&Value::Sequence(vec![raw_events.clone()])),
        ),
        other => {
            return error(
                Some(name),
                format!("'{}' object is not iterable", yaml_type_name(other)),
            );
        }
    };
    let timeout = match map.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT,
        Some(Value::Number(n)) if n.as_f64().is_some_and(|s| s > 0.0 && s.is_finite()) => {
            Duration::from_secs_f64(n.as_f64().unwrap_or(60.0))
        }
        Some(other) => {
            return error(
                Some(name),
                format!(
                    "`timeout` must be a positive number of seconds, not {}",
                    py_repr(other)
                ),
            );
        }
    };
    let config = match map.get("config") {
        None | Some(Value::Null) => serde_json::Value::Object(Default::default()),
        Some(v) => match serde_json::to_value(v) {
            Ok(json) => json,
            Err(e) => return error(Some(name), format!("`config` cannot be read as JSON: {e}")),
        },
    };
    DirOutcome::Found(HookSpec {
        dir: dir.to_path_buf(),
        dir_name: dir_name.to_string(),
        description: map.get("description").map(py_str).unwrap_or_default(),
        name,
        events,
        events_repr,
        source,
        timeout,
        config,
        warnings: Vec::new(),
    })
}

/// The handler of `dir`: native library, then executable `handler`, then `handler.py`.
///
/// `Ok(None)` when there is none (skipped silently); `Err` when the choice is ambiguous or
/// an executable-looking `handler` is not executable.
fn find_handler(dir: &Path, library: Option<&str>) -> Result<Option<HandlerSource>, String> {
    if let Some(library) = library.filter(|l| !l.trim().is_empty()) {
        let path = trust::confine(dir, "library", library)
            .map_err(|why| format!("{}: {why}", dir.join("HOOK.yaml").display()))?;
        return Ok(Some(HandlerSource::Native(path)));
    }
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let libraries: Vec<&String> = files
        .iter()
        .filter(|n| library_file::is_native(n))
        .collect();
    match libraries.as_slice() {
        [] => {
            let foreign = files
                .iter()
                .find_map(|f| library_file::foreign_platform(f).map(|p| (f, p)));
            if let Some((file, platform)) = foreign {
                let has_other = ["handler", "handler.py"]
                    .iter()
                    .any(|h| dir.join(h).is_file());
                if !has_other {
                    return Err(format!(
                        "{file} is a library for {platform}, and this host loads {}; build the hook on this machine",
                        library_file::pattern()
                    ));
                }
            }
        }
        [one] => return Ok(Some(HandlerSource::Native(dir.join(one)))),
        many => {
            let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
            return Err(format!(
                "several native libraries ({}); name the one to load with `library:` in HOOK.yaml",
                many.join(", ")
            ));
        }
    }
    let executable = dir.join("handler");
    let python = dir.join("handler.py");
    if executable.is_file() {
        let mode = std::fs::metadata(&executable)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o111 != 0 {
            return Ok(Some(HandlerSource::Executable(executable)));
        }
        if !python.is_file() {
            return Err(format!(
                "{} is not executable; run `chmod +x {}`",
                executable.display(),
                executable.display()
            ));
        }
    }
    if python.is_file() {
        return Ok(Some(HandlerSource::Python(python)));
    }
    Ok(None)
}

/// Python's truthiness of a YAML value (`bool(value)`).
fn py_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Sequence(items) => !items.is_empty(),
        Value::Mapping(map) => !map.is_empty(),
        Value::Tagged(tagged) => py_truthy(&tagged.value),
    }
}

/// Python's `str(value)`: text as is, everything else as [`py_repr`].
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr()` of the value `yaml.safe_load` would give.
///
/// ```
/// use hermes_host::gateway::discover::py_repr;
/// let v: yaml_serde::Value = yaml_serde::from_str("[agent:start, \"it's\", 3, true, null]").unwrap();
/// assert_eq!(py_repr(&v), r#"['agent:start', "it's", 3, True, None]"#);
/// ```
pub fn py_repr(value: &Value) -> String {
    crate::pyfmt::repr_yaml(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        yaml_serde::from_str(text).unwrap()
    }

    #[test]
    fn repr_quotes_like_python() {
        assert_eq!(
            py_repr(&yaml("['a', \"b'c\", 'd\"e', \"f'g\\\"\"]")),
            r#"['a', "b'c", 'd"e', 'f\'g"']"#
        );
        assert_eq!(py_repr(&yaml("{a: 1.5, b: [x]}")), "{'a': 1.5, 'b': ['x']}");
        assert_eq!(py_repr(&yaml("2.0")), "2.0");
        assert_eq!(py_repr(&yaml("\"tab\\there\"")), "'tab\\there'");
    }

    #[test]
    fn truthiness_follows_python() {
        for falsy in ["", "[]", "{}", "0", "false", "null", "''"] {
            assert!(!py_truthy(&yaml(falsy)), "{falsy}");
        }
        for truthy in ["[a]", "{a: 1}", "1", "true", "x"] {
            assert!(py_truthy(&yaml(truthy)), "{truthy}");
        }
    }
}
