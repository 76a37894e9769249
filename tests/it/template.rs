//! `plugin-template/` and `hermes plugins new`: rendered both ways (cargo-generate with no
//! `--define`, and the binary's embedded copy), compared file by file, built and tested on
//! their own, installed with `hermes plugins install` and fired.
//!
//! Everything runs offline: a generated crate gets the workspace's `Cargo.lock` and builds
//! into `target/it`, where the test plugins' dependencies are already built, so only the
//! generated crate and the two in-repo crates it depends on by path are compiled.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use hermes_tests::support::{TestHome, built, cargo_generate, run_ok, workspace};

/// Every hook of the interface, as `--hooks` takes them.
fn all_hooks() -> String {
    hermes_hooks_abi::hooks::HOOKS
        .iter()
        .map(|h| h.name)
        .collect::<Vec<_>>()
        .join(",")
}

/// A directory inside the checkout (under `target/`), as a user's `cargo generate` from the
/// checkout writes into, removed first.
fn scratch(name: &str) -> PathBuf {
    let dir = workspace().join("target").join("it-template").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// Renders the template with cargo-generate as `name` into `dest`, with exactly `defines`
/// (none: the user's plain command), run from the checkout.
fn cargo_generate_into(dest: &Path, name: &str, defines: &[String]) -> PathBuf {
    let run = cargo_generate_in(&workspace(), Some(dest), name, defines);
    assert!(run.status.success(), "{}", describe(&run));
    dest.join(name)
}

/// `cargo generate --path plugin-template --name name [--destination dest]` run in `dir`.
fn cargo_generate_in(dir: &Path, dest: Option<&Path>, name: &str, defines: &[String]) -> Output {
    let mut cmd = cargo_generate();
    cmd.current_dir(dir).args([
        "--path",
        "plugin-template",
        "--name",
        name,
        "--silent",
        "--vcs",
        "none",
    ]);
    if let Some(dest) = dest {
        std::fs::create_dir_all(dest).expect("create the destination");
        cmd.arg("--destination").arg(dest);
    }
    for define in defines {
        cmd.arg("--define").arg(define);
    }
    cmd.output().expect("cargo generate runs")
}

fn describe(out: &Output) -> String {
    format!(
        "--- {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A copy of the template as it is outside a built checkout: no recorded checkout path.
fn template_copy(into: &Path) {
    let from = workspace().join("hermes-host/plugin-template");
    for (rel, bytes) in tree(&from) {
        if rel == "checkout-dir.rhai" {
            continue;
        }
        let dest = into.join("plugin-template").join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
}

/// `hermes plugins new name --path dest extra...`, which must succeed.
fn plugins_new(dest: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let home = TestHome::new();
    let mut args = vec!["plugins", "new", name, "--path", dest.to_str().unwrap()];
    args.extend_from_slice(extra);
    home.hermes(&args, &[]).expect_code(0);
    dest.join(name)
}

/// Every file under `dir`, relative, with its bytes.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Asserts two generated crates are identical, naming the first file that differs.
fn assert_same_tree(a: &Path, b: &Path) {
    let (ta, tb) = (tree(a), tree(b));
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&ta),
        names(&tb),
        "{} and {} hold different files",
        a.display(),
        b.display()
    );
    for ((name, x), (_, y)) in ta.iter().zip(&tb) {
        assert!(
            x == y,
            "{name} differs:\n--- cargo generate\n{}\n--- hermes plugins new\n{}",
            String::from_utf8_lossy(x),
            String::from_utf8_lossy(y)
        );
    }
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

/// Runs the generated crate's own tests; checks that it compiles without warnings, is
/// formatted, and that at least `at_least` tests passed in all.
fn run_its_tests(crate_dir: &Path, name: &str, at_least: usize) {
    // The workspace's versions of every dependency: no network, and builds shared with the
    // test plugins in target/it.
    std::fs::copy(workspace().join("Cargo.lock"), crate_dir.join("Cargo.lock")).unwrap();
    // `--all-targets` also runs benches/hooks.rs once in criterion's test mode.
    let out = run_ok(&mut cargo(crate_dir, &["test", "--all-targets"]));
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
    assert!(
        passed >= at_least,
        "{passed} tests passed, expected {at_least} or more:\n{stdout}"
    );
    let mut fmt = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    fmt.args(["fmt", "--check", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"));
    run_ok(&mut fmt);
}

/// `major.minor` of the `version` in a workspace crate's Cargo.toml.
fn requirement_of(crate_dir: &str) -> String {
    let text = std::fs::read_to_string(workspace().join(crate_dir).join("Cargo.toml")).unwrap();
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("a version line");
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

#[test]
fn cargo_generate_without_defines_builds_against_the_checkout_and_matches_plugins_new() {
    // The user's command, from the checkout, into a directory outside it, with no --define.
    let out = tempfile::tempdir().unwrap();
    assert!(!out.path().starts_with(workspace()));
    let generated = cargo_generate_into(&out.path().join("cg"), "my-plugin", &[]);
    let cargo_toml = std::fs::read_to_string(generated.join("Cargo.toml")).unwrap();
    let root = workspace();
    let abi = format!(
        r#"hermes-hooks-abi = {{ path = "{}/hermes-hooks-abi" }}"#,
        root.display()
    );
    assert!(cargo_toml.contains(&abi), "{cargo_toml}");
    let host = format!(
        r#"hermes-host = {{ path = "{}/hermes-host", default-features = false, features = ["testing"] }}"#,
        root.display()
    );
    assert!(cargo_toml.contains(&host), "{cargo_toml}");
    assert!(cargo_toml.contains(r#"crate-type = ["cdylib", "rlib"]"#));
    assert!(cargo_toml.contains("\n[workspace]\n"));
    for machinery in [
        "cargo-generate.toml",
        "pre.rhai",
        "checkout.rhai",
        "checkout-dir.rhai",
    ] {
        assert!(
            !generated.join(machinery).exists(),
            "{machinery} was copied into the crate"
        );
    }

    // The binary's own copy renders the same bytes: one source of truth.
    let made = plugins_new(&out.path().join("hm"), "my-plugin", &[]);
    assert_same_tree(&generated, &made);

    // And so for every hook at once, with the gateway callback.
    let hooks = all_hooks();
    let generated = cargo_generate_into(
        &out.path().join("cg"),
        "every-hook",
        &[format!("hooks={hooks}"), "gateway=true".into()],
    );
    let made = plugins_new(
        &out.path().join("hm"),
        "every-hook",
        &["--hooks", &hooks, "--gateway"],
    );
    assert_same_tree(&generated, &made);
    // ... and with none.
    let generated = cargo_generate_into(&out.path().join("cg"), "no-hook", &["hooks=".into()]);
    let made = plugins_new(&out.path().join("hm"), "no-hook", &["--hooks", ""]);
    assert_same_tree(&generated, &made);
}

#[test]
fn an_unbuilt_checkout_is_found_above_the_destination_and_its_root_is_refused() {
    // A checkout as a fresh clone has it: the template, the interface crate, a workspace
    // root, and no recorded path (nothing was built).
    let clone = tempfile::tempdir().unwrap();
    template_copy(clone.path());
    std::fs::create_dir_all(clone.path().join("hermes-hooks-abi")).unwrap();
    std::fs::write(
        clone.path().join("hermes-hooks-abi/Cargo.toml"),
        "[package]\n",
    )
    .unwrap();
    let root_toml = "[workspace]\nresolver = \"3\"\n# a comment cargo-generate would drop\nmembers = [\"hermes-hooks-abi\"]\n";
    std::fs::write(clone.path().join("Cargo.toml"), root_toml).unwrap();

    // A destination below the checkout finds it.
    let generated = cargo_generate_in(clone.path(), Some(&clone.path().join("mine")), "below", &[]);
    assert!(generated.status.success(), "{}", describe(&generated));
    let cargo_toml = std::fs::read_to_string(clone.path().join("mine/below/Cargo.toml")).unwrap();
    let abi = format!("path = \"{}/hermes-hooks-abi\"", clone.path().display());
    assert!(cargo_toml.contains(&abi), "{cargo_toml}");

    // The checkout's root itself is refused before cargo-generate can rewrite its
    // Cargo.toml, with what to do instead.
    let refused = cargo_generate_in(clone.path(), None, "at-root", &[]);
    assert!(!refused.status.success(), "{}", describe(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let expected = format!(
        "the new crate would be made in {}, and cargo-generate would add it to that workspace and rewrite its Cargo.toml; remove the empty at-root/ it made there and render it elsewhere with --destination DIR (for example --destination ..), or run: hermes plugins new at-root --path DIR",
        clone.path().display()
    );
    assert!(stderr.contains(&expected), "{}", describe(&refused));
    assert_eq!(
        std::fs::read_to_string(clone.path().join("Cargo.toml")).unwrap(),
        root_toml
    );
    assert!(!clone.path().join("at-root/Cargo.toml").exists());
}

#[test]
fn outside_a_checkout_the_template_asks_for_the_workspace_releases() {
    // The template as a crates.io download of hermes-host has it: no checkout anywhere.
    let download = tempfile::tempdir().unwrap();
    template_copy(download.path());
    let out = tempfile::tempdir().unwrap();
    let run = cargo_generate_in(download.path(), Some(out.path()), "far-plugin", &[]);
    assert!(run.status.success(), "{}", describe(&run));
    let cargo_toml = std::fs::read_to_string(out.path().join("far-plugin/Cargo.toml")).unwrap();
    let abi = format!(
        "\nhermes-hooks-abi = \"{}\"\n",
        requirement_of("hermes-hooks-abi")
    );
    assert!(cargo_toml.contains(&abi), "{cargo_toml}");
    let host = format!(
        "\nhermes-host = {{ version = \"{}\", default-features = false, features = [\"testing\"] }}\n",
        requirement_of("hermes-host")
    );
    assert!(cargo_toml.contains(&host), "{cargo_toml}");
    // `--define abi_path=` still overrides, and the host crate is taken from beside it.
    let abi_path = workspace().join("hermes-hooks-abi");
    let define = [format!("abi_path={}", abi_path.display())];
    let run = cargo_generate_in(download.path(), Some(out.path()), "pinned", &define);
    assert!(run.status.success(), "{}", describe(&run));
    let cargo_toml = std::fs::read_to_string(out.path().join("pinned/Cargo.toml")).unwrap();
    assert!(
        cargo_toml.contains(&format!("path = \"{}\"", abi_path.display())),
        "{cargo_toml}"
    );
    assert!(cargo_toml.contains(&format!("path = \"{}/../hermes-host\"", abi_path.display())));
}

#[test]
fn a_new_plugin_builds_tests_installs_and_fires_with_the_readme_commands() {
    let started = Instant::now();
    let dest = scratch("flow");
    let crate_dir = plugins_new(&dest, "my-plugin", &[]);
    let readme = std::fs::read_to_string(crate_dir.join("README.md")).unwrap();
    let block = readme
        .split("## Build, install, run\n\n```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .unwrap_or_default();
    let commands: Vec<&str> = block.lines().collect();
    assert_eq!(commands.len(), 3, "{readme}");
    assert_eq!(commands[0], "cargo build --release");
    assert_eq!(commands[1], "hermes plugins install .");
    assert!(
        commands[2].starts_with("hermes plugins fire pre_tool_call --payload "),
        "{readme}"
    );

    // 1. Its own tests (unit tests with LocalHost, integration tests with TestHost).
    run_its_tests(&crate_dir, "my-plugin", 9);
    let tested = started.elapsed();

    // 2. The README's commands, as a user runs them (debug, to reuse the build).
    run_ok(&mut cargo(&crate_dir, &["build"]));
    let home = TestHome::new();
    let target = built().target_dir().display().to_string();
    let env = [
        ("CARGO_TARGET_DIR", target.as_str()),
        ("CARGO_NET_OFFLINE", "true"),
    ];
    let run = home.hermes(
        &["plugins", "install", crate_dir.to_str().unwrap(), "--debug"],
        &env,
    );
    run.expect_code(0);
    assert_eq!(
        home.mask(&run.stdout()),
        "Installed 'my-plugin' 0.1.0 into $HOME/plugins/my-plugin and enabled it.\n"
    );
    let payload = commands[2]
        .split("--payload '")
        .nth(1)
        .and_then(|p| p.strip_suffix('\''))
        .unwrap();
    let run = home.hermes(
        &["plugins", "fire", "pre_tool_call", "--payload", payload],
        &[],
    );
    run.expect_code(0);
    assert!(
        run.stdout().contains("Outcome: blocked by my-plugin::check_tool_call: my-plugin: `rm -rf /` is not allowed here"),
        "{}",
        run.describe()
    );

    // 3. A whole agent session in which its hooks fire at their points.
    let session = dest.join("session.yaml");
    std::fs::write(
        &session,
        "turns:\n  - user: tidy up\n    steps:\n      - tool: terminal\n        args: {command: rm -rf /}\n      - final: done\n",
    )
    .unwrap();
    let run = home.hermes(
        &[
            "run",
            session.to_str().unwrap(),
            "--cwd",
            dest.to_str().unwrap(),
            "--approvals",
            "deny",
        ],
        &[("HERMES_LOG", "info")],
    );
    run.expect_code(0);
    assert!(
        run.stdout()
            .contains(r#"<- {"error": "my-plugin: `rm -rf /` is not allowed here"}"#),
        "{}",
        run.describe()
    );
    assert!(run.stderr().contains("session ended"), "{}", run.describe());
    eprintln!(
        "new-plugin flow: tested in {tested:.1?}, installed and fired in {:.1?}",
        started.elapsed() - tested
    );
}

#[test]
fn every_hook_selection_passes_its_own_tests_even_with_a_second_callback() {
    let dest = scratch("selections");
    // Every hook and the gateway callback: one sample and its tests per hook.
    let every = plugins_new(&dest, "every-hook", &["--hooks", &all_hooks(), "--gateway"]);
    let lib = every.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    // A second callback on a hook that already has one, as an author adds it.
    let text = text.replacen(
        "    ctx.pre_llm_call(add_context);\n",
        "    ctx.pre_llm_call(add_context);\n    ctx.named(\"second\").pre_llm_call(|_e| None);\n",
        1,
    );
    assert!(text.contains("named(\"second\")"));
    std::fs::write(&lib, text).unwrap();
    let hooks = hermes_hooks_abi::hooks::HOOKS.len();
    // At least one unit and one integration test per hook, plus the gateway's.
    run_its_tests(&every, "every-hook", 2 * hooks + 2);

    // No hook at all still builds, warning-free, and its tests pass.
    let bare = plugins_new(&dest, "bare-plugin", &["--hooks", ""]);
    run_its_tests(&bare, "bare-plugin", 2);
    let manifest = hermes_host::plugins::Manifest::read(&bare).unwrap();
    assert!(manifest.provides_hooks.is_empty());
    assert_eq!(manifest.config, serde_json::json!({}));
}

#[test]
fn plugins_new_refuses_bad_input_with_one_line_and_writes_nothing() {
    let home = TestHome::new();
    let dest = tempfile::tempdir().unwrap();
    let path = dest.path().to_str().unwrap();
    let cases: [(&[&str], String); 4] = [
        (
            &["plugins", "new", "My Plugin", "--path", path],
            "hermes: 'My Plugin' is not a plugin name; use lowercase letters, digits, '-' and '_', starting with a letter (for example my-plugin)\n".into(),
        ),
        (
            &["plugins", "new", "../escape", "--path", path],
            "hermes: '../escape' is not a plugin name; use lowercase letters, digits, '-' and '_', starting with a letter (for example my-plugin)\n".into(),
        ),
        (
            &["plugins", "new", "ok", "--path", path, "--hooks", "pre_tool_call,pre_tool_cal"],
            "hermes: unknown hook 'pre_tool_cal' in --hooks; did you mean 'pre_tool_call'?\n".into(),
        ),
        (
            &["plugins", "new", "taken", "--path", path],
            format!(
                "hermes: {path}/taken is not empty; choose another --path, or pass --force to write the template's files into it\n"
            ),
        ),
    ];
    std::fs::create_dir_all(dest.path().join("taken")).unwrap();
    std::fs::write(dest.path().join("taken/notes.txt"), "mine").unwrap();
    for (args, expected) in cases {
        let run = home.hermes(args, &[]);
        run.expect_code(2);
        assert_eq!(run.stderr(), expected, "{}", run.describe());
    }
    let mut left: Vec<String> = std::fs::read_dir(dest.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["taken"]);
    assert_eq!(tree(&dest.path().join("taken")).len(), 1);
    // --force writes the template into it, keeping what else is there.
    home.hermes(&["plugins", "new", "taken", "--path", path, "--force"], &[])
        .expect_code(0);
    assert!(dest.path().join("taken/Cargo.toml").is_file());
    assert_eq!(
        std::fs::read_to_string(dest.path().join("taken/notes.txt")).unwrap(),
        "mine"
    );
}
