//! Slash commands plugins add (`ctx.register_command` in Hermes): `/name args` in a user
//! message runs the plugin's handler instead of a model turn, in `hermes run` and behind
//! the gateway alike. A registry by name, whatever kind of plugin answers.

use std::sync::Arc;

/// What a plugin declared about a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// The name, normalised (see [`normalize`]), without the slash.
    pub name: String,
    /// What it does, for `/help`.
    pub description: String,
    /// How its arguments look (`<file>`), for `/help`.
    pub args_hint: String,
    /// The plugin that registered it.
    pub source: String,
}

/// Runs the commands of one plugin.
pub trait CommandHandler: Send + Sync {
    /// Runs command `name` with the text after it; `dispatch` runs the tools the handler
    /// asks for (`ctx.dispatch_tool`). `Ok(None)`: the handler answered nothing.
    ///
    /// # Errors
    ///
    /// The handler failed; the message says how.
    fn run(
        &self,
        name: &str,
        raw_args: &str,
        dispatch: crate::tools::Dispatch<'_>,
    ) -> Result<Option<String>, String>;
}

/// The gateway's own commands, which a plugin's command of the same name would shadow: as
/// in the reference, such a registration is refused with a warning.
pub const BUILT_IN: &[&str] = &["new", "reset", "status", "help"];

/// Every plugin command of one load.
#[derive(Clone, Default)]
pub struct CommandRegistry {
    commands: Vec<(CommandSpec, Arc<dyn CommandHandler>)>,
}

impl std::fmt::Debug for CommandRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.commands.iter().map(|(s, _)| &s.name))
            .finish()
    }
}

/// A command name as the reference keeps it: lower case, no leading `/`, spaces as `-`.
///
/// ```
/// assert_eq!(hermes_host::commands::normalize(" /My Cmd "), "my-cmd");
/// ```
pub fn normalize(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .trim_start_matches('/')
        .replace(' ', "-")
}

/// `Some((name, args))` when `text` is a slash command: `/name`, then whitespace or the
/// end. The name is lower-cased, and a `@botname` suffix is dropped, as chat platforms
/// send it.
///
/// ```
/// use hermes_host::commands::parse;
/// assert_eq!(parse("/Status@my_bot now"), Some(("status".into(), "now".into())));
/// assert_eq!(parse("/ not a command"), None);
/// assert_eq!(parse("a/b"), None);
/// ```
pub fn parse(text: &str) -> Option<(String, String)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (word, args) = rest.split_at(end);
    let name = word.split_once('@').map_or(word, |(name, _bot)| name);
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then(|| (name.to_ascii_lowercase(), args.trim().to_string()))
}

impl CommandRegistry {
    /// Adds a command.
    ///
    /// # Errors
    ///
    /// The name is empty, or another plugin registered it first (the first keeps it).
    pub fn add(
        &mut self,
        spec: CommandSpec,
        handler: Arc<dyn CommandHandler>,
    ) -> Result<(), String> {
        if spec.name.is_empty() {
            return Err(format!(
                "Plugin '{}' tried to register a command with an empty name.",
                spec.source
            ));
        }
        if BUILT_IN.contains(&spec.name.as_str()) {
            return Err(format!(
                "Plugin '{}' tried to register command '/{}' which conflicts with a built-in command. Skipping.",
                spec.source, spec.name
            ));
        }
        if let Some((first, _)) = self.commands.iter().find(|(s, _)| s.name == spec.name) {
            return Err(format!(
                "Plugin '{}' tried to register command '/{}', which plugin '{}' registered first. Skipping.",
                spec.source, spec.name, first.source
            ));
        }
        self.commands.push((spec, handler));
        Ok(())
    }

    /// The command called `name`.
    pub fn spec(&self, name: &str) -> Option<&CommandSpec> {
        self.commands
            .iter()
            .map(|(s, _)| s)
            .find(|s| s.name == name)
    }

    /// Every command, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &CommandSpec> {
        self.commands.iter().map(|(s, _)| s)
    }

    /// Runs command `name`: `None` when no plugin has it. `dispatch` runs the tools its
    /// handler asks for.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::commands::{CommandHandler, CommandRegistry, CommandSpec};
    /// use hermes_host::tools::{Dispatch, no_dispatch};
    /// struct Shout;
    /// impl CommandHandler for Shout {
    ///     fn run(&self, _: &str, args: &str, _: Dispatch<'_>) -> Result<Option<String>, String> {
    ///         Ok(Some(args.to_uppercase()))
    ///     }
    /// }
    /// let mut commands = CommandRegistry::default();
    /// let spec = CommandSpec { name: "shout".into(), description: String::new(), args_hint: String::new(), source: "demo".into() };
    /// commands.add(spec, Arc::new(Shout)).unwrap();
    /// assert_eq!(commands.run("shout", "hi", &no_dispatch), Some(Ok(Some("HI".into()))));
    /// ```
    pub fn run(
        &self,
        name: &str,
        raw_args: &str,
        dispatch: crate::tools::Dispatch<'_>,
    ) -> Option<Result<Option<String>, String>> {
        let (_, handler) = self.commands.iter().find(|(s, _)| s.name == name)?;
        Some(handler.run(name, raw_args, dispatch))
    }
}
