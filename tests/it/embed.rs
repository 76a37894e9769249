//! `examples/embed`: the smallest agent host, built on the library alone, against a home
//! with the guardrail plugin installed; and `examples/static-host`, with guardrail linked in.

use std::process::Command;

use hermes_tests::support::{TestHome, built, static_host, workspace};

#[test]
fn the_embedding_example_asks_the_installed_guardrail_and_reports_who_blocked() {
    let home = TestHome::new();
    home.install("guardrail", "guardrail", None, None);
    home.config("plugins:\n  enabled: [guardrail]\n");
    let run = |args: &[&str]| {
        let out = Command::new(built().bin("embed"))
            .args(args)
            .env("HERMES_HOME", home.path())
            .env_remove("HERMES_SAFE_MODE")
            .output()
            .expect("the example runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, stdout) = run(&["sudo", "rm", "-rf", "/"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.starts_with("blocked by guardrail::check_terminal_command: Blocked by guardrail: "),
        "{stdout}"
    );
    let (code, stdout) = run(&["ls", "-la"]);
    assert_eq!((code, stdout.as_str()), (Some(0), "allowed\n"));
    let (code, _) = run(&[]);
    assert_eq!(code, Some(2));
    // A plugin's tool, called through every gate: it runs, and what it asks of the host
    // goes through the gates too (this host has no read_file).
    home.install("toolbox", "toolbox", None, None);
    home.config("plugins:\n  enabled: [guardrail, toolbox]\n");
    let (code, stdout) = run(&["--tool", "text_stats", r#"{"text": "two words"}"#]);
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), "{\"lines\":1,\"words\":2,\"bytes\":9}\n")
    );
    let (code, stdout) = run(&["--tool", "text_stats", r#"{"path": "notes.txt"}"#]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("cannot read notes.txt: unknown tool 'read_file'"),
        "{stdout}"
    );
}

#[test]
fn the_embedding_example_stays_small_and_its_library_has_no_cli_crates() {
    let main = std::fs::read_to_string(workspace().join("examples/embed/src/main.rs")).unwrap();
    let lines = main
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//"))
        .count();
    assert!(
        lines <= 45,
        "examples/embed/src/main.rs has {lines} lines of code"
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let tree = Command::new(cargo)
        .current_dir(workspace())
        .args([
            "tree",
            "--offline",
            "-p",
            "hermes-host",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let tree = String::from_utf8_lossy(&tree.stdout);
    for cli_crate in [
        "clap ",
        "anyhow ",
        "tracing-subscriber ",
        "tempfile ",
        "liquid ",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(cli_crate)),
            "{cli_crate}in:\n{tree}"
        );
    }
}

#[test]
fn a_statically_linked_plugin_blocks_with_no_library_installed_under_the_same_rules() {
    let home = TestHome::new();
    let run = |args: &[&str]| {
        let out = Command::new(static_host())
            .args(args)
            .env("HERMES_HOME", home.path())
            .env_remove("HERMES_SAFE_MODE")
            .output()
            .expect("the example runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert!(!home.path().join("plugins").exists());
    // Not enabled: found, reported as static, and not loaded, as a library plugin would be.
    let (code, stdout) = run(&["sudo", "ls"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.starts_with("plugin guardrail 0.1.0 (static): not enabled in config (run `hermes plugins enable guardrail` to activate)\n"),
        "{stdout}"
    );
    // Enabled: it blocks.
    home.config("plugins:\n  enabled: [guardrail]\n");
    let (code, stdout) = run(&["sudo", "ls"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("plugin guardrail 0.1.0 (static): enabled\n"),
        "{stdout}"
    );
    assert!(stdout.contains("blocked by guardrail::check_terminal_command: Blocked by guardrail: privilege escalation with sudo"), "{stdout}");
    // Settings from config.yaml reach it as they reach a library plugin.
    home.config("plugins:\n  enabled: [guardrail]\n  settings:\n    guardrail:\n      default_patterns: false\n");
    assert_eq!(run(&["sudo", "ls"]).0, Some(0));
    // Disabled: not loaded.
    home.config("plugins:\n  enabled: [guardrail]\n  disabled: [guardrail]\n");
    let (code, stdout) = run(&["sudo", "ls"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("(static): disabled via config"), "{stdout}");
}
