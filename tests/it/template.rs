//! `plugin-template/`: rendered with cargo-generate into a directory outside the workspace,
//! built and tested on its own, installed with `hermes plugins install` and fired.
//!
//! Everything runs offline: the generated crate gets the workspace's `Cargo.lock` and builds
//! into `target/it`, where the test plugins' dependencies are already built, so only the
//! generated crate and the two in-repo crates it depends on by path are compiled.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use hermes_tests::support::{TestHome, built, cargo_generate, run_ok, workspace};

/// Every hook the template offers, as its `hook_*` placeholders name them.
const TEMPLATE_HOOKS: &[&str] = &[
    "pre_tool_call",
    "pre_llm_call",
    "transform_tool_result",
    "on_session_end",
];

/// Renders the template as `name` into `dest` with each of `hooks` on and the others off,
/// depending on the in-repo ABI crate by path.
fn render(dest: &Path, name: &str, hooks: &[&str]) -> PathBuf {
    let root = workspace();
    let mut cmd = cargo_generate();
    cmd.arg("--path")
        .arg(root.join("plugin-template"))
        .args(["--name", name, "--silent", "--vcs", "none"])
        .arg("--destination")
        .arg(dest)
        .arg("--define")
        .arg(format!(
            "abi_path={}",
            root.join("hermes-hooks-abi").display()
        ))
        .args(["--define", "author=Template Test"]);
    for hook in TEMPLATE_HOOKS {
        cmd.arg("--define")
            .arg(format!("hook_{hook}={}", hooks.contains(hook)));
    }
    run_ok(&mut cmd);
    let crate_dir = dest.join(name);
    // The workspace's versions of every dependency: no network, and builds shared with the
    // test plugins in target/it.
    std::fs::copy(root.join("Cargo.lock"), crate_dir.join("Cargo.lock")).expect("copy Cargo.lock");
    crate_dir
}

/// A cargo command for the generated crate: offline, building into `target/it`.
fn cargo(crate_dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(args)
        .arg("--offline")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(built().target_dir())
        .env_remove("RUSTFLAGS");
    cmd
}

/// Runs the generated crate's own tests; checks that it compiles without warnings and that
/// `expect_passed` tests passed in all.
fn run_its_tests(crate_dir: &Path, name: &str, expect_passed: usize) {
    let out = run_ok(&mut cargo(crate_dir, &["test"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(&format!("warning: `{name}`")),
        "the generated crate has warnings:\n{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let passed: usize = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(passed, expect_passed, "{stdout}");
    let mut fmt = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    fmt.args(["fmt", "--check", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"));
    run_ok(&mut fmt);
}

#[test]
fn the_template_renders_builds_installs_and_fires_outside_the_workspace() {
    let started = Instant::now();
    let out = tempfile::tempdir().expect("a temporary directory");
    assert!(!out.path().starts_with(workspace()));

    // 1. Render with every hook, outside any workspace.
    let crate_dir = render(out.path(), "my-plugin", TEMPLATE_HOOKS);
    for file in [
        "Cargo.toml",
        "README.md",
        "plugin.yaml",
        "src/lib.rs",
        "tests/plugin.rs",
    ] {
        assert!(crate_dir.join(file).is_file(), "{file} was not generated");
    }
    let cargo_toml = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(cargo_toml.contains(r#"crate-type = ["cdylib", "rlib"]"#));
    assert!(cargo_toml.contains("\n[workspace]\n"));
    let readme = std::fs::read_to_string(crate_dir.join("README.md")).unwrap();
    let steps = readme
        .split("## Build, install, run")
        .nth(1)
        .unwrap_or_default()
        .split("\n## ")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .count();
    assert!(
        (1..=5).contains(&steps),
        "README has {steps} steps:\n{readme}"
    );
    let rendered = started.elapsed();

    // 2. Its own tests: 7 unit tests with LocalHost, 6 that load the built library into a
    //    real host through hermes_host::testing.
    run_its_tests(&crate_dir, "my-plugin", 13);
    let tested = started.elapsed();

    // 3. Install it into a fresh home, as a user would (debug, to reuse the build).
    let home = TestHome::new();
    let target = built().target_dir().display().to_string();
    let run = home.hermes(
        &["plugins", "install", crate_dir.to_str().unwrap(), "--debug"],
        &[("CARGO_TARGET_DIR", &target), ("CARGO_NET_OFFLINE", "true")],
    );
    run.expect_code(0);
    assert_eq!(
        home.mask(&run.stdout()),
        "Installed 'my-plugin' 0.1.0 into $HOME/plugins/my-plugin and enabled it.\n"
    );
    let installed = started.elapsed();

    // 4. Fire each of its hooks through the CLI.
    let list = home.hermes(&["plugins", "list", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&list.stdout()).unwrap();
    assert_eq!(list["plugins"][0]["enabled"], true, "{list:#}");
    assert_eq!(
        list["plugins"][0]["hooks"],
        serde_json::json!(TEMPLATE_HOOKS)
    );
    let fire = |hook: &str, payload: &str| {
        let run = home.hermes(
            &["plugins", "fire", hook, "--payload", payload, "--json"],
            &[("HERMES_LOG", "info")],
        );
        run.expect_code(0);
        let out: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
        (out["outcome"].as_str().unwrap_or_default().to_string(), run)
    };
    let (outcome, run) = fire(
        "pre_tool_call",
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}, "session_id": "s-1"}"#,
    );
    assert_eq!(
        outcome,
        "blocked by my-plugin::check_tool_call: my-plugin: `rm -rf /` is not allowed here"
    );
    assert!(
        run.stderr()
            .contains(r#"blocked session_id="s-1" command="rm -rf /""#),
        "{}",
        run.describe()
    );
    let (outcome, _) = fire(
        "pre_tool_call",
        r#"{"tool_name": "terminal", "args": {"command": "ls"}}"#,
    );
    assert_eq!(outcome, "allowed");
    let (outcome, _) = fire(
        "pre_llm_call",
        r#"{"is_first_turn": true, "platform": "cli"}"#,
    );
    assert_eq!(outcome, "context: The user is working on the cli platform.");
    let long = "y".repeat(4100);
    let (outcome, _) = fire(
        "transform_tool_result",
        &format!(r#"{{"tool_name": "read_file", "result": "{long}"}}"#),
    );
    assert!(
        outcome.starts_with("replaced with: yyyy")
            && outcome.ends_with("\n[cut to 4000 characters by my-plugin]"),
        "{outcome}"
    );
    let (outcome, run) = fire(
        "on_session_end",
        r#"{"session_id": "s-1", "completed": true}"#,
    );
    assert_eq!(outcome, "observed (answers are ignored for this hook)");
    assert!(
        run.stderr()
            .contains(r#"session ended session_id="s-1" completed=true interrupted=false"#),
        "{}",
        run.describe()
    );

    // 4b. And a whole agent session in which its hooks fire at their points.
    let session = out.path().join("session.yaml");
    std::fs::write(
        &session,
        "turns:\n  - user: tidy up\n    steps:\n      - tool: terminal\n        args: {command: rm -rf /}\n      - final: done\n",
    )
    .unwrap();
    let trace = out.path().join("trace.jsonl");
    let run = home.hermes(
        &[
            "run",
            session.to_str().unwrap(),
            "--cwd",
            out.path().to_str().unwrap(),
            "--approvals",
            "deny",
            "--trace",
            "json",
            "--trace-file",
            trace.to_str().unwrap(),
        ],
        &[],
    );
    run.expect_code(0);
    assert!(
        run.stdout()
            .contains(r#"<- {"error": "my-plugin: `rm -rf /` is not allowed here"}"#),
        "{}",
        run.describe()
    );
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let callbacks: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["kind"] == "callback")
        .map(|r| {
            (
                r["hook"].as_str().unwrap_or_default().to_string(),
                r["callback"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    for hook in TEMPLATE_HOOKS {
        assert!(
            callbacks
                .iter()
                .any(|(h, cb)| h == hook && cb.starts_with("my-plugin::")),
            "{hook} did not fire in the session: {callbacks:?}"
        );
    }
    let fired = started.elapsed();

    // 5. The other side of every conditional: no hooks at all still builds, warning-free,
    //    and its tests pass (2: register succeeds; the host sees the hooks plugin.yaml lists).
    let bare = render(out.path(), "bare-plugin", &[]);
    run_its_tests(&bare, "bare-plugin", 2);
    let manifest = hermes_host::plugins::Manifest::read(&bare).unwrap();
    assert!(manifest.provides_hooks.is_empty());
    assert_eq!(manifest.config, serde_json::json!({}));

    eprintln!(
        "template test: rendered {:.1?}, built and tested {:.1?}, installed {:.1?}, fired {:.1?}, bare variant {:.1?}",
        rendered,
        tested - rendered,
        installed - tested,
        fired - installed,
        started.elapsed() - fired
    );
}
