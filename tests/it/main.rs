//! The single integration-test binary. Each module is one area; all of them build real
//! plugin libraries from source (once per run) and load them into a real host.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

// examples/embed, the smallest agent host, and the library without the CLI's crates.
mod embed;
// The module import graph of every crate: no two modules import each other.
mod layout;
// The Hooks facade: all three systems from one home, in order, problems with their files.
mod facade;
// Plugin discovery, loading, registry order and the aggregation rules with real plugins.
mod plugins;
// The example plugins doing their jobs.
mod examples;
// Panics, junk answers, unknown hooks, failing `register`, the logging bridge.
mod faults;
// Interface compatibility: a frozen 1.0 plugin in this host, a 1.1 plugin in a 1.0 host,
// a 2.0 plugin refused.
mod compat;
// `hermes plugins ...` output and exit codes.
mod cli;
// plugin-template/ rendered with cargo-generate outside the workspace, built, installed, fired.
mod template;
// The shell-hook JSON Schemas: committed files match the generator; real payloads validate.
mod schema;
// isolation: process: a crashing, hanging or flooding plugin in a worker, survived.
mod isolation;
// persistent: true shell hooks: one process, many firings.
mod persistent;
// url: hooks against a real HTTP server on loopback.
mod http_hooks;
// `hermes bench` on real hooks: measurements, baselines, gates, exit codes.
mod bench;
// docs/hooks.md in step with the hook table: generated sections, every hook and field.
mod docs;
// Rust plugins inside the real Hermes Agent, through the hermes-hooks Python package.
mod hermes_agent;
// Interface 1.3's surface: native tools, commands and middleware, the new hooks.
mod surface;
// Files the host refuses: libraries outside their directory, names that are not plain,
// files others can write or own.
mod trust;

// hermes hooks replay: recorded traces against candidate policies.
mod replay;
