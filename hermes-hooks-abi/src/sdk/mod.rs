//! The plugin author's side: typed hook closures on top of the frozen core.
//!
//! Everything here is compiled into the plugin, not shared with the host, so it can grow
//! freely: a plugin built with a newer SDK still speaks the same frozen core.
//!
//! - [`PluginContext`] has one typed registration method per hook (`ctx.pre_tool_call(..)`,
//!   `ctx.pre_llm_call(..)`, ...), generated from [`hooks`](crate::hooks).
//! - Outcomes are typed: [`ToolDecision`] for `pre_tool_call`, `Option<String>` for context
//!   and transforms, [`DispatchDecision`] for `pre_gateway_dispatch`, `()` for observers.
//! - [`export_plugin!`](crate::export_plugin) exports the root module, catches panics in
//!   `register` and in every callback, and bridges `tracing` to the host's log.
//! - [`offer`]: tools, slash commands and request middleware (`ctx.tool`, `ctx.command`,
//!   `ctx.middleware`; interface 1.3).
//! - [`testing::LocalHost`] runs a `register` function in process, for unit tests.

pub mod data;
mod log;
pub mod offer;
pub mod statics;
pub mod testing;

use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{ROption, RResult, RStr, RString},
};

use crate::core::{
    EventView, HookCallback, HookCallback_TO, HookCallbackBox, RegistrarMut, Reply, action,
};

/// The interface version this SDK was built with (the crate version).
///
/// ```
/// assert!(hermes_hooks_abi::sdk::ABI_VERSION.starts_with("1."));
/// ```
pub const ABI_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a plugin's `register` function receives: register hooks on it.
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::prelude::*;
///
/// fn register(ctx: &mut PluginContext) {
///     ctx.pre_tool_call(|e| {
///         if e.tool_name() == "terminal" && e.args().value()["command"] == "rm -rf /" {
///             ToolDecision::block("refusing to delete the filesystem")
///         } else {
///             ToolDecision::Continue
///         }
///     });
///     ctx.pre_llm_call(|_e| Some("The user prefers short answers.".to_string()));
/// }
/// # let host = hermes_hooks_abi::sdk::testing::LocalHost::register("demo", register);
/// # assert_eq!(host.hook_names(), vec!["pre_tool_call", "pre_llm_call"]);
/// ```
pub struct PluginContext<'r> {
    registrar: RegistrarMut<'r>,
    plugin_name: String,
    next_name: Option<String>,
}

impl<'r> PluginContext<'r> {
    /// Wraps the host's registrar. [`export_plugin!`](crate::export_plugin) does this; the
    /// in-process [`testing::LocalHost`] does too:
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("named", |ctx| {
    ///     assert_eq!(ctx.plugin_name(), "named");
    /// });
    /// assert!(host.register_error().is_none());
    /// ```
    pub fn new(registrar: RegistrarMut<'r>) -> Self {
        let plugin_name = registrar.plugin_name().into_string();
        PluginContext {
            registrar,
            plugin_name,
            next_name: None,
        }
    }

    /// The name the host knows this plugin by (its `plugin.yaml` name).
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("audit", |ctx| {
    ///     assert_eq!(ctx.plugin_name(), "audit");
    /// });
    /// ```
    pub fn plugin_name(&self) -> &str {
        &self.plugin_name
    }

    /// The interface version of the host that loaded the plugin.
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     assert!(ctx.host_abi_version().starts_with("1."));
    /// });
    /// ```
    pub fn host_abi_version(&self) -> String {
        self.registrar.host_abi_version().into_string()
    }

    /// The plugin's own directory (`$HERMES_HOME/plugins/<name>/`), where it may keep state.
    ///
    /// `None` when the host does not say (an in-process [`testing::LocalHost`] without a
    /// directory).
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     assert!(ctx.plugin_dir().is_none());
    /// });
    /// ```
    pub fn plugin_dir(&self) -> Option<std::path::PathBuf> {
        let answer = self
            .registrar
            .host_call(RStr::from("plugin.dir"), RStr::from("{}"))
            .into_result()
            .ok()?;
        let dir: serde_json::Value = serde_json::from_str(answer.as_str()).ok()?;
        dir.as_str().map(std::path::PathBuf::from)
    }

    /// The file a plugin keeps its data in: the config key `path` if set (relative to the
    /// plugin's directory), else `file_name` in the plugin's directory, else in
    /// `$HERMES_HOME`, else in the working directory. See [`data::location::resolve`].
    ///
    /// ```
    /// let dir = std::env::temp_dir();
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::builder("x").plugin_dir(&dir).register(|ctx| {
    ///     assert_eq!(ctx.data_file("x.jsonl"), dir.join("x.jsonl"));
    /// });
    /// ```
    pub fn data_file(&self, file_name: &str) -> std::path::PathBuf {
        let home = std::env::var_os("HERMES_HOME");
        data::location::resolve(
            &self.config(),
            self.plugin_dir().as_deref(),
            home.as_deref(),
            file_name,
        )
    }

    /// The `config` mapping of the plugin's `plugin.yaml`, as JSON (`Null` when absent).
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     assert!(ctx.config().is_null());
    /// });
    /// ```
    pub fn config(&self) -> serde_json::Value {
        self.registrar
            .host_call(RStr::from("plugin.config"), RStr::from("{}"))
            .into_result()
            .ok()
            .and_then(|answer| serde_json::from_str(answer.as_str()).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Names the next callback registered, for logs and traces.
    ///
    /// Without it, a callback is named after its function (`check_command`), or
    /// `register::{{closure}}` for a closure.
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     ctx.named("record_call").post_tool_call(|_e| {});
    /// });
    /// assert_eq!(host.callback_names(), vec!["record_call"]);
    /// ```
    pub fn named(&mut self, name: impl Into<String>) -> &mut Self {
        self.next_name = Some(name.into());
        self
    }

    /// The name for the callback being registered: the one given to [`named`](Self::named),
    /// else the function's path.
    pub(crate) fn take_name<F>(&mut self) -> String {
        self.next_name.take().unwrap_or_else(callback_name::<F>)
    }

    /// Registers a callback for any hook or gateway event by name, with a raw view.
    ///
    /// Use it for hooks this SDK does not know yet; the typed methods are built on it. The
    /// callback is wrapped so that a panic becomes an error the host logs.
    ///
    /// ```
    /// use hermes_hooks_abi::core::Reply;
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     ctx.register_raw("future_hook", "mine", |view| Ok(Some(Reply::new("context", view.hook.as_str()))));
    /// });
    /// let out = host.fire("future_hook", &[]);
    /// assert_eq!(out[0].as_ref().unwrap().as_ref().unwrap().text.as_str(), "future_hook");
    /// ```
    pub fn register_raw<F>(&mut self, hook: &str, callback_name: &str, callback: F) -> &mut Self
    where
        F: Fn(&EventView<'_>) -> Result<Option<Reply>, String> + Send + Sync + 'static,
    {
        let name = self
            .next_name
            .take()
            .unwrap_or_else(|| callback_name.to_string());
        let boxed: HookCallbackBox = HookCallback_TO::from_value(Guarded(callback), TD_Opaque);
        self.registrar
            .register_hook(RStr::from(hook), RStr::from(name.as_str()), boxed);
        self
    }

    /// Registers a native gateway hook that can fail: an `Err(message)` is printed by the
    /// gateway as `[hooks] Error in handler for '<event>': <message>`.
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     ctx.try_on_gateway_event("agent:end", |_e| Err("the disk is full".to_string()));
    /// });
    /// let out = host.fire("agent:end", &[]);
    /// assert_eq!(out[0].as_ref().unwrap_err(), "the disk is full");
    /// ```
    pub fn try_on_gateway_event<F>(&mut self, event: &str, callback: F) -> &mut Self
    where
        F: Fn(&GatewayEvent<'_, '_>) -> Result<(), String> + Send + Sync + 'static,
    {
        let name = self.take_name::<F>();
        self.register_raw(event, &name, move |view| {
            callback(&GatewayEvent::new(view)).map(|()| None)
        })
    }

    /// Registers a native gateway hook for `event` (`agent:start`, `command:*`, ...).
    ///
    /// Gateway hooks are observers: they cannot change what the gateway does.
    ///
    /// ```
    /// let host = hermes_hooks_abi::sdk::testing::LocalHost::register("x", |ctx| {
    ///     ctx.on_gateway_event("session:start", |e| println!("{}", e.event_type()));
    /// });
    /// assert_eq!(host.hook_names(), vec!["session:start"]);
    /// ```
    pub fn on_gateway_event<F>(&mut self, event: &str, callback: F) -> &mut Self
    where
        F: Fn(&GatewayEvent<'_, '_>) + Send + Sync + 'static,
    {
        let name = self.take_name::<F>();
        self.register_raw(event, &name, move |view| {
            callback(&GatewayEvent::new(view));
            Ok(None)
        })
    }
}

/// A closure made safe to call from the host: it never unwinds across the boundary.
struct Guarded<F>(F);

impl<F> HookCallback for Guarded<F>
where
    F: Fn(&EventView<'_>) -> Result<Option<Reply>, String> + Send + Sync + 'static,
{
    // Inlined into abi_stable's `extern "C"` shim for the trait method, so that a firing
    // crosses one call into the plugin, not two.
    #[inline(always)]
    fn call(&self, event: &EventView<'_>) -> RResult<ROption<Reply>, RString> {
        // The closure's answer is parked in `answer` and only a flag crosses catch_unwind:
        // moving a whole reply out through it costs more than the callback itself on the
        // "no opinion" path, which is by far the most common one.
        let mut answer = None;
        let flag = catch_unwind(AssertUnwindSafe(|| match (self.0)(event) {
            Ok(None) => false,
            other => {
                answer = Some(other);
                true
            }
        }));
        match (flag, answer) {
            (Ok(false), _) | (Ok(true), None) => RResult::ROk(ROption::RNone),
            (Ok(true), Some(Ok(reply))) => RResult::ROk(reply.into()),
            (Ok(true), Some(Err(message))) => RResult::RErr(message.into()),
            (Err(payload), _) => RResult::RErr(panic_message(payload.as_ref()).into()),
        }
    }
}

/// The text of a panic payload, as `str(exc)` would give it for an exception.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// The display name of a callback: its path without the crate name.
///
/// A named `fn check_command` gives `check_command`; a closure gives
/// `register::{{closure}}`.
pub(crate) fn callback_name<F>() -> String {
    let full = std::any::type_name::<F>();
    match full.split_once("::") {
        Some((_crate, rest)) => rest.to_string(),
        None => full.to_string(),
    }
}

/// What a `pre_tool_call` hook decided.
///
/// ```
/// use hermes_hooks_abi::sdk::ToolDecision;
/// let d = ToolDecision::block("no");
/// assert!(matches!(d, ToolDecision::Block(ref m) if m == "no"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ToolDecision {
    /// No opinion: the tool runs (unless another hook blocks it).
    #[default]
    Continue,
    /// Do not run the tool; the model sees `{"error": "<message>"}`. The first block in
    /// registry order wins. An empty message is ignored, as in the reference.
    Block(String),
    /// Rewrite the tool arguments: these keys are merged over them, in registry order.
    Modify(serde_json::Map<String, serde_json::Value>),
    /// Put the call through the user's approval, even where no rule would ask (interface
    /// 1.3): a denial, a timeout or no one to ask blocks it. As in the reference, the first
    /// block or approve in registry order decides.
    Approve {
        /// Why approval is needed, shown to the user.
        message: String,
        /// What an approval covers (`"deploy:prod"`), as the reference's `rule_key`.
        rule_key: Option<String>,
    },
}

impl ToolDecision {
    /// A block with `message`.
    ///
    /// ```
    /// let d = hermes_hooks_abi::sdk::ToolDecision::block(format!("{} is not allowed", "sudo"));
    /// assert_eq!(d, hermes_hooks_abi::sdk::ToolDecision::Block("sudo is not allowed".into()));
    /// ```
    pub fn block(message: impl Into<String>) -> Self {
        ToolDecision::Block(message.into())
    }

    /// A modify that sets one argument.
    ///
    /// ```
    /// let d = hermes_hooks_abi::sdk::ToolDecision::set_arg("timeout", 30.into());
    /// assert!(matches!(d, hermes_hooks_abi::sdk::ToolDecision::Modify(_)));
    /// ```
    pub fn set_arg(key: impl Into<String>, value: serde_json::Value) -> Self {
        let mut map = serde_json::Map::new();
        map.insert(key.into(), value);
        ToolDecision::Modify(map)
    }

    /// An approval request with `message` (interface 1.3).
    ///
    /// ```
    /// let d = hermes_hooks_abi::sdk::ToolDecision::approve("deploys need a human");
    /// assert!(matches!(d, hermes_hooks_abi::sdk::ToolDecision::Approve { rule_key: None, .. }));
    /// ```
    pub fn approve(message: impl Into<String>) -> Self {
        ToolDecision::Approve {
            message: message.into(),
            rule_key: None,
        }
    }
}

/// What a `pre_verify` hook decided about an agent about to finish (interface 1.3).
///
/// ```
/// use hermes_hooks_abi::sdk::VerifyDecision;
/// let d = VerifyDecision::keep_working("run the tests first");
/// assert_eq!(d, VerifyDecision::Continue("run the tests first".into()));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub enum VerifyDecision {
    /// No opinion: the agent may finish.
    #[default]
    Finish,
    /// Keep working: the text is the agent's next instruction. An empty one is ignored.
    Continue(String),
}

impl VerifyDecision {
    /// A `Continue` with `message`. See [`VerifyDecision`] for an example.
    pub fn keep_working(message: impl Into<String>) -> Self {
        VerifyDecision::Continue(message.into())
    }
}

/// Reply actions added after 1.0, beside the frozen [`crate::core::action`] names.
pub mod actions {
    /// `pre_tool_call`: put the call through the approval gate; `text` is the message and
    /// `json` `{"rule_key": ...}` (interface 1.3).
    pub const APPROVE: &str = "approve";
    /// `pre_verify`: keep the agent working; `text` is its next instruction (interface 1.3).
    pub const CONTINUE: &str = "continue";
}

/// What a `pre_gateway_dispatch` hook decided about an incoming message.
///
/// ```
/// use hermes_hooks_abi::sdk::DispatchDecision;
/// let d = DispatchDecision::Skip("spam".into());
/// assert_ne!(d, DispatchDecision::Continue);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub enum DispatchDecision {
    /// No opinion: ask the next hook.
    #[default]
    Continue,
    /// Drop the message: no reply, no pairing, no authorisation. The text is the reason.
    Skip(String),
    /// Replace the message text, then stop asking later hooks.
    Rewrite(String),
    /// Dispatch the message as is and stop asking later hooks.
    Allow,
}

/// Turns a typed outcome into the frozen [`Reply`].
///
/// Implemented for every outcome type; the SDK calls it for you.
///
/// ```
/// use hermes_hooks_abi::{hooks::OutcomeKind, sdk::IntoReply};
/// let r = Some("ctx".to_string()).into_reply(OutcomeKind::Context).unwrap();
/// assert_eq!(r.action.as_str(), "context");
/// ```
pub trait IntoReply {
    /// The reply, or `None` for "no opinion".
    fn into_reply(self, kind: OutcomeKind) -> Option<Reply>;

    /// Whether this outcome is "no opinion", checked before building a reply so that the
    /// common case moves nothing across the boundary. A value for which this is `true` must
    /// own nothing (no heap memory, no handle): the SDK forgets it rather than dropping it.
    ///
    /// ```
    /// use hermes_hooks_abi::sdk::{IntoReply, ToolDecision};
    /// assert!(ToolDecision::Continue.is_no_opinion());
    /// assert!(!ToolDecision::block("no").is_no_opinion());
    /// ```
    fn is_no_opinion(&self) -> bool {
        false
    }
}

impl IntoReply for () {
    #[inline]
    fn into_reply(self, _kind: OutcomeKind) -> Option<Reply> {
        None
    }

    #[inline]
    fn is_no_opinion(&self) -> bool {
        true
    }
}

impl IntoReply for Option<String> {
    #[inline]
    fn into_reply(self, kind: OutcomeKind) -> Option<Reply> {
        let act = match kind {
            OutcomeKind::Context => action::CONTEXT,
            _ => action::REPLACE,
        };
        self.map(|text| Reply::new(act, text))
    }

    #[inline]
    fn is_no_opinion(&self) -> bool {
        self.is_none()
    }
}

impl IntoReply for ToolDecision {
    #[inline]
    fn is_no_opinion(&self) -> bool {
        matches!(self, ToolDecision::Continue)
    }

    #[inline]
    fn into_reply(self, _kind: OutcomeKind) -> Option<Reply> {
        match self {
            ToolDecision::Continue => None,
            ToolDecision::Block(message) => Some(Reply::new(action::BLOCK, message)),
            ToolDecision::Modify(args) => {
                let mut reply = Reply::new(action::MODIFY, "");
                reply.json = serde_json::Value::Object(args).to_string().into();
                Some(reply)
            }
            ToolDecision::Approve { message, rule_key } => {
                let mut reply = Reply::new(actions::APPROVE, message);
                reply.json = serde_json::json!({ "rule_key": rule_key })
                    .to_string()
                    .into();
                Some(reply)
            }
        }
    }
}

impl IntoReply for VerifyDecision {
    #[inline]
    fn is_no_opinion(&self) -> bool {
        matches!(self, VerifyDecision::Finish)
    }

    #[inline]
    fn into_reply(self, _kind: OutcomeKind) -> Option<Reply> {
        match self {
            VerifyDecision::Finish => None,
            VerifyDecision::Continue(message) => Some(Reply::new(actions::CONTINUE, message)),
        }
    }
}

impl IntoReply for DispatchDecision {
    #[inline]
    fn is_no_opinion(&self) -> bool {
        matches!(self, DispatchDecision::Continue)
    }

    #[inline]
    fn into_reply(self, _kind: OutcomeKind) -> Option<Reply> {
        match self {
            DispatchDecision::Continue => None,
            DispatchDecision::Skip(reason) => Some(Reply::new(action::SKIP, reason)),
            DispatchDecision::Rewrite(text) => Some(Reply::new(action::REWRITE, text)),
            DispatchDecision::Allow => Some(Reply::new(action::ALLOW, "")),
        }
    }
}

/// A JSON payload field (tool arguments, conversation history), parsed only when asked.
///
/// ```
/// use hermes_hooks_abi::sdk::Json;
/// let j = Json::new(Some(r#"{"command":"ls -la"}"#));
/// assert_eq!(j.value()["command"], "ls -la");
/// assert_eq!(Json::new(None).value(), serde_json::Value::Null);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Json<'a> {
    text: Option<&'a str>,
}

impl<'a> Json<'a> {
    /// Wraps borrowed JSON text (`None` when the host did not send the field).
    ///
    /// ```
    /// let j = hermes_hooks_abi::sdk::Json::new(Some("{}"));
    /// assert!(j.value().is_object());
    /// ```
    pub fn new(text: Option<&'a str>) -> Self {
        Json { text }
    }

    /// The raw JSON text, without parsing it.
    ///
    /// ```
    /// assert_eq!(hermes_hooks_abi::sdk::Json::new(Some("[]")).as_str(), Some("[]"));
    /// ```
    pub fn as_str(&self) -> Option<&'a str> {
        self.text
    }

    /// The parsed value; `Null` when absent or not valid JSON.
    ///
    /// ```
    /// assert!(hermes_hooks_abi::sdk::Json::new(Some("[1,2]")).value().is_array());
    /// ```
    pub fn value(&self) -> serde_json::Value {
        self.text
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Sends messages to a gateway chat, from a `pre_gateway_dispatch` hook.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
/// let host = LocalHost::register("x", |ctx| {
///     ctx.pre_gateway_dispatch(|e| {
///         // LocalHost offers no capabilities, so this reports an error.
///         assert!(e.gateway().send(e.platform(), e.chat_id(), "hello").is_err());
///         Default::default()
///     });
/// });
/// host.fire("pre_gateway_dispatch", &[field::str("platform", "local"), field::str("chat_id", "c1")]);
/// ```
pub struct Gateway<'a, 'v> {
    view: &'a EventView<'v>,
}

impl<'a, 'v> Gateway<'a, 'v> {
    /// The handle over a `pre_gateway_dispatch` event's view.
    pub(crate) fn new(view: &'a EventView<'v>) -> Self {
        Gateway { view }
    }
}

impl Gateway<'_, '_> {
    /// Sends `text` to chat `chat_id` on `platform`. See [`Gateway`] for an example.
    ///
    /// # Errors
    ///
    /// The host's message when it cannot deliver (unknown platform or chat, or no gateway).
    pub fn send(&self, platform: &str, chat_id: &str, text: &str) -> Result<(), String> {
        let args = serde_json::json!({ "platform": platform, "chat_id": chat_id, "text": text });
        host_call(self.view, "gateway.send", &args).map(drop)
    }
}

/// Appends entries to a session transcript, from a `pre_gateway_dispatch` hook.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
/// let host = LocalHost::register("x", |ctx| {
///     ctx.pre_gateway_dispatch(|e| {
///         let entry = serde_json::json!({"role": "system", "content": "note"});
///         assert!(e.session_store().append(e.session_key(), &entry).is_err());
///         Default::default()
///     });
/// });
/// host.fire("pre_gateway_dispatch", &[field::str("session_key", "local:c1")]);
/// ```
pub struct SessionStore<'a, 'v> {
    view: &'a EventView<'v>,
}

impl<'a, 'v> SessionStore<'a, 'v> {
    /// The handle over a `pre_gateway_dispatch` event's view.
    pub(crate) fn new(view: &'a EventView<'v>) -> Self {
        SessionStore { view }
    }
}

impl SessionStore<'_, '_> {
    /// Appends `entry` (a JSON object) to the transcript of `session_key`. See
    /// [`SessionStore`] for an example.
    ///
    /// # Errors
    ///
    /// The host's message when the session is unknown or the transcript cannot be written.
    pub fn append(&self, session_key: &str, entry: &serde_json::Value) -> Result<(), String> {
        let args = serde_json::json!({ "session_key": session_key, "entry": entry });
        host_call(self.view, "session.append", &args).map(drop)
    }
}

fn host_call(
    view: &EventView<'_>,
    capability: &str,
    args: &serde_json::Value,
) -> Result<String, String> {
    let args = args.to_string();
    view.host
        .call(RStr::from(capability), RStr::from(args.as_str()))
        .map(RString::into_string)
        .map_err(RString::into_string)
        .into_result()
}

/// What a plugin's `register` function may return: `()` or a `Result`.
///
/// ```
/// use hermes_hooks_abi::sdk::RegisterOutcome;
/// assert!(Err::<(), _>("no config").into_register_result().is_err());
/// ```
pub trait RegisterOutcome {
    /// `Err(message)` when registration failed.
    fn into_register_result(self) -> Result<(), String>;
}

impl RegisterOutcome for () {
    fn into_register_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: std::fmt::Display> RegisterOutcome for Result<(), E> {
    fn into_register_result(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

/// Runs a plugin's `register` for the host. Used by [`export_plugin!`](crate::export_plugin).
#[doc(hidden)]
pub fn __run_register<R: RegisterOutcome>(
    registrar: RegistrarMut<'_>,
    register: fn(&mut PluginContext<'_>) -> R,
) -> RResult<(), RString> {
    log::install(registrar.logger(), registrar.plugin_name().into_string());
    let mut ctx = PluginContext::new(registrar);
    match catch_unwind(AssertUnwindSafe(|| {
        register(&mut ctx).into_register_result()
    })) {
        Ok(Ok(())) => RResult::ROk(()),
        Ok(Err(message)) => RResult::RErr(message.into()),
        Err(payload) => RResult::RErr(
            format!("register() panicked: {}", panic_message(payload.as_ref())).into(),
        ),
    }
}

/// Builds the root module. Used by [`export_plugin!`](crate::export_plugin).
#[doc(hidden)]
pub fn __root_module(
    crate_name: &'static str,
    build_profile: &'static str,
    register: extern "C" fn(RegistrarMut<'_>) -> RResult<(), RString>,
) -> crate::core::PluginModRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    crate::core::PluginMod {
        abi_version: RStr::from_str(ABI_VERSION),
        build_profile: RStr::from_str(build_profile),
        crate_name: RStr::from_str(crate_name),
        register,
    }
    .leak_into_prefix()
}

/// `ABI_VERSION` as a C string, for the `hermes_plugin_abi_version` symbol.
#[doc(hidden)]
pub const __ABI_VERSION_CSTR: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(s) => s,
    Err(_) => panic!("the crate version contains a NUL byte"),
};

/// What a hook's callbacks may return, and so how the host combines their answers.
///
/// ```
/// use hermes_hooks_abi::hooks::{spec, OutcomeKind};
/// assert_eq!(spec("pre_llm_call").unwrap().outcome, OutcomeKind::Context);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// Return values are ignored.
    Observer,
    /// `pre_tool_call`: block or modify ([`ToolDecision`]).
    ToolDecision,
    /// `pre_llm_call`: context text, joined with a blank line in registry order.
    Context,
    /// `transform_tool_result`, `transform_terminal_output`: the first text replaces.
    Replace,
    /// `transform_llm_output`: the first non-empty text replaces.
    ReplaceNonEmpty,
    /// `pre_gateway_dispatch`: skip, rewrite or allow ([`DispatchDecision`]).
    Dispatch,
    /// `pre_verify`: the first continue with a message keeps the agent working
    /// ([`VerifyDecision`]; interface 1.3).
    Verify,
}

/// A gateway event, as a native gateway hook receives it.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
/// let host = LocalHost::register("demo", |ctx| {
///     ctx.on_gateway_event("agent:*", |e| {
///         assert_eq!(e.event_type(), "agent:start");
///     });
/// });
/// host.fire("agent:*", &[field::str("event_type", "agent:start"), field::json("context", "{}")]);
/// ```
#[derive(Clone, Copy)]
pub struct GatewayEvent<'a, 'v> {
    view: &'a EventView<'v>,
}

impl<'a, 'v> GatewayEvent<'a, 'v> {
    /// Wraps a raw view. The SDK calls this for you.
    ///
    /// ```
    /// use hermes_hooks_abi::core::{EventView, Field, no_host_calls};
    /// let fields = [Field::str("event_type", "agent:end"), Field::json("context", r#"{"response":"ok"}"#)];
    /// let view = EventView::new("agent:*", &fields, no_host_calls());
    /// let event = hermes_hooks_abi::hooks::GatewayEvent::new(&view);
    /// assert_eq!(event.event_type(), "agent:end");
    /// assert_eq!(event.context().value()["response"], "ok");
    /// ```
    pub fn new(view: &'a EventView<'v>) -> Self {
        GatewayEvent { view }
    }

    /// The event that fired, such as `agent:start` (also when the hook subscribed to
    /// `agent:*`). See [`GatewayEvent::new`] for an example.
    pub fn event_type(&self) -> &'a str {
        self.view.get_str("event_type").unwrap_or("")
    }

    /// The event's context object (see `docs/hooks.md` for the keys of each event). See
    /// [`GatewayEvent::new`] for an example.
    pub fn context(&self) -> Json<'a> {
        Json::new(self.view.get_str("context"))
    }

    /// Calls a capability of the running gateway, with JSON arguments, and returns its
    /// JSON answer. `hermes gateway run` offers:
    ///
    /// | capability | arguments | answer |
    /// |---|---|---|
    /// | `agent.run_once` | `{"prompt", "platform"?, "model"?, "max_iterations"?}` | one agent turn in a fresh session (platform `gateway` by default), with the gateway's model, tools and hooks: `{"final_response", "messages", "api_calls", "completed", "interrupted", "session_id"}` |
    /// | `gateway.model` | `{}` | `{"model"}` |
    /// | `gateway.send` | `{"platform"?, "chat_id", "text"}` | `{"delivered": n}` |
    ///
    /// The call runs on this hook's own delivery thread, so a long one (a whole agent turn)
    /// delays only this hook's later events, never the gateway.
    ///
    /// ```
    /// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
    /// let host = LocalHost::register("x", |ctx| {
    ///     ctx.try_on_gateway_event("gateway:startup", |e| {
    ///         // LocalHost is no gateway, so this reports an error.
    ///         let answer = e.call("agent.run_once", &serde_json::json!({"prompt": "hi"}));
    ///         assert!(answer.is_err());
    ///         Ok(())
    ///     });
    /// });
    /// host.fire("gateway:startup", &[field::str("event_type", "gateway:startup")]);
    /// ```
    ///
    /// # Errors
    ///
    /// The gateway's message (an unknown capability, bad arguments, a failed agent turn),
    /// or that no gateway serves calls (the hook runs under `hermes gateway emit`).
    pub fn call(
        &self,
        capability: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let answer = host_call(self.view, capability, args)?;
        serde_json::from_str(&answer)
            .map_err(|e| format!("{capability}: the host answered something that is not JSON: {e}"))
    }
}
