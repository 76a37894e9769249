//! Discovery, loading, registry order and the aggregation rules, with real plugin libraries.

use hermes_hooks_abi::hooks::payload::{PreLlmCallEvent, PreToolCallEvent};
use hermes_host::registry::{Blocked, Outcome};
use hermes_tests::support::TestHome;

fn recorder_config(log: &std::path::Path, tag: &str, answers: &str) -> String {
    format!(
        "{{log: '{}', tag: {tag}, answers: {answers}}}",
        log.display()
    )
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn callbacks_run_in_alphabetical_plugin_order_and_contexts_join_in_that_order() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    // Installed in reverse order on purpose: discovery sorts directory names.
    home.install(
        "zeta",
        "recorder",
        Some("zeta"),
        Some(&recorder_config(
            &log,
            "Z",
            "{pre_llm_call: {action: context, text: from-z}}",
        )),
    );
    home.install(
        "alpha",
        "recorder",
        Some("alpha"),
        Some(&recorder_config(
            &log,
            "A",
            "{pre_llm_call: {action: context, text: from-a}}",
        )),
    );
    home.config("plugins:\n  enabled: [zeta, alpha]\n");
    let (registry, report) = home.load();
    assert!(
        report.plugins.iter().all(|p| p.loaded()),
        "{:?}",
        report.plugins
    );
    let context = registry.pre_llm_call(&PreLlmCallEvent {
        session_id: "s1",
        user_message: "hi",
        ..Default::default()
    });
    assert_eq!(context.as_deref(), Some("from-a\n\nfrom-z"));
    let calls = lines(&log);
    assert_eq!(calls.len(), 2);
    assert!(calls[0].starts_with("A pre_llm_call "), "{calls:?}");
    assert!(calls[1].starts_with("Z pre_llm_call "), "{calls:?}");
    // The callback saw every field of the payload, by name, in the reference's order.
    let fields: serde_json::Value =
        serde_json::from_str(calls[0].splitn(3, ' ').nth(2).unwrap_or("{}")).unwrap();
    let keys: Vec<&str> = fields
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "session_id",
            "user_message",
            "conversation_history",
            "is_first_turn",
            "model",
            "platform",
            "sender_id",
            "turn_id",
            "task_id"
        ]
    );
    assert_eq!(fields["user_message"], "hi");
}

#[test]
fn first_block_wins_and_modifies_merge_across_plugins() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install(
        "a",
        "recorder",
        Some("a"),
        Some(&recorder_config(
            &log,
            "a",
            r#"{pre_tool_call: {action: modify, json: {timeout: 5, cwd: /a}}}"#,
        )),
    );
    home.install(
        "b",
        "recorder",
        Some("b"),
        Some(&recorder_config(
            &log,
            "b",
            r#"{pre_tool_call: {action: modify, json: {cwd: /b}}}"#,
        )),
    );
    home.install(
        "c",
        "recorder",
        Some("c"),
        Some(&recorder_config(
            &log,
            "c",
            "{pre_tool_call: {action: block, text: blocked by c}}",
        )),
    );
    home.install(
        "d",
        "recorder",
        Some("d"),
        Some(&recorder_config(
            &log,
            "d",
            "{pre_tool_call: {action: block, text: blocked by d}}",
        )),
    );
    home.config("plugins:\n  enabled: [a, b]\n");
    let (registry, _) = home.load();
    let event = PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls", "timeout": 60}"#,
        ..Default::default()
    };
    let verdict = registry.pre_tool_call(&event);
    assert_eq!(verdict.blocked, None);
    let args = verdict.apply(&serde_json::json!({"command": "ls", "timeout": 60}));
    assert_eq!(
        args,
        serde_json::json!({"command": "ls", "timeout": 5, "cwd": "/b"})
    );

    home.config("plugins:\n  enabled: [a, b, c, d]\n");
    let (registry, _) = home.load();
    let verdict = registry.pre_tool_call(&event);
    assert_eq!(
        verdict.blocked,
        Some(Box::new(Blocked {
            message: "blocked by c".into(),
            by: "c::record".into(),
            approval: None,
        }))
    );
    assert_eq!(
        verdict.error_result().as_deref(),
        Some(r#"{"error": "blocked by c"}"#)
    );
}

#[test]
fn transforms_and_gateway_dispatch_follow_the_reference_rules() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    let a = r#"{transform_llm_output: {action: replace, text: ''}, transform_tool_result: {action: replace, text: ''}, pre_gateway_dispatch: {action: nonsense}}"#;
    let b = r#"{transform_llm_output: {action: replace, text: B}, transform_tool_result: {action: replace, text: B}, pre_gateway_dispatch: {action: rewrite, text: hello}}"#;
    let c = r#"{pre_gateway_dispatch: {action: skip, text: spam}}"#;
    home.install(
        "a",
        "recorder",
        Some("a"),
        Some(&recorder_config(&log, "a", a)),
    );
    home.install(
        "b",
        "recorder",
        Some("b"),
        Some(&recorder_config(&log, "b", b)),
    );
    home.install(
        "c",
        "recorder",
        Some("c"),
        Some(&recorder_config(&log, "c", c)),
    );
    home.config("plugins:\n  enabled: [a, b, c]\n");
    let (registry, _) = home.load();
    // transform_llm_output: first NON-EMPTY text wins.
    assert_eq!(
        registry.fire("transform_llm_output", &[]),
        Outcome::Replace(Some("B".into()))
    );
    // transform_tool_result: first text wins, even empty.
    assert_eq!(
        registry.fire("transform_tool_result", &[]),
        Outcome::Replace(Some(String::new()))
    );
    // pre_gateway_dispatch: unknown actions are skipped, and the first rewrite decides.
    let verdict =
        registry.pre_gateway_dispatch(&Default::default(), &hermes_hooks_abi::core::NoHostCalls);
    assert_eq!(
        verdict,
        hermes_host::registry::DispatchVerdict::Rewrite {
            text: "hello".into(),
            by: "b::record".into()
        }
    );
}

#[test]
fn every_hook_kind_fires_with_its_fields() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install(
        "rec",
        "recorder",
        Some("rec"),
        Some(&recorder_config(&log, "r", "{}")),
    );
    home.config("plugins:\n  enabled: [rec]\n");
    let (registry, report) = home.load();
    assert_eq!(
        report.plugins[0].hooks.len(),
        hermes_hooks_abi::hooks::HOOKS.len()
    );
    for spec in hermes_hooks_abi::hooks::HOOKS {
        let payload =
            hermes_host::payload::OwnedPayload::from_json(spec.name, &serde_json::json!({}));
        registry.fire(spec.name, &payload.fields());
    }
    let calls = lines(&log);
    let fired: Vec<&str> = calls.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    let expected: Vec<&str> = hermes_hooks_abi::hooks::HOOKS
        .iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(fired, expected);
    for (line, spec) in calls.iter().zip(hermes_hooks_abi::hooks::HOOKS) {
        let fields: serde_json::Value =
            serde_json::from_str(line.splitn(3, ' ').nth(2).unwrap_or("{}")).unwrap();
        let keys: Vec<&str> = fields
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let spec_keys: Vec<&str> = spec.fields.iter().map(|f| f.name).collect();
        assert_eq!(keys, spec_keys, "fields of {}", spec.name);
    }
}

#[test]
fn categories_are_scanned_one_level_deep() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install(
        "security/guard",
        "recorder",
        Some("guard"),
        Some(&recorder_config(&log, "g", "{}")),
    );
    home.install(
        "deep/er/still",
        "recorder",
        Some("still"),
        Some(&recorder_config(&log, "s", "{}")),
    );
    home.config("plugins:\n  enabled: [security/guard, still]\n");
    let (_, report) = home.load();
    let keys: Vec<&str> = report.plugins.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["security/guard"]);
    assert!(report.plugins[0].loaded());
}

#[test]
fn disabled_wins_over_enabled_and_unlisted_plugins_are_not_loaded() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    for name in ["one", "two", "three"] {
        home.install(
            name,
            "recorder",
            Some(name),
            Some(&recorder_config(&log, name, "{}")),
        );
    }
    home.config("plugins:\n  enabled: [one, two]\n  disabled: [two]\n");
    let (_, report) = home.load();
    let state: Vec<(&str, Option<&str>)> = report
        .plugins
        .iter()
        .map(|p| (p.key.as_str(), p.error.as_deref()))
        .collect();
    assert_eq!(
        state,
        [
            ("one", None),
            (
                "three",
                Some("not enabled in config (run `hermes plugins enable three` to activate)")
            ),
            ("two", Some("disabled via config")),
        ]
    );
}

#[test]
fn no_enabled_list_means_nothing_loads() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install(
        "one",
        "recorder",
        Some("one"),
        Some(&recorder_config(&log, "one", "{}")),
    );
    home.config("plugins:\n  enabled: one\n");
    let (registry, report) = home.load();
    assert!(!report.plugins[0].loaded());
    assert!(registry.hook_names().is_empty());
}

#[test]
fn broken_plugins_are_reported_by_file_and_the_rest_still_load() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install(
        "good",
        "recorder",
        Some("good"),
        Some(&recorder_config(&log, "g", "{}")),
    );
    home.install(
        "twin",
        "recorder",
        Some("good"),
        Some(&recorder_config(&log, "t", "{}")),
    );
    let missing = home.path().join("plugins/missing");
    std::fs::create_dir_all(&missing).unwrap();
    std::fs::write(
        missing.join("plugin.yaml"),
        "name: missing\nlibrary: libmissing.so\n",
    )
    .unwrap();
    let malformed = home.path().join("plugins/malformed");
    std::fs::create_dir_all(&malformed).unwrap();
    std::fs::write(malformed.join("plugin.yaml"), "name: [unclosed\n").unwrap();
    let nolib = home.path().join("plugins/nolib");
    std::fs::create_dir_all(&nolib).unwrap();
    std::fs::write(nolib.join("plugin.yaml"), "name: nolib\n").unwrap();
    home.config("plugins:\n  enabled: [good, missing, malformed, nolib]\n");
    let (registry, report) = home.load();
    let by_key = |k: &str| report.plugins.iter().find(|p| p.key == k).unwrap();
    assert!(by_key("good").loaded());
    assert!(registry.has("pre_tool_call"));
    let twin = by_key("twin").error.clone().unwrap();
    assert!(twin.starts_with("duplicate plugin name 'good': "), "{twin}");
    assert!(
        twin.contains("plugins/twin/plugin.yaml") && twin.contains("plugins/good/plugin.yaml"),
        "{twin}"
    );
    let missing_err = by_key("missing").error.clone().unwrap();
    assert!(
        missing_err
            .contains("plugins/missing/libmissing.so: plugin 'missing' has no library there"),
        "{missing_err}"
    );
    let malformed_err = by_key("malformed").error.clone().unwrap();
    assert!(
        malformed_err.starts_with("Failed to parse ")
            && malformed_err.contains("plugins/malformed/plugin.yaml"),
        "{malformed_err}"
    );
    let nolib_err = by_key("nolib").error.clone().unwrap();
    assert!(
        nolib_err.contains("add `library: libnolib.so` for a Rust plugin"),
        "{nolib_err}"
    );
}

#[test]
fn a_library_that_is_not_a_plugin_is_refused_with_one_line() {
    let home = TestHome::new();
    // libc is a shared library, but not a hermes plugin.
    let libc = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists())
    .expect("a system libm to stand in for a library that is not a plugin");
    home.install_lib(
        "math",
        &libc,
        "name: math\nlibrary: libm.so.6\n",
        None,
        None,
    );
    home.config("plugins:\n  enabled: [math]\n");
    let (_, report) = home.load();
    let err = report.plugins[0].error.clone().unwrap();
    let lib = home.path().join("plugins/math/libm.so.6");
    assert_eq!(
        err,
        format!(
            "{}: plugin 'math' is not a hermes plugin (it exports no `hermes_plugin_abi_version`); build it from a crate with crate-type = [\"cdylib\"] that calls `hermes_hooks_abi::export_plugin!(register)`",
            lib.display()
        )
    );
}

#[test]
fn libraries_are_loaded_once_per_process() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install(
        "one",
        "recorder",
        Some("one"),
        Some(&recorder_config(&log, "one", "{}")),
    );
    home.config("plugins:\n  enabled: [one]\n");
    let lib = home
        .path()
        .join("plugins/one/librecorder.so")
        .canonicalize()
        .unwrap();
    let first = hermes_host::plugins::load_library(&lib, "one")
        .map(|l| l.abi_version())
        .unwrap();
    // Remove the file (the mapping stays valid): a second load must not need it.
    std::fs::remove_file(&lib).unwrap();
    let second = hermes_host::plugins::load_library(&lib, "one")
        .map(|l| l.abi_version())
        .unwrap();
    assert_eq!(first, second);
}

#[test]
fn the_testing_helper_loads_a_built_plugin_and_fires_typed_events() {
    use hermes_hooks_abi::hooks::payload::{GatewayDispatchEvent, SessionStartEvent};
    use hermes_host::registry::DispatchVerdict;
    use hermes_host::testing::TestHost;

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let config = serde_json::json!({
        "log": log,
        "tag": "T",
        "answers": {
            "pre_tool_call": {"action": "block", "text": "nope"},
            "pre_gateway_dispatch": {"action": "skip", "text": "spam"},
        },
    });
    let host = TestHost::builder(hermes_tests::support::built().lib("recorder"), "rec")
        .config(config)
        .load()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(host.hooks().len(), hermes_hooks_abi::hooks::HOOKS.len());
    let verdict = host.pre_tool_call(&PreToolCallEvent {
        tool_name: "terminal",
        ..Default::default()
    });
    assert_eq!(
        verdict.blocked,
        Some(Box::new(Blocked {
            message: "nope".into(),
            by: "rec::record".into(),
            approval: None,
        }))
    );
    host.on_session_start(&SessionStartEvent {
        session_id: "s-1",
        ..Default::default()
    })
    .unwrap();
    let dispatch = host.pre_gateway_dispatch(&GatewayDispatchEvent {
        text: "buy now",
        ..Default::default()
    });
    assert_eq!(
        dispatch,
        DispatchVerdict::Skip {
            reason: "spam".into(),
            by: "rec::record".into()
        }
    );
    let calls = lines(&log);
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls[1].starts_with(r#"T on_session_start {"session_id":"s-1""#));
    assert_eq!(host.firings().len(), 3);
    assert!(host.raised().is_empty());

    // A plugin whose callback panics: contained as in the host, and visible to the test.
    let faulty = TestHost::load(hermes_tests::support::built().lib("faulty"), "faulty")
        .unwrap_or_else(|e| panic!("{e}"));
    let verdict = faulty.pre_tool_call(&PreToolCallEvent {
        tool_name: "terminal",
        ..Default::default()
    });
    assert_eq!(verdict.blocked, None);
    let raised = faulty.raised();
    assert_eq!(raised[0].callback, "faulty::explode");
    let logs = faulty.logs();
    assert!(
        logs.iter().any(|l| l.to_string().starts_with(
            "WARN hermes_host::registry: Hook 'pre_tool_call' callback faulty::explode raised: deliberate panic"
        )),
        "{logs:#?}"
    );
    let context = faulty.pre_llm_call(&PreLlmCallEvent {
        session_id: "s-42",
        ..Default::default()
    });
    assert_eq!(context.as_deref(), Some("context from faulty"));
    let logs = faulty.logs();
    let saw = logs
        .iter()
        .find(|l| l.message.starts_with("faulty saw pre_llm_call"))
        .unwrap();
    assert_eq!(saw.plugin.as_deref(), Some("faulty"));

    // A panic in register fails the load with the loader's one line.
    let err = TestHost::builder(hermes_tests::support::built().lib("faulty"), "faulty")
        .config(serde_json::json!({"panic_in_register": true}))
        .load()
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .ends_with("register() panicked: deliberate panic in register; run with HERMES_LOG=debug to see where"),
        "{err}"
    );
}

#[test]
fn a_library_for_another_platform_is_refused_with_a_message_saying_so() {
    let home = TestHome::new();
    let foreign = if cfg!(target_os = "macos") {
        "libmac.so"
    } else {
        "libmac.dylib"
    };
    let platform = if cfg!(target_os = "macos") {
        "Linux"
    } else {
        "macOS"
    };
    let native = hermes_host::plugins::library_file::for_crate("mac");
    // `library:` names it, and it is there.
    let named = home.path().join("plugins/named");
    std::fs::create_dir_all(&named).unwrap();
    std::fs::write(named.join(foreign), b"not for this machine").unwrap();
    std::fs::write(
        named.join("plugin.yaml"),
        format!("name: named\nlibrary: {foreign}\n"),
    )
    .unwrap();
    // `library:` names this platform's file, and only the other platform's is there.
    let copied = home.path().join("plugins/copied");
    std::fs::create_dir_all(&copied).unwrap();
    std::fs::write(copied.join(foreign), b"not for this machine").unwrap();
    std::fs::write(
        copied.join("plugin.yaml"),
        format!("name: copied\nlibrary: {native}\n"),
    )
    .unwrap();
    home.config("plugins:\n  enabled: [named, copied]\n");
    let (_, report) = home.load();
    let error = |key: &str| {
        let p = report.plugins.iter().find(|p| p.key == key).unwrap();
        home.mask(p.error.as_deref().unwrap_or_default())
    };
    assert_eq!(
        error("named"),
        format!(
            "$HOME/plugins/named/{foreign}: plugin 'named' is a library for {platform}, and this host loads {}; build the plugin on this machine (`cargo build --release`, or `hermes plugins install <crate dir>`) and set `library: {}`",
            hermes_host::plugins::library_file::pattern(),
            hermes_host::plugins::library_file::for_crate("named")
        )
    );
    assert_eq!(
        error("copied"),
        format!(
            "$HOME/plugins/copied/{native}: plugin 'copied' has no library there, only {foreign}, a library for {platform}; build the plugin on this machine with `cargo build --release` (or `hermes plugins install <crate dir>`)"
        )
    );

    // A gateway hook directory holding only the other platform's library.
    let hook = home.path().join("hooks/mac-hook");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(
        hook.join("HOOK.yaml"),
        "name: mac-hook\nevents: [agent:start]\n",
    )
    .unwrap();
    std::fs::write(hook.join(foreign), b"not for this machine").unwrap();
    let run = home.hermes(&["gateway", "hooks"], &[]);
    let expected = format!(
        "  mac-hook: {foreign} is a library for {platform}, and this host loads {}; build the hook on this machine\n",
        hermes_host::plugins::library_file::pattern()
    );
    assert!(run.stdout().contains(&expected), "{}", run.describe());
}

#[test]
fn every_gateway_dispatch_callback_runs_and_the_first_decision_wins() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    let skip = r#"{pre_gateway_dispatch: {action: skip, text: spam}}"#;
    let rewrite = r#"{pre_gateway_dispatch: {action: rewrite, text: hello}}"#;
    home.install(
        "a",
        "recorder",
        Some("a"),
        Some(&recorder_config(&log, "a", skip)),
    );
    home.install(
        "b",
        "recorder",
        Some("b"),
        Some(&recorder_config(&log, "b", rewrite)),
    );
    home.install("c", "gateway-ack", None, None);
    home.config("plugins:\n  enabled: [a, b, gateway-ack]\n");
    let payload = r#"{"platform": "telegram", "chat_id": "c-1", "text": "hi", "session_key": "telegram:c-1"}"#;
    let run = home.hermes(
        &[
            "plugins",
            "fire",
            "pre_gateway_dispatch",
            "--payload",
            payload,
        ],
        &[("HERMES_LOG", "debug")],
    );
    run.expect_code(0);
    // All three ran, in registry order, after the skip had decided.
    let called: Vec<String> = lines(&log)
        .iter()
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(called, ["a pre_gateway_dispatch", "b pre_gateway_dispatch"]);
    let stdout = run.stdout();
    assert!(
        stdout.contains("  gateway-ack::acknowledge  no opinion"),
        "{}",
        run.describe()
    );
    assert!(
        stdout.contains("Outcome: skipped by a::record: spam"),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr().contains("Hook 'pre_gateway_dispatch' callback b::record answered 'rewrite' after a::record had decided; ignoring it"),
        "{}",
        run.describe()
    );
    // The capabilities the gateway gives are there, checked, and said to be a dry run.
    assert!(
        stdout.contains("Capability calls (checked and recorded, not carried out: `plugins fire` runs no gateway to deliver to):\n  gateway.send {\"platform\":\"telegram\",\"chat_id\":\"c-1\",\"text\":\"ack: hi\"}\n  session.append "),
        "{}",
        run.describe()
    );
    let json = home.hermes(
        &[
            "plugins",
            "fire",
            "pre_gateway_dispatch",
            "--payload",
            payload,
            "--json",
        ],
        &[],
    );
    let out: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    assert_eq!(out["capability_calls"][0]["capability"], "gateway.send");
    assert_eq!(out["capability_calls"][1]["capability"], "session.append");
    assert_eq!(
        out["capability_calls"][1]["args"]["entry"]["content"],
        "ack: hi"
    );
}

#[test]
fn the_test_host_fires_gateway_callbacks_and_captures_what_a_plugin_prints() {
    use hermes_host::testing::TestHost;
    let host = TestHost::load(hermes_tests::support::built().lib("noisy"), "noisy").unwrap();
    // The capture holds whatever reached fd 1 meanwhile, which includes the test harness's
    // own `test ... ok` lines from other threads: only the plugin's lines are compared.
    let plugin_lines = |host: &TestHost| -> String {
        host.stdout()
            .lines()
            .filter(|l| l.starts_with("noisy: "))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    // What register printed, then what each firing printed, in order.
    assert_eq!(plugin_lines(&host), "noisy: register\n");
    host.fire(
        "pre_tool_call",
        &serde_json::json!({"tool_name": "terminal"}),
    );
    assert_eq!(host.gateway_events(), ["agent:*"]);
    host.gateway_event("agent:start", &serde_json::json!({"platform": "cli"}))
        .unwrap();
    host.gateway_event("session:start", &serde_json::json!({}))
        .unwrap();
    assert_eq!(
        plugin_lines(&host),
        "noisy: register\nnoisy: pre_tool_call\nnoisy: gateway agent:start\n"
    );
    // A plugin without gateway callbacks: an event reaches nothing, and that is no error.
    let ack = TestHost::load(hermes_tests::support::built().lib("gateway-ack"), "ack").unwrap();
    assert!(ack.gateway_events().is_empty());
    assert_eq!(
        ack.gateway_event("agent:start", &serde_json::json!({})),
        Ok(())
    );
}

#[test]
fn native_and_python_plugins_interleave_in_one_alphabetical_order() {
    let home = TestHome::new();
    home.install("guardrail", "guardrail", None, None);
    for name in ["alpha-py", "zulu-py"] {
        let dir = home.path().join("plugins").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("plugin.yaml"), format!("name: {name}\n")).unwrap();
        std::fs::write(
            dir.join("__init__.py"),
            format!("def guard(tool_name, args, **kw):\n    if 'sudo' in args.get('command', ''):\n        return {{'action': 'block', 'message': 'by {name}'}}\ndef register(ctx):\n    ctx.register_hook('pre_tool_call', guard)\n"),
        )
        .unwrap();
    }
    home.config("plugins:\n  enabled: [zulu-py, guardrail, alpha-py]\n");
    let payload = r#"{"tool_name": "terminal", "args": {"command": "sudo rm -rf /"}}"#;
    let run = home.hermes(
        &["plugins", "fire", "pre_tool_call", "--payload", payload],
        &[],
    );
    run.expect_code(0);
    let stdout = run.stdout();
    let position = |label: &str| {
        stdout
            .find(label)
            .unwrap_or_else(|| panic!("{label} did not fire: {}", run.describe()))
    };
    assert!(
        position("alpha-py::guard") < position("guardrail::"),
        "{stdout}"
    );
    assert!(
        position("guardrail::") < position("zulu-py::guard"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Outcome: blocked by alpha-py::guard: by alpha-py"),
        "{stdout}"
    );
    // Without the first Python plugin, the native one decides before the last.
    home.config("plugins:\n  enabled: [zulu-py, guardrail]\n");
    let run = home.hermes(
        &["plugins", "fire", "pre_tool_call", "--payload", payload],
        &[],
    );
    assert!(
        run.stdout().contains("Outcome: blocked by guardrail::"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_truncated_or_foreign_library_is_refused_by_name_before_it_is_mapped() {
    let home = TestHome::new();
    let built = hermes_tests::support::built();
    let whole = std::fs::read(built.lib("noop")).unwrap();
    // Cut short, as an interrupted copy leaves it: the loader would map it past its end
    // and the host would die of SIGBUS.
    let cut = home.path().join("plugins/cut");
    std::fs::create_dir_all(&cut).unwrap();
    std::fs::write(cut.join("libnoop.so"), &whole[..4096]).unwrap();
    std::fs::write(cut.join("plugin.yaml"), "name: cut\nlibrary: libnoop.so\n").unwrap();
    // Another architecture's library: the loader's own message names a missing file.
    let foreign = home.path().join("plugins/foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    let mut other = whole.clone();
    let aarch64 = if cfg!(target_arch = "aarch64") {
        62u16
    } else {
        183u16
    };
    other[18..20].copy_from_slice(&aarch64.to_le_bytes());
    std::fs::write(foreign.join("libnoop.so"), &other).unwrap();
    std::fs::write(
        foreign.join("plugin.yaml"),
        "name: foreign\nlibrary: libnoop.so\n",
    )
    .unwrap();
    // The same cut library as a gateway hook's native handler.
    let hook = home.path().join("hooks/cut-hook");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(hook.join("libnoop.so"), &whole[..4096]).unwrap();
    std::fs::write(
        hook.join("HOOK.yaml"),
        "name: cut-hook\nevents: [agent:start]\nlibrary: libnoop.so\n",
    )
    .unwrap();
    home.install("noop", "noop", None, None);
    home.config("plugins:\n  enabled: [cut, foreign, noop]\n");
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    run.expect_code(0);
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let error = |key: &str| -> String {
        list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["key"] == key)
            .and_then(|p| p["error"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let cut_error = error("cut");
    assert!(
        cut_error.contains(&format!(
            "{}: plugin 'cut' cannot be loaded (the file is cut short: 4096 bytes",
            cut.join("libnoop.so").display()
        )),
        "{cut_error}"
    );
    let foreign_error = error("foreign");
    assert!(
        foreign_error.contains("cannot be loaded (built for "),
        "{foreign_error}"
    );
    assert!(
        foreign_error.contains(", and this host is "),
        "{foreign_error}"
    );
    assert!(error("noop").is_empty(), "the other plugins load: {list:#}");
    let run = home.hermes(&["gateway", "hooks"], &[]);
    let text = format!("{}{}", run.stdout(), run.stderr());
    assert!(run.code() == 0 || run.code() == 1, "{}", run.describe());
    assert!(
        text.contains("the file is cut short: 4096 bytes"),
        "{}",
        run.describe()
    );
}
