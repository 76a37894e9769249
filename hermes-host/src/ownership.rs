//! Who owns a file and who else may write it: the metadata check behind every refusal
//! of a file that another user could change.
//!
//! [`inspect`] reads a path's owner and mode (following symlinks) and says what is wrong,
//! as sshd's `StrictModes` does: group or others may write it, or it belongs to someone
//! other than the user running the host (or root). [`Finding`] turns that into one line
//! with the fix (`chmod go-w <path>`, `chown <uid> <path>`).
//!
//! This module only reads metadata and decides nothing: the loaders apply it through
//! [`crate::trust::Policy`] (which may only warn on a shared machine), and
//! [`crate::home::Home::load_config`] applies it to `config.yaml`, whose settings decide
//! that policy and which hooks run, so it sits below both.
//!
//! Directories with the sticky bit (`/tmp`, mode 1777) are not counted as writable by
//! others: there, only a file's owner can replace it, and the owner is checked separately.
//! Group write is harmless when the group is the user's own private group (primary group,
//! no other members), which is what a umask of 002 gives on Debian and Ubuntu; OpenSSH as
//! Debian ships it makes the same exception.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

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
    /// `config.yaml`.
    Config,
    /// The Hermes home, or its `sessions/` or `logs/`: where the host keeps files it reads
    /// back and runs (a session's environment file is sourced before commands).
    Home,
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
            Role::Config => "configuration",
            Role::Home => "Hermes home",
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
        format!(
            "{} ({}) {}",
            self.path.display(),
            self.role.as_str(),
            self.condition()
        )
    }

    /// What is wrong, without the path: `is writable by others (mode 0666)`.
    pub fn condition(&self) -> String {
        match &self.problem {
            Problem::Writable { mode, who } => format!("is writable by {who} (mode {mode:04o})"),
            Problem::ForeignOwner { owner, me } => {
                format!("is owned by uid {owner}, not by you (uid {me}) or root")
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

    /// Why it matters, in a few words: `another user could change what runs as you`.
    pub fn risk(&self) -> &'static str {
        match &self.problem {
            Problem::Writable { .. } => "another user could change what runs as you",
            Problem::ForeignOwner { .. } => "that user controls what runs as you",
        }
    }
}

/// The ownership and permission finding for `path`, following symlinks; `None` when it is
/// fine or does not exist.
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// use hermes_host::ownership::{inspect, Problem, Role};
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
}
