//! Whether a file on disk may be trusted to run as the user: the checks every loader makes
//! before it loads a plugin library, starts a gateway hook handler or runs a shell hook
//! script.
//!
//! Three rules, each with one message that names the file, the problem and the fix:
//!
//! - **Confinement** ([`confine`]): a path a manifest names (a plugin's `library:`, a gateway
//!   hook's `library:`) must resolve, after symlinks, to a file inside the directory that
//!   manifest lives in. A `plugin.yaml` saying `library: ../../../tmp/libx.so` would
//!   otherwise load whatever another user put in `/tmp`.
//! - **Plain names** ([`plugin_name`]): a plugin's name becomes a directory under
//!   `plugins/`, so it is letters, digits, `-` and `_` only; no separator, no `..`.
//! - **Ownership and permissions** ([`inspect`], [`Policy::check`]), as sshd's
//!   `StrictModes` does: a file or directory that group or others may write, or that is
//!   owned by someone other than the user running the host (or root), lets that someone
//!   change what runs as the user, and makes an approval pinned to the script's content
//!   meaningless. Such a file is refused, or, with `hooks.strict_permissions: false` in
//!   `config.yaml` (shared machines that need group-writable hook directories), loaded
//!   with a warning.
//!
//! Directories with the sticky bit (`/tmp`, mode 1777) are not counted as writable by
//! others: there, only a file's owner can replace it, and the owner is checked separately.
//! Group write is harmless when the group is the user's own private group (primary group,
//! no other members), which is what a umask of 002 gives on Debian and Ubuntu; OpenSSH as
//! Debian ships it makes the same exception.
//!
//! Nothing here loads or runs anything; it reads metadata only, so it sits beside the
//! loaders, below them in the flow (files -> loaders -> registry).
//!
//! ```
//! use std::os::unix::fs::PermissionsExt;
//! use hermes_host::trust::{Policy, Role};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let script = dir.path().join("guard.sh");
//! std::fs::write(&script, "#!/bin/sh\n").unwrap();
//! std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
//! assert_eq!(Policy::STRICT.check(&[(&script, Role::ShellScript)]), Ok(Vec::new()));
//!
//! std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o777)).unwrap();
//! let refusal = Policy::STRICT.check(&[(&script, Role::ShellScript)]).unwrap_err();
//! assert!(refusal.contains("is writable by"), "{refusal}");
//! assert!(refusal.contains(&format!("chmod go-w {}", script.display())), "{refusal}");
//! ```

use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

use crate::home::Config;

/// What a checked path is, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `plugins/` or `hooks/` themselves, or a category folder under `plugins/`.
    Root,
    /// A plugin's directory.
    PluginDir,
    /// A plugin's shared library.
    PluginLibrary,
    /// A gateway hook's directory.
    GatewayHookDir,
    /// A gateway hook's handler (library, executable or `handler.py`).
    GatewayHandler,
    /// A shell hook's script.
    ShellScript,
    /// The directory holding a shell hook's script.
    ShellScriptDir,
    /// The shell hook allowlist.
    Allowlist,
}

impl Role {
    /// `plugin library`, `shell hook script`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Root => "hooks directory",
            Role::PluginDir => "plugin directory",
            Role::PluginLibrary => "plugin library",
            Role::GatewayHookDir => "gateway hook directory",
            Role::GatewayHandler => "gateway hook handler",
            Role::ShellScript => "shell hook script",
            Role::ShellScriptDir => "directory of a shell hook script",
            Role::Allowlist => "shell hook allowlist",
        }
    }
}

/// What is wrong with a path's ownership or mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Group or others may write it; `who` is `group`, `others` or `group and others`.
    Writable {
        /// The permission bits (`0o777`).
        mode: u32,
        /// Who may write it besides the owner.
        who: &'static str,
    },
    /// Owned by another user than the one running the host, and not by root.
    ForeignOwner {
        /// The owner's uid.
        owner: u32,
        /// The uid running the host.
        me: u32,
    },
}

/// One path that fails the ownership and permission rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The path, as the loader named it (symlinks are followed for the check).
    pub path: PathBuf,
    /// What it is.
    pub role: Role,
    /// What is wrong.
    pub problem: Problem,
}

impl Finding {
    /// `/h/x.sh (shell hook script) is writable by others (mode 0666)`.
    pub fn what(&self) -> String {
        let path = self.path.display();
        let role = self.role.as_str();
        match &self.problem {
            Problem::Writable { mode, who } => {
                format!("{path} ({role}) is writable by {who} (mode {mode:04o})")
            }
            Problem::ForeignOwner { owner, me } => {
                format!("{path} ({role}) is owned by uid {owner}, not by you (uid {me}) or root")
            }
        }
    }

    /// The command that fixes it.
    pub fn fix(&self) -> String {
        let path = shell_words::quote(&self.path.display().to_string()).into_owned();
        match &self.problem {
            Problem::Writable { .. } => format!("chmod go-w {path}"),
            Problem::ForeignOwner { me, .. } => format!("chown {me} {path}"),
        }
    }

    /// Why it matters, in a few words.
    fn risk(&self) -> &'static str {
        match &self.problem {
            Problem::Writable { .. } => "another user could change what runs as you",
            Problem::ForeignOwner { .. } => "that user controls what runs as you",
        }
    }
}

/// Whether a finding refuses the file or only warns (`hooks.strict_permissions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Refuse (true, the default) or warn (false).
    pub strict: bool,
}

impl Policy {
    /// Refuse what fails the rule: the default.
    pub const STRICT: Policy = Policy { strict: true };

    /// `hooks.strict_permissions` of `config.yaml`; anything but `false` is strict (the
    /// shell hook parser warns about a value that is not a boolean).
    ///
    /// ```
    /// use hermes_host::{home::Config, trust::Policy};
    /// assert!(Policy::from_config(&Config::default()).strict);
    /// let shared = Config::parse("hooks:\n  strict_permissions: false\n").unwrap();
    /// assert!(!Policy::from_config(&shared).strict);
    /// ```
    pub fn from_config(config: &Config) -> Policy {
        let setting = config
            .get("hooks")
            .and_then(|h| h.get(STRICT_PERMISSIONS_KEY))
            .and_then(yaml_serde::Value::as_bool);
        Policy {
            strict: setting != Some(false),
        }
    }

    /// Checks every path in order. `Ok` with the warnings to show (none when all is well,
    /// one per finding when the policy only warns); `Err` with the refusal of the first
    /// finding when it is strict. Paths that do not exist are not findings: the loader
    /// reports a missing file in its own words.
    ///
    /// # Errors
    ///
    /// The first finding, as one line with its fix, when the policy is strict.
    pub fn check(&self, paths: &[(&Path, Role)]) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        for (path, role) in paths {
            let Some(finding) = inspect(path, *role) else {
                continue;
            };
            if self.strict {
                return Err(format!(
                    "{}: {}; run `{}`, or set `hooks.strict_permissions: false` in config.yaml to allow it on a shared machine",
                    finding.what(),
                    finding.risk(),
                    finding.fix()
                ));
            }
            warnings.push(format!(
                "{}; allowed because hooks.strict_permissions is false in config.yaml; run `{}` to fix it",
                finding.what(),
                finding.fix()
            ));
        }
        Ok(warnings)
    }
}

/// The key of the `hooks:` block that turns refusals into warnings.
pub const STRICT_PERMISSIONS_KEY: &str = "strict_permissions";

/// The ownership and permission finding for `path`, following symlinks; `None` when it is
/// fine or does not exist.
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// use hermes_host::trust::{inspect, Problem, Role};
/// let dir = tempfile::tempdir().unwrap();
/// let lib = dir.path().join("libx.so");
/// std::fs::write(&lib, "").unwrap();
/// std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o646)).unwrap();
/// let finding = inspect(&lib, Role::PluginLibrary).unwrap();
/// assert_eq!(finding.problem, Problem::Writable { mode: 0o646, who: "others" });
/// ```
pub fn inspect(path: &Path, role: Role) -> Option<Finding> {
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.mode() & 0o7777;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner = meta.uid();
    let problem = if owner != me && owner != 0 {
        Problem::ForeignOwner { owner, me }
    } else {
        let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
        let group_write = mode & 0o020 != 0 && !private_group(meta.gid(), me);
        let who = match (group_write, mode & 0o002 != 0) {
            _ if sticky_dir => return None,
            (true, true) => "group and others",
            (true, false) => "group",
            (false, true) => "others",
            (false, false) => return None,
        };
        Problem::Writable {
            mode: mode & 0o777,
            who,
        }
    };
    Some(Finding {
        path: path.to_path_buf(),
        role,
        problem,
    })
}

/// Whether `gid` is the private group of user `uid`: that user's primary group, with no
/// supplementary member but that user. Unknown users or groups are not private.
fn private_group(gid: u32, uid: u32) -> bool {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: getpwuid_r/getgrgid_r write only into `pwd`/`grp` and `buf`, whose length is
    // passed; the strings they point to live in `buf`, read before it is reused.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) != 0
            || found.is_null()
            || pwd.pw_gid != gid
        {
            return false;
        }
        let user = std::ffi::CStr::from_ptr(pwd.pw_name).to_owned();
        let mut grp: libc::group = std::mem::zeroed();
        let mut found: *mut libc::group = std::ptr::null_mut();
        if libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr(), buf.len(), &mut found) != 0
            || found.is_null()
        {
            return false;
        }
        let mut member = grp.gr_mem;
        while !member.is_null() && !(*member).is_null() {
            if std::ffi::CStr::from_ptr(*member) != user.as_c_str() {
                return false;
            }
            member = member.add(1);
        }
        true
    }
}

/// `dir.join(relative)`, provided it resolves (after symlinks, and after `..` for a file
/// that does not exist yet) to a path inside `dir`.
///
/// # Errors
///
/// One line naming the manifest key, where the path leads and the rule, with the fix.
///
/// ```
/// use hermes_host::trust::confine;
/// let dir = tempfile::tempdir().unwrap();
/// assert_eq!(confine(dir.path(), "library", "libx.so").unwrap(), dir.path().join("libx.so"));
/// let escape = confine(dir.path(), "library", "../../../../tmp/libx.so").unwrap_err();
/// assert!(escape.contains("outside the directory"), "{escape}");
/// ```
pub fn confine(dir: &Path, key: &str, relative: &str) -> Result<PathBuf, String> {
    let joined = dir.join(relative);
    let root = resolve(dir);
    let target = resolve(&joined);
    if target.starts_with(&root) && target != root {
        return Ok(joined);
    }
    let file_name = Path::new(relative)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| relative.to_string());
    Err(format!(
        "`{key}: {relative}` resolves to {}, outside the directory {}; what a manifest loads must be a file inside its own directory: move the file into {} and set `{key}: {file_name}`",
        target.display(),
        dir.display(),
        dir.display()
    ))
}

/// `path` with symlinks resolved as far as it exists, and `.`/`..` applied to the rest the
/// way the kernel would (a `..` after a symlink leaves the link's target).
fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => {
                out.push(other.as_os_str());
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    out
}

/// Checks a plugin name: the directory it installs into is `plugins/<name>/`, so letters,
/// digits, `-` and `_` only.
///
/// # Errors
///
/// What is wrong with it and what a valid name looks like.
///
/// ```
/// use hermes_host::trust::plugin_name;
/// assert!(plugin_name("audit-log_2").is_ok());
/// for bad in ["", "..", "a/b", "a.b", "x y", "é"] {
///     assert!(plugin_name(bad).is_err(), "{bad}");
/// }
/// ```
pub fn plugin_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        return Ok(());
    }
    let why = if name.is_empty() {
        "is empty".to_string()
    } else if name.contains('/') || name.contains('\\') {
        "contains a path separator".to_string()
    } else if name.contains("..") {
        "contains `..`".to_string()
    } else {
        "has characters other than letters, digits, '-' and '_'".to_string()
    };
    Err(format!(
        "plugin name '{name}' {why}; a plugin lives in plugins/<name>/, so use letters, digits, '-' and '_' only"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Gives `path` a group that is not the user's private one, so that group write
    /// counts; `false` (with the reason printed) where this user cannot.
    fn shared_group(path: &Path) -> bool {
        let me = unsafe { libc::geteuid() };
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // Root can give any group; gid 65534 (nogroup) is nobody's private group.
        if me == 0 && unsafe { libc::chown(c.as_ptr(), u32::MAX, 65534) } == 0 {
            return true;
        }
        let gid = std::fs::metadata(path).unwrap().gid();
        if !private_group(gid, me) {
            return true;
        }
        eprintln!(
            "skipped: cannot give {} a group other than this user's private group",
            path.display()
        );
        false
    }

    #[test]
    fn group_write_is_harmless_only_for_the_users_private_group() {
        let me = unsafe { libc::geteuid() };
        assert!(!private_group(65534, me) || me == 65534);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "").unwrap();
        chmod(&f, 0o664);
        let gid = std::fs::metadata(&f).unwrap().gid();
        let finding = inspect(&f, Role::ShellScript);
        assert_eq!(finding.is_none(), private_group(gid, me), "{finding:?}");
    }

    #[test]
    fn writable_bits_name_who_can_write() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "").unwrap();
        if !shared_group(&f) {
            return;
        }
        for (mode, who) in [
            (0o620, Some("group")),
            (0o602, Some("others")),
            (0o666, Some("group and others")),
            (0o644, None),
            (0o755, None),
        ] {
            chmod(&f, mode);
            let got = inspect(&f, Role::ShellScript).map(|x| x.problem);
            let want = who.map(|who| Problem::Writable {
                mode: mode & 0o777,
                who,
            });
            assert_eq!(got, want, "mode {mode:o}");
        }
    }

    #[test]
    fn a_sticky_directory_is_not_writable_by_others_but_a_sticky_file_is() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("shared");
        std::fs::create_dir(&sub).unwrap();
        chmod(&sub, 0o1777);
        assert_eq!(inspect(&sub, Role::ShellScriptDir), None);
        chmod(&sub, 0o777);
        assert!(inspect(&sub, Role::ShellScriptDir).is_some());
    }

    #[test]
    fn symlinks_are_followed_to_the_file_they_name() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.sh");
        std::fs::write(&real, "").unwrap();
        chmod(&real, 0o646);
        let link = dir.path().join("link.sh");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let finding = inspect(&link, Role::ShellScript).unwrap();
        assert_eq!(
            finding.path, link,
            "the message names the path as configured"
        );
    }

    #[test]
    fn a_missing_path_is_no_finding() {
        assert_eq!(
            inspect(Path::new("/nonexistent/x"), Role::PluginLibrary),
            None
        );
    }

    #[test]
    fn the_lenient_policy_warns_once_per_finding_and_refuses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        chmod(&a, 0o666);
        chmod(&b, 0o646);
        let lenient = Policy { strict: false };
        let warnings = lenient
            .check(&[(&a, Role::PluginDir), (&b, Role::PluginLibrary)])
            .unwrap();
        assert_eq!(warnings.len(), 2);
        assert!(warnings[1].contains("allowed because hooks.strict_permissions is false"));
        let refusal = Policy::STRICT
            .check(&[(&a, Role::PluginDir), (&b, Role::PluginLibrary)])
            .unwrap_err();
        assert!(refusal.starts_with(&format!("{} (plugin directory)", a.display())));
    }

    #[test]
    fn confinement_follows_symlinks_and_dot_dots() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("plugin");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(dir.join("lib")).unwrap();
        std::fs::write(outer.path().join("libx.so"), "").unwrap();
        // Inside, through a harmless detour.
        assert!(confine(&dir, "library", "lib/../libx.so").is_ok());
        assert!(confine(&dir, "library", "./lib/libx.so").is_ok());
        // Outside, lexically and through a symlink (file and directory).
        assert!(confine(&dir, "library", "../libx.so").is_err());
        assert!(confine(&dir, "library", "/etc/passwd").is_err());
        assert!(confine(&dir, "library", "missing/../../../x.so").is_err());
        std::os::unix::fs::symlink(outer.path().join("libx.so"), dir.join("link.so")).unwrap();
        let err = confine(&dir, "library", "link.so").unwrap_err();
        assert!(
            err.contains("resolves to") && err.contains("libx.so"),
            "{err}"
        );
        std::os::unix::fs::symlink(outer.path(), dir.join("up")).unwrap();
        assert!(confine(&dir, "library", "up/libx.so").is_err());
        // A symlink that stays inside is fine.
        std::fs::write(dir.join("lib/libreal.so"), "").unwrap();
        std::os::unix::fs::symlink(dir.join("lib/libreal.so"), dir.join("libalias.so")).unwrap();
        assert!(confine(&dir, "library", "libalias.so").is_ok());
        // The directory itself is not a file inside it.
        assert!(confine(&dir, "library", ".").is_err());
    }
}
