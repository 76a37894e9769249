//! The host end of the plugin logging bridge: a plugin's `tracing` records, re-emitted
//! into whatever subscriber the host installed (the `hermes` binary installs its own in
//! `cli`; an embedder keeps theirs).

use std::sync::Arc;

use abi_stable::std_types::RStr;
use hermes_hooks_abi::core::{HostLogger, level};
use tracing::level_filters::LevelFilter;

/// Receives a plugin's `tracing` records and re-emits them in the host's log with target
/// `plugin` and the plugin's name as a field.
pub struct PluginLogger {
    plugin: Arc<str>,
}

impl PluginLogger {
    /// A logger for plugin `name`.
    pub fn new(name: &str) -> PluginLogger {
        PluginLogger {
            plugin: name.into(),
        }
    }
}

impl HostLogger for PluginLogger {
    fn max_level(&self) -> u8 {
        match LevelFilter::current() {
            LevelFilter::OFF => level::OFF,
            LevelFilter::ERROR => level::ERROR,
            LevelFilter::WARN => level::WARN,
            LevelFilter::INFO => level::INFO,
            LevelFilter::DEBUG => level::DEBUG,
            _ => level::TRACE,
        }
    }

    fn log(&self, lvl: u8, target: RStr<'_>, message: RStr<'_>) {
        let (plugin, module, message) = (&*self.plugin, target.as_str(), message.as_str());
        match lvl {
            level::ERROR => tracing::error!(target: "plugin", plugin, module, "{message}"),
            level::WARN => tracing::warn!(target: "plugin", plugin, module, "{message}"),
            level::INFO => tracing::info!(target: "plugin", plugin, module, "{message}"),
            level::DEBUG => tracing::debug!(target: "plugin", plugin, module, "{message}"),
            _ => tracing::trace!(target: "plugin", plugin, module, "{message}"),
        }
    }
}
