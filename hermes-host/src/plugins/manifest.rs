//! `plugin.yaml`: what a plugin says about itself.

use std::path::{Path, PathBuf};

use yaml_serde::Value;

use crate::config::yaml_type_name;

/// A parsed `plugin.yaml`.
///
/// ```
/// use hermes_host::plugins::Manifest;
/// let m = Manifest::parse("name: audit\nversion: 1.2\nlibrary: libaudit.so\n", "dir".as_ref()).unwrap();
/// assert_eq!((m.name.as_str(), m.version.as_str(), m.library.as_str()), ("audit", "1.2", "libaudit.so"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// `name`, default the directory name.
    pub name: String,
    /// `version`, stringified (`1.2` and `"1.2"` are the same).
    pub version: String,
    /// `description`.
    pub description: String,
    /// `author`.
    pub author: String,
    /// `library`: the shared library's file name, relative to the plugin directory; empty
    /// for a Python plugin.
    pub library: String,
    /// What the plugin is made of: a shared library, or Python (`__init__.py`, no
    /// `library`).
    pub kind: PluginKind,
    /// `provides_hooks`: informational, compared with what `register` really registers.
    pub provides_hooks: Vec<String>,
    /// `config`: the plugin's own settings, handed to it as JSON.
    pub config: serde_json::Value,
    /// `isolation`: `in-process` (default) or `process` (the library runs in a worker
    /// process; see [`isolation`](crate::plugins::isolation)). `plugins.isolation.<name>` and
    /// `plugins.isolation_default` in `config.yaml` override it. `None`: not set.
    pub isolation: Option<Isolation>,
    /// `timeout`: seconds an isolated or Python plugin's callback may take before its
    /// worker is killed and restarted (default 30).
    pub timeout: Option<f64>,
    /// `memory_limit`: bytes of address space an isolated plugin's worker may use
    /// (`256MiB`, `1GiB`, or a number of bytes).
    pub memory_limit: Option<u64>,
    /// `fail_closed`: when an isolated or Python plugin's worker dies or hangs during
    /// `pre_tool_call`, the tool call is blocked instead of allowed.
    pub fail_closed: bool,
}

/// What a plugin is made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PluginKind {
    /// A Rust `cdylib` built on `hermes-hooks-abi`, named by `library:`.
    #[default]
    Native,
    /// A Hermes Python plugin: `__init__.py` with `register(ctx)` and no `library:`. It runs
    /// in a Python worker process (see [`python`](crate::plugins::python)).
    Python,
    /// A Claude Code plugin: `.claude-plugin/plugin.json`, whose hooks run as `format:
    /// claude` shell hooks (see [`claude_plugin`](crate::shell::claude_plugin)).
    Claude,
}

impl PluginKind {
    /// `native` or `python`, as `plugins list` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Native => "native",
            PluginKind::Python => "python",
            PluginKind::Claude => "claude",
        }
    }
}

/// Where a plugin's callbacks run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// In the host's process: nanosecond calls; a crash takes the host down.
    #[default]
    InProcess,
    /// In a worker process of its own: microsecond calls; a crash is reported and survived.
    Process,
}

impl Isolation {
    /// `in-process` or `process`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::InProcess => "in-process",
            Isolation::Process => "process",
        }
    }

    /// Parses `in-process` / `process`.
    ///
    /// # Errors
    ///
    /// Any other text, with the two valid values.
    pub fn parse(text: &str) -> Result<Isolation, String> {
        match text {
            "in-process" | "in_process" => Ok(Isolation::InProcess),
            "process" => Ok(Isolation::Process),
            other => Err(format!(
                "isolation '{other}' is not known (valid: in-process, process)"
            )),
        }
    }
}

/// Parses a size such as `256MiB`, `1GiB`, `512MB`, `4096`.
///
/// # Errors
///
/// Text that is not a number with an optional unit.
///
/// ```
/// assert_eq!(hermes_host::plugins::parse_size("256MiB"), Ok(256 << 20));
/// ```
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size (try 256MiB or 1GiB)"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "'{text}' has an unknown unit '{other}' (use KiB, MiB or GiB)"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("'{text}' is too large"))
}

impl Manifest {
    /// Reads `<dir>/plugin.yaml` (or `plugin.yml`).
    ///
    /// # Errors
    ///
    /// A message naming the file when it cannot be read, is not YAML, is not a mapping, or
    /// has neither `library` nor an `__init__.py` beside it.
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let path = manifest_path(dir).unwrap_or_else(|| dir.join("plugin.yaml"));
        if path.ends_with(crate::shell::claude_plugin::MANIFEST) {
            let plugin = crate::shell::claude_plugin::read(dir)?;
            let mut events: Vec<String> = Vec::new();
            for entry in &plugin.entries {
                if !events.iter().any(|e| e == entry.event) {
                    events.push(entry.event.to_string());
                }
            }
            return Ok(Manifest {
                name: plugin.name,
                version: plugin.version,
                description: plugin.description,
                kind: PluginKind::Claude,
                provides_hooks: events,
                ..Manifest::default()
            });
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("Failed to parse {}: {e}", path.display()))?;
        Manifest::parse(&text, dir).map_err(|e| format!("Failed to parse {}: {e}", path.display()))
    }

    /// Parses manifest text for the plugin directory `dir`.
    ///
    /// # Errors
    ///
    /// What is wrong, with the fix.
    pub fn parse(text: &str, dir: &Path) -> Result<Manifest, String> {
        crate::nesting::check_yaml(text)?;
        let value: Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        let map = match value {
            Value::Mapping(map) => map,
            Value::Null => {
                return Err("the file is empty; it needs at least `name` and `library`".into());
            }
            other => {
                return Err(format!(
                    "the top level must be a mapping, not {}",
                    yaml_type_name(&other)
                ));
            }
        };
        let text_of = |key: &str| -> String {
            match map.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::Bool(b)) => {
                    if *b {
                        "True".into()
                    } else {
                        "False".into()
                    }
                }
                _ => String::new(),
            }
        };
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = Some(text_of("name"))
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(dir_name);
        let library = match map.get("library") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "`library` must be a file name such as `{}`, not {}",
                    super::library_file::for_crate(&name),
                    yaml_type_name(other)
                ));
            }
        };
        let kind = if !library.trim().is_empty() {
            PluginKind::Native
        } else if dir.join("__init__.py").is_file() {
            PluginKind::Python
        } else {
            let guess = super::library_file::for_crate(&name);
            return Err(format!(
                "neither a Rust nor a Python plugin: add `library: {guess}` for a Rust plugin (the file cargo builds in target/release/), or an `__init__.py` with `register(ctx)` beside plugin.yaml for a Python plugin"
            ));
        };
        let provides_hooks = match map.get("provides_hooks") {
            Some(Value::Sequence(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        let config = match map.get("config") {
            Some(v) => serde_json::to_value(v)
                .map_err(|e| format!("`config` cannot be read as JSON: {e}"))?,
            None => serde_json::Value::Null,
        };
        let isolation = match map.get("isolation") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(Isolation::parse(s)?),
            Some(other) => {
                return Err(format!(
                    "`isolation` must be in-process or process, not {}",
                    yaml_type_name(other)
                ));
            }
        };
        let timeout = match map.get("timeout") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_f64().filter(|t| *t > 0.0),
            Some(_) => return Err("`timeout` must be a number of seconds".into()),
        };
        let memory_limit = match map.get("memory_limit") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(parse_size(s)?),
            Some(Value::Number(n)) => n.as_u64(),
            Some(_) => return Err("`memory_limit` must be a size such as 256MiB".into()),
        };
        let fail_closed = matches!(map.get("fail_closed"), Some(Value::Bool(true)));
        Ok(Manifest {
            name,
            version: text_of("version"),
            description: text_of("description"),
            author: text_of("author"),
            library,
            kind,
            provides_hooks,
            config,
            isolation,
            timeout,
            memory_limit,
            fail_closed,
        })
    }
}

/// `<dir>/plugin.yaml`, `<dir>/plugin.yml` or a Claude Code plugin's
/// `<dir>/.claude-plugin/plugin.json`, the first that exists.
pub(crate) fn manifest_path(dir: &Path) -> Option<PathBuf> {
    [
        "plugin.yaml",
        "plugin.yml",
        crate::shell::claude_plugin::MANIFEST,
    ]
    .iter()
    .map(|f| dir.join(f))
    .find(|p| p.is_file())
}
