//! Runs `$HERMES_HOME/BOOT.md` as a one-shot agent turn when the gateway starts: the seed
//! document's `boot-md` gateway hook, written the Rust way.
//!
//! The Python hook starts a thread so that gateway start-up is not held up by a whole agent
//! turn; a native gateway callback already runs on its hook's own delivery thread, so this
//! one simply calls the gateway's `agent.run_once` capability and waits. The prompt, the
//! `[SILENT]` convention and the log lines are the seed's, so an operator reading the log
//! sees the same thing whichever version is installed.

use std::path::{Path, PathBuf};

use hermes_hooks_abi::prelude::*;
use serde_json::json;

/// The prompt around the checklist, word for word the seed's `_build_prompt`.
pub fn build_prompt(content: &str) -> String {
    format!(
        "You are running a startup boot checklist. Follow the instructions below exactly.\n\n\
         ---\n{content}\n---\n\n\
         Execute each instruction. Use the send_message tool to deliver any messages to \
         platforms like Discord or Slack.\n\
         If nothing needs attention and there is nothing to report, reply with ONLY: [SILENT]"
    )
}

/// Where the checklist is: `boot_file` from the config (relative to `home`), else
/// `BOOT.md` in `home`.
pub fn boot_file(config: &serde_json::Value, home: &Path) -> PathBuf {
    match config["boot_file"].as_str().filter(|p| !p.is_empty()) {
        Some(path) => home.join(path),
        None => home.join("BOOT.md"),
    }
}

/// The log line for a finished boot turn's answer, as the seed words it.
pub fn completion_line(response: &str) -> String {
    if !response.is_empty() && !response.contains("[SILENT]") {
        format!(
            "boot-md completed: {}",
            response.chars().take(200).collect::<String>()
        )
    } else {
        "boot-md completed (nothing to report)".to_string()
    }
}

/// Registers the `gateway:startup` callback.
pub fn register(ctx: &mut PluginContext) {
    let config = ctx.config();
    let home = std::env::var_os("HERMES_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".hermes")))
        .unwrap_or_else(|| PathBuf::from(".hermes"));
    let path = boot_file(&config, &home);
    let max_iterations = config["max_iterations"].as_u64().unwrap_or(20);
    ctx.named("run_boot_md")
        .on_gateway_event("gateway:startup", move |e| {
            // A missing or unreadable file is the same as no checklist, as in the seed.
            let Ok(text) = std::fs::read_to_string(&path) else {
                return;
            };
            let content = text.trim();
            if content.is_empty() {
                return;
            }
            tracing::info!("Running BOOT.md ({} chars)", content.chars().count());
            let args = json!({
                "prompt": build_prompt(content),
                "platform": "gateway",
                "max_iterations": max_iterations,
            });
            match e.call("agent.run_once", &args) {
                Ok(answer) => {
                    let response = answer["final_response"].as_str().unwrap_or_default();
                    tracing::info!("{}", completion_line(response));
                }
                Err(error) => tracing::error!("boot-md agent failed: {error}"),
            }
        });
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    #[test]
    fn the_prompt_wraps_the_checklist_as_the_seed_does() {
        let prompt = build_prompt("check the disk");
        assert!(prompt.starts_with("You are running a startup boot checklist."));
        assert!(prompt.contains("---\ncheck the disk\n---"));
        assert!(prompt.ends_with("reply with ONLY: [SILENT]"));
    }

    #[test]
    fn silent_or_empty_answers_report_nothing() {
        assert_eq!(
            completion_line("[SILENT]"),
            "boot-md completed (nothing to report)"
        );
        assert_eq!(completion_line(""), "boot-md completed (nothing to report)");
        assert_eq!(completion_line("disk ok"), "boot-md completed: disk ok");
        assert_eq!(
            completion_line(&"x".repeat(300)).len(),
            200 + "boot-md completed: ".len()
        );
    }

    #[test]
    fn the_file_is_in_the_home_unless_configured() {
        let home = Path::new("/h");
        assert_eq!(boot_file(&json!({}), home), Path::new("/h/BOOT.md"));
        assert_eq!(
            boot_file(&json!({"boot_file": "lists/boot.md"}), home),
            Path::new("/h/lists/boot.md")
        );
    }

    #[test]
    fn it_registers_for_gateway_startup_only() {
        let host = LocalHost::register("boot-md", register);
        assert_eq!(host.hook_names(), vec!["gateway:startup"]);
        // No BOOT.md where this test runs looks: nothing to do, no error.
        let out = host.fire(
            "gateway:startup",
            &[field::str("event_type", "gateway:startup")],
        );
        assert!(out.iter().all(Result::is_ok));
    }
}
