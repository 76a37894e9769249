//! The host side of hermes-hooks: load hooks from `$HERMES_HOME` and fire them.
//!
//! An agent embeds this library to run every hook system of Hermes at its lifecycle points:
//!
//! - [`home`] resolves `$HERMES_HOME` and reads `config.yaml`;
//! - [`plugins`] discovers and loads native plugins (`plugins/<name>/plugin.yaml` plus a
//!   `cdylib` built on `hermes-hooks-abi`);
//! - [`registry`] keeps one ordered list of callbacks per hook and combines their answers
//!   by the reference's rules (first block wins, contexts joined, first transform wins, ...);
//! - [`shell`] turns the `hooks:` block of `config.yaml` into shell hooks in the same
//!   registry (validation, consent and allowlist, one subprocess per firing);
//! - [`logging`] bridges plugins' `tracing` records into the host's log;
//! - [`gateway`] loads gateway hooks (`hooks/<name>/HOOK.yaml` plus a native, executable
//!   or `handler.py` handler) and delivers events to them without blocking the caller;
//! - [`cpu_slots`] keeps the threads of a large pool that use the CPU at once near the
//!   number of cores, while any number wait on hooks' processes;
//! - [`run_control`] carries what hooks ask of the run beyond their answer (Claude's
//!   `ask` / `allow` for one tool call, `continue: false` for the run) to the host;
//! - [`schema`] generates the JSON Schemas of shell-hook payloads and answers;
//! - [`trust`] decides whether a file may run as the user (confinement to its directory,
//!   plain plugin names, ownership and permissions as sshd's `StrictModes`);
//! - `testing` (feature `testing`) loads a built plugin into a host with a temporary home,
//!   for the plugin's own tests.
//!
//! The library never prints, exits or reads argv: the `hermes` binary does that.
//!
//! [`Hooks`] is the facade over all of it: [`Hooks::load`] loads plugins, shell hooks and
//! (when asked) gateway hooks in the documented order and reports every problem found, and
//! the loaded [`Hooks`] fires them. The `hermes` binary loads through it too.
//!
//! # Example
//!
//! A home with one shell hook that blocks every terminal command, loaded and fired:
//!
//! ```
//! use std::os::unix::fs::PermissionsExt;
//! use hermes_host::{ConsentPolicy, Hooks, LoadOptions, home::Home};
//! use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let guard = dir.path().join("guard.sh");
//! std::fs::write(&guard, "#!/bin/sh\necho '{\"decision\": \"block\", \"reason\": \"not here\"}'\n")?;
//! std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755))?;
//! let config = format!("hooks:\n  pre_tool_call:\n    - command: {}\n", guard.display());
//! std::fs::write(dir.path().join("config.yaml"), config)?;
//!
//! // A service would keep the default, ConsentPolicy::AllowlistedOnly.
//! let options = LoadOptions { consent: ConsentPolicy::AcceptAndRecord, ..Default::default() };
//! let hooks = Hooks::load(&Home::at(dir.path()), &options)?;
//! assert!(hooks.report().problems.is_empty(), "{:?}", hooks.report().problems);
//!
//! let verdict = hooks.pre_tool_call(&PreToolCallEvent {
//!     tool_name: "terminal",
//!     args: r#"{"command": "rm -rf /"}"#,
//!     session_id: "s-1",
//!     ..Default::default()
//! });
//! let blocked = verdict.blocked.expect("the shell hook blocks");
//! assert_eq!(blocked.message, "not here");
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub use hooks::{ConsentPolicy, Hooks, HooksReport, LoadError, LoadOptions, Problem};
pub use plugins::isolation;

pub mod commands;
pub mod config;
pub mod config_edit;
pub mod cpu_slots;
pub mod dotenv;
pub mod fatal;
pub mod gateway;
pub mod home;
pub mod hooks;
pub mod lines;
pub mod logging;
pub mod middleware;
pub mod nesting;
pub mod ownership;
pub mod payload;
pub mod plugins;
pub mod private_file;
pub mod process;
pub mod prompt_sections;
pub mod pyfmt;
pub mod reentry;
pub mod registry;
pub mod run_control;
pub mod schema;
pub mod shell;
pub mod stream;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool_call;
pub mod tools;
pub mod trust;
