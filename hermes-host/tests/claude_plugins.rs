//! Claude Code plugins, installed unchanged with `hermes plugins install`: a plugin
//! directory (`.claude-plugin/plugin.json`, `hooks/hooks.json`, scripts named through
//! `${CLAUDE_PLUGIN_ROOT}`) or one plugin of a marketplace, shaped as published ones are
//! (a safety net on Bash, a Stop hook, events and handler types Hermes cannot run). Each
//! test runs the real `hermes` binary on a real home and a scripted agent session.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Env {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    src: tempfile::TempDir,
}

fn text(out: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const GUARD_PY: &str = r#"import json, os, sys
event = json.load(sys.stdin)
command = event.get("tool_input", {}).get("command", "")
with open(os.path.join(os.environ["CLAUDE_PLUGIN_DATA"], "seen.log"), "a") as f:
    f.write(command + "\n")
if "rm -rf" in command:
    print("safety-net: rm -rf is blocked", file=sys.stderr)
    sys.exit(2)
"#;

const STOP_SH: &str = "#!/bin/sh\ncat > /dev/null\necho \"stop from $CLAUDE_PLUGIN_ROOT\" >> \"$CLAUDE_PLUGIN_DATA/stop.log\"\n";

const HOOKS_JSON: &str = r#"{
  "description": "Safety net for Bash",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 \"${CLAUDE_PLUGIN_ROOT}/hooks/guard.py\"", "timeout": 20}]}
    ],
    "Stop": [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/stop.sh"}]}],
    "Notification": [
      {"hooks": [{"type": "command", "command": "notify-send done"}, {"type": "command", "command": "say done"}]}
    ],
    "UserPromptSubmit": [{"hooks": [{"type": "prompt", "prompt": "Is this request safe? $ARGUMENTS"}]}]
  }
}"#;

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
            src: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    /// A marketplace in the source directory with the safety-net plugin under
    /// `plugins/safety-net` (and one that lives elsewhere); returns the marketplace.
    fn marketplace(&self) -> PathBuf {
        let market = self.src.path().join("market");
        let plugin = market.join("plugins/safety-net");
        std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
        std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
        std::fs::create_dir_all(plugin.join("hooks")).unwrap();
        std::fs::write(
            market.join(".claude-plugin/marketplace.json"),
            r#"{"name": "team-tools", "owner": {"name": "Team"}, "plugins": [
                {"name": "safety-net", "source": "./plugins/safety-net", "description": "Blocks rm -rf"},
                {"name": "formatter", "source": {"source": "github", "repo": "someone/formatter"}}]}"#,
        )
        .unwrap();
        std::fs::write(
            plugin.join(".claude-plugin/plugin.json"),
            r#"{"name": "safety-net", "version": "0.3.1", "description": "Blocks rm -rf", "author": {"name": "Team"}}"#,
        )
        .unwrap();
        std::fs::write(plugin.join("hooks/hooks.json"), HOOKS_JSON).unwrap();
        std::fs::write(plugin.join("hooks/guard.py"), GUARD_PY).unwrap();
        let stop = plugin.join("hooks/stop.sh");
        std::fs::write(&stop, STOP_SH).unwrap();
        std::fs::set_permissions(&stop, std::fs::Permissions::from_mode(0o755)).unwrap();
        market
    }

    fn hermes(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.arg("--home").arg(self.home()).args(args);
        for var in ["HERMES_HOME", "HERMES_SAFE_MODE", "RUST_LOG", "HERMES_LOG"] {
            cmd.env_remove(var);
        }
        cmd.current_dir(self.work.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn install(&self, market: &Path) -> Output {
        let out = self.hermes(&[
            "plugins",
            "install",
            market.to_str().unwrap(),
            "--plugin",
            "safety-net",
            "--yes",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        out
    }

    /// A scripted session running `echo fine` and `rm -rf <dir>` in the terminal; returns
    /// its output.
    fn session(&self) -> String {
        let victim = self.work.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        let script = self.work.path().join("s.yaml");
        std::fs::write(
            &script,
            format!(
                "turns:\n  - user: clean up\n    steps:\n      - tool: terminal\n        args: {{command: echo fine}}\n      - tool: terminal\n        args: {{command: \"rm -rf {}\"}}\n      - final: done\n",
                victim.display()
            ),
        )
        .unwrap();
        let out = self.hermes(&["run", script.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        text(&out)
    }

    fn data(&self) -> PathBuf {
        self.home().join("plugin-data/claude-safety-net")
    }
}

/// A published-shape Claude Code plugin from a marketplace installs unchanged: the install
/// lists the commands it will run (from the installed copy) and what it drops with the
/// number of hooks, then its hooks decide in a session as in Claude Code, with
/// `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA` set; `plugins list` shows it.
#[test]
fn a_claude_code_plugin_from_a_marketplace_installs_and_decides() {
    let env = Env::new();
    let market = env.marketplace();
    let out = env.install(&market);
    let shown = text(&out);
    let installed = std::fs::canonicalize(env.home())
        .unwrap()
        .join("plugins/safety-net");
    assert!(
        shown.contains(&format!(
            "pre_tool_call [Bash]: python3 \"{}/hooks/guard.py\"",
            installed.display()
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "post_llm_call: {}/hooks/stop.sh",
            installed.display()
        )),
        "{shown}"
    );
    assert!(
        shown.contains("not here: Notification (2 hook(s))"),
        "{shown}"
    );
    assert!(
        shown.contains("UserPromptSubmit: a hook of type \"prompt\", which asks a model"),
        "{shown}"
    );
    let session = env.session();
    assert!(session.contains("<- {\"output\":\"fine\\n\""), "{session}");
    assert!(
        session.contains("<- {\"error\": \"safety-net: rm -rf is blocked\"}"),
        "{session}"
    );
    assert!(env.work.path().join("victim").is_dir(), "the guard held");
    let seen = std::fs::read_to_string(env.data().join("seen.log")).unwrap();
    assert!(seen.starts_with("echo fine\nrm -rf "), "{seen}");
    assert_eq!(
        std::fs::read_to_string(env.data().join("stop.log")).unwrap(),
        format!("stop from {}\n", installed.display())
    );
    let list = text(&env.hermes(&["plugins", "list"]));
    assert!(list.contains("safety-net 0.3.1  enabled"), "{list}");
    assert!(list.contains("kind: claude code plugin"), "{list}");
    assert!(
        list.contains(&format!(
            "from: Claude Code plugin, installed from the marketplace {} (--plugin safety-net)",
            market.display()
        )),
        "{list}"
    );
    assert!(
        list.contains("hooks: pre_tool_call, post_llm_call"),
        "{list}"
    );
}

/// Consent: without `--yes` and without a terminal nothing is installed; the marketplace
/// says which plugins it has, and one that lives elsewhere is named with what to do.
#[test]
fn an_install_needs_consent_and_a_marketplace_names_its_plugins() {
    let env = Env::new();
    let market = env.marketplace();
    let m = market.to_str().unwrap();
    let out = env.hermes(&["plugins", "install", m, "--plugin", "safety-net"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("run again with --yes to accept them"),
        "{}",
        text(&out)
    );
    assert!(!env.home().join("plugins/safety-net").exists());
    let out = env.hermes(&["plugins", "install", m]);
    assert!(
        text(&out).contains("say which plugin to install with --plugin NAME")
            && text(&out).contains("it lists: safety-net, formatter"),
        "{}",
        text(&out)
    );
    let out = env.hermes(&["plugins", "install", m, "--plugin", "formatter", "--yes"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("not from this directory; fetch it (git clone)"),
        "{}",
        text(&out)
    );
}

/// Its hooks are pinned at install like any shell hook's: a script changed afterwards
/// does not run. Disable stops its hooks, a reinstall keeps its data directory, and
/// uninstall removes it and its approvals but not its data.
#[test]
fn a_claude_plugin_is_pinned_disabled_reinstalled_and_uninstalled_as_a_whole() {
    let env = Env::new();
    let market = env.marketplace();
    env.install(&market);
    let out = env.hermes(&["plugins", "disable", "safety-net"]);
    assert!(out.status.success(), "{}", text(&out));
    let session = env.session();
    assert!(
        !session.contains("safety-net: rm -rf is blocked"),
        "{session}"
    );
    assert!(!env.data().join("seen.log").exists());
    // Reinstalled (enabled again): the data directory and what is in it stay.
    std::fs::write(env.data().join("keep.txt"), "mine").unwrap();
    env.install(&market);
    assert_eq!(
        std::fs::read_to_string(env.data().join("keep.txt")).unwrap(),
        "mine"
    );
    // The installed guard changed behind hermes's back: not run.
    let guard = env.home().join("plugins/safety-net/hooks/guard.py");
    std::fs::write(&guard, "import sys\nsys.exit(0)\n").unwrap();
    let session = env.session();
    assert!(
        session.contains("changed since it was approved"),
        "{session}"
    );
    let out = env.hermes(&["plugins", "uninstall", "safety-net"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("2 hook approval(s) revoked"),
        "{}",
        text(&out)
    );
    assert!(!env.home().join("plugins/safety-net").exists());
    assert!(env.data().join("keep.txt").is_file());
    let list = text(&env.hermes(&["plugins", "list"]));
    assert!(!list.contains("safety-net 0.3.1"), "{list}");
}

/// A plugin whose manifest carries its hooks inline, and a plain plugin directory (no
/// marketplace), install the same way.
#[test]
fn inline_hooks_in_plugin_json_install_from_a_plugin_directory() {
    let env = Env::new();
    let plugin = env.src.path().join("inline");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(plugin.join("scripts")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "inline", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "python3 ${CLAUDE_PLUGIN_ROOT}/scripts/guard.py"}]}]}}"#,
    )
    .unwrap();
    std::fs::write(plugin.join("scripts/guard.py"), GUARD_PY).unwrap();
    let out = env.hermes(&["plugins", "install", plugin.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    let session = env.session();
    assert!(
        session.contains("<- {\"error\": \"safety-net: rm -rf is blocked\"}"),
        "{session}"
    );
    assert!(
        env.home()
            .join("plugin-data/claude-inline/seen.log")
            .is_file()
    );
}

/// Matchers on the events Claude Code matches on besides tools, as published plugins write
/// them: two `SessionStart` groups running one script (`startup|resume` and
/// `clear|compact`), so that it runs once per start; a `compact`-only group that a fresh
/// start never runs; `SubagentStart` and `SubagentStop` matched on the child's agent type;
/// and SessionStart and Stop for the main session only, as Claude Code fires them.
#[test]
fn session_and_subagent_matchers_choose_the_groups_that_run_as_in_claude_code() {
    let env = Env::new();
    let plugin = env.src.path().join("starter");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(plugin.join("hooks")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "starter", "version": "1.0.0"}"#,
    )
    .unwrap();
    let run = |script: &str| {
        format!(
            r#"{{"type": "command", "command": "python3 ${{CLAUDE_PLUGIN_ROOT}}/hooks/{script}"}}"#
        )
    };
    std::fs::write(
        plugin.join("hooks/hooks.json"),
        format!(
            r#"{{"hooks": {{
  "SessionStart": [
    {{"matcher": "startup|resume", "hooks": [{start}]}},
    {{"matcher": "clear|compact", "hooks": [{start}]}},
    {{"matcher": "compact", "hooks": [{compact}]}}
  ],
  "SubagentStart": [{{"matcher": "Explore", "hooks": [{log}]}}],
  "SubagentStop": [{{"matcher": "^Pl", "hooks": [{log}]}}],
  "Stop": [{{"hooks": [{stop}]}}]
}}}}"#,
            start = run("session_start.py"),
            compact = run("after_compact.py"),
            log = run("log_agent.py"),
            stop = run("stop.py"),
        ),
    )
    .unwrap();
    std::fs::write(
        plugin.join("hooks/session_start.py"),
        r#"import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PLUGIN_DATA"], "starts.log"), "a") as f:
    f.write(event["source"] + "\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "use the starter skills"}}))
"#,
    )
    .unwrap();
    std::fs::write(
        plugin.join("hooks/stop.py"),
        "import json, os, sys\nevent = json.load(sys.stdin)\nopen(os.path.join(os.environ['CLAUDE_PLUGIN_DATA'], 'stops.log'), 'a').write(event['session_id'] + '\\n')\n",
    )
    .unwrap();
    std::fs::write(
        plugin.join("hooks/after_compact.py"),
        "import os\nopen(os.path.join(os.environ['CLAUDE_PLUGIN_DATA'], 'compact.log'), 'a').write('ran\\n')\n",
    )
    .unwrap();
    std::fs::write(
        plugin.join("hooks/log_agent.py"),
        r#"import json, os, sys
event = json.load(sys.stdin)
line = event["hook_event_name"] + " " + event["agent_type"] + " " + event.get("last_assistant_message", "-")
with open(os.path.join(os.environ["CLAUDE_PLUGIN_DATA"], "agents.log"), "a") as f:
    f.write(line + "\n")
"#,
    )
    .unwrap();
    let out = env.hermes(&["plugins", "install", plugin.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("on_session_start [startup|resume]: python3 "),
        "{}",
        text(&out)
    );

    let work = env.work.path();
    let run_session = |name: &str, session: &str| {
        std::fs::write(work.join(name), session).unwrap();
        let out = env.hermes(&["run", work.join(name).to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        (String::from_utf8_lossy(&out.stdout).to_string(), text(&out))
    };
    let (said, shown) = run_session(
        "s.yaml",
        "turns:\n  - user: hello\n    steps:\n      - final: hi\n        echo: true\n",
    );
    assert!(
        said.contains("[the model received: hello\n\nuse the starter skills]"),
        "{shown}"
    );
    assert_eq!(
        said.matches("use the starter skills").count(),
        1,
        "the context is given once: {shown}"
    );
    let data = env.home().join("plugin-data/claude-starter");
    let read = |f: &str| std::fs::read_to_string(data.join(f)).unwrap_or_default();
    assert_eq!(read("starts.log"), "startup\n", "{shown}");
    assert_eq!(read("compact.log"), "", "a fresh start is no compaction");

    for (name, answer) in [("explore", "found the bug"), ("plan", "a plan")] {
        std::fs::write(
            work.join(format!("{name}.yaml")),
            format!("turns:\n  - user: {name}\n    steps:\n      - final: {answer}\n"),
        )
        .unwrap();
    }
    let (_, shown) = run_session(
        "d.yaml",
        "turns:\n  - user: look around\n    steps:\n      - tool: delegate_task\n        args: {tasks: [{script: explore.yaml, role: Explore}, {script: plan.yaml, role: Plan}]}\n      - final: done\n",
    );
    // Claude Code fires SessionStart and Stop for the main session only: the children's
    // sessions run their tools' hooks but not these.
    assert_eq!(read("starts.log"), "startup\nstartup\n", "{shown}");
    let stops = read("stops.log");
    assert_eq!(
        stops.lines().count(),
        2,
        "one Stop per main-session turn: {stops}"
    );
    let mut agents: Vec<String> = read("agents.log").lines().map(str::to_string).collect();
    agents.sort();
    assert_eq!(
        agents,
        ["SubagentStart Explore -", "SubagentStop Plan a plan"],
        "{shown}"
    );
}
