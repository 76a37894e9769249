//! Run a plugin's `register` in process, without building a library.
//!
//! [`LocalHost`] is a minimal host for unit tests and examples: it collects the callbacks a
//! `register` function registers and fires events at them. It applies none of the host's
//! aggregation rules; to test a built plugin in a real host, use `hermes_host::testing`.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RResult, RStr, RString},
};

use crate::core::{
    EventView, HookCallbackBox, HostLogger, HostLogger_TO, HostLoggerBox, Registrar, Registrar_TO,
    no_host_calls,
};
use crate::sdk::{PluginContext, RegisterOutcome};

// Re-exported so a plugin's tests need one import.
pub use crate::core::{Field, Reply};

/// Field constructors, for firing events in tests.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::field;
/// let f = field::str("tool_name", "terminal");
/// assert_eq!(f.value.as_str(), Some("terminal"));
/// ```
pub mod field {
    use crate::core::Field;

    /// A text field.
    pub const fn str<'a>(name: &'a str, value: &'a str) -> Field<'a> {
        Field::str(name, value)
    }
    /// A JSON field.
    pub const fn json<'a>(name: &'a str, value: &'a str) -> Field<'a> {
        Field::json(name, value)
    }
    /// An integer field.
    pub const fn int(name: &str, value: i64) -> Field<'_> {
        Field::int(name, value)
    }
    /// A boolean field.
    pub const fn bool(name: &str, value: bool) -> Field<'_> {
        Field::bool(name, value)
    }
    /// A null field.
    pub const fn null(name: &str) -> Field<'_> {
        Field::null(name)
    }
}

/// An in-process host that records what a `register` function registers.
///
/// ```
/// use hermes_hooks_abi::prelude::*;
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
///
/// fn register(ctx: &mut PluginContext) {
///     ctx.pre_tool_call(|e| if e.tool_name() == "terminal" { ToolDecision::block("no") } else { ToolDecision::Continue });
/// }
///
/// let host = LocalHost::register("guard", register);
/// let out = host.fire("pre_tool_call", &[field::str("tool_name", "terminal")]);
/// assert_eq!(out[0].as_ref().unwrap().as_ref().unwrap().text.as_str(), "no");
/// ```
pub struct LocalHost {
    callbacks: Vec<(String, String, HookCallbackBox)>,
    register_error: Option<String>,
}

/// Sets up a [`LocalHost`] with a plugin config and directory before `register` runs.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::LocalHost;
/// let dir = std::env::temp_dir();
/// let host = LocalHost::builder("audit")
///     .config(serde_json::json!({"path": "audit.jsonl"}))
///     .plugin_dir(&dir)
///     .register(|ctx| {
///         assert_eq!(ctx.config()["path"], "audit.jsonl");
///         assert_eq!(ctx.plugin_dir().as_deref(), Some(dir.as_path()));
///     });
/// assert!(host.register_error().is_none());
/// ```
pub struct LocalHostBuilder {
    name: String,
    config: serde_json::Value,
    dir: Option<std::path::PathBuf>,
}

impl LocalHostBuilder {
    /// The `config` mapping the plugin reads with `ctx.config()`.
    pub fn config(mut self, config: serde_json::Value) -> Self {
        self.config = config;
        self
    }

    /// The directory the plugin reads with `ctx.plugin_dir()`.
    pub fn plugin_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Runs `register` and keeps what it registered.
    pub fn register<R: RegisterOutcome>(
        self,
        register: impl FnOnce(&mut PluginContext<'_>) -> R,
    ) -> LocalHost {
        let mut local = LocalRegistrar {
            name: self.name,
            config: self.config,
            dir: self.dir,
            callbacks: Vec::new(),
        };
        let result = {
            let registrar = Registrar_TO::from_ptr(&mut local, TD_Opaque);
            let mut ctx = PluginContext::new(registrar);
            register(&mut ctx).into_register_result()
        };
        LocalHost {
            callbacks: local.callbacks,
            register_error: result.err(),
        }
    }
}

impl LocalHost {
    /// A builder, to give the plugin a config and a directory.
    pub fn builder(plugin_name: &str) -> LocalHostBuilder {
        LocalHostBuilder {
            name: plugin_name.to_string(),
            config: serde_json::Value::Null,
            dir: None,
        }
    }

    /// Runs `register` for a plugin called `plugin_name` and keeps what it registered.
    pub fn register<R: RegisterOutcome>(
        plugin_name: &str,
        register: impl FnOnce(&mut PluginContext<'_>) -> R,
    ) -> LocalHost {
        LocalHost::builder(plugin_name).register(register)
    }

    /// Fires `hook` and returns the first callback's reply, panicking with a clear message
    /// when there is no callback or it failed. For tests.
    ///
    /// ```
    /// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
    /// let host = LocalHost::register("x", |ctx| { ctx.transform_llm_output(|e| Some(e.response_text().to_uppercase())); });
    /// let reply = host.fire_one("transform_llm_output", &[field::str("response_text", "hi")]);
    /// assert_eq!(reply.unwrap().text.as_str(), "HI");
    /// ```
    ///
    /// # Panics
    ///
    /// When no callback is registered for `hook`, or the first one failed.
    pub fn fire_one(&self, hook: &str, fields: &[Field<'_>]) -> Option<Reply> {
        match self.fire(hook, fields).into_iter().next() {
            Some(Ok(reply)) => reply,
            Some(Err(message)) => panic!("the {hook} callback failed: {message}"),
            None => panic!("no callback is registered for {hook}"),
        }
    }

    /// The hook names registered, in registration order.
    pub fn hook_names(&self) -> Vec<&str> {
        self.callbacks
            .iter()
            .map(|(hook, _, _)| hook.as_str())
            .collect()
    }

    /// The callback names registered, in registration order.
    ///
    /// ```
    /// fn on_start(_e: &hermes_hooks_abi::hooks::SessionStartEvent<'_, '_>) {}
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| { ctx.on_session_start(on_start); });
    /// assert!(host.callback_names()[0].ends_with("on_start"));
    /// ```
    pub fn callback_names(&self) -> Vec<&str> {
        self.callbacks
            .iter()
            .map(|(_, name, _)| name.as_str())
            .collect()
    }

    /// The error `register` returned, if any.
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |_ctx| Err::<(), _>("missing key"));
    /// assert_eq!(host.register_error(), Some("missing key"));
    /// ```
    pub fn register_error(&self) -> Option<&str> {
        self.register_error.as_deref()
    }

    /// Calls every callback registered for `hook`, in order, with `fields`.
    ///
    /// Each result is the callback's reply, or `Err(message)` if it failed or panicked.
    pub fn fire(&self, hook: &str, fields: &[Field<'_>]) -> Vec<Result<Option<Reply>, String>> {
        let view = EventView::new(hook, fields, no_host_calls());
        self.callbacks
            .iter()
            .filter(|(h, _, _)| h == hook)
            .map(|(_, _, cb)| {
                cb.call(&view)
                    .map(Into::into)
                    .map_err(RString::into_string)
                    .into_result()
            })
            .collect()
    }
}

struct LocalRegistrar {
    name: String,
    config: serde_json::Value,
    dir: Option<std::path::PathBuf>,
    callbacks: Vec<(String, String, HookCallbackBox)>,
}

impl Registrar for LocalRegistrar {
    fn register_hook(
        &mut self,
        hook: RStr<'_>,
        callback_name: RStr<'_>,
        callback: HookCallbackBox,
    ) {
        self.callbacks
            .push((hook.to_string(), callback_name.to_string(), callback));
    }

    fn host_abi_version(&self) -> RString {
        RString::from(crate::sdk::ABI_VERSION)
    }

    fn plugin_name(&self) -> RString {
        RString::from(self.name.as_str())
    }

    fn host_call(&self, capability: RStr<'_>, _args_json: RStr<'_>) -> RResult<RString, RString> {
        match (capability.as_str(), &self.dir) {
            ("plugin.config", _) => RResult::ROk(self.config.to_string().into()),
            ("plugin.dir", Some(dir)) => RResult::ROk(
                serde_json::Value::String(dir.display().to_string())
                    .to_string()
                    .into(),
            ),
            _ => RResult::RErr(RString::from(format!("unknown capability '{capability}'"))),
        }
    }

    fn logger(&self) -> HostLoggerBox {
        HostLogger_TO::from_value(SilentLogger, TD_Opaque)
    }
}

/// In process, a plugin's `tracing` calls reach the test's own subscriber directly.
struct SilentLogger;

impl HostLogger for SilentLogger {
    fn max_level(&self) -> u8 {
        crate::core::level::OFF
    }

    fn log(&self, _level: u8, _target: RStr<'_>, _message: RStr<'_>) {}
}
