//! Shows transform hooks: secrets in tool results and terminal output become `[REDACTED:<kind>]`.

mod patterns;

use std::sync::Arc;

use hermes_hooks_abi::prelude::*;

pub use patterns::{BUILT_IN, Redactor};

/// Compiles the built-in and configured patterns once, then redacts every tool result and
/// terminal output.
pub fn register(ctx: &mut PluginContext) {
    let (redactor, warnings) = Redactor::from_config(&ctx.config());
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    redact_secrets(ctx, redactor);
}

/// Registers the two transform hooks that apply `redactor` ([`register`], once the patterns
/// are compiled). Each returns `None`, no opinion, when there was nothing to redact.
pub fn redact_secrets(ctx: &mut PluginContext, redactor: Redactor) {
    let redactor = Arc::new(redactor);
    let for_terminal = Arc::clone(&redactor);
    ctx.named("redact_tool_result")
        .transform_tool_result(move |e| {
            let redacted = redactor.redact(e.result())?;
            tracing::info!(
                tool = e.tool_name(),
                session_id = e.session_id(),
                "redacted the tool result"
            );
            Some(redacted)
        });
    ctx.named("redact_terminal_output")
        .transform_terminal_output(move |e| {
            let redacted = for_terminal.redact(e.output())?;
            tracing::info!(task_id = e.task_id(), "redacted the terminal output");
            Some(redacted)
        });
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    use super::*;

    fn replacement(
        host: &LocalHost,
        hook: &str,
        fields: &[hermes_hooks_abi::core::Field<'_>],
    ) -> Option<String> {
        let mut replies = host.fire(hook, fields);
        assert_eq!(replies.len(), 1);
        let reply = replies.remove(0).unwrap()?;
        assert_eq!(reply.action.as_str(), "replace");
        Some(reply.text.into_string())
    }

    #[test]
    fn register_transforms_tool_results_and_terminal_output() {
        let host = LocalHost::register("secret-redactor", register);
        assert_eq!(
            host.hook_names(),
            vec!["transform_tool_result", "transform_terminal_output"]
        );
    }

    #[test]
    fn a_tool_result_with_a_secret_is_replaced() {
        let host = LocalHost::register("secret-redactor", register);
        let result =
            r#"{"output": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG and AKIAIOSFODNN7EXAMPLE"}"#;
        assert_eq!(
            replacement(
                &host,
                "transform_tool_result",
                &[
                    field::str("tool_name", "read_file"),
                    field::str("result", result)
                ]
            )
            .as_deref(),
            Some(
                r#"{"output": "AWS_SECRET_ACCESS_KEY=[REDACTED:secret] and [REDACTED:aws_access_key_id]"}"#
            )
        );
    }

    #[test]
    fn a_clean_tool_result_gets_no_opinion() {
        let host = LocalHost::register("secret-redactor", register);
        let fields = [
            field::str("tool_name", "terminal"),
            field::str("result", r#"{"output": "ok"}"#),
        ];
        assert_eq!(host.fire("transform_tool_result", &fields), vec![Ok(None)]);
    }

    #[test]
    fn terminal_output_is_redacted_before_truncation() {
        let host = LocalHost::register("secret-redactor", register);
        let output = "$ env\nHOME=/root\nNPM_TOKEN=npm_abc123\nPWD=/work";
        assert_eq!(
            replacement(
                &host,
                "transform_terminal_output",
                &[
                    field::str("command", "env"),
                    field::str("output", output),
                    field::int("returncode", 0)
                ]
            )
            .as_deref(),
            Some("$ env\nHOME=/root\nNPM_TOKEN=[REDACTED:secret]\nPWD=/work")
        );
        let clean = [
            field::str("command", "ls"),
            field::str("output", "a.txt\nb.txt"),
        ];
        assert_eq!(
            host.fire("transform_terminal_output", &clean),
            vec![Ok(None)]
        );
    }

    #[test]
    fn configured_patterns_apply_to_both_hooks() {
        let config = serde_json::json!({"patterns": [{"name": "ticket", "pattern": r"\bTCK-\d+"}]});
        let (redactor, _) = Redactor::from_config(&config);
        let host = LocalHost::register("secret-redactor", move |ctx| redact_secrets(ctx, redactor));
        assert_eq!(
            replacement(
                &host,
                "transform_tool_result",
                &[field::str("result", "TCK-9")]
            )
            .as_deref(),
            Some("[REDACTED:ticket]")
        );
        assert_eq!(
            replacement(
                &host,
                "transform_terminal_output",
                &[field::str("output", "TCK-10")]
            )
            .as_deref(),
            Some("[REDACTED:ticket]")
        );
    }
}
