//! The facade: everything an agent run needs, loaded in the documented order, behind one
//! type.
//!
//! [`Hooks::load`] reads `config.yaml`, loads the enabled native plugins (alphabetically,
//! then in registration order), adds the shell hooks of `config.yaml` that consent allows
//! (in config order, after the plugins, in the same registry), and, when asked, the gateway
//! hooks of `hooks/` plus the plugins' native gateway callbacks. Every problem found is in
//! the [`HooksReport`], naming its file; nothing found wrong stops the rest from loading.
//!
//! [`Hooks`] dereferences to the [`Registry`], so every typed firing method is there
//! (`hooks.pre_tool_call(..)`, `hooks.pre_llm_call(..)`, `hooks.fire(..)`); gateway events go
//! through [`Hooks::emit`]. The `hermes` binary loads through this type too, so an embedder
//! and the CLI cannot drift apart.

use std::path::PathBuf;
use std::sync::Arc;

use crate::gateway::{GatewayHooks, GatewayLog, GatewayOptions, LoadedHook, SkippedHook};
use crate::plugins::{DiscoverOptions, LoadReport, PluginReport, load_all};
use crate::registry::{Registry, TraceSink};
use crate::shell::{self, Consent, ShellReport};
use crate::{config::Config, home::Home};

/// What to do with a shell hook of `config.yaml` that is not yet approved.
pub enum ConsentPolicy {
    /// Run only hooks already in the allowlist (with their approved content); refuse the
    /// others with the reference's warning. The right choice for a service.
    AllowlistedOnly,
    /// Ask at the terminal when standard input is one (reading the answer from stdin, asking
    /// on stdout) and record a yes; refuse when it is not. What `hermes` does.
    PromptOnTerminal,
    /// Approve every unapproved hook and record it (`--accept-hooks`). A script whose
    /// content changed since its approval is still not run.
    AcceptAndRecord,
    /// Approve every unapproved hook for this load only, writing nothing (a benchmark or
    /// a dry run that must leave the home as it found it).
    AcceptForThisRun,
    /// Run only allowlisted hooks and write nothing, not even an approval that
    /// `hooks_auto_accept: true` in `config.yaml` would record.
    ReadOnly,
}

/// How [`Hooks::load`] loads.
///
/// ```
/// let options = hermes_host::LoadOptions::default();
/// assert!(!options.safe_mode);
/// ```
pub struct LoadOptions {
    /// Load no plugins and no shell hooks (`--safe-mode`, `HERMES_SAFE_MODE`).
    pub safe_mode: bool,
    /// Also load project plugins from this directory (`./.hermes/plugins`).
    pub project_plugins: Option<PathBuf>,
    /// Load the shell hooks of `config.yaml` (default true; `hermes plugins` turns them off
    /// to look at plugins alone).
    pub shell_hooks: bool,
    /// Unapproved shell hooks: [`ConsentPolicy::AllowlistedOnly`] by default.
    pub consent: ConsentPolicy,
    /// Where every firing's record goes, when anywhere.
    pub trace: Option<Arc<dyn TraceSink>>,
    /// Where shadow hooks' answers go (`shadow: true`, `plugins.shadow`); without one
    /// they are logged at INFO.
    pub shadow_sink: Option<Arc<dyn crate::registry::ShadowSink>>,
    /// Load gateway hooks too, printing their `[hooks] ...` lines to this log.
    pub gateway_log: Option<Arc<dyn GatewayLog>>,
    /// How gateway hooks run (Python interpreter, queue size).
    pub gateway: GatewayOptions,
    /// The directory the agent works in, when not the process's: `format: claude` shell
    /// hooks are told it (see [`ShellHookSpec::work_dir`](crate::shell::config::ShellHookSpec)).
    pub work_dir: Option<PathBuf>,
    /// Ask the Python interpreter for its pip-installed plugins even when no enabled plugin
    /// needs them (`hermes plugins list` shows what is installed); see
    /// [`discover_with_pip`](crate::plugins::discover_with_pip).
    pub list_pip_plugins: bool,
    /// Load Rust plugins only (see
    /// [`DiscoverOptions::native_only`](crate::plugins::DiscoverOptions::native_only)).
    pub native_only: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            safe_mode: false,
            project_plugins: None,
            shell_hooks: true,
            consent: ConsentPolicy::AllowlistedOnly,
            trace: None,
            shadow_sink: None,
            gateway_log: None,
            gateway: GatewayOptions::default(),
            work_dir: None,
            list_pip_plugins: false,
            native_only: false,
        }
    }
}

/// A problem found while loading, with the file it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file or directory the problem is in.
    pub file: PathBuf,
    /// What is wrong and what to do, in one line.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.starts_with(&self.file.display().to_string()) {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.file.display(), self.message)
        }
    }
}

/// What [`Hooks::load`] loaded, and every problem it found.
#[derive(Debug, Default)]
pub struct HooksReport {
    /// Every plugin directory found, in load order, loaded or not.
    pub plugins: Vec<PluginReport>,
    /// The shell hooks registered and the warnings about the others.
    pub shell: ShellReport,
    /// The gateway hooks that loaded (when gateway hooks were asked for).
    pub gateway: Vec<LoadedHook>,
    /// The gateway hook directories that did not load, and why.
    pub gateway_skipped: Vec<SkippedHook>,
    /// Everything wrong, each naming its file: `config.yaml`, plugins, shell hooks, gateway
    /// hooks, in that order.
    pub problems: Vec<Problem>,
    /// Whether safe mode kept plugins and shell hooks out.
    pub safe_mode: bool,
}

/// Why [`Hooks::load`] could not load at all.
#[derive(Debug)]
pub struct LoadError {
    home: PathBuf,
    why: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.home.display(), self.why)
    }
}

impl std::error::Error for LoadError {}

/// Every hook of a Hermes home, loaded and ready to fire.
///
/// ```no_run
/// use hermes_host::{Hooks, LoadOptions, home::Home};
/// use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
///
/// let hooks = Hooks::load(&Home::from_env(), &LoadOptions::default())?;
/// for problem in &hooks.report().problems {
///     eprintln!("{problem}");
/// }
/// let verdict = hooks.pre_tool_call(&PreToolCallEvent {
///     tool_name: "terminal",
///     args: r#"{"command": "rm -rf /"}"#,
///     ..Default::default()
/// });
/// println!("blocked: {:?}", verdict.blocked);
/// # Ok::<(), hermes_host::LoadError>(())
/// ```
pub struct Hooks {
    registry: Registry,
    gateway: Option<GatewayHooks>,
    config: Config,
    report: HooksReport,
}

impl Hooks {
    /// Loads the hooks of `home` as `options` say: plugins, then shell hooks, then (when a
    /// gateway log is given) gateway hooks.
    ///
    /// # Errors
    ///
    /// Only when there is no home to load from: the path exists and is not a directory.
    /// Everything else that is wrong (a malformed `config.yaml`, a plugin that does not load,
    /// an unapproved shell hook) is a [`Problem`] in the report.
    pub fn load(home: &Home, options: &LoadOptions) -> Result<Hooks, LoadError> {
        Hooks::load_with_config(home, home.load_config(), options)
    }

    /// [`load`](Hooks::load) with `config.yaml` already read by the caller, as
    /// [`Home::load_config`] returns it, so an application that needs a setting before its
    /// hooks load (the gateway's token) reads the file once. Each loader is handed its
    /// section of it.
    ///
    /// # Errors
    ///
    /// As for [`load`](Hooks::load).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use hermes_host::{home::Home, Hooks, LoadOptions};
    /// let home = Home::at(dir.path());
    /// let loaded = home.load_config();
    /// assert_eq!(loaded.0.gateway.token.get(), None);
    /// let hooks = Hooks::load_with_config(&home, loaded, &LoadOptions::default())?;
    /// assert!(hooks.report().problems.is_empty());
    /// # Ok::<(), hermes_host::LoadError>(())
    /// ```
    pub fn load_with_config(
        home: &Home,
        loaded: (Config, Option<crate::config::ConfigError>),
        options: &LoadOptions,
    ) -> Result<Hooks, LoadError> {
        if home.root().exists() && !home.root().is_dir() {
            return Err(LoadError {
                home: home.root().to_path_buf(),
                why: "the Hermes home is not a directory; point HERMES_HOME (or --home) at a directory".into(),
            });
        }
        let mut report = HooksReport {
            safe_mode: options.safe_mode,
            ..HooksReport::default()
        };
        let (config, problem) = loaded;
        // What Python plugins' and handlers' `hermes_cli.config.load_config()` answers:
        // serialised once for both loaders.
        let config_json: Option<std::sync::Arc<str>> =
            serde_json::to_string(config.root()).ok().map(Into::into);
        if let Some(problem) = problem {
            tracing::warn!("{problem}");
            report.problems.push(Problem {
                file: home.config_path(),
                message: problem.to_string(),
            });
        }
        for warning in config.unknown_keys() {
            tracing::warn!("{warning}");
            report.problems.push(Problem {
                file: home.config_path(),
                message: warning.clone(),
            });
        }
        let mut registry = Registry::new();
        if let Some(trace) = &options.trace {
            registry.set_trace(trace.clone());
        }
        registry.set_shadow_plugins(config.plugins.shadow_names());
        if let Some(sink) = &options.shadow_sink {
            registry.set_shadow_sink(sink.clone());
        }
        let mut plugins = LoadReport::default();
        if !options.safe_mode {
            let discover = DiscoverOptions {
                safe_mode: false,
                project_dir: options.project_plugins.clone(),
                policy: crate::trust::Policy::from_config(&config),
                host_config: config_json.clone(),
                entry_points: Vec::new(),
                list_entry_points: options.list_pip_plugins,
                native_only: options.native_only,
            };
            plugins = load_all(home, &config.plugins, &discover, &mut registry);
        }
        if !options.safe_mode && options.shell_hooks {
            let stdin = std::io::stdin();
            let mut prompt = shell::consent::TextPrompt::new(stdin.lock(), std::io::stdout());
            let consent = match options.consent {
                ConsentPolicy::AllowlistedOnly => Consent::Refuse,
                ConsentPolicy::AcceptAndRecord => Consent::Accept,
                ConsentPolicy::AcceptForThisRun => Consent::AcceptForThisRun,
                ConsentPolicy::ReadOnly => Consent::ReadOnly,
                ConsentPolicy::PromptOnTerminal => {
                    use std::io::IsTerminal;
                    if stdin.is_terminal() {
                        Consent::Ask(&mut prompt)
                    } else {
                        Consent::Refuse
                    }
                }
            };
            let plugin_hooks = claude_plugin_hooks(home, &plugins);
            report.shell = shell::register_with(
                home,
                &config.hooks,
                plugin_hooks,
                consent,
                &mut registry,
                options.work_dir.as_deref(),
            );
        }
        let gateway = options.gateway_log.as_ref().map(|log| {
            let handlers = std::mem::take(&mut plugins.gateway_handlers);
            let gateway_options = crate::gateway::GatewayOptions {
                policy: crate::trust::Policy::from_config(&config),
                host_config: config_json.clone(),
                ..options.gateway.clone()
            };
            GatewayHooks::discover_with_plugins(home, log.clone(), &gateway_options, handlers)
        });
        for p in &plugins.plugins {
            if let Some(error) = &p.error {
                let skipped_by_choice = error.starts_with("not enabled in config")
                    || error == "disabled via config"
                    || error.starts_with(crate::plugins::NOT_LOADED_HERE);
                if !skipped_by_choice {
                    report.problems.push(Problem {
                        file: p.dir.clone(),
                        message: error.clone(),
                    });
                }
            }
        }
        for warning in &report.shell.warnings {
            report.problems.push(Problem {
                file: home.config_path(),
                message: warning.clone(),
            });
        }
        if let Some(gateway) = &gateway {
            report.gateway = gateway.loaded().to_vec();
            report.gateway_skipped = gateway.skipped().to_vec();
            for skipped in gateway.skipped().iter().filter(|s| s.line.is_some()) {
                report.problems.push(Problem {
                    file: skipped.path.clone(),
                    message: skipped.reason.clone(),
                });
            }
        }
        report.plugins = plugins.plugins;
        Ok(Hooks {
            registry,
            gateway,
            config,
            report,
        })
    }

    /// What loaded and every problem found.
    pub fn report(&self) -> &HooksReport {
        &self.report
    }

    /// The `config.yaml` the hooks were loaded from (defaults when it was missing or
    /// malformed), for the settings an agent reads beside the hooks.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The registry, to fire hooks by name or with the typed methods (also reachable
    /// through `Deref`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The request middleware plugins registered (see [`crate::middleware`]): a host runs
    /// its model requests and tool calls through it.
    ///
    /// ```
    /// use hermes_host::middleware::Kind;
    /// let dir = tempfile::tempdir().unwrap();
    /// let hooks = hermes_host::Hooks::load(&hermes_host::home::Home::at(dir.path()), &Default::default()).unwrap();
    /// let chain = hooks.middleware();
    /// let args = chain.rewrite(Kind::ToolRequest, serde_json::json!({"command": "ls"}), &Default::default());
    /// let result = chain.execute(Kind::ToolExecution, args.payload, &args.original, &Default::default(), &mut |args| Ok(args));
    /// assert_eq!(result.unwrap()["command"], "ls");
    /// ```
    pub fn middleware(&self) -> &crate::middleware::MiddlewareChain {
        self.registry.middleware()
    }

    /// The tools plugins of every kind registered (see [`crate::tools`]): a host offers
    /// them to its model and runs a call through every gate with
    /// [`Registry::call_tool`] (reachable on the facade through `Deref`), or only the
    /// tool with [`ToolRegistry::dispatch`](crate::tools::ToolRegistry::dispatch).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let hooks = hermes_host::Hooks::load(&hermes_host::home::Home::at(dir.path()), &Default::default()).unwrap();
    /// assert!(hooks.tools().is_empty());
    /// ```
    pub fn tools(&self) -> &crate::tools::ToolRegistry {
        self.registry.tools()
    }

    /// The slash commands plugins registered (see [`crate::commands`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let hooks = hermes_host::Hooks::load(&hermes_host::home::Home::at(dir.path()), &Default::default()).unwrap();
    /// assert!(hooks.commands().specs().next().is_none());
    /// ```
    pub fn commands(&self) -> &crate::commands::CommandRegistry {
        self.registry.commands()
    }

    /// The system prompt sections plugins registered (see [`crate::prompt_sections`]): a
    /// host renders them once per new session and puts them at the head of its prompt.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let hooks = hermes_host::Hooks::load(&hermes_host::home::Home::at(dir.path()), &Default::default()).unwrap();
    /// assert_eq!(hooks.prompt_sections().render(&serde_json::json!({})), None);
    /// ```
    pub fn prompt_sections(&self) -> &crate::prompt_sections::PromptSections {
        self.registry.prompt_sections()
    }

    /// The gateway hooks, when [`LoadOptions::gateway_log`] asked for them.
    pub fn gateway(&self) -> Option<&GatewayHooks> {
        self.gateway.as_ref()
    }

    /// Queues gateway event `event` for every gateway hook subscribed to it and returns at
    /// once (see [`GatewayHooks::emit`]); nothing when gateway hooks were not loaded.
    pub fn emit(&self, event: &str, context: serde_json::Value) {
        if let Some(gateway) = &self.gateway {
            gateway.emit(event, context);
        }
    }

    /// The parts, for an application that shares them between threads (the registry and
    /// the gateway hooks are each `Sync`).
    pub fn into_parts(self) -> (Registry, Option<GatewayHooks>, Config, HooksReport) {
        (self.registry, self.gateway, self.config, self.report)
    }
}

impl std::ops::Deref for Hooks {
    type Target = Registry;

    fn deref(&self) -> &Registry {
        &self.registry
    }
}

/// The hooks of the enabled Claude Code plugins that loaded, as shell hooks, with each
/// plugin's data directory made when it is missing.
fn claude_plugin_hooks(
    home: &Home,
    plugins: &LoadReport,
) -> Vec<crate::shell::config::ShellHookSpec> {
    use crate::shell::claude_plugin;
    use std::os::unix::fs::DirBuilderExt as _;
    let mut specs = Vec::new();
    for p in &plugins.plugins {
        if p.kind != crate::plugins::PluginKind::Claude || !p.loaded() {
            continue;
        }
        match claude_plugin::read(&p.dir) {
            Ok(plugin) => {
                let data = claude_plugin::data_dir(home, &plugin.name);
                let made = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&data);
                if let Err(e) = made {
                    tracing::warn!(
                        "plugin '{}': cannot create {}: {e}",
                        plugin.name,
                        data.display()
                    );
                }
                specs.extend(plugin.specs(&p.dir, &data));
            }
            Err(why) => tracing::warn!("Failed to load plugin '{}': {why}", p.name),
        }
    }
    specs
}
