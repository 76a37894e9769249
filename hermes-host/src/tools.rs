//! Tools plugins offer the model (`ctx.register_tool` in Hermes): a registry by name,
//! whatever kind of plugin answers for the tool.
//!
//! A tool is its [`ToolSpec`] (name, toolset, JSON schema, description) and a
//! [`ToolHandler`] that runs it. The host calls a plugin tool as it calls its own: through
//! `tool_request` middleware, `pre_tool_call`, approvals, `tool_execution` middleware,
//! `post_tool_call` and `transform_tool_result`; this registry is only the last step, the
//! run. As in the reference's `registry.dispatch`, a result is text, and every failure is a
//! result too (`{"error": "..."}`), never a panic or an error out of the agent loop.

use std::sync::Arc;

use serde_json::{Map, Value, json};

/// What a plugin declared about a tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// The toolset it belongs to.
    pub toolset: String,
    /// Its JSON schema, as registered (`{"name", "description", "parameters"}`).
    pub schema: Value,
    /// What it does, for listings.
    pub description: String,
    /// The plugin that registered it.
    pub source: String,
}

/// How a plugin's command or tool runs another tool (`ctx.dispatch_tool` in Hermes): the
/// host runs it as it runs the model's calls, its guards and approvals included (so a
/// plugin cannot reach a tool the user's hooks would stop), and answers the result text.
pub type Dispatch<'a> = &'a dyn Fn(&str, &Value) -> String;

/// The [`Dispatch`] of a host that lets plugins run no tools: every call answers an error
/// result that says so.
///
/// ```
/// let result = hermes_host::tools::no_dispatch("terminal", &serde_json::json!({}));
/// assert!(result.contains("error"));
/// ```
pub fn no_dispatch(name: &str, _: &Value) -> String {
    json!({ "error": format!("tool '{name}' cannot be dispatched by plugins in this host") })
        .to_string()
}

/// Runs the tools of one plugin.
pub trait ToolHandler: Send + Sync {
    /// Runs tool `name` with `args` (a JSON object); `context` holds the call's ids
    /// (`task_id`, `session_id`, `tool_call_id`, ...), and `dispatch` runs other tools the
    /// handler asks for. Returns the result text: on failure, a JSON `{"error": "..."}`
    /// saying what went wrong.
    fn call(
        &self,
        name: &str,
        args: &Value,
        context: &Map<String, Value>,
        dispatch: Dispatch<'_>,
    ) -> String;
}

/// Every plugin tool of one load, in registration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<(ToolSpec, Arc<dyn ToolHandler>)>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|(s, _)| &s.name))
            .finish()
    }
}

impl ToolRegistry {
    /// Adds a tool.
    ///
    /// # Errors
    ///
    /// Another plugin registered the name first: the message names both (the first one
    /// keeps it).
    pub fn add(&mut self, spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Result<(), String> {
        if let Some((first, _)) = self.tools.iter().find(|(s, _)| s.name == spec.name) {
            return Err(format!(
                "Plugin '{}' tried to register tool '{}', which plugin '{}' registered first; ignoring it",
                spec.source, spec.name, first.source
            ));
        }
        self.tools.push((spec, handler));
        Ok(())
    }

    /// The tool called `name`.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().map(|(s, _)| s).find(|s| s.name == name)
    }

    /// Every tool, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().map(|(s, _)| s)
    }

    /// Whether no plugin registered a tool.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Runs tool `name`: `None` when no plugin has it. `dispatch` runs the tools its
    /// handler asks for in turn.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::tools::{Dispatch, ToolHandler, ToolRegistry, ToolSpec, no_dispatch};
    /// struct Echo;
    /// impl ToolHandler for Echo {
    ///     fn call(&self, _: &str, args: &serde_json::Value, _: &serde_json::Map<String, serde_json::Value>, _: Dispatch<'_>) -> String {
    ///         args.to_string()
    ///     }
    /// }
    /// let mut tools = ToolRegistry::default();
    /// let spec = ToolSpec { name: "echo".into(), toolset: "demo".into(), schema: serde_json::json!({}), description: String::new(), source: "demo".into() };
    /// tools.add(spec, Arc::new(Echo)).unwrap();
    /// let args = serde_json::json!({"a": 1});
    /// assert_eq!(tools.dispatch("echo", &args, &Default::default(), &no_dispatch).as_deref(), Some(r#"{"a":1}"#));
    /// assert!(tools.dispatch("other", &args, &Default::default(), &no_dispatch).is_none());
    /// ```
    pub fn dispatch(
        &self,
        name: &str,
        args: &Value,
        context: &Map<String, Value>,
        dispatch: Dispatch<'_>,
    ) -> Option<String> {
        let (_, handler) = self.tools.iter().find(|(s, _)| s.name == name)?;
        let args = if args.is_object() {
            args.clone()
        } else {
            json!({})
        };
        Some(handler.call(name, &args, context, dispatch))
    }
}
