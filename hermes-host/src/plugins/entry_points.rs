//! pip-installed Python plugins: the `hermes_agent.plugins` entry-point group of the
//! interpreter Python plugins run on, found as Hermes finds them.
//!
//! Hermes lists `importlib.metadata.entry_points(group="hermes_agent.plugins")` of its own
//! environment; each entry is a plugin named by the entry point, loaded with `ep.load()`
//! and registered with its `register(ctx)`, and, like every plugin, only when
//! `plugins.enabled` names it. Here the environment is the configured interpreter's
//! (`plugins.python`, else `python3`), asked once per load by a short-lived `python3 -I`.
//! That costs an interpreter start and a scan of every installed distribution (0.1 to
//! 0.6 s), so a load asks only when `plugins.enabled` names a plugin that no directory
//! provides (`hermes plugins list` always asks, to show what is installed), and the answer
//! is remembered in `$HERMES_HOME/cache/pip-plugins.json` until the interpreter or a
//! directory of its `sys.path` changes (installing or removing a package changes its
//! `site-packages`): a stale name in `plugins.enabled` costs a few `stat`s per run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The entry-point group Hermes reads.
pub const GROUP: &str = "hermes_agent.plugins";

/// How long listing the entry points may take: an interpreter start and a metadata scan.
const SCAN_TIMEOUT: Duration = Duration::from_secs(20);

/// One plugin a pip package declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryPoint {
    /// The entry point's name: the plugin's name and key.
    pub name: String,
    /// What it loads: `module` or `module:attribute`.
    pub value: String,
    /// The distribution (pip package) that declares it.
    pub dist: String,
    /// That distribution's version.
    pub version: String,
    /// Where the distribution is installed (its `site-packages`), when known.
    pub location: Option<PathBuf>,
}

impl EntryPoint {
    /// Where it came from, for `plugins list`: `pip package <dist> <version> (entry point
    /// <value>)`.
    ///
    /// ```
    /// use hermes_host::plugins::EntryPoint;
    /// let ep = EntryPoint { name: "guard".into(), value: "guard_pkg".into(), dist: "hermes-guard".into(), version: "1.0".into(), location: None };
    /// assert_eq!(ep.origin(), "pip package hermes-guard 1.0 (entry point guard_pkg)");
    /// ```
    pub fn origin(&self) -> String {
        format!(
            "pip package {} {} (entry point {})",
            self.dist, self.version, self.value
        )
    }
}

/// Lists the group's entry points in `interpreter`'s environment, in the order
/// `importlib.metadata` gives them; answered from `cache` while what the last listing saw
/// is unchanged: the interpreter's name and `PATH`, and the modification time of the
/// interpreter and of every directory on its `sys.path`. A cache that cannot be written
/// only costs the next run a listing.
///
/// # Errors
///
/// The interpreter cannot be started, fails, hangs past 20 s, or prints something else
/// than the list: the message names the interpreter and what to do.
pub fn scan_cached(interpreter: &Path, cache: &Path) -> Result<Vec<EntryPoint>, String> {
    let key = cache_key(interpreter);
    let cached = std::fs::read(cache)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .filter(|cached| cached["key"] == key && stamps_hold(&cached["stamps"]));
    if let Some(cached) = cached {
        return parse_list(&cached["entry_points"]);
    }
    let scanned = run_scan(interpreter)?;
    let stamps: Vec<serde_json::Value> = scanned
        .watched
        .iter()
        .filter_map(|p| Some(serde_json::json!([p, stamp(Path::new(p))?])))
        .collect();
    let record = serde_json::json!({ "key": key, "stamps": stamps, "entry_points": scanned.list });
    if let Err(e) = write_cache(cache, &record) {
        tracing::debug!(
            "{}: not written ({e}); the next run lists pip plugins again",
            cache.display()
        );
    }
    parse_list(&scanned.list)
}

/// What identifies the interpreter beyond its files: its name as configured, and `PATH`,
/// which resolves a bare `python3`.
fn cache_key(interpreter: &Path) -> serde_json::Value {
    serde_json::json!([
        interpreter.display().to_string(),
        std::env::var("PATH").unwrap_or_default()
    ])
}

/// A path's modification time, in nanoseconds since the epoch.
fn stamp(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_nanos()).ok()
}

/// Whether every `[path, stamp]` still holds (and there is at least one).
fn stamps_hold(stamps: &serde_json::Value) -> bool {
    stamps.as_array().is_some_and(|stamps| {
        !stamps.is_empty()
            && stamps.iter().all(|s| match (s[0].as_str(), s[1].as_i64()) {
                (Some(path), Some(then)) => stamp(Path::new(path)) == Some(then),
                _ => false,
            })
    })
}

fn write_cache(cache: &Path, record: &serde_json::Value) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::DirBuilderExt as _;
    if let Some(dir) = cache.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut file = crate::private_file::create_fresh(cache)?;
    file.write_all(record.to_string().as_bytes())
}

/// The scan's answer: the entry points as JSON, and what would change it (the interpreter,
/// and the directories of its `sys.path`).
struct Scanned {
    list: serde_json::Value,
    watched: Vec<String>,
}

fn run_scan(interpreter: &Path) -> Result<Scanned, String> {
    let mut cmd = Command::new(interpreter);
    cmd.args(["-I", "-B", "-c", SCAN_PY, GROUP])
        .stdin(Stdio::null())
        .env_remove("PYTHONPATH");
    let run = crate::process::Run::new()
        .capture(1 << 20)
        .timeout(SCAN_TIMEOUT);
    let name = interpreter.display();
    let outcome = crate::process::run(&mut cmd, &run).map_err(|e| {
        format!("cannot list pip-installed plugins: the interpreter `{name}` did not start ({e}); install python3 or set `plugins.python` in config.yaml")
    })?;
    if !matches!(outcome.ended, crate::process::Ended::Completed)
        || !outcome.status.is_some_and(|s| s.success())
    {
        let stderr = outcome.stderr.lossy();
        let last = stderr.lines().last().unwrap_or("no message");
        return Err(format!(
            "cannot list pip-installed plugins: `{name} -c 'import importlib.metadata'` failed ({last})"
        ));
    }
    let answer: serde_json::Value = serde_json::from_str(outcome.stdout.lossy().trim())
        .map_err(|e| format!("cannot list pip-installed plugins: `{name}` answered something else than JSON ({e})"))?;
    let watched = std::iter::once(&answer["executable"])
        .chain(answer["paths"].as_array().into_iter().flatten())
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    Ok(Scanned {
        list: answer["entry_points"].clone(),
        watched,
    })
}

/// The scan's list: `{name, value, dist, version, location}` per entry point.
fn parse_list(list: &serde_json::Value) -> Result<Vec<EntryPoint>, String> {
    let items = list.as_array().ok_or_else(|| {
        "cannot list pip-installed plugins: the scan answered something else than a list"
            .to_string()
    })?;
    let field =
        |item: &serde_json::Value, key: &str| item[key].as_str().unwrap_or_default().to_string();
    Ok(items
        .iter()
        .filter(|item| item["name"].as_str().is_some_and(|n| !n.is_empty()))
        .map(|item| EntryPoint {
            name: field(item, "name"),
            value: field(item, "value"),
            dist: field(item, "dist"),
            version: field(item, "version"),
            location: item["location"].as_str().map(PathBuf::from),
        })
        .collect())
}

/// Lists the group as Hermes's `_scan_entry_points` does (`select` on 3.10+, the dict of
/// older versions), with each entry's distribution.
const SCAN_PY: &str = r#"
import importlib.metadata as m, json, sys
group = sys.argv[1]
eps = m.entry_points()
if hasattr(eps, "select"):
    found = eps.select(group=group)
elif isinstance(eps, dict):
    found = eps.get(group, [])
else:
    found = [ep for ep in eps if ep.group == group]
out = []
for ep in found:
    dist = getattr(ep, "dist", None)
    location = None
    if dist is not None:
        try:
            location = str(dist.locate_file(""))
        except Exception:
            location = None
    out.append({"name": ep.name, "value": ep.value,
                "dist": dist.metadata["Name"] if dist is not None else "",
                "version": dist.version if dist is not None else "",
                "location": location})
import os
print(json.dumps({"executable": sys.executable, "entry_points": out,
                  "paths": [p for p in sys.path if p and os.path.isdir(p)]}))
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_read_and_nameless_entries_are_left_out() {
        let eps = parse_list(&serde_json::json!([
            {"name": "guard", "value": "g:plugin", "dist": "hermes-guard", "version": "1.0", "location": "/v/lib"},
            {"name": "", "value": "x"}
        ]))
        .unwrap();
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].location.as_deref(), Some(Path::new("/v/lib")));
        let err = parse_list(&serde_json::json!("Traceback")).unwrap_err();
        assert!(err.contains("something else than a list"), "{err}");
    }

    #[test]
    fn a_cache_holds_while_its_directories_are_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        std::fs::create_dir(&site).unwrap();
        let then = stamp(&site).unwrap();
        assert!(stamps_hold(&serde_json::json!([[site, then]])));
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(site.join("new_pkg-1.0.dist-info")).unwrap();
        assert!(
            !stamps_hold(&serde_json::json!([[site, then]])),
            "an install changes it"
        );
        assert!(
            !stamps_hold(&serde_json::json!([])),
            "nothing watched is no proof"
        );
    }
}
