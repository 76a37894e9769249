//! pip-installed Python plugins: the `hermes_agent.plugins` entry-point group of the
//! interpreter Python plugins run on, found as Hermes finds them.
//!
//! Hermes lists `importlib.metadata.entry_points(group="hermes_agent.plugins")` of its own
//! environment; each entry is a plugin named by the entry point, loaded with `ep.load()`
//! and registered with its `register(ctx)`, and, like every plugin, only when
//! `plugins.enabled` names it. Here the environment is the configured interpreter's
//! (`plugins.python`, else `python3`), asked once per load by a short-lived `python3 -I`.
//! That costs an interpreter start, so a load asks only when `plugins.enabled` names a
//! plugin that no directory provides; `hermes plugins list` always asks, to show what is
//! installed.

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
/// `importlib.metadata` gives them.
///
/// # Errors
///
/// The interpreter cannot be started, fails, hangs past 20 s, or prints something else
/// than the list: the message names the interpreter and what to do.
pub fn scan(interpreter: &Path) -> Result<Vec<EntryPoint>, String> {
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
    parse(&outcome.stdout.lossy())
        .map_err(|why| format!("cannot list pip-installed plugins: `{name}` answered {why}"))
}

/// The scan's output: a JSON list of `{name, value, dist, version, location}`.
fn parse(text: &str) -> Result<Vec<EntryPoint>, String> {
    let items: Vec<serde_json::Value> = serde_json::from_str(text.trim())
        .map_err(|e| format!("something else than a list ({e})"))?;
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
print(json.dumps(out))
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_read_and_nameless_entries_are_left_out() {
        let eps = parse(
            r#"[{"name": "guard", "value": "g:plugin", "dist": "hermes-guard", "version": "1.0", "location": "/v/lib"}, {"name": "", "value": "x"}]"#,
        )
        .unwrap();
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].location.as_deref(), Some(Path::new("/v/lib")));
        assert!(
            parse("Traceback")
                .unwrap_err()
                .contains("something else than a list")
        );
    }
}
