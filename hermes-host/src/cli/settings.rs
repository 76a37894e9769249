//! Resolving command-line flags and environment into one `Settings`, before any command runs.

use hermes_host::plugins::DiscoverOptions;
use hermes_host::{config::is_truthy, home::Home};

use super::args::GlobalArgs;

/// Everything a command needs to know about where and how to run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The Hermes home.
    pub home: Home,
    /// Plugin discovery options.
    pub discover: DiscoverOptions,
    /// Whether unapproved shell hooks are approved (`--accept-hooks`, `HERMES_ACCEPT_HOOKS`).
    #[allow(dead_code)] // read by the shell-hook commands
    pub accept_hooks: bool,
    /// `--log-file`: where this command also writes its log.
    pub log_file: Option<std::path::PathBuf>,
    /// `--log-format`.
    pub log_format: crate::app::logfile::Format,
    /// `HERMES_GATEWAY_TOKEN`, taken out of the environment at start: terminal commands,
    /// shell hooks and plugins inherit the environment, and `env` in a tool would put the
    /// token in the transcript. The gateway (and the supervisor that starts it) pass it on
    /// explicitly.
    pub gateway_token: Option<String>,
}

impl Settings {
    /// CLI flags first, then the environment. Sets `HERMES_HOME` for child processes, as the
    /// reference does, so hooks and plugins see the same home.
    pub fn resolve(args: &GlobalArgs) -> Settings {
        let home = match (&args.home, &args.profile) {
            (Some(dir), _) => Home::at(dir.clone()),
            (None, Some(profile)) => Home::profile(profile),
            (None, None) => Home::from_env(),
        };
        // SAFETY: called once at start-up, before any thread is spawned.
        unsafe { std::env::set_var("HERMES_HOME", home.root()) };
        let gateway_token = std::env::var("HERMES_GATEWAY_TOKEN").ok();
        // SAFETY: as above.
        unsafe { std::env::remove_var("HERMES_GATEWAY_TOKEN") };
        let flag = |name: &str| std::env::var(name).is_ok_and(|v| is_truthy(&v));
        let project_dir = flag("HERMES_ENABLE_PROJECT_PLUGINS")
            .then(|| {
                std::env::current_dir()
                    .ok()
                    .map(|d| d.join(".hermes").join("plugins"))
            })
            .flatten();
        Settings {
            home,
            discover: DiscoverOptions {
                safe_mode: args.safe_mode || flag("HERMES_SAFE_MODE"),
                project_dir,
                // Hooks::load reads `hooks.strict_permissions` when it loads.
                policy: Default::default(),
                host_config: None,
                entry_points: Vec::new(),
                list_entry_points: false,
                native_only: false,
            },
            accept_hooks: args.accept_hooks || flag("HERMES_ACCEPT_HOOKS"),
            log_file: args.log_file.clone(),
            log_format: args.log_format.parse().unwrap_or_default(),
            gateway_token,
        }
    }
}
