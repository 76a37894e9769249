//! Every plugin hook of this interface version: its name, its fields and its outcome.
//!
//! One macro invocation at the bottom of this file is the single definition of the hooks.
//! It produces the [`HOOKS`] table (which the host uses for validation, the shell-hook
//! payload, documentation and JSON schemas), one typed event view per hook (what a plugin's
//! closure receives) and one typed registration method per hook on
//! [`PluginContext`].

use crate::core::{EventView, Field, FieldValue};
use crate::sdk::{
    DispatchDecision, Gateway, Json, PluginContext, SessionStore, ToolDecision, VerifyDecision,
};
pub use crate::sdk::{GatewayEvent, OutcomeKind};

/// How a field's value crosses the boundary and what its accessor returns.
///
/// ```
/// use hermes_hooks_abi::hooks::{spec, FieldKind};
/// let f = spec("pre_tool_call").unwrap().fields[0];
/// assert_eq!((f.name, f.kind), ("tool_name", FieldKind::Str));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// Text, always sent; the accessor returns `&str` (empty when absent).
    Str,
    /// Text or null; the accessor returns `Option<&str>`.
    OptStr,
    /// A JSON object or list as text; the accessor returns [`Json`].
    Json,
    /// An integer, always sent; the accessor returns `i64` (0 when absent).
    Int,
    /// An integer or null; the accessor returns `Option<i64>`.
    OptInt,
    /// A boolean, always sent; the accessor returns `bool` (false when absent).
    Bool,
    /// A number, always sent (interface 1.3: times in seconds, as the reference passes
    /// them); the accessor returns `f64` (0.0 when absent).
    Float,
}

/// One payload field of a hook.
///
/// ```
/// use hermes_hooks_abi::hooks::spec;
/// let turn_id = spec("pre_tool_call").unwrap().field("turn_id").unwrap();
/// assert_eq!(turn_id.since, "1.1");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FieldSpec {
    /// The reference's keyword-argument name.
    pub name: &'static str,
    /// Its kind.
    pub kind: FieldKind,
    /// The interface version that added it (`"1.0"` or later).
    pub since: &'static str,
    /// One line saying what it holds.
    pub doc: &'static str,
}

/// One plugin hook.
///
/// ```
/// use hermes_hooks_abi::hooks::HOOKS;
/// assert!(HOOKS.iter().any(|h| h.name == "transform_tool_result"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct HookSpec {
    /// The hook name, as in `config.yaml` and `register_hook`.
    pub name: &'static str,
    /// The interface version that added it.
    pub since: &'static str,
    /// What its callbacks may return.
    pub outcome: OutcomeKind,
    /// Its payload fields, in the order the reference passes them.
    pub fields: &'static [FieldSpec],
    /// When it fires and what it is for.
    pub doc: &'static str,
}

impl HookSpec {
    /// The field called `name`.
    ///
    /// ```
    /// let s = hermes_hooks_abi::hooks::spec("post_tool_call").unwrap();
    /// assert!(s.field("duration_ms").is_some());
    /// ```
    pub fn field(&self, name: &str) -> Option<&'static FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// The spec of hook `name`, if this interface version has it.
///
/// ```
/// assert!(hermes_hooks_abi::hooks::spec("on_session_reset").is_some());
/// assert!(hermes_hooks_abi::hooks::spec("pre_tool_use").is_none());
/// ```
pub fn spec(name: &str) -> Option<&'static HookSpec> {
    HOOKS.iter().find(|h| h.name == name)
}

/// Every hook name of this interface version, sorted (the reference's `VALID_HOOKS`).
///
/// ```
/// let names = hermes_hooks_abi::hooks::names_sorted();
/// assert!(names.windows(2).all(|w| w[0] < w[1]));
/// ```
pub fn names_sorted() -> Vec<&'static str> {
    let mut names: Vec<_> = HOOKS.iter().map(|h| h.name).collect();
    names.sort_unstable();
    names
}

macro_rules! field_ret {
    (Str) => { &'a str };
    (OptStr) => { Option<&'a str> };
    (Json) => { Json<'a> };
    (Int) => { i64 };
    (OptInt) => { Option<i64> };
    (Bool) => { bool };
    (Float) => { f64 };
}

macro_rules! field_get {
    (Str, $f:expr) => {
        $f.and_then(FieldValue::as_str).unwrap_or("")
    };
    (OptStr, $f:expr) => {
        $f.and_then(FieldValue::as_str)
    };
    (Json, $f:expr) => {
        Json::new($f.and_then(FieldValue::as_str))
    };
    (Int, $f:expr) => {
        $f.and_then(as_int).unwrap_or(0)
    };
    (OptInt, $f:expr) => {
        $f.and_then(as_int)
    };
    (Bool, $f:expr) => {
        matches!($f, Some(FieldValue::Bool(true)))
    };
    (Float, $f:expr) => {
        $f.and_then(as_float).unwrap_or(0.0)
    };
}

fn as_float(value: &FieldValue<'_>) -> Option<f64> {
    match value {
        FieldValue::Float(f) => Some(*f),
        FieldValue::Int(i) => Some(*i as f64),
        _ => None,
    }
}

fn as_int(value: &FieldValue<'_>) -> Option<i64> {
    match value {
        FieldValue::Int(i) => Some(*i),
        FieldValue::Float(f) => Some(*f as i64),
        FieldValue::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// Finds field `name`, looking first at `hint`, where a host of this interface version puts
/// it; a host of another version may order fields differently, so fall back to a scan.
/// Always inlined: `name` is then a constant, and comparing it compiles to a few loads
/// instead of a call to `memcmp`.
#[inline(always)]
fn find<'a, 'v>(view: &'a EventView<'v>, hint: usize, name: &str) -> Option<&'a FieldValue<'v>> {
    let fields = view.fields.as_slice();
    match fields.get(hint) {
        Some(f) if f.name.as_str() == name => Some(&f.value),
        _ => fields
            .iter()
            .find(|f| f.name.as_str() == name)
            .map(|f| &f.value),
    }
}

/// The position of `name` in `names`, at compile time.
const fn position(names: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < names.len() {
        let (a, b) = (names[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    usize::MAX
}

macro_rules! payload_ty {
    (Str) => { &'a str };
    (OptStr) => { Option<&'a str> };
    (Json) => { &'a str };
    (Int) => { i64 };
    (OptInt) => { Option<i64> };
    (Bool) => { bool };
    (Float) => { f64 };
}

// Here rather than beside the other constructors: `core` stays byte-identical to the frozen
// 1.0 copy (tests/it/compat.rs), and an inherent method may live in any module of the crate.
impl<'a> Field<'a> {
    /// A number field (interface 1.3; [`FieldValue::Float`] itself is as old as 1.0).
    ///
    /// ```
    /// let f = hermes_hooks_abi::core::Field::float("api_duration", 0.25);
    /// assert!(matches!(f.value, hermes_hooks_abi::core::FieldValue::Float(x) if x == 0.25));
    /// ```
    pub const fn float(name: &'a str, value: f64) -> Self {
        Field {
            name: abi_stable::std_types::RStr::from_str(name),
            value: FieldValue::Float(value),
        }
    }
}

macro_rules! payload_field {
    (Str, $n:expr, $v:expr) => {
        Field::str($n, $v)
    };
    (OptStr, $n:expr, $v:expr) => {
        Field::opt_str($n, $v)
    };
    (Json, $n:expr, $v:expr) => {
        Field::json($n, $v)
    };
    (Int, $n:expr, $v:expr) => {
        Field::int($n, $v)
    };
    (OptInt, $n:expr, $v:expr) => {
        match $v {
            Some(i) => Field::int($n, i),
            None => Field::null($n),
        }
    };
    (Bool, $n:expr, $v:expr) => {
        Field::bool($n, $v)
    };
    (Float, $n:expr, $v:expr) => {
        Field::float($n, $v)
    };
}

macro_rules! outcome_ty {
    (Observer) => { () };
    (ToolDecision) => { ToolDecision };
    (Context) => { Option<String> };
    (Replace) => { Option<String> };
    (ReplaceNonEmpty) => { Option<String> };
    (Dispatch) => { DispatchDecision };
    (Verify) => { VerifyDecision };
}

macro_rules! define_hooks {
    ($(
        $(#[doc = $doc:literal])+
        $hook:ident => $Event:ident, $outcome:ident, since $since:literal {
            $( $fname:ident : $fkind:ident $(since $fsince:literal)? = $fdoc:literal ),* $(,)?
        }
    )*) => {
        /// Every hook name, in [`HOOKS`] order.
        const HOOK_NAMES: &[&str] = &[$(stringify!($hook)),*];

        /// Every plugin hook of this interface version, in the reference's order.
        pub const HOOKS: &[HookSpec] = &[$(
            HookSpec {
                name: stringify!($hook),
                since: $since,
                outcome: OutcomeKind::$outcome,
                fields: &[$(FieldSpec {
                    name: stringify!($fname),
                    kind: FieldKind::$fkind,
                    since: define_hooks!(@since $since $($fsince)?),
                    doc: $fdoc,
                }),*],
                doc: concat!($($doc, "\n"),+),
            },
        )*];

        /// Host-side payloads: one struct per hook whose `fields()` is what callbacks see.
        ///
        /// A host fills the struct with borrowed values and passes `fields()` to dispatch, so
        /// the field names and order always match the typed views plugins read.
        pub mod payload {
            define_hooks!(@payloads $(
                $(#[doc = $doc])+
                $hook => $Event, $outcome, since $since {
                    $( $fname : $fkind $(since $fsince)? = $fdoc ),*
                }
            )*);
        }

        $(
            $(#[doc = $doc])+
            ///
            /// This is the typed view a plugin's closure receives; every accessor reads the
            /// borrowed payload in place.
            ///
            /// # Example
            ///
            /// ```
            /// use hermes_hooks_abi::sdk::testing::LocalHost;
            #[doc = concat!("let host = LocalHost::register(\"demo\", |ctx| {\n    ctx.", stringify!($hook), "(|e| {\n        let _ = e.view();\n        Default::default()\n    });\n});")]
            #[doc = concat!("assert_eq!(host.hook_names(), vec![\"", stringify!($hook), "\"]);")]
            /// ```
            #[derive(Clone, Copy)]
            pub struct $Event<'a, 'v> {
                view: &'a EventView<'v>,
            }

            impl<'a, 'v> $Event<'a, 'v> {
                /// The names of this hook's fields, in the order this interface sends them.
                pub const FIELD_NAMES: &'static [&'static str] = &[$(stringify!($fname)),*];

                /// Wraps a raw view. The SDK calls this for you.
                ///
                /// ```
                /// use hermes_hooks_abi::core::{EventView, no_host_calls};
                #[doc = concat!("let view = EventView::new(\"", stringify!($hook), "\", &[], no_host_calls());")]
                #[doc = concat!("let event = hermes_hooks_abi::hooks::", stringify!($Event), "::new(&view);")]
                #[doc = concat!("assert_eq!(event.view().hook.as_str(), \"", stringify!($hook), "\");")]
                /// ```
                pub fn new(view: &'a EventView<'v>) -> Self {
                    $Event { view }
                }

                /// The raw view, for fields this SDK version does not know yet.
                ///
                /// ```
                /// use hermes_hooks_abi::core::{EventView, Field, no_host_calls};
                /// let fields = [Field::str("from_the_future", "x")];
                #[doc = concat!("let view = EventView::new(\"", stringify!($hook), "\", &fields, no_host_calls());")]
                #[doc = concat!("let event = hermes_hooks_abi::hooks::", stringify!($Event), "::new(&view);")]
                /// assert_eq!(event.view().get_str("from_the_future"), Some("x"));
                /// ```
                pub fn view(&self) -> &'a EventView<'v> {
                    self.view
                }

                $(
                    #[doc = $fdoc]
                    ///
                    /// ```
                    /// use hermes_hooks_abi::sdk::testing::LocalHost;
                    #[doc = concat!("let host = LocalHost::register(\"demo\", |ctx| {\n    ctx.", stringify!($hook), "(|e| {\n        println!(\"{:?}\", e.", stringify!($fname), "());\n        Default::default()\n    });\n});")]
                    #[doc = concat!("host.fire(\"", stringify!($hook), "\", &[]);")]
                    /// ```
                    #[inline(always)]
                    pub fn $fname(&self) -> field_ret!($fkind) {
                        const AT: usize = position($Event::<'static, 'static>::FIELD_NAMES, stringify!($fname));
                        field_get!($fkind, find(self.view, AT, stringify!($fname)))
                    }
                )*
            }

            impl<'a> payload::$Event<'a> {
                /// The position of this hook in [`HOOKS`](crate::hooks::HOOKS), for hosts that
                /// keep per-hook tables.
                ///
                /// ```
                #[doc = concat!("let i = hermes_hooks_abi::hooks::payload::", stringify!($Event), "::INDEX;")]
                #[doc = concat!("assert_eq!(hermes_hooks_abi::hooks::HOOKS[i].name, \"", stringify!($hook), "\");")]
                /// ```
                pub const INDEX: usize = position(HOOK_NAMES, stringify!($hook));

                /// The hook this payload is for.
                ///
                /// ```
                #[doc = concat!("assert_eq!(hermes_hooks_abi::hooks::payload::", stringify!($Event), "::HOOK, \"", stringify!($hook), "\");")]
                /// ```
                pub const HOOK: &'static str = stringify!($hook);

                /// The payload as named fields, in the reference's order, borrowed from `self`.
                ///
                /// ```
                #[doc = concat!("let payload = hermes_hooks_abi::hooks::payload::", stringify!($Event), "::default();")]
                #[doc = concat!("let names: Vec<_> = payload.fields().iter().map(|f| f.name.to_string()).collect();")]
                #[doc = concat!("let spec: Vec<_> = hermes_hooks_abi::hooks::spec(\"", stringify!($hook), "\").unwrap().fields.iter().map(|f| f.name.to_string()).collect();")]
                /// assert_eq!(names, spec);
                /// ```
                #[inline]
                pub fn fields(&self) -> [Field<'a>; [$(stringify!($fname)),*].len()] {
                    [$( payload_field!($fkind, stringify!($fname), self.$fname) ),*]
                }
            }

            impl PluginContext<'_> {
                #[doc = concat!("Registers a `", stringify!($hook), "` hook.")]
                ///
                $(#[doc = $doc])+
                ///
                /// The callback's name in logs is the function's path (use a named `fn` for
                /// a readable name). A panic inside it is caught and logged by the host.
                ///
                /// # Example
                ///
                /// ```
                /// use hermes_hooks_abi::sdk::testing::LocalHost;
                #[doc = concat!("let host = LocalHost::register(\"demo\", |ctx| {\n    ctx.", stringify!($hook), "(|_e| Default::default());\n});")]
                #[doc = concat!("assert_eq!(host.hook_names(), vec![\"", stringify!($hook), "\"]);")]
                /// ```
                pub fn $hook<F>(&mut self, callback: F) -> &mut Self
                where
                    F: Fn(&$Event<'_, '_>) -> outcome_ty!($outcome) + Send + Sync + 'static,
                {
                    let name = self.take_name::<F>();
                    self.register_raw(stringify!($hook), &name, move |view| {
                        let out = callback(&$Event::new(view));
                        if crate::sdk::IntoReply::is_no_opinion(&out) {
                            // A no-opinion value owns nothing, and forgetting it spares the
                            // out-of-line drop call the optimiser otherwise keeps on the
                            // most common path.
                            let _ = std::mem::ManuallyDrop::new(out);
                            return Ok(None);
                        }
                        Ok(crate::sdk::IntoReply::into_reply(out, OutcomeKind::$outcome))
                    })
                }
            }
        )*
    };
    (@payloads $(
        $(#[doc = $doc:literal])+
        $hook:ident => $Event:ident, $outcome:ident, since $since:literal {
            $( $fname:ident : $fkind:ident $(since $fsince:literal)? = $fdoc:literal ),* $(,)?
        }
    )*) => {
        $(
            #[doc = concat!("The payload of `", stringify!($hook), "`, as the host builds it.")]
            ///
            /// # Example
            ///
            /// ```
            #[doc = concat!("let payload = hermes_hooks_abi::hooks::payload::", stringify!($Event), "::default();")]
            #[doc = concat!("assert_eq!(payload.fields().len(), hermes_hooks_abi::hooks::spec(\"", stringify!($hook), "\").unwrap().fields.len());")]
            /// ```
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $Event<'a> {
                $(
                    #[doc = $fdoc]
                    pub $fname: payload_ty!($fkind),
                )*
            }
        )*
    };
    (@since $since:literal) => { $since };
    (@since $since:literal $fsince:literal) => { $fsince };
}

define_hooks! {
    /// Fires before every tool call. The first `Block` wins and the tool does not run (its
    /// result becomes `{"error": "<message>"}`); `Modify` rewrites the tool arguments, merged
    /// in registry order.
    pre_tool_call => PreToolCallEvent, ToolDecision, since "1.0" {
        tool_name: Str = "The tool about to run, such as `terminal`.",
        args: Json = "The tool arguments (a JSON object; `{}` when the model sent none).",
        task_id: Str = "The task (agent run) this call belongs to.",
        session_id: Str = "The session id.",
        tool_call_id: Str = "The model's id for this tool call.",
        turn_id: OptStr since "1.1" = "The turn this call belongs to (interface 1.1; `None` from a 1.0 host).",
        api_request_id: OptStr since "1.3" = "The model request that asked for this call (interface 1.3): an opaque id shared with `pre_api_request` / `post_api_request`.",
        middleware_trace: Json since "1.3" = "What `tool_request` middleware did to this call (interface 1.3; a JSON list, `[]` when none ran).",
    }
    /// Fires after a tool ran, with its untransformed result. Observer.
    post_tool_call => PostToolCallEvent, Observer, since "1.0" {
        tool_name: Str = "The tool that ran.",
        args: Json = "The arguments it ran with (after any `modify`).",
        result: Str = "The tool's result text, before `transform_tool_result`.",
        task_id: Str = "The task (agent run) this call belongs to.",
        session_id: Str = "The session id.",
        tool_call_id: Str = "The model's id for this tool call.",
        duration_ms: Int = "How long the tool took, in milliseconds.",
        status: Str = "`ok`, `error` or `blocked`.",
        error_type: OptStr = "The error class when `status` is `error`.",
        error_message: OptStr = "The error text when `status` is `error`.",
        turn_id: OptStr since "1.3" = "The turn this call belongs to (interface 1.3).",
        api_request_id: OptStr since "1.3" = "The model request that asked for this call (interface 1.3).",
        middleware_trace: Json since "1.3" = "What `tool_request` middleware did to this call (interface 1.3; a JSON list).",
    }
    /// Fires once per turn before the tool loop. Every context returned is appended to the
    /// user message sent to the model (joined with a blank line, in registry order), and is
    /// never persisted.
    pre_llm_call => PreLlmCallEvent, Context, since "1.0" {
        session_id: Str = "The session id.",
        user_message: Str = "The user's message for this turn.",
        conversation_history: Json = "The conversation so far (a JSON list of messages, a copy).",
        is_first_turn: Bool = "Whether this is the first turn of the session.",
        model: Str = "The model name.",
        platform: Str = "`cli` or the gateway platform name.",
        sender_id: OptStr = "The sender's user id on the platform, when known.",
        turn_id: OptStr since "1.1" = "The id of this turn (interface 1.1; `None` from a 1.0 host).",
        task_id: Str since "1.3" = "The task (agent run) this turn belongs to (interface 1.3).",
    }
    /// Fires after a turn that produced a final response and was not interrupted. Observer.
    post_llm_call => PostLlmCallEvent, Observer, since "1.0" {
        session_id: Str = "The session id.",
        user_message: Str = "The user's message for this turn.",
        assistant_response: Str = "The model's final response text.",
        conversation_history: Json = "The conversation including this turn (a JSON list).",
        model: Str = "The model name.",
        platform: Str = "`cli` or the gateway platform name.",
        task_id: Str since "1.3" = "The task (agent run) this turn belongs to (interface 1.3).",
        turn_id: OptStr since "1.3" = "The id of this turn (interface 1.3).",
        api_call_count: Int since "1.3" = "How many model requests this turn made (interface 1.3).",
    }
    /// Fires once per turn in which the agent edited files, when it is about to give its
    /// final answer (interface 1.3). The first `Continue` with a message keeps it working:
    /// the message becomes the next user instruction and the loop runs again, at most
    /// `agent.max_verify_nudges` times in a row (3 by default); the held-back answer is not
    /// shown meanwhile.
    pre_verify => PreVerifyEvent, Verify, since "1.3" {
        session_id: Str = "The session id.",
        platform: Str = "`cli` or the gateway platform name.",
        model: Str = "The model name.",
        coding: Bool = "Whether the turn runs in a code workspace (scope a hook on it).",
        attempt: Int = "How many times this turn was already kept working by `pre_verify` (0 the first time).",
        final_response: Str = "The answer the agent is about to give.",
        changed_paths: Json = "The files the agent edited this turn (a sorted JSON list, never empty here).",
        task_id: Str = "The task (agent run) this turn belongs to.",
        turn_id: OptStr = "The turn about to finish.",
    }
    /// Fires when the model starts streaming a response (interface 1.3). Observer, off the
    /// stream: each callback has a bounded queue of its own, and a slow callback loses its
    /// oldest events (counted), never slowing the stream.
    on_stream_start => StreamStartEvent, Observer, since "1.3" {
        session_id: Str = "The session id.",
        turn_id: OptStr = "The turn being streamed, when known (opaque).",
        iteration: Int = "Which model request of the turn's tool loop this is (1 for the first).",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        surface: Str = "`cli` or the gateway platform name.",
    }
    /// Fires for each piece of streamed text (interface 1.3). Observer, off the stream, as
    /// `on_stream_start`.
    on_stream_delta => StreamDeltaEvent, Observer, since "1.3" {
        session_id: Str = "The session id.",
        turn_id: OptStr = "The turn being streamed, when known (opaque).",
        iteration: Int = "Which model request of the turn's tool loop this is (1 for the first).",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        surface: Str = "`cli` or the gateway platform name.",
        delta: Str = "The new text.",
        kind: Str = "`text`, or `reasoning` when `plugins.stream_reasoning_deltas` is on.",
    }
    /// Fires when a streamed response ends, complete or not (interface 1.3). Observer, off
    /// the stream, as `on_stream_start`.
    on_stream_end => StreamEndEvent, Observer, since "1.3" {
        session_id: Str = "The session id.",
        turn_id: OptStr = "The turn being streamed, when known (opaque).",
        iteration: Int = "Which model request of the turn's tool loop this is (1 for the first).",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        surface: Str = "`cli` or the gateway platform name.",
        final_text: Str = "The whole streamed text.",
        finished: Bool = "Whether the stream ran to its end.",
        error: OptStr = "Why it did not, when it did not.",
    }
    /// Fires for the text of an intermediate response, one that asks for tools too
    /// (interface 1.3), streamed or not. Observer, off the stream, as `on_stream_start`.
    on_interim_message => InterimMessageEvent, Observer, since "1.3" {
        session_id: Str = "The session id.",
        turn_id: OptStr = "The turn being streamed, when known (opaque).",
        iteration: Int = "Which model request of the turn's tool loop this is (1 for the first).",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        surface: Str = "`cli` or the gateway platform name.",
        text: Str = "The intermediate text.",
        already_streamed: Bool = "Whether its text already went out as `on_stream_delta`s.",
    }
    /// Fires on the first turn of a new session. Observer.
    on_session_start => SessionStartEvent, Observer, since "1.0" {
        session_id: Str = "The new session's id.",
        model: Str = "The model name.",
        platform: Str = "`cli` or the gateway platform name.",
    }
    /// Fires at the end of every run of the agent loop, also when it was interrupted. Observer.
    on_session_end => SessionEndEvent, Observer, since "1.0" {
        session_id: Str = "The session id.",
        completed: Bool = "Whether the turn completed.",
        interrupted: Bool = "Whether the turn was interrupted (for example by Ctrl-C).",
        model: Str = "The model name.",
        platform: Str = "`cli` or the gateway platform name.",
        task_id: Str since "1.3" = "The task (agent run) that ended (interface 1.3).",
        turn_id: OptStr since "1.3" = "The turn that ended (interface 1.3).",
        api_request_id: OptStr since "1.3" = "The turn's last model request, when it made one (interface 1.3).",
        reason: OptStr since "1.3" = "Why the turn ended early: `interrupted`, `stopped_by_hook` or `model_error`; `None` when it ran to its end (interface 1.3).",
    }
    /// Fires when a session is closed for good: `/new`, exit, gateway reset or expiry. Observer.
    on_session_finalize => SessionFinalizeEvent, Observer, since "1.0" {
        session_id: OptStr = "The session being closed, if one had started.",
        platform: Str = "`cli` or the gateway platform name.",
        reason: Str since "1.3" = "Why: `session_boundary` (the end of a run), `new_session` (`/new`, `/reset`), `session_expired` (idle), `session_evicted` (too many live sessions) or `shutdown` (interface 1.3).",
        old_session_id: OptStr since "1.3" = "On a reset, the session being closed (interface 1.3).",
        new_session_id: OptStr since "1.3" = "On a reset, the session that replaces it (interface 1.3).",
    }
    /// Fires in the gateway after a reset allocated a new session. Observer.
    on_session_reset => SessionResetEvent, Observer, since "1.0" {
        session_id: Str = "The new session's id.",
        platform: Str = "The gateway platform name.",
        reason: Str since "1.3" = "Why: `new_session` (interface 1.3).",
        old_session_id: OptStr since "1.3" = "The session the reset closed (interface 1.3).",
        new_session_id: OptStr since "1.3" = "The new session's id again, under the reference's name (interface 1.3).",
    }
    /// Fires once per delegated child, after it is built and before it runs (interface
    /// 1.3). Observer: to stop a delegation, block the `delegate_task` call in
    /// `pre_tool_call`.
    subagent_start => SubagentStartEvent, Observer, since "1.3" {
        parent_session_id: OptStr = "The delegating session's id.",
        parent_turn_id: Str = "The parent's turn that delegated.",
        parent_subagent_id: OptStr = "The parent's own subagent id when it is a child itself; `None` at the top.",
        child_session_id: OptStr = "The child session's id.",
        child_subagent_id: Str = "The child's subagent id, stable for its whole run.",
        child_role: Str = "The child's role (`leaf` when none was given).",
        child_goal: Str = "What the child was asked to do.",
    }
    /// Fires once per delegated child, on the parent, after all children finished. Observer.
    subagent_stop => SubagentStopEvent, Observer, since "1.0" {
        parent_session_id: Str = "The parent session's id.",
        child_role: OptStr = "The role the child was given, if any.",
        child_summary: Str = "The child's final summary.",
        child_status: Str = "`completed`, `failed` or `interrupted`.",
        duration_ms: Int = "How long the child ran, in milliseconds.",
        parent_turn_id: OptStr since "1.3" = "The parent's turn that delegated (interface 1.3).",
        child_session_id: OptStr since "1.3" = "The child session's id (interface 1.3).",
    }
    /// Fires in the gateway for every non-internal message, before authorisation. The first
    /// skip, rewrite or allow (in registry order) decides. The event offers two capabilities:
    /// [`gateway`](crate::sdk::Gateway) sends a message to a chat and
    /// [`session_store`](crate::sdk::SessionStore) appends to a session transcript.
    pre_gateway_dispatch => GatewayDispatchEvent, Dispatch, since "1.0" {
        platform: Str = "The platform the message came from.",
        chat_id: Str = "The chat it came from.",
        user_id: Str = "The sender's user id.",
        text: Str = "The message text.",
        message_id: OptStr = "The platform's message id, when it has one.",
        session_key: Str = "The session key the message maps to (`<platform>:<chat_id>`).",
        chat_type: Str since "1.2" = "`dm`, `group` or `channel`, as the adapter says (interface 1.2; empty from an older host).",
        user_name: OptStr since "1.2" = "The sender's display name, when the adapter gives one (interface 1.2).",
    }
    /// Fires before the user is asked to approve a dangerous command. Observer (cannot veto).
    pre_approval_request => ApprovalRequestEvent, Observer, since "1.0" {
        command: Str = "The command awaiting approval.",
        description: Str = "Why it is considered dangerous.",
        pattern_key: Str = "The key of the first dangerous pattern it matched.",
        pattern_keys: Json = "The keys of every pattern it matched (a JSON list).",
        session_key: Str = "The session the approval belongs to.",
        surface: Str = "`cli` or `gateway`.",
        turn_id: OptStr since "1.3" = "The turn whose tool call needs approval (interface 1.3).",
        tool_call_id: OptStr since "1.3" = "The tool call that needs approval (interface 1.3).",
    }
    /// Fires after the approval was answered or timed out. Observer.
    post_approval_response => ApprovalResponseEvent, Observer, since "1.0" {
        command: Str = "The command that awaited approval.",
        description: Str = "Why it was considered dangerous.",
        pattern_key: Str = "The key of the first dangerous pattern it matched.",
        pattern_keys: Json = "The keys of every pattern it matched (a JSON list).",
        session_key: Str = "The session the approval belongs to.",
        surface: Str = "`cli` or `gateway`.",
        choice: Str = "`once`, `session`, `always`, `deny` or `timeout`.",
        turn_id: OptStr since "1.3" = "The turn whose tool call needed approval (interface 1.3).",
        tool_call_id: OptStr since "1.3" = "The tool call that needed approval (interface 1.3).",
    }
    /// Fires after `post_tool_call`; the first text returned replaces the tool result the
    /// model sees.
    transform_tool_result => TransformToolResultEvent, Replace, since "1.0" {
        tool_name: Str = "The tool that ran.",
        args: Json = "The arguments it ran with.",
        result: Str = "The tool's result text.",
        task_id: Str = "The task (agent run) this call belongs to.",
        session_id: Str = "The session id.",
        tool_call_id: Str = "The model's id for this tool call.",
        duration_ms: Int = "How long the tool took, in milliseconds.",
        status: Str = "`ok`, `error` or `blocked`.",
        error_type: OptStr = "The error class when `status` is `error`.",
        error_message: OptStr = "The error text when `status` is `error`.",
        turn_id: OptStr since "1.3" = "The turn this call belongs to (interface 1.3).",
        api_request_id: OptStr since "1.3" = "The model request that asked for this call (interface 1.3).",
    }
    /// Fires inside the terminal tool before truncation; the first text returned (even an
    /// empty one) replaces the output.
    transform_terminal_output => TransformTerminalOutputEvent, Replace, since "1.0" {
        command: Str = "The command that ran.",
        output: Str = "Its combined output, before truncation.",
        returncode: Int = "Its exit code.",
        task_id: Str = "The task (agent run) it belongs to.",
        env_type: Str = "Where it ran (`local`).",
    }
    /// Fires before each request to the model's API (interface 1.1). Observer.
    pre_api_request => ApiRequestEvent, Observer, since "1.1" {
        session_id: Str = "The session id.",
        task_id: Str = "The task (agent run) this request belongs to.",
        platform: Str = "`cli` or the gateway platform name.",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        api_call_count: Int = "How many API calls this turn has made, this one included.",
        message_count: Int = "How many messages the request carries.",
        tool_count: Int = "How many tools the request offers.",
        approx_input_tokens: Int = "A rough count of the request's input tokens.",
        turn_id: OptStr since "1.3" = "The turn this request belongs to (interface 1.3).",
        api_request_id: OptStr since "1.3" = "This request's id, shared with its `post_api_request` and the tool calls it asks for (interface 1.3; opaque, do not parse it).",
        user_message: Str since "1.3" = "The user's message for this turn (interface 1.3).",
        conversation_history: Json since "1.3" = "The conversation so far (interface 1.3; a JSON list).",
        base_url: Str since "1.3" = "The model endpoint's base URL (interface 1.3; empty for the scripted model).",
        api_mode: Str since "1.3" = "The API dialect, such as `chat_completions` (interface 1.3).",
        request_messages: Json since "1.3" = "The messages this request sends, after middleware (interface 1.3; a JSON list).",
        request_char_count: Int since "1.3" = "The request's size in characters (interface 1.3).",
        max_tokens: OptInt since "1.3" = "The output token limit, when one is set (interface 1.3).",
        started_at: Float since "1.3" = "When the request started, in seconds since the Unix epoch (interface 1.3).",
        middleware_trace: Json since "1.3" = "What `llm_request` middleware did to this request (interface 1.3; a JSON list).",
        request: Json since "1.3" = "The request as sent: `{\"method\", \"body\"}` (interface 1.3).",
    }
    /// Fires after each response from the model's API (interface 1.1). Observer.
    post_api_request => ApiResponseEvent, Observer, since "1.1" {
        session_id: Str = "The session id.",
        task_id: Str = "The task (agent run) this request belongs to.",
        platform: Str = "`cli` or the gateway platform name.",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        api_call_count: Int = "How many API calls this turn has made, this one included.",
        api_duration_ms: Int = "How long the request took, in milliseconds.",
        finish_reason: Str = "Why the model stopped: `stop` or `tool_calls`.",
        usage: Json = "Token usage as the provider reported it (a JSON object).",
        turn_id: OptStr since "1.3" = "The turn this request belongs to (interface 1.3).",
        api_request_id: OptStr since "1.3" = "The id its `pre_api_request` had (interface 1.3).",
        base_url: Str since "1.3" = "The model endpoint's base URL (interface 1.3).",
        api_mode: Str since "1.3" = "The API dialect, such as `chat_completions` (interface 1.3).",
        api_duration: Float since "1.3" = "How long the request took, in seconds (interface 1.3; the reference's name).",
        started_at: Float since "1.3" = "When the request started, in seconds since the Unix epoch (interface 1.3).",
        ended_at: Float since "1.3" = "When the response was complete, in seconds since the Unix epoch (interface 1.3).",
        message_count: Int since "1.3" = "How many messages the request carried (interface 1.3).",
        response_model: OptStr since "1.3" = "The model the response says answered (interface 1.3).",
        response: Json since "1.3" = "The response: `{\"model\", \"finish_reason\", \"assistant_message\", \"usage\"}` (interface 1.3).",
        assistant_message: Json since "1.3" = "The assistant message: `{\"role\", \"content\", \"tool_calls\"}` (interface 1.3).",
        assistant_content_chars: Int since "1.3" = "The length of the assistant's text, in characters (interface 1.3).",
        assistant_tool_call_count: Int since "1.3" = "How many tool calls the response asks for (interface 1.3).",
    }
    /// Fires when a request to the model's API failed (interface 1.3). Observer.
    api_request_error => ApiRequestErrorEvent, Observer, since "1.3" {
        task_id: Str = "The task (agent run) this request belongs to.",
        turn_id: OptStr = "The turn this request belongs to.",
        api_request_id: OptStr = "The id its `pre_api_request` had.",
        session_id: Str = "The session id.",
        platform: Str = "`cli` or the gateway platform name.",
        model: Str = "The model name.",
        provider: Str = "The model provider.",
        base_url: Str = "The model endpoint's base URL.",
        api_mode: Str = "The API dialect, such as `chat_completions`.",
        api_call_count: Int = "How many API calls this turn has made, this one included.",
        api_duration: Float = "How long the request took before it failed, in seconds.",
        started_at: Float = "When the request started, in seconds since the Unix epoch.",
        ended_at: Float = "When it failed, in seconds since the Unix epoch.",
        status_code: OptInt = "The HTTP status, when the provider answered one.",
        retry_count: Int = "How many times this request was already retried.",
        max_retries: Int = "How many retries are allowed.",
        retryable: Bool = "Whether it will be retried.",
        reason: Str = "The error's class: `rate_limit`, `timeout`, `auth`, `server_error`, `bad_request` or `unknown`.",
        error: Str = "The error text.",
        request: Json = "The request as sent: `{\"method\", \"body\"}`.",
    }
    /// Fires after a final, non-empty, non-interrupted response; the first non-empty text
    /// returned replaces it.
    transform_llm_output => TransformLlmOutputEvent, ReplaceNonEmpty, since "1.0" {
        response_text: Str = "The model's final response.",
        session_id: Str = "The session id.",
        model: Str = "The model name.",
        platform: Str = "`cli` or the gateway platform name.",
    }
    /// Fires when a task of a task board is claimed, before its worker starts (interface
    /// 1.3; fired by hosts that have a board, and by `hermes plugins fire`). Observer.
    kanban_task_claimed => KanbanTaskClaimedEvent, Observer, since "1.3" {
        task_id: Str = "The board task's id.",
        board: OptStr = "The board, when there are several.",
        assignee: OptStr = "Who the task is assigned to.",
        run_id: OptInt = "The task's run, when it has one.",
        profile_name: Str = "The profile the worker runs as.",
    }
    /// Fires when a task of a task board is completed (interface 1.3). Observer.
    kanban_task_completed => KanbanTaskCompletedEvent, Observer, since "1.3" {
        task_id: Str = "The board task's id.",
        board: OptStr = "The board, when there are several.",
        assignee: OptStr = "Who the task is assigned to.",
        run_id: OptInt = "The task's run, when it has one.",
        profile_name: Str = "The profile the worker runs as.",
        summary: OptStr = "The worker's summary, when it gave one.",
    }
    /// Fires when a task of a task board is blocked (interface 1.3). Observer.
    kanban_task_blocked => KanbanTaskBlockedEvent, Observer, since "1.3" {
        task_id: Str = "The board task's id.",
        board: OptStr = "The board, when there are several.",
        assignee: OptStr = "Who the task is assigned to.",
        run_id: OptInt = "The task's run, when it has one.",
        profile_name: Str = "The profile the worker runs as.",
        reason: OptStr = "Why it is blocked, when known.",
    }
}

impl<'a, 'v> GatewayDispatchEvent<'a, 'v> {
    /// The capability to send a message back to a chat. See [`Gateway`] for an example.
    pub fn gateway(&self) -> Gateway<'a, 'v> {
        Gateway::new(self.view())
    }

    /// The capability to append to a session transcript. See
    /// [`SessionStore`] for an example.
    pub fn session_store(&self) -> SessionStore<'a, 'v> {
        SessionStore::new(self.view())
    }
}
