//! The clap definition of the command line. Data only: no I/O, no defaults from the
//! environment (those are resolved in `settings`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Hermes hooks: native plugins, shell hooks and gateway hooks for an AI agent.
#[derive(Parser, Debug)]
#[command(name = "hermes", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// Use DIR as the Hermes home (sets HERMES_HOME for everything this run starts).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Use the named profile, ~/.hermes/profiles/NAME.
    #[arg(short = 'p', long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Load no plugins (also HERMES_SAFE_MODE=1).
    #[arg(long, global = true)]
    pub safe_mode: bool,
    /// Approve shell hooks that are not yet allowlisted, and record the approval.
    #[arg(long, global = true)]
    pub accept_hooks: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Manage native plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// List discovered plugins: version, library, enabled or why not, hooks registered.
    #[command(visible_alias = "ls")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Enable a plugin in config.yaml (plugins.enabled).
    Enable {
        /// The plugin's name or key.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Disable a plugin in config.yaml (plugins.disabled).
    Disable {
        /// The plugin's name or key.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Build a plugin crate in release mode, install it into the home and enable it.
    Install {
        /// The plugin crate's directory (it holds Cargo.toml and plugin.yaml).
        crate_dir: PathBuf,
        /// Build in debug mode instead (faster to build, slower hooks).
        #[arg(long)]
        debug: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Fire one hook at the loaded plugins and print what they decided.
    Fire {
        /// The hook, such as pre_tool_call.
        hook: String,
        /// The payload: a JSON object of the hook's fields (missing fields are empty).
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        /// Read the payload from a file.
        #[arg(long, value_name = "FILE", conflicts_with = "payload")]
        payload_file: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}
