//! A Rust plugin's face to Hermes Agent: the two-line `__init__.py` that lets Hermes's own
//! plugin scan load the plugin through the `hermes-hooks` Python package.
//!
//! Hermes and `hermes` read the same `plugins/` directory and the same `plugins.enabled`.
//! Hermes imports every enabled directory's `__init__.py`, and fails on one without it
//! ("No __init__.py in ..."), so a Rust plugin directory carries this file: in Hermes it
//! registers the plugin's native callbacks under the plugin's own name (`hermes plugins
//! list` there shows them), or, when the package is not installed, fails with a message
//! that says to install it. `hermes` never runs it: a directory whose `plugin.yaml` names
//! a `library` is a Rust plugin whatever else it holds. `hermes plugins install` writes it.

use std::path::Path;

/// The file's name.
pub const FILE: &str = "__init__.py";

/// The file's first line, by which an installed shim is recognised (and rewritten).
const MARKER: &str = "# hermes-hooks: a Rust plugin.";

/// The file's content.
pub const SHIM: &str =
    "# hermes-hooks: a Rust plugin. Hermes Agent runs its library through the hermes-hooks
# Python package (`pip install hermes-hooks` in Hermes's environment); `hermes` loads it itself.
try:
    from hermes_hooks import register_directory as register
except ImportError as exc:
    raise ImportError(
        \"this directory is a Rust plugin of hermes-hooks: to run it in Hermes Agent, \"
        \"`pip install hermes-hooks` into Hermes's environment\"
    ) from exc
";

/// What a Rust plugin directory holds for Hermes Agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShimState {
    /// The shim: Hermes loads the plugin through `hermes-hooks`.
    Present,
    /// No `__init__.py`: Hermes fails on the directory when the plugin is enabled (the
    /// `hermes-hooks` entry point still registers its callbacks).
    Missing,
    /// An `__init__.py` of someone else's, left alone.
    Foreign,
}

/// What `dir` holds.
///
/// ```
/// use hermes_host::plugins::hermes_agent::{shim_state, write_shim, ShimState};
/// let dir = tempfile::tempdir().unwrap();
/// assert_eq!(shim_state(dir.path()), ShimState::Missing);
/// write_shim(dir.path()).unwrap();
/// assert_eq!(shim_state(dir.path()), ShimState::Present);
/// ```
pub fn shim_state(dir: &Path) -> ShimState {
    match std::fs::read_to_string(dir.join(FILE)) {
        Ok(text) if text.starts_with(MARKER) => ShimState::Present,
        Ok(_) => ShimState::Foreign,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ShimState::Missing,
        Err(_) => ShimState::Foreign,
    }
}

/// Writes (or refreshes) the shim into `dir`; returns `false`, writing nothing, when the
/// directory has an `__init__.py` of its own.
///
/// # Errors
///
/// The file cannot be written.
pub fn write_shim(dir: &Path) -> std::io::Result<bool> {
    if shim_state(dir) == ShimState::Foreign {
        return Ok(false);
    }
    std::fs::write(dir.join(FILE), SHIM)?;
    Ok(true)
}

/// One line for `plugins list`: how Hermes Agent sees the directory.
pub fn describe(state: ShimState) -> &'static str {
    match state {
        ShimState::Present => {
            "in Hermes Agent: runs through the hermes-hooks package (its __init__.py)"
        }
        ShimState::Missing => {
            "in Hermes Agent: no __init__.py, so Hermes reports it as broken; run `hermes plugins install` on its crate again to add one"
        }
        ShimState::Foreign => "in Hermes Agent: its own __init__.py runs there, not this library",
    }
}
