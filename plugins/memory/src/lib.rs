//! Shows a context plugin: `pre_llm_call` recalls what `post_llm_call` stored in a local file.

// Shared with every plugin that keeps data in files.
use hermes_hooks_abi::sdk::data::{jsonl, location, timestamp};

mod settings;
mod store;
mod words;

use std::{sync::Arc, time::SystemTime};

use hermes_hooks_abi::prelude::*;

pub use settings::{DEFAULT_MAX_ITEMS, Settings};
pub use store::{Entry, MAX_CHARS, Memory, Store};

/// Opens the configured store and registers the recall and remember hooks on it.
pub fn register(ctx: &mut PluginContext) {
    let home = std::env::var_os("HERMES_HOME");
    let plugin_dir = ctx.plugin_dir();
    let (settings, warnings) =
        Settings::resolve(&ctx.config(), plugin_dir.as_deref(), home.as_deref());
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    tracing::debug!("memory store: {}", settings.path.display());
    remember_and_recall(ctx, Store::new(settings.path), settings.max_items);
}

/// Registers the two hooks on `store` ([`register`], once the settings are known): every
/// turn first recalls up to `max_items` memories, and every finished turn is remembered.
pub fn remember_and_recall(ctx: &mut PluginContext, store: Store, max_items: usize) {
    let store = Arc::new(store);
    let recall_from = Arc::clone(&store);
    ctx.named("recall").pre_llm_call(move |e| {
        let recalled = recall_from.recall(e.user_message(), max_items);
        let bullets: Vec<String> = recalled.iter().map(Entry::bullet).collect();
        (!bullets.is_empty()).then(|| format!("Relevant memory:\n{}", bullets.join("\n")))
    });
    ctx.named("remember").post_llm_call(move |e| {
        let now = SystemTime::now();
        store.add(Entry::from_turn(
            e.session_id(),
            e.user_message(),
            e.assistant_response(),
            now,
        ));
    });
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use std::path::Path;

    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    use super::*;

    fn memory_host(path: &Path, max_items: usize) -> LocalHost {
        let store = Store::new(path.to_path_buf());
        LocalHost::register("memory", move |ctx| {
            remember_and_recall(ctx, store, max_items)
        })
    }

    fn finish_turn(host: &LocalHost, user: &str, assistant: &str) {
        let replies = host.fire(
            "post_llm_call",
            &[
                field::str("session_id", "s1"),
                field::str("user_message", user),
                field::str("assistant_response", assistant),
            ],
        );
        assert_eq!(replies, vec![Ok(None)]);
    }

    fn context_for(host: &LocalHost, user: &str) -> Option<String> {
        let mut replies = host.fire(
            "pre_llm_call",
            &[
                field::str("session_id", "s2"),
                field::str("user_message", user),
            ],
        );
        let reply = replies.remove(0).unwrap()?;
        assert_eq!(reply.action.as_str(), "context");
        Some(reply.text.into_string())
    }

    #[test]
    fn register_recalls_before_and_remembers_after_each_turn() {
        let host = LocalHost::register("memory", register);
        assert_eq!(host.hook_names(), vec!["pre_llm_call", "post_llm_call"]);
    }

    #[test]
    fn a_finished_turn_is_written_to_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.jsonl");
        let host = memory_host(&path, 3);
        finish_turn(
            &host,
            "Set up the Kafka consumer",
            "Done: consumer group `billing`.",
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, vec!["ts", "session_id", "user", "assistant"]);
        assert_eq!(line["session_id"], "s1");
        assert_eq!(line["user"], "Set up the Kafka consumer");
        assert_eq!(line["assistant"], "Done: consumer group `billing`.");
    }

    #[test]
    fn a_later_turn_gets_the_relevant_memories_as_context() {
        let dir = tempfile::tempdir().unwrap();
        let host = memory_host(&dir.path().join("memory.jsonl"), 3);
        finish_turn(&host, "Remember: my favourite editor is Helix", "Noted.");
        finish_turn(&host, "Set up the Kafka consumer", "Done.");
        assert_eq!(
            context_for(&host, "Which editor should I configure?").as_deref(),
            Some("Relevant memory:\n- my favourite editor is Helix")
        );
    }

    #[test]
    fn nothing_relevant_means_no_context() {
        let dir = tempfile::tempdir().unwrap();
        let host = memory_host(&dir.path().join("memory.jsonl"), 3);
        finish_turn(&host, "Set up the Kafka consumer", "Done.");
        assert_eq!(context_for(&host, "What time is it?"), None);
    }

    #[test]
    fn max_items_limits_the_recalled_memories() {
        let dir = tempfile::tempdir().unwrap();
        let host = memory_host(&dir.path().join("memory.jsonl"), 1);
        finish_turn(&host, "remember: deploys happen on tuesdays", "");
        finish_turn(&host, "remember: deploys need two approvals", "");
        assert_eq!(
            context_for(&host, "can we deploy today? deploys are blocked?").as_deref(),
            Some("Relevant memory:\n- deploys need two approvals")
        );
    }
}
