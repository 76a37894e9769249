//! `examples/embed`: the smallest agent host, built on the library alone, against a home
//! with the guardrail plugin installed.

use std::process::Command;

use hermes_tests::support::{TestHome, built, workspace};

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
}

#[test]
fn the_embedding_example_stays_small_and_its_library_has_no_cli_crates() {
    let main = std::fs::read_to_string(workspace().join("examples/embed/src/main.rs")).unwrap();
    let lines = main
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//"))
        .count();
    assert!(
        lines <= 40,
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
