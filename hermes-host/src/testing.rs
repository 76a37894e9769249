//! Load a built plugin into a real host, for the plugin's own tests.
//!
//! [`TestHost`] does what `hermes plugins install` and an agent run do, in a temporary
//! `$HERMES_HOME`: it copies the plugin's library next to a `plugin.yaml`, enables the plugin
//! in `config.yaml`, loads it through the real loader (the same interface checks, the same
//! `register`, the same registry and combining rules), and then fires typed events at it.
//! So a plugin's integration test is a few lines:
//!
//! ```no_run
//! use hermes_host::testing::{TestHost, built_library};
//! use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
//!
//! # fn main() -> Result<(), hermes_host::testing::TestHostError> {
//! // The library `cargo test` built next to the test binary (target/debug/libmy_plugin.so).
//! let host = TestHost::load(built_library("my-plugin"), "my-plugin")?;
//! let verdict = host.pre_tool_call(&PreToolCallEvent {
//!     tool_name: "terminal",
//!     args: r#"{"command": "rm -rf /"}"#,
//!     ..Default::default()
//! });
//! assert!(verdict.blocked.is_some());
//! assert!(host.raised().is_empty(), "{:#?}", host.logs());
//! # Ok(())
//! # }
//! ```
//!
//! For in-process unit tests of `register` without building a library, use
//! `hermes_hooks_abi::sdk::testing::LocalHost` instead: it is faster, but it applies none of
//! the host's rules (no interface check, no combining of answers, no log bridge).
//!
//! # Logs
//!
//! Everything logged while the plugin loads and while a hook fires is captured, at every
//! level: the plugin's own `tracing` records (through the same bridge as in `hermes`) and the
//! host's warnings, such as `Hook 'pre_tool_call' callback my-plugin::check raised: ...`.
//! Read them with [`TestHost::logs`]. Nothing is printed.
//!
//! # Caveats
//!
//! - Each `TestHost` loads its own copy of the library (the file is copied into its
//!   temporary home), so two hosts in one test process do not share the plugin's statics.
//!   Libraries are never unloaded: a test process that creates thousands of hosts keeps
//!   thousands of copies mapped.
//! - Logs are captured on the thread that calls the `TestHost` method.
//! - `cargo test` builds the `cdylib` of a crate with `crate-type = ["cdylib", "rlib"]` before
//!   it runs the crate's integration tests (`tests/*.rs`), which is where [`built_library`]
//!   finds it. Unit tests inside `src/` run before that is guaranteed; use `LocalHost` there.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use abi_stable::std_types::{RResult, RStr, RString};
use hermes_hooks_abi::core::HostCalls;
use hermes_hooks_abi::hooks::payload;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::home::Home;
use crate::payload::OwnedPayload;
use crate::plugins::{DiscoverOptions, GatewayHandler, PluginReport, load_all};
use crate::registry::{DispatchVerdict, FiringRecord, Outcome, Registry, ToolVerdict, TraceSink};

/// The `cdylib` of crate `crate_name` that `cargo test` built for the running test binary.
///
/// Looks next to the test executable's directory (`target/debug/`, then
/// `target/debug/deps/`), so it follows `--target-dir`, `CARGO_TARGET_DIR` and `--release`.
/// The name may be given with dashes (`my-plugin`) or underscores. When no such file exists,
/// the first place looked is returned, and [`TestHost::load`] then says that it is missing.
///
/// ```
/// let lib = hermes_host::testing::built_library("my-plugin");
/// assert!(lib.file_name().unwrap().to_string_lossy().contains("my_plugin"));
/// ```
pub fn built_library(crate_name: &str) -> PathBuf {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    let file = format!("{DLL_PREFIX}{}{DLL_SUFFIX}", crate_name.replace('-', "_"));
    let exe = std::env::current_exe().unwrap_or_default();
    let deps = exe.parent().unwrap_or(Path::new("."));
    let candidates = [deps.parent().unwrap_or(deps).join(&file), deps.join(&file)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or(&candidates[0])
        .clone()
}

/// A plugin loaded into a real host with a temporary `$HERMES_HOME`.
///
/// Build one with [`TestHost::load`] or [`TestHost::builder`], then fire events with the
/// typed methods (one per hook, each taking the `hermes_hooks_abi::hooks::payload` struct of
/// that hook) or with [`fire`](TestHost::fire) and a JSON object. The temporary home is
/// removed when the `TestHost` is dropped.
///
/// ```no_run
/// use hermes_host::testing::{TestHost, built_library};
/// use hermes_hooks_abi::hooks::payload::{PreLlmCallEvent, SessionEndEvent};
///
/// let host = TestHost::load(built_library("my-plugin"), "my-plugin").unwrap();
/// assert_eq!(host.hooks(), ["pre_llm_call", "on_session_end"]);
/// let context = host.pre_llm_call(&PreLlmCallEvent { is_first_turn: true, ..Default::default() });
/// assert_eq!(context.as_deref(), Some("The user prefers short answers."));
/// host.on_session_end(&SessionEndEvent { session_id: "s-1", completed: true, ..Default::default() }).unwrap();
/// ```
pub struct TestHost {
    home: tempfile::TempDir,
    registry: Registry,
    report: PluginReport,
    dispatch: tracing::Dispatch,
    logs: Arc<Mutex<Vec<LogLine>>>,
    firings: Arc<Firings>,
    host_calls: Arc<RecordingHost>,
    gateway_handlers: Vec<GatewayHandler>,
    stdout: Mutex<Vec<u8>>,
}

/// Sets up a [`TestHost`]: the plugin's `plugin.yaml` and `config` before it loads.
///
/// ```no_run
/// use hermes_host::testing::{TestHost, built_library};
/// let host = TestHost::builder(built_library("my-plugin"), "my-plugin")
///     .plugin_yaml(concat!(env!("CARGO_MANIFEST_DIR"), "/plugin.yaml"))
///     .config(serde_json::json!({"blocked_commands": ["sudo"]}))
///     .load()
///     .unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TestHostBuilder {
    library: PathBuf,
    name: String,
    plugin_yaml: Option<PathBuf>,
    config: Option<serde_json::Value>,
}

impl TestHostBuilder {
    /// Installs this `plugin.yaml` (typically the crate's own) instead of a generated one;
    /// its `name` and `library` are replaced by the ones the test gives.
    ///
    /// ```no_run
    /// # use hermes_host::testing::TestHost;
    /// let host = TestHost::builder("target/debug/libaudit.so", "audit").plugin_yaml("plugin.yaml").load().unwrap();
    /// ```
    pub fn plugin_yaml(mut self, path: impl Into<PathBuf>) -> Self {
        self.plugin_yaml = Some(path.into());
        self
    }

    /// The `config` mapping the plugin reads with `ctx.config()`, replacing the one of
    /// [`plugin_yaml`](Self::plugin_yaml).
    ///
    /// ```no_run
    /// # use hermes_host::testing::TestHost;
    /// let host = TestHost::builder("target/debug/libaudit.so", "audit")
    ///     .config(serde_json::json!({"path": "audit.jsonl"}))
    ///     .load()
    ///     .unwrap();
    /// ```
    pub fn config(mut self, config: serde_json::Value) -> Self {
        self.config = Some(config);
        self
    }

    /// Installs the plugin into a new temporary home, enables it, and loads it with the real
    /// loader.
    ///
    /// # Errors
    ///
    /// One line saying what went wrong and what to do: the library is missing, the
    /// `plugin.yaml` cannot be read, or the plugin did not load (the loader's message: not a
    /// plugin, an incompatible interface, a `register` that failed or panicked).
    ///
    /// ```no_run
    /// # use hermes_host::testing::TestHost;
    /// match TestHost::builder("target/debug/libaudit.so", "audit").load() {
    ///     Ok(host) => println!("{:?}", host.hooks()),
    ///     Err(e) => panic!("{e}"),
    /// }
    /// ```
    pub fn load(self) -> Result<TestHost, TestHostError> {
        let dir = tempfile::Builder::new()
            .prefix("hermes-test-home-")
            .tempdir()
            .map_err(|e| {
                TestHostError::new(format!("cannot create a temporary HERMES_HOME: {e}"))
            })?;
        let home = Home::at(dir.path());
        self.install(&home)?;
        let logs = Arc::new(Mutex::new(Vec::new()));
        let dispatch =
            tracing::Dispatch::new(tracing_subscriber::registry().with(Capture(logs.clone())));
        let firings = Arc::new(Firings::default());
        let mut registry = Registry::new();
        registry.set_trace(firings.clone());
        let (config, problem) = home.load_config();
        if let Some(problem) = problem {
            return Err(TestHostError::new(problem.to_string()));
        }
        let (loaded, load_stdout) = capture_stdout(|| {
            tracing::dispatcher::with_default(&dispatch, || {
                load_all(
                    &home,
                    &config.plugins,
                    &DiscoverOptions::default(),
                    &mut registry,
                )
            })
        });
        let gateway_handlers = loaded.gateway_handlers;
        let Some(report) = loaded.plugins.into_iter().find(|p| p.key == self.name) else {
            return Err(TestHostError::new(format!(
                "{}: the host found no plugin '{}' there; give the plugin a plain name, without `/`",
                home.plugins_dir().display(),
                self.name
            )));
        };
        if let Some(error) = &report.error {
            let logs = logs.lock().map(|l| l.clone()).unwrap_or_default();
            return Err(TestHostError {
                message: error.clone(),
                logs,
            });
        }
        Ok(TestHost {
            home: dir,
            registry,
            report,
            dispatch,
            logs,
            firings,
            host_calls: Arc::new(RecordingHost::default()),
            gateway_handlers,
            stdout: Mutex::new(load_stdout),
        })
    }

    /// Copies the library and writes `plugin.yaml` and `config.yaml` into `home`.
    fn install(&self, home: &Home) -> Result<(), TestHostError> {
        let Some(file_name) = self.library.file_name() else {
            return Err(TestHostError::new(format!(
                "{}: not a library file name",
                self.library.display()
            )));
        };
        let dest = home.plugins_dir().join(&self.name);
        std::fs::create_dir_all(&dest).map_err(|e| {
            TestHostError::new(format!("{}: cannot create it: {e}", dest.display()))
        })?;
        std::fs::copy(&self.library, dest.join(file_name)).map_err(|e| {
            TestHostError::new(format!(
                "{}: cannot read the plugin library ({e}); build it first (`cargo build`, or `cargo test` for tests/*.rs) or fix the path",
                self.library.display()
            ))
        })?;
        let mut manifest = match &self.plugin_yaml {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    TestHostError::new(format!("{}: cannot read it: {e}", path.display()))
                })?;
                match yaml_serde::from_str::<yaml_serde::Value>(&text) {
                    Ok(yaml_serde::Value::Mapping(map)) => map,
                    Ok(_) => {
                        return Err(TestHostError::new(format!(
                            "{}: the top level must be a mapping",
                            path.display()
                        )));
                    }
                    Err(e) => return Err(TestHostError::new(format!("{}: {e}", path.display()))),
                }
            }
            None => {
                let mut map = yaml_serde::Mapping::new();
                map.insert("version".into(), "0.0.0".into());
                map
            }
        };
        manifest.insert("name".into(), self.name.as_str().into());
        manifest.insert(
            "library".into(),
            file_name.to_string_lossy().as_ref().into(),
        );
        if let Some(config) = &self.config {
            let value = yaml_serde::to_value(config).map_err(|e| {
                TestHostError::new(format!("the config cannot be written as YAML: {e}"))
            })?;
            manifest.insert("config".into(), value);
        }
        let text = yaml_serde::to_string(&yaml_serde::Value::Mapping(manifest))
            .map_err(|e| TestHostError::new(format!("cannot write plugin.yaml: {e}")))?;
        let manifest_path = dest.join("plugin.yaml");
        std::fs::write(&manifest_path, text).map_err(|e| {
            TestHostError::new(format!("{}: cannot write it: {e}", manifest_path.display()))
        })?;
        crate::config_edit::set_plugin(home, &self.name, true)
            .map(drop)
            .map_err(|e| TestHostError::new(e.to_string()))
    }
}

/// Why a [`TestHost`] could not be set up: one line saying what to do, plus what was logged.
///
/// ```
/// use hermes_host::testing::TestHost;
/// let err = TestHost::load("/nonexistent/libmy_plugin.so", "my-plugin").err().unwrap();
/// assert!(err.to_string().starts_with("/nonexistent/libmy_plugin.so: cannot read the plugin library"));
/// ```
#[derive(Clone, Debug)]
pub struct TestHostError {
    message: String,
    logs: Vec<LogLine>,
}

impl TestHostError {
    fn new(message: String) -> TestHostError {
        TestHostError {
            message,
            logs: Vec::new(),
        }
    }

    /// What was logged while the plugin loaded (empty when it never got that far).
    ///
    /// ```
    /// # use hermes_host::testing::TestHost;
    /// let err = TestHost::load("/nonexistent/libx.so", "x").err().unwrap();
    /// assert!(err.logs().is_empty());
    /// ```
    pub fn logs(&self) -> &[LogLine] {
        &self.logs
    }
}

impl std::fmt::Display for TestHostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TestHostError {}

/// One log record captured by a [`TestHost`].
///
/// ```no_run
/// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
/// for line in host.logs() {
///     println!("{line}"); // `WARN plugin x: blocked command="rm -rf /"`
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// Its level.
    pub level: tracing::Level,
    /// `plugin` for the plugin's own records; the host module otherwise.
    pub target: String,
    /// The plugin that logged it, for the plugin's own records.
    pub plugin: Option<String>,
    /// The message, followed by its other fields as `key=value`.
    pub message: String,
}

impl std::fmt::Display for LogLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.plugin {
            Some(plugin) => write!(f, "{} plugin {plugin}: {}", self.level, self.message),
            None => write!(f, "{} {}: {}", self.level, self.target, self.message),
        }
    }
}

/// A host capability a hook called (`gateway.send`, `session.append`), as a [`TestHost`]
/// recorded it.
///
/// ```no_run
/// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
/// for call in host.host_calls() {
///     assert_eq!(call.capability, "gateway.send");
///     assert_eq!(call.args["text"], "hello");
/// }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HostCall {
    /// The capability's name.
    pub capability: String,
    /// Its arguments (`Null` when they were not JSON).
    pub args: serde_json::Value,
}

macro_rules! observers {
    ($( $hook:ident($Event:ident) ),* $(,)?) => {$(
        #[doc = concat!("Fires `", stringify!($hook), "` (an observer hook).")]
        ///
        /// # Errors
        ///
        /// The first callback that failed or panicked, as the host logs it
        /// (`Hook '<event>' callback <plugin>::<callback> raised: <message>`); the others still ran.
        ///
        /// ```no_run
        #[doc = concat!("use hermes_hooks_abi::hooks::payload::", stringify!($Event), ";")]
        /// let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
        #[doc = concat!("host.", stringify!($hook), "(&", stringify!($Event), "::default()).unwrap();")]
        /// ```
        pub fn $hook(&self, event: &payload::$Event<'_>) -> Result<(), String> {
            let start = self.firings.len();
            self.fire_fields(payload::$Event::HOOK, &event.fields());
            match self.firings.since(start).into_iter().find_map(|r| r.error.map(|e| (r.callback, e))) {
                Some((callback, error)) => {
                    Err(format!("Hook '{}' callback {callback} raised: {error}", payload::$Event::HOOK))
                }
                None => Ok(()),
            }
        }
    )*};
}

impl TestHost {
    /// Loads the library at `library` as plugin `name`, with a generated `plugin.yaml` and no
    /// config. See [`TestHostBuilder::load`] for the errors.
    ///
    /// ```no_run
    /// let host = hermes_host::testing::TestHost::load("target/debug/libmy_plugin.so", "my-plugin").unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`TestHostBuilder::load`].
    pub fn load(library: impl Into<PathBuf>, name: &str) -> Result<TestHost, TestHostError> {
        TestHost::builder(library, name).load()
    }

    /// A builder, to install the crate's `plugin.yaml` or give a config.
    ///
    /// ```no_run
    /// let host = hermes_host::testing::TestHost::builder("target/debug/libmy_plugin.so", "my-plugin")
    ///     .plugin_yaml("plugin.yaml")
    ///     .load()
    ///     .unwrap();
    /// ```
    pub fn builder(library: impl Into<PathBuf>, name: &str) -> TestHostBuilder {
        TestHostBuilder {
            library: library.into(),
            name: name.to_string(),
            plugin_yaml: None,
            config: None,
        }
    }

    /// The temporary `$HERMES_HOME` (removed on drop).
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert!(host.home().join("plugins/x/plugin.yaml").is_file());
    /// ```
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The plugin's own directory, `$HERMES_HOME/plugins/<name>` (what `ctx.plugin_dir()`
    /// returns inside the plugin).
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let state = host.plugin_dir().join("state.json");
    /// ```
    pub fn plugin_dir(&self) -> &Path {
        &self.report.dir
    }

    /// What the loader reported: version, interface version, build profile, hooks.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert_eq!(host.report().abi_version.as_deref(), Some(hermes_host::plugins::HOST_ABI_VERSION));
    /// ```
    pub fn report(&self) -> &PluginReport {
        &self.report
    }

    /// The hooks the plugin registered, in registration order.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert_eq!(host.hooks(), ["pre_tool_call"]);
    /// ```
    pub fn hooks(&self) -> &[String] {
        &self.report.hooks
    }

    /// The registry the plugin was loaded into, to fire anything the typed methods do not
    /// cover.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert!(host.registry().has("pre_tool_call"));
    /// ```
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Every log record captured so far, oldest first.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert!(host.logs().iter().all(|l| l.level > tracing::Level::WARN), "{:#?}", host.logs());
    /// ```
    pub fn logs(&self) -> Vec<LogLine> {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// One record per callback run so far (hook, callback, decision, duration, error).
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// host.fire("on_session_start", &serde_json::json!({"session_id": "s-1"}));
    /// assert_eq!(host.firings()[0].hook, "on_session_start");
    /// ```
    pub fn firings(&self) -> Vec<FiringRecord> {
        self.firings.since(0)
    }

    /// The firings whose callback failed or panicked, so far.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert!(host.raised().is_empty(), "{:#?}", host.raised());
    /// ```
    pub fn raised(&self) -> Vec<FiringRecord> {
        self.firings
            .since(0)
            .into_iter()
            .filter(|r| r.error.is_some())
            .collect()
    }

    /// The host capabilities the plugin called so far (from `pre_gateway_dispatch`).
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert!(host.host_calls().is_empty());
    /// ```
    pub fn host_calls(&self) -> Vec<HostCall> {
        self.host_calls
            .0
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// Fires `hook` with a JSON object of its fields, as `hermes plugins fire` does (missing
    /// fields get their empty value), and returns the combined outcome.
    ///
    /// ```no_run
    /// use hermes_host::registry::Outcome;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let outcome = host.fire("transform_llm_output", &serde_json::json!({"response_text": "hi"}));
    /// assert_eq!(outcome, Outcome::Replace(Some("HI".into())));
    /// ```
    pub fn fire(&self, hook: &str, fields: &serde_json::Value) -> Outcome {
        let owned = OwnedPayload::from_json(hook, fields);
        self.fire_fields(hook, &owned.fields())
    }

    /// Fires `hook` with raw fields and returns the combined outcome.
    fn fire_fields(&self, hook: &str, fields: &[hermes_hooks_abi::core::Field<'_>]) -> Outcome {
        self.run(|| self.registry.fire(hook, fields))
    }

    /// Runs `f` as the host runs a callback: the plugin's log records go to [`logs`](Self::logs)
    /// and what it prints to [`stdout`](Self::stdout).
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let (out, printed) =
            capture_stdout(|| tracing::dispatcher::with_default(&self.dispatch, f));
        if let Ok(mut stdout) = self.stdout.lock() {
            stdout.extend_from_slice(&printed);
        }
        out
    }

    /// Everything the plugin printed to standard output so far (while it loaded and while
    /// hooks fired), which `hermes` sends to its log rather than to a protocol stream.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// host.fire("on_session_start", &serde_json::json!({"session_id": "s-1"}));
    /// assert!(host.stdout().contains("session s-1 started"), "{}", host.stdout());
    /// ```
    pub fn stdout(&self) -> String {
        let bytes = self.stdout.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Delivers gateway event `event` (such as `agent:start`) with `context` to the plugin's
    /// native gateway callbacks, as `hermes gateway run` does: callbacks registered for the
    /// exact name first, then those for `<prefix>:*`.
    ///
    /// # Errors
    ///
    /// The first error a callback returned (the gateway prints each as
    /// `[hooks] Error in handler for '<event>': <error>`); the others still ran.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// host.gateway_event("agent:start", &serde_json::json!({"platform": "telegram"})).unwrap();
    /// assert!(host.logs().iter().any(|l| l.message.contains("agent:start")));
    /// ```
    pub fn gateway_event(&self, event: &str, context: &serde_json::Value) -> Result<(), String> {
        let context = context.to_string();
        let fields = [
            hermes_hooks_abi::core::Field::str("event_type", event),
            hermes_hooks_abi::core::Field::json("context", &context),
        ];
        let prefix = event.split_once(':').map(|(p, _)| p);
        let exact = self.gateway_handlers.iter().filter(|h| h.event == event);
        let wild = self
            .gateway_handlers
            .iter()
            .filter(|h| prefix.is_some() && h.event.strip_suffix(":*") == prefix);
        let errors: Vec<String> = self.run(|| {
            let view = hermes_hooks_abi::core::EventView::new(
                event,
                &fields,
                hermes_hooks_abi::core::no_host_calls(),
            );
            exact
                .chain(wild)
                .filter_map(|h| match h.callback.call(&view) {
                    RResult::RErr(message) => Some(message.into_string()),
                    RResult::ROk(_) => None,
                })
                .collect()
        });
        match errors.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The gateway events and `prefix:*` patterns the plugin's native gateway callbacks
    /// subscribe to, in registration order.
    ///
    /// ```no_run
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// assert_eq!(host.gateway_events(), ["agent:*"]);
    /// ```
    pub fn gateway_events(&self) -> Vec<String> {
        self.gateway_handlers
            .iter()
            .map(|h| h.event.clone())
            .collect()
    }

    /// Fires `pre_tool_call`: may the tool run, and with which arguments?
    ///
    /// ```no_run
    /// use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let verdict = host.pre_tool_call(&PreToolCallEvent { tool_name: "terminal", args: r#"{"command": "ls"}"#, ..Default::default() });
    /// assert_eq!(verdict.blocked, None);
    /// ```
    pub fn pre_tool_call(&self, event: &payload::PreToolCallEvent<'_>) -> ToolVerdict {
        match self.fire_fields(payload::PreToolCallEvent::HOOK, &event.fields()) {
            Outcome::Tool(verdict) => verdict,
            _ => ToolVerdict::default(),
        }
    }

    /// Fires `pre_llm_call`: the context appended to the user's message, if any.
    ///
    /// ```no_run
    /// use hermes_hooks_abi::hooks::payload::PreLlmCallEvent;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let context = host.pre_llm_call(&PreLlmCallEvent { user_message: "hi", is_first_turn: true, ..Default::default() });
    /// ```
    pub fn pre_llm_call(&self, event: &payload::PreLlmCallEvent<'_>) -> Option<String> {
        self.fire_fields(payload::PreLlmCallEvent::HOOK, &event.fields())
            .into_text()
    }

    /// Fires `transform_tool_result`: the replacement result, if any.
    ///
    /// ```no_run
    /// use hermes_hooks_abi::hooks::payload::TransformToolResultEvent;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let result = host.transform_tool_result(&TransformToolResultEvent { tool_name: "terminal", result: "ok", ..Default::default() });
    /// ```
    pub fn transform_tool_result(
        &self,
        event: &payload::TransformToolResultEvent<'_>,
    ) -> Option<String> {
        self.fire_fields(payload::TransformToolResultEvent::HOOK, &event.fields())
            .into_text()
    }

    /// Fires `transform_terminal_output`: the replacement output, if any.
    ///
    /// ```no_run
    /// use hermes_hooks_abi::hooks::payload::TransformTerminalOutputEvent;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let output = host.transform_terminal_output(&TransformTerminalOutputEvent { command: "ls", output: "a b", ..Default::default() });
    /// ```
    pub fn transform_terminal_output(
        &self,
        event: &payload::TransformTerminalOutputEvent<'_>,
    ) -> Option<String> {
        self.fire_fields(payload::TransformTerminalOutputEvent::HOOK, &event.fields())
            .into_text()
    }

    /// Fires `transform_llm_output`: the replacement response, if any.
    ///
    /// ```no_run
    /// use hermes_hooks_abi::hooks::payload::TransformLlmOutputEvent;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let response = host.transform_llm_output(&TransformLlmOutputEvent { response_text: "hi", ..Default::default() });
    /// ```
    pub fn transform_llm_output(
        &self,
        event: &payload::TransformLlmOutputEvent<'_>,
    ) -> Option<String> {
        self.fire_fields(payload::TransformLlmOutputEvent::HOOK, &event.fields())
            .into_text()
    }

    /// Fires `pre_gateway_dispatch`: what the gateway does with the message. The hook's
    /// `gateway.send` and `session.append` calls succeed and are recorded in
    /// [`host_calls`](Self::host_calls).
    ///
    /// ```no_run
    /// use hermes_hooks_abi::hooks::payload::GatewayDispatchEvent;
    /// use hermes_host::registry::DispatchVerdict;
    /// # let host = hermes_host::testing::TestHost::load("target/debug/libx.so", "x").unwrap();
    /// let verdict = host.pre_gateway_dispatch(&GatewayDispatchEvent { platform: "telegram", text: "spam", ..Default::default() });
    /// assert!(matches!(verdict, DispatchVerdict::Skip { .. }));
    /// ```
    pub fn pre_gateway_dispatch(
        &self,
        event: &payload::GatewayDispatchEvent<'_>,
    ) -> DispatchVerdict {
        self.run(|| {
            self.registry
                .pre_gateway_dispatch(event, self.host_calls.as_ref())
        })
    }

    observers! {
        post_tool_call(PostToolCallEvent),
        post_llm_call(PostLlmCallEvent),
        on_session_start(SessionStartEvent),
        on_session_end(SessionEndEvent),
        on_session_finalize(SessionFinalizeEvent),
        on_session_reset(SessionResetEvent),
        subagent_stop(SubagentStopEvent),
        pre_approval_request(ApprovalRequestEvent),
        post_approval_response(ApprovalResponseEvent),
        pre_api_request(ApiRequestEvent),
        post_api_request(ApiResponseEvent),
    }
}

/// Runs `f` with file descriptor 1 pointed at a temporary file and returns what was
/// written to it. A plugin has its own copy of std, so its `println!` bypasses the test
/// harness's capture and writes to fd 1 directly; this is the one way to see it.
///
/// One capture at a time in the process (fd 1 is shared by all threads). What another
/// thread writes to fd 1 meanwhile lands in the capture too, and a plugin's `print!`
/// without a newline stays in the plugin's buffer until its next newline.
fn capture_stdout<T>(f: impl FnOnce() -> T) -> (T, Vec<u8>) {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _ = std::io::stdout().flush();
    let Ok(mut file) = tempfile::tempfile() else {
        return (f(), Vec::new());
    };
    // SAFETY: dup/dup2/close on fd 1 and on descriptors this function owns.
    let saved = unsafe { libc::dup(1) };
    if saved < 0 || unsafe { libc::dup2(file.as_raw_fd(), 1) } < 0 {
        if saved >= 0 {
            unsafe { libc::close(saved) };
        }
        return (f(), Vec::new());
    }
    let out = f();
    // SAFETY: as above; `saved` is a duplicate of the original fd 1.
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    let mut printed = Vec::new();
    if file.rewind().is_ok() {
        let _ = file.read_to_end(&mut printed);
    }
    (out, printed)
}

/// Collects firing records.
#[derive(Default)]
struct Firings(Mutex<Vec<FiringRecord>>);

impl Firings {
    fn len(&self) -> usize {
        self.0.lock().map(|r| r.len()).unwrap_or(0)
    }

    fn since(&self, start: usize) -> Vec<FiringRecord> {
        self.0
            .lock()
            .map(|r| r.get(start..).unwrap_or_default().to_vec())
            .unwrap_or_default()
    }
}

impl TraceSink for Firings {
    fn record(&self, record: FiringRecord) {
        if let Ok(mut records) = self.0.lock() {
            records.push(record);
        }
    }
}

/// Answers every capability call with `null` and records it.
#[derive(Default)]
struct RecordingHost(Mutex<Vec<HostCall>>);

impl HostCalls for RecordingHost {
    fn call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString> {
        let args = serde_json::from_str(args_json.as_str()).unwrap_or(serde_json::Value::Null);
        if let Ok(mut calls) = self.0.lock() {
            calls.push(HostCall {
                capability: capability.to_string(),
                args,
            });
        }
        RResult::ROk(RString::from("null"))
    }
}

/// A `tracing` layer that keeps every event as a [`LogLine`].
struct Capture(Arc<Mutex<Vec<LogLine>>>);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let line = LogLine {
            level: *meta.level(),
            target: meta.target().to_string(),
            plugin: fields.plugin,
            message: fields.text,
        };
        if let Ok(mut logs) = self.0.lock() {
            logs.push(line);
        }
    }
}

/// The message first, then `key=value` for the other fields; `plugin` and `module` (set by
/// the plugin log bridge) are taken apart.
#[derive(Default)]
struct Fields {
    text: String,
    rest: String,
    plugin: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "plugin" => self.plugin = Some(value.to_string()),
            "module" => {}
            "message" => self.push_message(value),
            name => self.push_field(name, &format!("{value:?}")),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "plugin" => self.plugin = Some(format!("{value:?}").trim_matches('"').to_string()),
            "module" => {}
            "message" => self.push_message(&format!("{value:?}")),
            name => self.push_field(name, &format!("{value:?}")),
        }
    }
}

impl Fields {
    fn push_message(&mut self, message: &str) {
        self.text = if self.rest.is_empty() {
            message.to_string()
        } else {
            format!("{message} {}", self.rest)
        };
    }

    fn push_field(&mut self, name: &str, value: &str) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.text.push_str(&format!("{name}={value}"));
        if !self.rest.is_empty() {
            self.rest.push(' ');
        }
        self.rest.push_str(&format!("{name}={value}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_says_to_build_it() {
        let err = TestHost::load("/nonexistent/dir/libmy_plugin.so", "my-plugin")
            .err()
            .unwrap();
        let message = err.to_string();
        assert!(
            message
                .starts_with("/nonexistent/dir/libmy_plugin.so: cannot read the plugin library ("),
            "{message}"
        );
        assert!(
            message.ends_with(
                "build it first (`cargo build`, or `cargo test` for tests/*.rs) or fix the path"
            ),
            "{message}"
        );
        assert_eq!(message.lines().count(), 1);
    }

    #[test]
    fn a_library_that_is_not_a_plugin_fails_with_the_loader_line() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libjunk.so");
        std::fs::write(&lib, "not a library").unwrap();
        let err = TestHost::load(&lib, "junk").err().unwrap();
        let message = err.to_string();
        assert!(
            message.contains("plugin 'junk' cannot be loaded"),
            "{message}"
        );
        assert_eq!(message.lines().count(), 1);
        // The loader's warning was captured, not printed.
        assert!(err.logs().iter().any(|l| l.level == tracing::Level::WARN
            && l.message.contains("Failed to load plugin 'junk'")));
    }

    #[test]
    fn a_given_plugin_yaml_keeps_its_config_and_gets_the_test_name_and_library() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libjunk.so");
        std::fs::write(&lib, "not a library").unwrap();
        let yaml = dir.path().join("plugin.yaml");
        std::fs::write(
            &yaml,
            "name: other\nlibrary: libother.so\nconfig:\n  level: 3\n",
        )
        .unwrap();
        let builder = TestHost::builder(&lib, "junk").plugin_yaml(&yaml);
        let home_dir = tempfile::tempdir().unwrap();
        let home = Home::at(home_dir.path());
        builder.install(&home).unwrap();
        let manifest = crate::plugins::Manifest::read(&home.plugins_dir().join("junk")).unwrap();
        assert_eq!(
            (manifest.name.as_str(), manifest.library.as_str()),
            ("junk", "libjunk.so")
        );
        assert_eq!(manifest.config, serde_json::json!({"level": 3}));
        let (config, _) = home.load_config();
        assert_eq!(config.plugins_enabled(), Some(vec!["junk".to_string()]));
    }

    #[test]
    fn log_lines_keep_the_plugin_apart_from_the_message() {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let dispatch =
            tracing::Dispatch::new(tracing_subscriber::registry().with(Capture(logs.clone())));
        tracing::dispatcher::with_default(&dispatch, || {
            let (plugin, module) = ("guard", "guard::rules");
            tracing::warn!(target: "plugin", plugin, module, "{}", "blocked command=\"rm\"");
            tracing::info!(count = 2, "loaded");
        });
        let logs = logs.lock().unwrap();
        assert_eq!(
            logs[0].to_string(),
            "WARN plugin guard: blocked command=\"rm\""
        );
        assert_eq!(
            logs[1].to_string(),
            format!("INFO {}: loaded count=2", module_path!())
        );
    }
}
