//! Loading every hook an agent run registers: plugins, then shell hooks (with consent), in
//! that registry order. Every surface of the binary that runs the agent goes through here,
//! so no surface runs it without the hooks.

use std::io::IsTerminal;
use std::sync::Arc;

use hermes_host::home::Config;
use hermes_host::plugins::{LoadReport, load_all};
use hermes_host::registry::{Registry, TraceSink};
use hermes_host::shell::{self, Consent, ShellReport};

use super::settings::Settings;

/// What loading produced.
pub struct Loaded {
    pub registry: Registry,
    #[allow(dead_code)] // for surfaces that read more settings (the gateway's allowed users)
    pub config: Config,
    pub plugins: LoadReport,
    pub shell: ShellReport,
}

/// Loads plugins and shell hooks into one registry, tracing to `trace` when given. Safe mode
/// skips both, as the later reference does.
pub fn load_hooks(settings: &Settings, trace: Option<Arc<dyn TraceSink>>) -> Loaded {
    let (config, problem) = settings.home.load_config();
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    let mut registry = Registry::new();
    if let Some(trace) = trace {
        registry.set_trace(trace);
    }
    let mut plugins = LoadReport::default();
    let mut shell_report = ShellReport::default();
    if !settings.discover.safe_mode {
        plugins = load_all(&settings.home, &config, &settings.discover, &mut registry);
        let stdin = std::io::stdin();
        let mut prompt = shell::consent::TextPrompt::new(stdin.lock(), std::io::stdout());
        let consent = if settings.accept_hooks {
            Consent::Accept
        } else if stdin.is_terminal() {
            Consent::Ask(&mut prompt)
        } else {
            Consent::Refuse
        };
        shell_report = shell::register_from_config(&settings.home, &config, consent, &mut registry);
    }
    Loaded {
        registry,
        config,
        plugins,
        shell: shell_report,
    }
}
