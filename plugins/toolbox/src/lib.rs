//! Shows what a native plugin offers beside hooks (interface 1.3): a tool the model can
//! call, a slash command, and an `llm_request` middleware that routes and answers requests.
//!
//! - Tool `text_stats {path}` or `{text}`: lines, words and bytes of a file or a text. It
//!   reads a file through the host's own `read_file` (`call.dispatch`), so the user's
//!   guards and approvals apply to what a plugin tool reads exactly as they do to the
//!   model's calls.
//! - Command `/toolbox`: what the plugin did in this process (calls, routed and answered
//!   requests).
//! - `llm_request` middleware: a request whose last user message is short goes to
//!   `small_model` (the rewrite is in the hooks' `middleware_trace`), and the
//!   `canned_question` is answered with `canned_answer` without calling the model at all.
//! - `pre_verify`: with `verify_reminder` set, a turn that wrote files is kept working once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hermes_hooks_abi::prelude::*;
use hermes_hooks_abi::sdk::offer::ToolCall;
use serde_json::{Value, json};

/// The plugin's settings, from the `config:` of `plugin.yaml` (and `plugins.settings`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// Last user messages of at most this many characters are routed (0: never).
    pub short_message_chars: usize,
    /// Where short requests go; empty: no routing.
    pub small_model: String,
    /// The message answered without the model.
    pub canned_question: String,
    /// Its answer.
    pub canned_answer: String,
    /// The instruction `pre_verify` keeps a turn that wrote files working with, once.
    pub verify_reminder: String,
}

impl Settings {
    /// Reads the settings from the plugin's config, with the defaults of `plugin.yaml`.
    pub fn from_config(config: &Value) -> Settings {
        let text =
            |key: &str, default: &str| config[key].as_str().unwrap_or(default).trim().to_string();
        Settings {
            short_message_chars: config["short_message_chars"]
                .as_u64()
                .map_or(40, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            small_model: text("small_model", ""),
            canned_question: text("canned_question", "ping"),
            canned_answer: text("canned_answer", "pong"),
            verify_reminder: text("verify_reminder", ""),
        }
    }
}

/// What the plugin did in this process, for `/toolbox`.
#[derive(Default)]
struct Counters {
    tool_calls: AtomicU64,
    routed: AtomicU64,
    answered: AtomicU64,
}

/// Registers the tool, the command, the middleware and the `pre_verify` hook.
pub fn register(ctx: &mut PluginContext) {
    let settings = Settings::from_config(&ctx.config());
    offer(ctx, settings);
}

/// [`register`] with the settings known.
pub fn offer(ctx: &mut PluginContext, settings: Settings) {
    let counters = Arc::new(Counters::default());
    let seen = counters.clone();
    ctx.tool(
        "text_stats",
        json!({
            "description": "Counts the lines, words and bytes of a text file, or of a text.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to count."},
                    "text": {"type": "string", "description": "Or the text to count."},
                },
            },
        }),
        move |call| {
            seen.tool_calls.fetch_add(1, Ordering::Relaxed);
            text_stats(call)
        },
    );
    let shown = counters.clone();
    ctx.command("toolbox", "What the toolbox plugin did so far.", move |_cmd| {
        Ok(Some(format!(
            "toolbox: {} text_stats call(s), {} request(s) routed, {} answered without the model",
            shown.tool_calls.load(Ordering::Relaxed),
            shown.routed.load(Ordering::Relaxed),
            shown.answered.load(Ordering::Relaxed),
        )))
    });
    let route = settings.clone();
    ctx.middleware(MiddlewareKind::LlmRequest, move |m| {
        let request = m.payload();
        let last = last_user_message(&request).unwrap_or_default();
        // Hooks' context follows the user's words after a blank line.
        let asked = last.split("\n\n").next().unwrap_or_default().trim();
        if !route.canned_question.is_empty() && asked == route.canned_question {
            counters.answered.fetch_add(1, Ordering::Relaxed);
            return Ok(MiddlewareOutcome::Respond(json!(route.canned_answer)));
        }
        let short = last.chars().count() <= route.short_message_chars;
        if short && !route.small_model.is_empty() && request["model"] != route.small_model {
            counters.routed.fetch_add(1, Ordering::Relaxed);
            let mut routed = request;
            routed["model"] = json!(route.small_model);
            return Ok(MiddlewareOutcome::Replace {
                payload: routed,
                reason: Some(format!(
                    "short message ({} characters) routed to {}",
                    last.chars().count(),
                    route.small_model
                )),
            });
        }
        Ok(MiddlewareOutcome::Continue)
    });
    let reminder = settings.verify_reminder;
    ctx.named("remind_once").pre_verify(move |e| {
        if reminder.is_empty() || e.attempt() > 0 {
            return VerifyDecision::Finish;
        }
        VerifyDecision::keep_working(reminder.clone())
    });
}

/// `text_stats`: the text, or the file read through the host's `read_file`, counted.
fn text_stats(call: &ToolCall<'_, '_>) -> Result<Value, String> {
    let args = call.args();
    if let Some(text) = args["text"].as_str() {
        return Ok(counts(text));
    }
    let Some(path) = args["path"].as_str() else {
        return Err("text_stats needs a `path` or a `text`".into());
    };
    let read: Value = serde_json::from_str(&call.dispatch("read_file", &json!({ "path": path })))
        .map_err(|e| format!("read_file answered something that is not JSON: {e}"))?;
    if let Some(error) = read["error"].as_str() {
        return Err(format!("cannot read {path}: {error}"));
    }
    let mut stats = counts(read["content"].as_str().unwrap_or_default());
    stats["path"] = json!(path);
    Ok(stats)
}

fn counts(text: &str) -> Value {
    json!({
        "lines": text.lines().count(),
        "words": text.split_whitespace().count(),
        "bytes": text.len(),
    })
}

/// The text of the last user message of a model request.
fn last_user_message(request: &Value) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .map(str::to_string)
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    use super::*;

    fn host(settings: Settings) -> LocalHost {
        LocalHost::register("toolbox", move |ctx| offer(ctx, settings))
    }

    fn reply(
        host: &LocalHost,
        hook: &str,
        fields: &[hermes_hooks_abi::core::Field<'_>],
    ) -> hermes_hooks_abi::core::Reply {
        host.fire(hook, fields)[0].clone().unwrap().unwrap()
    }

    #[test]
    fn the_canned_question_is_answered_and_a_short_one_routed() {
        let host = host(Settings {
            small_model: "small".into(),
            short_message_chars: 10,
            ..Settings::from_config(&Value::Null)
        });
        let ping =
            json!({"model": "big", "messages": [{"role": "user", "content": "ping"}]}).to_string();
        let answered = reply(
            &host,
            "@middleware/llm_request",
            &[field::json("payload", &ping)],
        );
        assert_eq!(
            (answered.action.as_str(), answered.json.as_str()),
            ("result", "\"pong\"")
        );
        let short = json!({"model": "big", "messages": [{"role": "user", "content": "hi there"}]})
            .to_string();
        let routed = reply(
            &host,
            "@middleware/llm_request",
            &[field::json("payload", &short)],
        );
        assert_eq!(routed.action.as_str(), "replace");
        assert_eq!(
            serde_json::from_str::<Value>(&routed.json).unwrap()["model"],
            "small"
        );
        let long = json!({"model": "big", "messages": [{"role": "user", "content": "a longer question than ten"}]}).to_string();
        assert_eq!(
            host.fire("@middleware/llm_request", &[field::json("payload", &long)]),
            vec![Ok(None)]
        );
        let stats = reply(&host, "@command/toolbox", &[]);
        assert_eq!(
            stats.text.as_str(),
            "toolbox: 0 text_stats call(s), 1 request(s) routed, 1 answered without the model"
        );
    }

    #[test]
    fn without_a_host_that_dispatches_the_tool_says_it_cannot_read() {
        let host = host(Settings::from_config(&Value::Null));
        let out = host.fire(
            "@tool/text_stats",
            &[field::json("args", r#"{"path": "a.txt"}"#)],
        );
        let error = out[0].clone().unwrap_err();
        assert!(error.starts_with("cannot read a.txt: "), "{error}");
    }

    #[test]
    fn the_reminder_keeps_a_turn_working_once() {
        let host = host(Settings {
            verify_reminder: "run the tests".into(),
            ..Settings::from_config(&Value::Null)
        });
        let first = reply(&host, "pre_verify", &[field::int("attempt", 0)]);
        assert_eq!(
            (first.action.as_str(), first.text.as_str()),
            ("continue", "run the tests")
        );
        assert_eq!(
            host.fire("pre_verify", &[field::int("attempt", 1)]),
            vec![Ok(None)]
        );
    }
}
