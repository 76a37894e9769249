//! A plugin that panics, answers junk, registers unknown hooks or fails in `register` never
//! takes the host down; and the logging bridge carries a plugin's `tracing` into the host.

use hermes_tests::support::TestHome;

fn faulty_home(extra_config: Option<&str>) -> TestHome {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    home.install("faulty", "faulty", None, extra_config);
    let config = format!(
        "{{log: '{}', tag: z, answers: {{pre_tool_call: {{action: block, text: blocked after the panic}}}}}}",
        log.display()
    );
    home.install(
        "zz-recorder",
        "recorder",
        Some("zz-recorder"),
        Some(&config),
    );
    home.config("plugins:\n  enabled: [faulty, zz-recorder]\n");
    home
}

#[test]
fn a_panicking_callback_is_logged_and_dispatch_continues() {
    let home = faulty_home(None);
    let run = home.hermes(
        &[
            "plugins",
            "fire",
            "pre_tool_call",
            "--payload",
            r#"{"tool_name": "terminal"}"#,
        ],
        &[],
    );
    run.expect_code(0);
    let err = run.stderr();
    assert!(
        err.contains("Hook 'pre_tool_call' callback faulty::explode raised: deliberate panic in pre_tool_call for terminal"),
        "{}",
        run.describe()
    );
    // No `thread panicked` noise from the plugin's own panic hook.
    assert!(!err.contains("panicked at"), "{}", run.describe());
    // The next plugin still ran, and its block is the outcome.
    assert!(
        run.stdout()
            .contains("Outcome: blocked by zz-recorder::record: blocked after the panic"),
        "{}",
        run.describe()
    );
}

#[test]
fn junk_answers_are_warned_about_and_ignored() {
    let home = faulty_home(None);
    let run = home.hermes(
        &["plugins", "fire", "pre_tool_call", "--payload", "{}"],
        &[],
    );
    let err = run.stderr();
    for expected in [
        "Hook 'pre_tool_call' callback faulty::empty_block returned an unusable answer (a block without a message); ignoring it",
        "Hook 'pre_tool_call' callback faulty::bad_modify returned an unusable answer (a modify whose args are not a JSON object); ignoring it",
        "Hook 'pre_tool_call' callback faulty::unknown_action returned an unusable answer (action 'frobnicate' does not apply to pre_tool_call); ignoring it",
    ] {
        assert!(
            err.contains(expected),
            "missing {expected:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn an_error_from_a_callback_is_logged_like_a_raise() {
    let home = faulty_home(None);
    let run = home.hermes(
        &[
            "plugins",
            "fire",
            "pre_llm_call",
            "--payload",
            r#"{"session_id": "s1"}"#,
        ],
        &[],
    );
    run.expect_code(0);
    assert!(
        run.stderr().contains(
            "Hook 'pre_llm_call' callback faulty::returns_error raised: the memory backend is down"
        ),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout()
            .contains("Outcome: context: context from faulty"),
        "{}",
        run.describe()
    );
}

#[test]
fn unknown_hook_names_are_kept_and_warned_about() {
    let home = faulty_home(None);
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    let valid = hermes_hooks_abi::hooks::names_sorted().join(", ");
    assert!(
        run.stderr().contains(&format!(
            "Plugin 'faulty' registered unknown hook 'pre_tool_use' (valid: {valid}); did you mean 'pre_tool_call'?"
        )),
        "{}",
        run.describe()
    );
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(
        list["plugins"][0]["unknown_hooks"],
        serde_json::json!(["pre_tool_use"])
    );
    // Kept: firing that name by hand reaches it.
    let fired = home.hermes(&["plugins", "fire", "pre_tool_use"], &[]);
    assert!(
        fired.stdout().contains("faulty::misspelled  no opinion"),
        "{}",
        fired.describe()
    );
}

#[test]
fn a_panic_in_register_fails_that_plugin_only_and_keeps_its_earlier_hooks() {
    let home = faulty_home(Some("{panic_in_register: true}"));
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    run.expect_code(0);
    let lib = home.path().join("plugins/faulty/libfaulty.so");
    let error = format!(
        "{}: register() panicked: deliberate panic in register; run with HERMES_LOG=debug to see where",
        lib.display()
    );
    assert!(
        run.stderr()
            .contains(&format!("Failed to load plugin 'faulty': {error}\n")),
        "{}",
        run.describe()
    );
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(list["plugins"][0]["enabled"], false);
    assert_eq!(list["plugins"][0]["error"], error.as_str());
    assert_eq!(
        list["plugins"][0]["hooks"],
        serde_json::json!(["on_session_start"])
    );
    assert_eq!(list["plugins"][1]["enabled"], true);
}

#[test]
fn plugin_logs_reach_the_host_log_filtered_by_its_level() {
    let home = faulty_home(None);
    let payload = r#"{"session_id": "s-42"}"#;
    let info = home.hermes(
        &["plugins", "fire", "pre_llm_call", "--payload", payload],
        &[("HERMES_LOG", "info")],
    );
    let err = info.stderr();
    assert!(
        err.contains("faulty saw pre_llm_call session=\"s-42\"")
            && err.contains("plugin=\"faulty\""),
        "{}",
        info.describe()
    );
    assert!(
        !err.contains("faulty pre_llm_call debug detail"),
        "{}",
        info.describe()
    );

    let debug = home.hermes(
        &["plugins", "fire", "pre_llm_call", "--payload", payload],
        &[("RUST_LOG", "debug")],
    );
    assert!(
        debug.stderr().contains("faulty pre_llm_call debug detail"),
        "{}",
        debug.describe()
    );

    let quiet = home.hermes(
        &["plugins", "fire", "pre_llm_call", "--payload", payload],
        &[("HERMES_LOG", "error")],
    );
    assert!(
        !quiet.stderr().contains("faulty saw pre_llm_call"),
        "{}",
        quiet.describe()
    );
}

#[test]
fn with_debug_logs_a_panic_in_register_says_where_it_happened() {
    let home = faulty_home(Some("{panic_in_register: true}"));
    let run = home.hermes(&["plugins", "list"], &[("HERMES_LOG", "debug")]);
    run.expect_code(0);
    assert!(
        run.stderr()
            .contains("plugin 'faulty' panicked at tests/plugins/faulty/src/lib.rs:"),
        "{}",
        run.describe()
    );
}

/// Asserts that `error` is one line that names `file` and contains `fix`.
fn one_line_with_the_fix(error: &str, file: &std::path::Path, fix: &str) {
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.contains(&file.display().to_string()), "{error}");
    assert!(error.contains(fix), "{error}");
}

#[test]
fn errors_a_plugin_author_meets_are_one_line_naming_the_file_and_the_fix() {
    let home = TestHome::new();
    // A file that is not a shared library at all.
    let junk = home.path().join("plugins/junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("libjunk.so"), "not a library").unwrap();
    std::fs::write(
        junk.join("plugin.yaml"),
        "name: junk\nlibrary: libjunk.so\n",
    )
    .unwrap();
    // A plugin.yaml without the one field that has no default.
    let nolib = home.path().join("plugins/nolib");
    std::fs::create_dir_all(&nolib).unwrap();
    std::fs::write(nolib.join("plugin.yaml"), "name: nolib\nversion: 1.0.0\n").unwrap();
    // A manifest whose library was never copied.
    let unbuilt = home.path().join("plugins/unbuilt");
    std::fs::create_dir_all(&unbuilt).unwrap();
    std::fs::write(
        unbuilt.join("plugin.yaml"),
        "name: unbuilt\nlibrary: libunbuilt.so\n",
    )
    .unwrap();
    // A panic in register.
    home.install("faulty", "faulty", None, Some("{panic_in_register: true}"));
    home.config("plugins:\n  enabled: [junk, nolib, unbuilt, faulty]\n");
    let (_, report) = home.load();
    let error = |key: &str| {
        report
            .plugins
            .iter()
            .find(|p| p.key == key)
            .and_then(|p| p.error.clone())
            .unwrap_or_else(|| panic!("{key} loaded"))
    };
    one_line_with_the_fix(
        &error("junk"),
        &junk.join("libjunk.so"),
        "it must be a shared library built for this machine: rebuild it with `cargo build --release` from a crate with crate-type = [\"cdylib\"]",
    );
    one_line_with_the_fix(
        &error("nolib"),
        &nolib.join("plugin.yaml"),
        "add `library: libnolib.so` for a Rust plugin",
    );
    one_line_with_the_fix(
        &error("unbuilt"),
        &unbuilt.join("libunbuilt.so"),
        "build the plugin with `cargo build --release`",
    );
    one_line_with_the_fix(
        &error("faulty"),
        &home.path().join("plugins/faulty/libfaulty.so"),
        "register() panicked: deliberate panic in register; run with HERMES_LOG=debug to see where",
    );
}

#[test]
fn deeply_nested_yaml_is_refused_by_line_before_the_parser_walks_it() {
    let home = TestHome::new();
    let deep = |prefix: &str| format!("{prefix}{}{}\n", "{a: ".repeat(20_000), "}".repeat(20_000));
    home.config(&format!("plugins:\n  enabled: [nested]\n{}", deep("x: ")));
    let run = home.hermes(&["hooks", "list"], &[]);
    let config = home.path().join("config.yaml");
    assert!(
        run.stderr().contains(&format!(
            "{}: line 3: brackets nested deeper than 128 levels",
            config.display()
        )),
        "{}",
        run.describe()
    );
    // plugin.yaml and HOOK.yaml too, each named.
    home.config("plugins:\n  enabled: [nested]\n");
    let plugin = home.path().join("plugins/nested");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(plugin.join("plugin.yaml"), deep("name: nested\nconfig: ")).unwrap();
    let hook = home.path().join("hooks/nested");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(hook.join("HOOK.yaml"), deep("events: ")).unwrap();
    std::fs::write(hook.join("handler.py"), "def handle(e, c):\n    pass\n").unwrap();
    let run = home.hermes(&["plugins", "list"], &[]);
    assert!(
        run.stdout().contains(&format!(
            "Failed to parse {}: line 2: brackets nested deeper than 128 levels",
            plugin.join("plugin.yaml").display()
        )),
        "{}",
        run.describe()
    );
    let run = home.hermes(&["gateway", "hooks"], &[]);
    let text = format!("{}{}", run.stdout(), run.stderr());
    assert!(
        text.contains("line 1: brackets nested deeper than 128 levels"),
        "{}",
        run.describe()
    );
}
