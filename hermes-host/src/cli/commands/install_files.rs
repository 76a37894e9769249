//! Putting an installed plugin's files in place: a copy of its directory beside
//! `plugins/<name>/`, then swapped in, so that a running host never sees half a plugin.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Copies the plugin in `dir` to `plugins/<name>/` of `home`, beside its place first and
/// then swapped in, so that a running host never sees half a plugin. Returns where it is.
pub(super) fn copy_into_place(
    home: &hermes_host::home::Home,
    dir: &Path,
    name: &str,
) -> anyhow::Result<PathBuf> {
    let plugins = home.plugins_dir();
    let dest = plugins.join(name);
    if dest.is_symlink() {
        bail!(
            "{} is a symbolic link; `plugins install` writes only inside plugins/<name>/ itself. Remove the link (or copy the plugin by hand into where it points) and run install again",
            dest.display()
        );
    }
    std::fs::create_dir_all(&plugins)
        .with_context(|| format!("cannot create {}", plugins.display()))?;
    // Copied beside its place, then swapped in: a running host never sees half a plugin.
    let staging = plugins.join(format!(".{}.installing-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let mut skipped = Vec::new();
    copy_tree(dir, &staging, &mut skipped)
        .with_context(|| format!("cannot copy {} to {}", dir.display(), staging.display()))?;
    let old = plugins.join(format!(".{}.replaced-{}", name, std::process::id()));
    if dest.exists() {
        std::fs::rename(&dest, &old)
            .with_context(|| format!("cannot move the installed {} aside", dest.display()))?;
    }
    std::fs::rename(&staging, &dest)
        .with_context(|| format!("cannot install into {}", dest.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    for path in &skipped {
        tracing::warn!(
            "{}: a symbolic link, not copied; copy what it points to into the plugin directory",
            path.display()
        );
    }
    Ok(dest)
}

/// Copies the files and directories of `from` into a new `to` (mode 0700 directories,
/// files with their mode less group and other write), leaving out `__pycache__`, `.git`
/// and symbolic links (listed in `skipped`).
fn copy_tree(from: &Path, to: &Path, skipped: &mut Vec<PathBuf>) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new().mode(0o700).create(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "__pycache__" || name == ".git" {
            continue;
        }
        let kind = entry.file_type()?;
        let (src, dst) = (entry.path(), to.join(&name));
        if kind.is_symlink() {
            skipped.push(src);
        } else if kind.is_dir() {
            copy_tree(&src, &dst, skipped)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst)?;
            let mode = std::fs::metadata(&src)?.permissions().mode() & 0o755;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}
