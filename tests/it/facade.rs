//! `hermes_host::Hooks`, the facade an embedder uses: real plugins, a real shell hook and a
//! real gateway hook loaded from one home, in the documented order, with every problem
//! reported against its file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
use hermes_host::gateway::MemoryLog;
use hermes_host::{ConsentPolicy, Hooks, LoadOptions};
use hermes_tests::support::TestHome;

/// A `/bin/sh` script running `body`.
fn script(home: &TestHome, name: &str, body: &str) -> std::path::PathBuf {
    home.script(name, &format!("#!/bin/sh\n{body}\n"))
}

#[test]
fn the_facade_loads_all_three_systems_in_order_and_reports_each_problem_with_its_file() {
    let home = TestHome::new();
    home.install("guardrail", "guardrail", None, None);
    // A plugin whose library is missing: a problem naming its directory.
    let broken = home.path().join("plugins/broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("plugin.yaml"),
        "name: broken\nlibrary: libbroken.so\n",
    )
    .unwrap();
    let guard = script(
        &home,
        "guard.sh",
        "echo '{\"decision\": \"block\", \"reason\": \"shell says no\"}'",
    );
    home.config(&format!(
        "plugins:\n  enabled: [guardrail, broken]\nhooks:\n  pre_tool_call:\n    - command: {}\n",
        guard.display()
    ));
    // A gateway hook: an executable handler that appends each event to a file.
    let out = home.path().join("events.log");
    home.gateway_recorder(&out);

    // The service default: only allowlisted shell hooks run.
    let log = Arc::new(MemoryLog::default());
    let options = LoadOptions {
        gateway_log: Some(log.clone()),
        ..LoadOptions::default()
    };
    let hooks = Hooks::load(&home.home(), &options).unwrap();
    let report = hooks.report();
    assert!(report.shell.registered.is_empty());
    let files: Vec<String> = report
        .problems
        .iter()
        .map(|p| home.mask(&p.file.display().to_string()))
        .collect();
    assert_eq!(
        files,
        ["$HOME/plugins/broken", "$HOME/config.yaml"],
        "{:#?}",
        report.problems
    );
    assert!(report.problems[0].message.contains("has no library there"));
    assert_eq!(
        report.problems[1].message,
        format!(
            "shell hook for pre_tool_call ({}) not allowlisted — skipped. Use --accept-hooks / HERMES_ACCEPT_HOOKS=1 / hooks_auto_accept: true, or approve at the TTY prompt next run.",
            guard.display()
        )
    );
    assert_eq!(report.gateway.len(), 1);
    assert_eq!(report.gateway[0].name, "recorder");

    // Accepting: the shell hook is registered after the plugin, and the plugin's block,
    // first in registry order, wins.
    let options = LoadOptions {
        consent: ConsentPolicy::AcceptAndRecord,
        gateway_log: Some(log.clone()),
        ..LoadOptions::default()
    };
    let hooks = Hooks::load(&home.home(), &options).unwrap();
    assert_eq!(hooks.report().shell.registered.len(), 1);
    let labels: Vec<String> = hooks
        .entries("pre_tool_call")
        .iter()
        .map(|e| e.label.clone())
        .collect();
    assert_eq!(labels.len(), 2);
    assert!(labels[0].starts_with("guardrail::"), "{labels:?}");
    let sudo = PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "sudo ls"}"#,
        ..Default::default()
    };
    assert!(
        hooks
            .pre_tool_call(&sudo)
            .blocked
            .unwrap()
            .by
            .starts_with("guardrail::")
    );
    let ls = PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls"}"#,
        ..Default::default()
    };
    assert_eq!(
        hooks.pre_tool_call(&ls).blocked.unwrap().message,
        "shell says no"
    );

    // emit reaches the gateway hook without blocking the caller.
    hooks.emit("agent:start", serde_json::json!({"platform": "embed"}));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("agent:start")
    {
        assert!(
            Instant::now() < deadline,
            "the gateway hook never got the event"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Safe mode: no plugins, no shell hooks.
    let options = LoadOptions {
        safe_mode: true,
        ..LoadOptions::default()
    };
    let hooks = Hooks::load(&home.home(), &options).unwrap();
    assert!(!hooks.has("pre_tool_call"));
    assert!(hooks.report().safe_mode);

    // The one fatal case: a home that is a file.
    let file = home.path().join("events.log");
    let err = Hooks::load(&hermes_host::home::Home::at(&file), &LoadOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().ends_with(
        "the Hermes home is not a directory; point HERMES_HOME (or --home) at a directory"
    ));
}
