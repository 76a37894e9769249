//! `hermes plugins list | enable | disable | install | fire`: output and exit codes.

use hermes_tests::support::{TestHome, built, workspace};

fn recorder(home: &TestHome, dir: &str) {
    let log = home.path().join("calls.log");
    home.install(
        dir,
        "recorder",
        Some(dir),
        Some(&format!("{{log: '{}', tag: {dir}}}", log.display())),
    );
}

#[test]
fn list_shows_version_library_state_and_hooks() {
    let home = TestHome::new();
    recorder(&home, "alpha");
    recorder(&home, "beta");
    home.config("plugins:\n  enabled: [alpha]\n");
    let run = home.hermes(&["plugins", "list"], &[]);
    run.expect_code(0);
    let all_hooks = hermes_hooks_abi::hooks::HOOKS
        .iter()
        .map(|h| h.name)
        .collect::<Vec<_>>()
        .join(", ");
    let expected = format!(
        "Plugins in $HOME/plugins (host interface 1.3.0):\n\n  alpha 0.1.0  enabled\n      library: $HOME/plugins/alpha/librecorder.so (interface 1.3.0, debug)\n      hooks: {all_hooks}\n  beta 0.1.0  not loaded: not enabled in config (run `hermes plugins enable beta` to activate)\n      library: $HOME/plugins/beta/librecorder.so\n"
    );
    assert_eq!(home.mask(&run.stdout()), expected, "{}", run.describe());
}

#[test]
fn list_with_nothing_installed_says_how_to_install() {
    let home = TestHome::new();
    let run = home.hermes(&["plugins", "list"], &[]);
    assert_eq!(
        home.mask(&run.stdout()),
        "No plugins found in $HOME/plugins.\nInstall one with `hermes plugins install <crate dir>`.\n"
    );
}

#[test]
fn safe_mode_loads_nothing_by_flag_or_environment() {
    let home = TestHome::new();
    recorder(&home, "alpha");
    home.config("plugins:\n  enabled: [alpha]\n");
    for run in [
        home.hermes(&["--safe-mode", "plugins", "list", "--json"], &[]),
        home.hermes(
            &["plugins", "list", "--json"],
            &[("HERMES_SAFE_MODE", "yes")],
        ),
    ] {
        let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
        assert_eq!(list["safe_mode"], true, "{}", run.describe());
        assert_eq!(list["plugins"], serde_json::json!([]));
    }
}

#[test]
fn project_plugins_load_only_when_enabled_by_environment() {
    let home = TestHome::new();
    let project = tempfile::tempdir().unwrap();
    let log = home.path().join("calls.log");
    let lib = built().lib("recorder");
    let dest = project.path().join(".hermes/plugins/proj");
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::copy(&lib, dest.join("librecorder.so")).unwrap();
    std::fs::write(
        dest.join("plugin.yaml"),
        format!(
            "name: proj\nlibrary: librecorder.so\nconfig: {{log: '{}'}}\n",
            log.display()
        ),
    )
    .unwrap();
    home.config("plugins:\n  enabled: [proj]\n");
    let list = |env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(built().hermes());
        cmd.current_dir(project.path())
            .arg("--home")
            .arg(home.path())
            .args(["plugins", "list", "--json"]);
        cmd.env_remove("HERMES_ENABLE_PROJECT_PLUGINS");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(list(&[])["plugins"], serde_json::json!([]));
    let on = list(&[("HERMES_ENABLE_PROJECT_PLUGINS", "1")]);
    assert_eq!(on["plugins"][0]["name"], "proj");
    assert_eq!(on["plugins"][0]["enabled"], true);
}

#[test]
fn enable_and_disable_edit_config_yaml() {
    let home = TestHome::new();
    recorder(&home, "alpha");
    home.config("model: gpt-4\nplugins:\n  enabled: []\n");
    let run = home.hermes(&["plugins", "enable", "alpha"], &[]);
    run.expect_code(0);
    assert_eq!(
        home.mask(&run.stdout()),
        "Plugin 'alpha' enabled in $HOME/config.yaml.\n"
    );
    let again = home.hermes(&["plugins", "enable", "alpha"], &[]);
    assert_eq!(
        home.mask(&again.stdout()),
        "Plugin 'alpha' is already enabled in $HOME/config.yaml.\n"
    );
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        config.starts_with("model: gpt-4\n"),
        "other settings and their order are kept:\n{config}"
    );
    let list: serde_json::Value =
        serde_json::from_str(&home.hermes(&["plugins", "list", "--json"], &[]).stdout()).unwrap();
    assert_eq!(list["plugins"][0]["enabled"], true);

    let off = home.hermes(&["plugins", "disable", "alpha", "--json"], &[]);
    let answer: serde_json::Value = serde_json::from_str(&off.stdout()).unwrap();
    assert_eq!(
        (answer["state"].as_str(), answer["changed"].as_bool()),
        (Some("disabled"), Some(true))
    );
    let list: serde_json::Value =
        serde_json::from_str(&home.hermes(&["plugins", "list", "--json"], &[]).stdout()).unwrap();
    assert_eq!(list["plugins"][0]["error"], "disabled via config");

    // Not installed: nothing is enabled, unless forced.
    let unknown = home.hermes(&["plugins", "enable", "ghost"], &[]);
    unknown.expect_code(2);
    assert!(
        unknown
            .stderr()
            .contains("no plugin 'ghost' is installed in"),
        "{}",
        unknown.describe()
    );
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(!config.contains("ghost"), "{config}");
    let forced = home.hermes(&["plugins", "enable", "ghost", "--force"], &[]);
    forced.expect_code(0);
    assert!(
        forced
            .stdout()
            .contains("Note: no plugin 'ghost' is installed"),
        "{}",
        forced.describe()
    );
}

#[test]
fn enable_refuses_a_plugin_that_cannot_load_and_says_why() {
    let home = TestHome::new();
    let dir = home.path().join("plugins/broken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: broken
library: libbroken.so
",
    )
    .unwrap();
    std::fs::write(dir.join("libbroken.so"), b"not a library").unwrap();
    home.config(
        "model: x
",
    );
    let run = home.hermes(&["plugins", "enable", "broken"], &[]);
    run.expect_code(2);
    assert!(
        run.stderr()
            .contains("plugin 'broken' cannot load, so it is not enabled: ")
            && run.stderr().contains("not an ELF file")
            && run.stderr().contains("pass --force"),
        "{}",
        run.describe()
    );
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert_eq!(config, "model: x\n");
    home.hermes(&["plugins", "enable", "broken", "--force"], &[])
        .expect_code(0);
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(config.contains("broken"), "{config}");
}

#[test]
fn enable_refuses_to_rewrite_a_malformed_config() {
    let home = TestHome::new();
    home.config("plugins: [unclosed\n");
    let run = home.hermes(&["plugins", "enable", "alpha"], &[]);
    run.expect_code(2);
    assert!(
        home.mask(&run.stderr())
            .starts_with("hermes: $HOME/config.yaml: "),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr().contains("not changing it"),
        "{}",
        run.describe()
    );
}

#[test]
fn install_builds_copies_and_enables_a_plugin_crate() {
    let home = TestHome::new();
    let crate_dir = workspace().join("tests/plugins/noop");
    let target = built().target_dir().display().to_string();
    let run = home.hermes(
        &["plugins", "install", crate_dir.to_str().unwrap(), "--debug"],
        &[("CARGO_TARGET_DIR", &target)],
    );
    run.expect_code(0);
    assert_eq!(
        home.mask(&run.stdout()),
        "Installed 'noop' 0.1.0 into $HOME/plugins/noop and enabled it.\n"
    );
    assert!(home.path().join("plugins/noop/libnoop.so").is_file());
    let list: serde_json::Value =
        serde_json::from_str(&home.hermes(&["plugins", "list", "--json"], &[]).stdout()).unwrap();
    assert_eq!(list["plugins"][0]["enabled"], true);
    assert_eq!(
        list["plugins"][0]["hooks"],
        serde_json::json!(["pre_tool_call"])
    );
    // Hermes Agent reads the same directory: the shim that lets it load the library.
    assert_eq!(list["plugins"][0]["hermes_agent"], "shim");
    assert_eq!(
        std::fs::read_to_string(home.path().join("plugins/noop/__init__.py")).unwrap(),
        hermes_host::plugins::hermes_agent::SHIM
    );
    let fired = home.hermes(&["plugins", "fire", "pre_tool_call"], &[]);
    assert!(
        fired.stdout().contains("noop::noop  no opinion"),
        "{}",
        fired.describe()
    );
}

#[test]
fn install_errors_say_what_to_do() {
    let home = TestHome::new();
    let empty = tempfile::tempdir().unwrap();
    let run = home.hermes(&["plugins", "install", empty.path().to_str().unwrap()], &[]);
    run.expect_code(2);
    assert!(
        run.stderr()
            .contains("has no Cargo.toml, no __init__.py and no .claude-plugin/; give the directory of a plugin crate (Rust), of a Python plugin (plugin.yaml and __init__.py), or of a Claude Code plugin"),
        "{}",
        run.describe()
    );

    std::fs::write(empty.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    let run = home.hermes(&["plugins", "install", empty.path().to_str().unwrap()], &[]);
    run.expect_code(2);
    assert_eq!(
        run.stderr(),
        format!(
            "hermes: {}: no plugin.yaml; the crate directory needs a plugin.yaml with name, version and library (plugin-template/ has one)\n",
            empty.path().display()
        ),
        "{}",
        run.describe()
    );
}

#[test]
fn fire_reports_each_callback_and_the_outcome_as_json() {
    let home = TestHome::new();
    let log = home.path().join("calls.log");
    let config = format!(
        "{{log: '{}', answers: {{pre_tool_call: {{action: block, text: nope}}}}}}",
        log.display()
    );
    home.install("rec", "recorder", Some("rec"), Some(&config));
    home.config("plugins:\n  enabled: [rec]\n");
    let run = home.hermes(
        &[
            "plugins",
            "fire",
            "pre_tool_call",
            "--payload",
            r#"{"tool_name": "terminal"}"#,
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    let out: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(out["outcome"], "blocked by rec::record: nope");
    assert_eq!(out["callbacks"][0]["decision"], "block: nope");
    assert_eq!(out["callbacks"][0]["system"], "plugin");
}

#[test]
fn settings_in_config_yaml_reach_register_and_list_shows_them() {
    let home = TestHome::new();
    home.install("guardrail", "guardrail", None, None);
    let sudo = r#"{"tool_name": "terminal", "args": {"command": "sudo ls"}}"#;
    let fire = |home: &TestHome| {
        let run = home.hermes(
            &[
                "plugins",
                "fire",
                "pre_tool_call",
                "--payload",
                sudo,
                "--json",
            ],
            &[],
        );
        run.expect_code(0);
        let out: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
        out["outcome"].as_str().unwrap_or_default().to_string()
    };
    home.config("plugins:\n  enabled: [guardrail]\n");
    assert!(
        fire(&home).starts_with("blocked by guardrail"),
        "{}",
        fire(&home)
    );

    // The user's settings, merged over plugin.yaml's `config:` (default_patterns: true).
    let config = "plugins:\n  enabled: [guardrail]\n  settings:\n    guardrail:\n      # mine\n      default_patterns: false\n";
    home.config(config);
    assert_eq!(fire(&home), "allowed");
    let list = home.hermes(&["plugins", "list", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&list.stdout()).unwrap();
    let plugin = &list["plugins"][0];
    assert_eq!(
        plugin["settings"],
        serde_json::json!({"default_patterns": false})
    );
    assert_eq!(plugin["config"]["default_patterns"], false);
    assert_eq!(
        plugin["config"]["patterns"],
        serde_json::json!([]),
        "{plugin:#}"
    );
    let text = home.hermes(&["plugins", "list"], &[]).stdout();
    assert!(
        text.contains("settings: plugins.settings.guardrail in"),
        "{text}"
    );

    // Settings that are not a mapping: one warning naming the file, and the defaults.
    home.config("plugins:\n  enabled: [guardrail]\n  settings:\n    guardrail: [oops]\n");
    let run = home.hermes(
        &["plugins", "fire", "pre_tool_call", "--payload", sudo],
        &[],
    );
    run.expect_code(0);
    assert!(
        home.mask(&run.stderr()).contains("$HOME/config.yaml: plugins.settings.guardrail must be a mapping of the plugin's settings, not list; plugin 'guardrail' loads with the config of its plugin.yaml"),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout().contains("Outcome: blocked by guardrail"),
        "{}",
        run.describe()
    );
}

#[test]
fn reinstalling_keeps_an_edited_plugin_yaml_and_never_touches_settings() {
    let home = TestHome::new();
    let crate_dir = workspace().join("tests/plugins/noop");
    let target = built().target_dir().display().to_string();
    let env = [("CARGO_TARGET_DIR", target.as_str())];
    let install = |extra: &[&str]| {
        let mut args = vec!["plugins", "install", crate_dir.to_str().unwrap(), "--debug"];
        args.extend_from_slice(extra);
        let run = home.hermes(&args, &env);
        run.expect_code(0);
        home.mask(&run.stdout())
    };
    install(&[]);
    let config_yaml = home.path().join("config.yaml");
    let mut config = std::fs::read_to_string(&config_yaml).unwrap();
    config.push_str("  settings:\n    noop:\n      # the user's own\n      count: 3\n");
    std::fs::write(&config_yaml, &config).unwrap();

    // Unedited: a reinstall rewrites plugin.yaml as before and says nothing more.
    assert_eq!(
        install(&[]),
        "Installed 'noop' 0.1.0 into $HOME/plugins/noop and enabled it.\n"
    );
    assert_eq!(std::fs::read_to_string(&config_yaml).unwrap(), config);

    // Edited: kept, and said so.
    let installed = home.path().join("plugins/noop/plugin.yaml");
    let edited = std::fs::read_to_string(&installed).unwrap() + "# tuned by hand\n";
    std::fs::write(&installed, &edited).unwrap();
    assert_eq!(
        install(&[]),
        "Installed 'noop' 0.1.0 into $HOME/plugins/noop and enabled it.\nKept your edited $HOME/plugins/noop/plugin.yaml (it changed since the last install); pass --force to replace it with the crate's.\n"
    );
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), edited);
    assert_eq!(std::fs::read_to_string(&config_yaml).unwrap(), config);
    // The settings still reach the plugin: count: 3 registers three callbacks.
    let list = home.hermes(&["plugins", "list", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&list.stdout()).unwrap();
    assert_eq!(
        list["plugins"][0]["hooks"].as_array().map(Vec::len),
        Some(3),
        "{list:#}"
    );

    // --force replaces it with the crate's.
    install(&["--force"]);
    let fresh = std::fs::read_to_string(&installed).unwrap();
    assert!(!fresh.contains("# tuned by hand"));
    assert_eq!(std::fs::read_to_string(&config_yaml).unwrap(), config);
}

#[test]
fn a_reader_that_went_away_ends_a_command_quietly() {
    // stdout is a pipe whose read end is already closed: the first print fails with EPIPE.
    let (read, write) = std::io::pipe().unwrap();
    drop(read);
    let home = TestHome::new();
    let out = std::process::Command::new(hermes_tests::support::built().hermes())
        .arg("--home")
        .arg(home.path())
        .args(["hooks", "schema", "pre_tool_call"])
        .stdout(write)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn hooks_doctor_exits_1_on_problems_and_on_a_config_it_cannot_read() {
    let home = TestHome::new();
    home.config("hooks:\n  pre_tool_call:\n    - command: /nonexistent/guard.sh\n");
    let run = home.hermes(&["hooks", "doctor"], &[]);
    assert!(
        run.stdout().contains("issue(s) found"),
        "{}",
        run.describe()
    );
    run.expect_code(1);
    home.config("hooks: [unclosed\n");
    let run = home.hermes(&["hooks", "doctor"], &[]);
    assert!(
        !run.stdout().contains("No shell hooks configured"),
        "{}",
        run.describe()
    );
    assert!(run.stdout().contains("config.yaml"), "{}", run.describe());
    run.expect_code(1);
    home.config("model: x\n");
    home.hermes(&["hooks", "doctor"], &[]).expect_code(0);
}

#[test]
fn a_plugin_directory_without_a_manifest_is_listed_as_skipped_with_the_fix() {
    let home = TestHome::new();
    let dir = home.path().join("plugins/forgot");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("__init__.py"), "def register(ctx):\n    pass\n").unwrap();
    // A hidden directory (an install in progress) is not a plugin and is not listed.
    std::fs::create_dir_all(home.path().join("plugins/.x.installing-1")).unwrap();
    home.config("plugins:\n  enabled: [forgot]\n");
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    run.expect_code(0);
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let plugins = list["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1, "{list:#}");
    assert_eq!(plugins[0]["key"], "forgot");
    let error = plugins[0]["error"].as_str().unwrap();
    assert!(
        error.contains("forgot: no plugin.yaml, so it is not a plugin: add one"),
        "{error}"
    );
}

#[test]
fn a_profile_is_a_plain_name() {
    let home = TestHome::new();
    for bad in ["..", "/etc", "", "a/b"] {
        let run = home.hermes(&["-p", bad, "plugins", "list"], &[]);
        run.expect_code(2);
        assert!(
            run.stderr().contains("a profile is a plain name"),
            "{}",
            run.describe()
        );
    }
}

#[test]
fn a_library_field_that_is_not_a_string_says_so() {
    let home = TestHome::new();
    let dir = home.path().join("plugins/odd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.yaml"), "name: odd\nlibrary: {a: 1}\n").unwrap();
    home.config("plugins:\n  enabled: [odd]\n");
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let error = list["plugins"][0]["error"].as_str().unwrap();
    assert!(
        error.contains("`library` must be a file name such as `libodd.so`, not dict"),
        "{error}"
    );
}

#[test]
fn fifty_enables_at_once_all_land_and_the_rest_of_the_file_stays_byte_for_byte() {
    let home = TestHome::new();
    let original = "# the guard: DO NOT REMOVE\nmodel: &m gpt-4\nshadow: *m\nversion: '010'\nplugins:\n  enabled:\n    - guard   # keep\n  settings:\n    guard: {x: 1}\n";
    home.config(original);
    let hermes = hermes_tests::support::built().hermes();
    let children: Vec<std::process::Child> = (0..50)
        .map(|i| {
            std::process::Command::new(&hermes)
                .arg("--home")
                .arg(home.path())
                .args(["plugins", "enable", &format!("p{i}"), "--force"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    let config = hermes_host::config::Config::parse(&text).unwrap();
    let enabled = config.plugins_enabled().unwrap();
    assert_eq!(enabled.len(), 51, "{text}");
    for i in 0..50 {
        assert!(
            enabled.contains(&format!("p{i}")),
            "p{i} is missing:\n{text}"
        );
    }
    // Everything but the added `- pN` lines is as it was.
    let kept: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("- p"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(kept, original);
    let leftovers: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A shape that cannot be edited in place is refused, naming the line.
    home.config("model: x\nplugins: {enabled: [a]}\n");
    let run = home.hermes(&["plugins", "enable", "b", "--force"], &[]);
    run.expect_code(2);
    assert!(
        run.stderr()
            .contains("line 2: `plugins:` has its value on the same line"),
        "{}",
        run.describe()
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("config.yaml")).unwrap(),
        "model: x\nplugins: {enabled: [a]}\n"
    );
}

#[test]
fn misspelt_keys_get_a_did_you_mean_at_load_and_in_doctor() {
    let home = TestHome::new();
    let script = home.path().join("guard.sh");
    std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    home.config(&format!(
        "hook: {{}}\nplugins:\n  enable: [a]\nhooks:\n  pre_tool_call:\n    - command: {}\n      fail_close: true\n      timout: 1\n      matchr: write_file\n",
        script.display()
    ));
    let doctor = home.hermes(&["hooks", "doctor"], &[]);
    doctor.expect_code(1);
    let out = doctor.stdout();
    for says in [
        "hooks.pre_tool_call[0]: unknown key 'fail_close' — did you mean 'fail_closed'? (ignored)",
        "hooks.pre_tool_call[0]: unknown key 'timout' — did you mean 'timeout'? (ignored)",
        "hooks.pre_tool_call[0]: unknown key 'matchr' — did you mean 'matcher'? (ignored)",
        "config.yaml: unknown key 'hook' — did you mean 'hooks'? (ignored)",
        "config.yaml: unknown key 'plugins.enable' — did you mean 'enabled'? (ignored)",
    ] {
        assert!(out.contains(says), "{says}\n{}", doctor.describe());
    }
    // At load, as a warning.
    let list = home.hermes(&["hooks", "list"], &[]);
    assert!(
        list.stderr()
            .contains("unknown key 'fail_close' — did you mean 'fail_closed'?"),
        "{}",
        list.describe()
    );
    // The wrong type for the whole block.
    home.config("hooks: yes please\n");
    let doctor = home.hermes(&["hooks", "doctor"], &[]);
    doctor.expect_code(1);
    assert!(
        doctor
            .stdout()
            .contains("`hooks:` must be a mapping of event names to lists of hooks, not str"),
        "{}",
        doctor.describe()
    );
}
