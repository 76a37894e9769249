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
//! - [`agent`] is the reference agent loop that fires every hook at its documented point;
//! - [`gateway`] loads gateway hooks (`hooks/<name>/HOOK.yaml` plus a native, executable
//!   or `handler.py` handler) and delivers events to them without blocking the caller;
//! - [`server`] is the local message gateway: the agent behind TCP and stdin adapters, with
//!   sessions per chat, `pre_gateway_dispatch`, gateway events and session transcripts;
//! - [`schema`] generates the JSON Schemas of shell-hook payloads and answers;
//! - [`testing`] loads a built plugin into a host with a temporary home, for the plugin's
//!   own tests.
//!
//! The library never prints, exits or reads argv: the `hermes` binary does that.
//!
//! # Example
//!
//! ```no_run
//! use hermes_host::{home::Home, plugins::{load_all, DiscoverOptions}, registry::Registry};
//! use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
//!
//! let home = Home::from_env();
//! let (config, _problem) = home.load_config();
//! let mut registry = Registry::new();
//! load_all(&home, &config, &DiscoverOptions::default(), &mut registry);
//!
//! let verdict = registry.pre_tool_call(&PreToolCallEvent {
//!     tool_name: "terminal",
//!     args: r#"{"command": "rm -rf /"}"#,
//!     session_id: "s-1",
//!     ..Default::default()
//! });
//! if let Some(blocked) = verdict.blocked {
//!     println!("blocked by {}: {}", blocked.by, blocked.message);
//! }
//! ```

#![deny(missing_docs)]

pub mod agent;
pub mod gateway;
pub mod home;
pub mod logging;
pub mod payload;
pub mod plugins;
pub mod pyfmt;
pub mod registry;
pub mod schema;
pub mod server;
pub mod shell;
pub mod testing;
