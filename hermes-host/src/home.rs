//! `$HERMES_HOME`: where every hook file lives, and its `config.yaml`.
//!
//! This is the only module that reads the `HERMES_HOME` variable. Everything else takes a
//! resolved [`Home`].

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use yaml_serde::Value;

use crate::config::{Config, ConfigError};

use crate::ownership::{self, Role};

/// A resolved Hermes home directory.
///
/// ```
/// use hermes_host::home::Home;
/// let home = Home::at("/tmp/h");
/// assert_eq!(home.plugins_dir(), std::path::Path::new("/tmp/h/plugins"));
/// assert_eq!(home.config_path(), std::path::Path::new("/tmp/h/config.yaml"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$HERMES_HOME` if set and not empty, else `~/.hermes`.
    ///
    /// ```no_run
    /// let home = hermes_host::home::Home::from_env();
    /// println!("{}", home.root().display());
    /// ```
    pub fn from_env() -> Home {
        match std::env::var_os("HERMES_HOME") {
            Some(dir) if !dir.is_empty() => Home::at(PathBuf::from(dir)),
            _ => Home::at(default_root()),
        }
    }

    /// The named profile `~/.hermes/profiles/<name>`.
    ///
    /// ```
    /// let home = hermes_host::home::Home::profile("work");
    /// assert!(home.root().ends_with(".hermes/profiles/work"));
    /// ```
    pub fn profile(name: &str) -> Home {
        Home::at(default_root().join("profiles").join(name))
    }

    /// A home at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }

    /// The home directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<home>/config.yaml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.yaml")
    }

    /// `<home>/plugins`: native plugins, one directory each.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// `<home>/hooks`: gateway hooks, one directory each.
    pub fn hooks_dir(&self) -> PathBuf {
        self.root.join("hooks")
    }

    /// `<home>/shell-hooks-allowlist.json`: approved shell hooks.
    pub fn allowlist_path(&self) -> PathBuf {
        self.root.join("shell-hooks-allowlist.json")
    }

    /// `<home>/sessions`: session transcripts.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// Checks that the home, and its `sessions/` and `logs/` where they exist, belong to
    /// the user (or root) and that no one else may write them, sticky bit or not: the
    /// host sources session environment files from there, appends to logs, and finds its
    /// gateway through files there, so another user's home would run what that user
    /// wrote. A missing home is fine (it is created private).
    ///
    /// ```
    /// use std::os::unix::fs::PermissionsExt;
    /// let dir = tempfile::tempdir().unwrap();
    /// let home = hermes_host::home::Home::at(dir.path());
    /// assert!(home.check_trusted().is_ok());
    /// std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    /// assert!(home.check_trusted().unwrap_err().contains("writable by others"));
    /// ```
    ///
    /// # Errors
    ///
    /// One line naming the directory, what is wrong with it and the fix.
    pub fn check_trusted(&self) -> Result<(), String> {
        for path in [
            self.root.clone(),
            self.sessions_dir(),
            self.root.join("logs"),
        ] {
            let finding = ownership::inspect(&path, Role::Home).or_else(|| {
                use std::os::unix::fs::MetadataExt as _;
                // A sticky directory protects files from each other's owners, not the
                // names not yet taken: another user could create `sessions/x.env` first.
                let mode = std::fs::metadata(&path).ok()?.mode() & 0o777;
                (mode & 0o002 != 0).then(|| ownership::Finding {
                    path: path.clone(),
                    role: Role::Home,
                    problem: ownership::Problem::Writable {
                        mode,
                        who: "others",
                    },
                })
            });
            if let Some(finding) = finding {
                return Err(format!(
                    "{}: another user could plant files that hermes runs or reads back as you (session environment files, logs, the gateway's state); run `{}`, or use a home of your own (--home DIR)",
                    finding.what(),
                    finding.fix()
                ));
            }
        }
        Ok(())
    }

    /// Reads `config.yaml`. A missing file is an empty config; a malformed one is an empty
    /// config plus an error that names the file. So is one that another user could change
    /// (writable by group or others, or owned by someone else than you or root, as
    /// [`crate::ownership::inspect`] decides): it names what runs as you, so none of its
    /// settings is used until its permissions are fixed.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("config.yaml"), "plugins:\n  enabled: [audit-log]\n").unwrap();
    /// let (config, problem) = hermes_host::home::Home::at(dir.path()).load_config();
    /// assert!(problem.is_none());
    /// assert_eq!(config.plugins_enabled(), Some(vec!["audit-log".to_string()]));
    ///
    /// use std::os::unix::fs::PermissionsExt;
    /// let path = dir.path().join("config.yaml");
    /// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    /// let (config, problem) = hermes_host::home::Home::at(dir.path()).load_config();
    /// assert_eq!(config.plugins_enabled(), None);
    /// assert!(problem.unwrap().to_string().contains("chmod go-w"));
    /// ```
    pub fn load_config(&self) -> (Config, Option<ConfigError>) {
        let path = self.config_path();
        // The file decides which commands run as the user (shell hooks, plugins,
        // `hooks_auto_accept`) and whether loose permissions elsewhere are tolerated
        // (`hooks.strict_permissions`), so a copy another user could edit is not read at
        // all, whatever it says.
        if let Some(finding) = ownership::inspect(&path, Role::Config) {
            let message = format!(
                "it {}: {} (it names the hooks and plugins that run, and can approve them); run `{}`",
                finding.condition(),
                finding.risk(),
                finding.fix()
            );
            return (Config::default(), Some(ConfigError { path, message }));
        }
        // A FIFO (or a device) there would hang every command on the read.
        let text = match crate::private_file::read_regular(&path)
            .and_then(|bytes| String::from_utf8(bytes).map_err(std::io::Error::other))
        {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Config::default(), None),
            Err(e) => {
                return (
                    Config::default(),
                    Some(ConfigError {
                        path,
                        message: e.to_string(),
                    }),
                );
            }
        };
        match Config::parse(&text) {
            Ok(config) => (config, None),
            Err(message) => (Config::default(), Some(ConfigError { path, message })),
        }
    }

    /// Writes `config` to `config.yaml`, atomically, readable and writable by the user
    /// only (mode 0600, whatever the umask). Comments in the old file are not kept.
    ///
    /// # Errors
    ///
    /// When the directory cannot be created or the file cannot be written.
    pub fn save_config(&self, config: &Config) -> Result<(), ConfigError> {
        let path = self.config_path();
        let err = |message: String| ConfigError {
            path: path.clone(),
            message,
        };
        std::fs::create_dir_all(&self.root).map_err(|e| err(e.to_string()))?;
        let text = yaml_serde::to_string(&Value::Mapping(config.root().clone()))
            .map_err(|e| err(e.to_string()))?;
        let tmp = self.root.join(".config.yaml.tmp");
        // A new file, private to the user whatever the umask: one that others could
        // write would be refused by the next `load_config`. A temporary file left by an
        // interrupted save goes first, so `create_new` never writes through a link.
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| err(format!("{}: {e}", tmp.display())))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| err(format!("{}: {e}", tmp.display())))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|e| err(e.to_string()))
    }
}

/// Checks that `id` can name a session's files (`sessions/<id>.jsonl`, `.env`): a plain
/// file name, as every session id must be, whoever chose it (a script, a gateway client,
/// a hook's payload). Not empty, at most 200 bytes, no `/`, `\`, NUL or control
/// character, and not starting with `.`.
///
/// ```
/// use hermes_host::home::check_session_id;
/// assert!(check_session_id("20261207_030405_ab12").is_ok());
/// assert!(check_session_id("../../shared/trav").is_err());
/// assert!(check_session_id(".hidden").is_err());
/// ```
///
/// # Errors
///
/// A message that quotes the id and says what a session id may be.
pub fn check_session_id(id: &str) -> Result<(), String> {
    let bad = id.is_empty()
        || id.len() > 200
        || id.starts_with('.')
        || id.chars().any(|c| c == '/' || c == '\\' || c.is_control());
    if bad {
        return Err(format!(
            "session id {id:?} is not a plain name: use letters, digits, `-`, `_` (no `/`, no leading `.`, at most 200 bytes)"
        ));
    }
    Ok(())
}

fn default_root() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".hermes")
}

/// The subdirectories of `dir` as `(name, path)`, sorted by name in byte order, which is
/// the code-point order Python's `sorted()` gives. A missing or unreadable `dir` has none.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// for name in ["b", "a", "B"] {
///     std::fs::create_dir(dir.path().join(name)).unwrap();
/// }
/// std::fs::write(dir.path().join("file"), "").unwrap();
/// let names: Vec<String> = hermes_host::home::sorted_subdirs(dir.path()).into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["B", "a", "b"]);
/// ```
pub fn sorted_subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    dirs.sort();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_saved_config_is_private_to_the_user_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        std::fs::write(home.config_path(), "plugins:\n  enabled: [a]\n").unwrap();
        std::fs::set_permissions(home.config_path(), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        // What an interrupted save leaves behind.
        std::fs::write(dir.path().join(".config.yaml.tmp"), "junk").unwrap();
        let (mut config, problem) = home.load_config();
        assert_eq!(problem, None);
        assert!(config.enable_plugin("b"));
        home.save_config(&config).unwrap();
        let mode = std::fs::metadata(home.config_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, problem) = home.load_config();
        assert_eq!(problem, None);
        assert_eq!(
            again.plugins_enabled(),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert!(!dir.path().join(".config.yaml.tmp").exists());
    }
}
