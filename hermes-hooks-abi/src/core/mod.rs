#![allow(non_local_definitions)] // abi_stable 0.11's #[sabi_trait] expands to impls inside a const.

//! The frozen core: every type reachable from the root module.
//!
//! abi_stable checks the layout of these types when a plugin is loaded, and a plugin built
//! against an older interface is refused as soon as any of them changed. So nothing in this
//! module may ever change shape within ABI major version 1. Everything that can grow (new
//! hooks, new payload fields, new reply actions, new host capabilities) is named by a string
//! and crosses as data: hooks by name in [`Registrar::register_hook`], payload fields by name
//! in [`EventView::fields`], replies by action name in [`Reply::action`], and host
//! capabilities by name in [`HostCalls::call`].
//!
//! Plugin authors never touch these types directly: the [`sdk`](crate::sdk) builds typed hook
//! closures on top of them.

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::{RMut, RRef, VersionStrings},
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString},
};

/// The root module every plugin library exports.
///
/// FROZEN since ABI 1.0.
///
/// A plugin never builds this by hand: [`export_plugin!`](crate::export_plugin) does it.
/// The host reads it with `lib_header_from_path(path)?.init_root_module::<PluginModRef>()`.
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::core::PluginModRef;
/// use hermes_hooks_abi::abi_stable::library::RootModule;
///
/// // The module name the host asks abi_stable for.
/// assert_eq!(PluginModRef::NAME, "hermes_plugin");
/// ```
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    /// The interface version the plugin was compiled against, such as `"1.1.0"`.
    pub abi_version: RStr<'static>,
    /// `"debug"` or `"release"`: how the plugin crate itself was compiled.
    pub build_profile: RStr<'static>,
    /// The crate name of the plugin, used in messages when no manifest name is known.
    pub crate_name: RStr<'static>,
    /// Registers the plugin's hooks with the host. Called once per process.
    ///
    /// An `RErr` carries a message the host logs as
    /// `Failed to load plugin '<name>': <message>`; hooks registered before the error stay
    /// registered, as in the reference.
    ///
    /// New fields go below this one, and the `last_prefix_field` marker then stays here:
    /// a host reading a plugin built before the field existed sees `None` for it.
    #[sabi(last_prefix_field)]
    pub register: extern "C" fn(registrar: RegistrarMut<'_>) -> RResult<(), RString>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "hermes_plugin";
    const NAME: &'static str = "hermes_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// The host side of registration, handed to a plugin's `register`.
///
/// FROZEN since ABI 1.0.
///
/// Implemented by the host. Hook names are plain strings, so a plugin can register hooks
/// this host does not know (they are kept and reported, never fatal), and a host can offer
/// hooks an older plugin never asks for.
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::sdk::testing::LocalHost;
///
/// // LocalHost is an in-process Registrar, for tests and examples.
/// let host = LocalHost::register("demo", |ctx| {
///     ctx.on_session_start(|e| println!("session {} started", e.session_id()));
/// });
/// assert_eq!(host.hook_names(), vec!["on_session_start"]);
/// ```
#[sabi_trait]
pub trait Registrar {
    /// Registers `callback` for hook `hook` under the display name `callback_name`.
    ///
    /// `hook` is a plugin hook name (`pre_tool_call`, ...) or a gateway event name
    /// (`agent:start`, `command:*`): gateway events always contain a colon.
    fn register_hook(&mut self, hook: RStr<'_>, callback_name: RStr<'_>, callback: HookCallbackBox);

    /// The interface version of the host, such as `"1.1.0"`.
    fn host_abi_version(&self) -> RString;

    /// The name the host knows this plugin by (its manifest name).
    fn plugin_name(&self) -> RString;

    /// Invokes a registration-time host capability by name, with JSON arguments.
    ///
    /// Offered by every 1.x host: `plugin.dir` (the plugin's directory, as a JSON string)
    /// and `plugin.config` (the `config` mapping of its `plugin.yaml`, as a JSON object).
    /// Unknown capabilities answer `RErr`, so later hosts can add more without a layout
    /// change.
    fn host_call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString>;

    /// A logger that stays valid for the rest of the process.
    ///
    /// New methods go below this one, and the `last_prefix_field` marker then stays here.
    #[sabi(last_prefix_field)]
    fn logger(&self) -> HostLoggerBox;
}

/// A `Registrar` borrowed for the duration of `register`.
pub type RegistrarMut<'a> = Registrar_TO<'a, RMut<'a, ()>>;

/// A hook callback, implemented by the plugin and called by the host.
///
/// FROZEN since ABI 1.0.
///
/// A callback must not unwind: [`export_plugin!`](crate::export_plugin) and the SDK wrap
/// every closure in `catch_unwind` and turn a panic into `RErr(message)`.
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
///
/// let host = LocalHost::register("demo", |ctx| {
///     ctx.transform_llm_output(|e| Some(e.response_text().to_uppercase()));
/// });
/// let reply = host.fire("transform_llm_output", &[field::str("response_text", "hi")]);
/// assert_eq!(reply[0].as_ref().unwrap().as_ref().unwrap().text.as_str(), "HI");
/// ```
#[sabi_trait]
pub trait HookCallback: Send + Sync + 'static {
    /// Runs the hook. `RNone` means "no opinion"; `RErr` carries a failure message.
    ///
    /// New methods go below this one, and the `last_prefix_field` marker then stays here.
    #[sabi(last_prefix_field)]
    fn call(&self, event: &EventView<'_>) -> RResult<ROption<Reply>, RString>;
}

/// An owned, type-erased [`HookCallback`].
pub type HookCallbackBox = HookCallback_TO<RBox<()>>;

/// The host's log sink, so `tracing` records inside a plugin reach the host's log.
///
/// FROZEN since ABI 1.0.
///
/// Levels are numbers: 1 error, 2 warn, 3 info, 4 debug, 5 trace; 0 means off.
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::core::level;
/// assert!(level::INFO < level::DEBUG);
/// ```
#[sabi_trait]
pub trait HostLogger: Send + Sync + 'static {
    /// The most verbose level the host will print; records above it are dropped before
    /// they are formatted.
    fn max_level(&self) -> u8;

    /// Writes one record. `target` is the module path inside the plugin.
    ///
    /// New methods go below this one, and the `last_prefix_field` marker then stays here.
    #[sabi(last_prefix_field)]
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>);
}

/// An owned, type-erased [`HostLogger`].
pub type HostLoggerBox = HostLogger_TO<RBox<()>>;

/// Log levels as they cross the boundary.
pub mod level {
    /// Nothing is logged.
    pub const OFF: u8 = 0;
    /// `tracing::Level::ERROR`.
    pub const ERROR: u8 = 1;
    /// `tracing::Level::WARN`.
    pub const WARN: u8 = 2;
    /// `tracing::Level::INFO`.
    pub const INFO: u8 = 3;
    /// `tracing::Level::DEBUG`.
    pub const DEBUG: u8 = 4;
    /// `tracing::Level::TRACE`.
    pub const TRACE: u8 = 5;
}

/// Capabilities the host offers to a callback while it runs, named by string.
///
/// FROZEN since ABI 1.0.
///
/// `capability` names what to do (`"gateway.send"`, `"session.append"`) and `args_json`
/// carries its arguments as a JSON object. A host that does not offer a capability answers
/// `RErr("unknown capability ...")`. The SDK wraps these in typed handles such as
/// [`Gateway`](crate::sdk::Gateway).
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::core::no_host_calls;
/// use hermes_hooks_abi::abi_stable::std_types::RStr;
///
/// let answer = no_host_calls().call(RStr::from("gateway.send"), RStr::from("{}"));
/// assert!(answer.is_err());
/// ```
#[sabi_trait]
pub trait HostCalls: Sync {
    /// Invokes a host capability. Returns the capability's JSON answer.
    ///
    /// New methods go below this one, and the `last_prefix_field` marker then stays here.
    #[sabi(last_prefix_field)]
    fn call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString>;
}

/// A borrowed, type-erased [`HostCalls`].
pub type HostCallsRef<'a> = HostCalls_TO<'a, RRef<'a, ()>>;

/// A `HostCalls` that offers nothing, for events without capabilities.
pub struct NoHostCalls;

impl HostCalls for NoHostCalls {
    fn call(&self, capability: RStr<'_>, _args_json: RStr<'_>) -> RResult<RString, RString> {
        RResult::RErr(RString::from(format!(
            "unknown capability '{capability}': this hook offers no host capabilities"
        )))
    }
}

/// A [`HostCallsRef`] that offers nothing, for any lifetime.
///
/// ```
/// use hermes_hooks_abi::core::{no_host_calls, EventView};
/// let view = EventView::new("on_session_start", &[], no_host_calls());
/// assert!(view.get("session_id").is_none());
/// ```
pub fn no_host_calls<'a>() -> HostCallsRef<'a> {
    HostCalls_TO::from_const(&NoHostCalls, abi_stable::sabi_trait::TD_Opaque)
}

/// What a hook callback sees: the hook's name, its payload fields, and host capabilities.
///
/// FROZEN since ABI 1.0.
///
/// Everything is borrowed from the host for the duration of one call: the host builds the
/// field list once per dispatch and every callback reads the same one, so a dispatch to ten
/// callbacks costs no allocation at all. Fields are looked up by name; a field this host does
/// not send reads as absent, which is how a newer plugin runs in an older host.
///
/// # Example
///
/// ```
/// use hermes_hooks_abi::core::{EventView, no_host_calls};
/// use hermes_hooks_abi::sdk::testing::field;
///
/// let fields = [field::str("tool_name", "terminal"), field::int("duration_ms", 12)];
/// let view = EventView::new("post_tool_call", &fields, no_host_calls());
/// assert_eq!(view.get_str("tool_name"), Some("terminal"));
/// assert_eq!(view.get_int("duration_ms"), Some(12));
/// assert_eq!(view.get_str("turn_id"), None);
/// ```
#[repr(C)]
#[derive(StableAbi)]
pub struct EventView<'a> {
    /// The hook or gateway event being fired, such as `pre_tool_call` or `agent:start`.
    pub hook: RStr<'a>,
    /// The payload, in the order the reference passes its keyword arguments.
    pub fields: RSlice<'a, Field<'a>>,
    /// Capabilities the host offers during this call.
    pub host: HostCallsRef<'a>,
}

impl<'a> EventView<'a> {
    /// Builds a view over borrowed fields.
    ///
    /// ```
    /// use hermes_hooks_abi::core::{EventView, no_host_calls};
    /// let view = EventView::new("on_session_start", &[], no_host_calls());
    /// assert_eq!(view.hook.as_str(), "on_session_start");
    /// ```
    pub fn new(hook: &'a str, fields: &'a [Field<'a>], host: HostCallsRef<'a>) -> Self {
        EventView {
            hook: RStr::from(hook),
            fields: RSlice::from_slice(fields),
            host,
        }
    }

    /// The value of field `name`, if the host sent it.
    ///
    /// ```
    /// use hermes_hooks_abi::core::{EventView, FieldValue, no_host_calls};
    /// use hermes_hooks_abi::sdk::testing::field;
    /// let fields = [field::bool("completed", true)];
    /// let view = EventView::new("on_session_end", &fields, no_host_calls());
    /// assert!(matches!(view.get("completed"), Some(FieldValue::Bool(true))));
    /// ```
    pub fn get(&self, name: &str) -> Option<&FieldValue<'a>> {
        self.fields
            .iter()
            .find(|f| f.name.as_str() == name)
            .map(|f| &f.value)
    }

    /// Field `name` as text: a `Str` or `Json` field's text; `None` otherwise.
    ///
    /// ```
    /// use hermes_hooks_abi::core::{EventView, no_host_calls};
    /// use hermes_hooks_abi::sdk::testing::field;
    /// let fields = [field::json("args", r#"{"command":"ls"}"#)];
    /// let view = EventView::new("pre_tool_call", &fields, no_host_calls());
    /// assert_eq!(view.get_str("args"), Some(r#"{"command":"ls"}"#));
    /// ```
    pub fn get_str(&self, name: &str) -> Option<&'a str> {
        match self.get(name)? {
            FieldValue::Str(s) | FieldValue::Json(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// Field `name` as an integer (a `Float` is truncated, as Python's `int()` would).
    ///
    /// ```
    /// use hermes_hooks_abi::core::{EventView, no_host_calls};
    /// use hermes_hooks_abi::sdk::testing::field;
    /// let fields = [field::int("returncode", 2)];
    /// let view = EventView::new("transform_terminal_output", &fields, no_host_calls());
    /// assert_eq!(view.get_int("returncode"), Some(2));
    /// ```
    pub fn get_int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            FieldValue::Int(i) => Some(*i),
            FieldValue::Float(f) => Some(*f as i64),
            FieldValue::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    /// Field `name` as a boolean.
    ///
    /// ```
    /// use hermes_hooks_abi::core::{EventView, no_host_calls};
    /// use hermes_hooks_abi::sdk::testing::field;
    /// let fields = [field::bool("is_first_turn", false)];
    /// let view = EventView::new("pre_llm_call", &fields, no_host_calls());
    /// assert_eq!(view.get_bool("is_first_turn"), Some(false));
    /// ```
    pub fn get_bool(&self, name: &str) -> Option<bool> {
        match self.get(name)? {
            FieldValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

/// One named payload field.
///
/// FROZEN since ABI 1.0.
///
/// ```
/// use hermes_hooks_abi::core::Field;
/// let f = Field::str("session_id", "s-1");
/// assert_eq!(f.name.as_str(), "session_id");
/// ```
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct Field<'a> {
    /// The reference's keyword-argument name.
    pub name: RStr<'a>,
    /// The value.
    pub value: FieldValue<'a>,
}

impl<'a> Field<'a> {
    /// A text field.
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::str("model", "gpt-4");
    /// assert_eq!(f.value.as_str(), Some("gpt-4"));
    /// ```
    pub const fn str(name: &'a str, value: &'a str) -> Self {
        Field {
            name: RStr::from_str(name),
            value: FieldValue::Str(RStr::from_str(value)),
        }
    }

    /// A JSON field (an object or list, as JSON text).
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::json("args", "{}");
    /// assert_eq!(f.value.as_str(), Some("{}"));
    /// ```
    pub const fn json(name: &'a str, value: &'a str) -> Self {
        Field {
            name: RStr::from_str(name),
            value: FieldValue::Json(RStr::from_str(value)),
        }
    }

    /// An integer field.
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::int("duration_ms", 5);
    /// assert!(matches!(f.value, hermes_hooks_abi::core::FieldValue::Int(5)));
    /// ```
    pub const fn int(name: &'a str, value: i64) -> Self {
        Field {
            name: RStr::from_str(name),
            value: FieldValue::Int(value),
        }
    }

    /// A boolean field.
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::bool("completed", true);
    /// assert!(matches!(f.value, hermes_hooks_abi::core::FieldValue::Bool(true)));
    /// ```
    pub const fn bool(name: &'a str, value: bool) -> Self {
        Field {
            name: RStr::from_str(name),
            value: FieldValue::Bool(value),
        }
    }

    /// A null field (the reference's `None`).
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::null("child_role");
    /// assert!(matches!(f.value, hermes_hooks_abi::core::FieldValue::Null));
    /// ```
    pub const fn null(name: &'a str) -> Self {
        Field {
            name: RStr::from_str(name),
            value: FieldValue::Null,
        }
    }

    /// A text field that is null when `value` is `None`.
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::opt_str("session_id", None);
    /// assert!(matches!(f.value, hermes_hooks_abi::core::FieldValue::Null));
    /// ```
    pub const fn opt_str(name: &'a str, value: Option<&'a str>) -> Self {
        match value {
            Some(v) => Field::str(name, v),
            None => Field::null(name),
        }
    }
}

/// A payload value. Dicts and lists cross as JSON text, which the SDK parses lazily.
///
/// FROZEN since ABI 1.0: no variant may be added. These six cover every JSON value.
///
/// ```
/// use hermes_hooks_abi::core::FieldValue;
/// use hermes_hooks_abi::abi_stable::std_types::RStr;
/// assert_eq!(FieldValue::Str(RStr::from("x")).as_str(), Some("x"));
/// assert_eq!(FieldValue::Int(3).as_str(), None);
/// ```
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub enum FieldValue<'a> {
    /// No value.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// Text.
    Str(RStr<'a>),
    /// A JSON object or list, as text.
    Json(RStr<'a>),
}

impl<'a> FieldValue<'a> {
    /// The text of a `Str` or `Json` value.
    ///
    /// ```
    /// use hermes_hooks_abi::core::FieldValue;
    /// use hermes_hooks_abi::abi_stable::std_types::RStr;
    /// assert_eq!(FieldValue::Json(RStr::from("[]")).as_str(), Some("[]"));
    /// ```
    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            FieldValue::Str(s) | FieldValue::Json(s) => Some(s.as_str()),
            _ => None,
        }
    }
}

/// What a callback decided, when it decided anything.
///
/// FROZEN since ABI 1.0.
///
/// `action` is one of the names in [`action`]; the host ignores (and warns about) an action
/// that does not fit the hook, so new actions can be added without a layout change.
///
/// ```
/// use hermes_hooks_abi::core::{Reply, action};
/// let r = Reply::new(action::BLOCK, "no rm -rf");
/// assert_eq!(r.action.as_str(), "block");
/// ```
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq)]
pub struct Reply {
    /// What to do: see [`action`].
    pub action: RString,
    /// The block message, context text, replacement text, skip reason or rewritten text.
    pub text: RString,
    /// JSON data, such as the new tool arguments of a `modify`.
    pub json: RString,
}

impl Reply {
    /// A reply with an action and text and no JSON data.
    ///
    /// ```
    /// let r = hermes_hooks_abi::core::Reply::new("context", "remember: tabs");
    /// assert_eq!(r.text.as_str(), "remember: tabs");
    /// ```
    pub fn new(action: &str, text: impl Into<String>) -> Self {
        Reply {
            action: RString::from(action),
            text: RString::from(text.into()),
            json: RString::new(),
        }
    }
}

/// The reply actions the host understands.
pub mod action {
    /// `pre_tool_call`: do not run the tool; `text` is the message.
    pub const BLOCK: &str = "block";
    /// `pre_tool_call`: rewrite the tool arguments; `json` is an object merged over them.
    pub const MODIFY: &str = "modify";
    /// `pre_llm_call`: `text` is context appended to the user message.
    pub const CONTEXT: &str = "context";
    /// `transform_*`: `text` replaces the output.
    pub const REPLACE: &str = "replace";
    /// `pre_gateway_dispatch`: drop the message; `text` is the reason.
    pub const SKIP: &str = "skip";
    /// `pre_gateway_dispatch`: replace the message text with `text`.
    pub const REWRITE: &str = "rewrite";
    /// `pre_gateway_dispatch`: dispatch the message as is and stop asking later hooks.
    pub const ALLOW: &str = "allow";
}
