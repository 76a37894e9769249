//! `docs/hooks.md` in step with the code: its generated sections are what the hook table and
//! the schema generator produce, every hook of the table is documented with every field,
//! and no documented hook is missing from the table.
//!
//! `HERMES_BLESS=1 cargo test -p hermes-tests --test it docs` rewrites the generated sections.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use hermes_hooks_abi::hooks::{FieldKind, HOOKS, HookSpec, OutcomeKind};
use hermes_host::schema;
use hermes_tests::support::workspace;

const HOOKS_MD: &str = "docs/hooks.md";

/// What a callback of `kind` returns, and how the host combines the answers. One arm per
/// kind and no catch-all: a new kind does not compile until it is documented.
fn outcome_doc(kind: OutcomeKind) -> (&'static str, &'static str) {
    match kind {
        OutcomeKind::Observer => (
            "`()`: an observer",
            "Every callback runs; answers are ignored.",
        ),
        OutcomeKind::ToolDecision => (
            "`ToolDecision`: `Continue`, `Block(message)`, `Modify(args)` or `Approve { message, rule_key }`",
            "The first `Block` with a non-empty message (or `Approve`), in registry order, wins: the tool does not run and the model sees `{\"error\": \"<message>\"}`. Every `Modify` is merged over the arguments (top-level keys, a later key wins), in registry order; each callback sees the original arguments. An `Approve` (interface 1.3) counts as a directive like a block, and the first of the two in registry order decides: an approve sends the call to the approval gate even where no rule would, and a denial, a timeout or no one to ask blocks it.",
        ),
        OutcomeKind::Context => (
            "`Option<String>`: context to add",
            "Every non-blank text, in registry order, joined with a blank line, is appended to this turn's user message (after a blank line) when it is sent; it is never persisted.",
        ),
        OutcomeKind::Replace => (
            "`Option<String>`: the replacement",
            "The first `Some`, in registry order, replaces the text, even an empty one.",
        ),
        OutcomeKind::ReplaceNonEmpty => (
            "`Option<String>`: the replacement",
            "The first non-empty `Some`, in registry order, replaces the text.",
        ),
        OutcomeKind::Verify => (
            "`VerifyDecision`: `Finish` or `Continue(message)`",
            "The first `Continue` with a non-empty message, in registry order, keeps the agent working: its held-back answer stays in the history, unseen, and the message is its next instruction. At most `agent.max_verify_nudges` (3) in a row; `attempt` counts them.",
        ),
        OutcomeKind::Dispatch => (
            "`DispatchDecision`: `Continue`, `Skip(reason)`, `Rewrite(text)` or `Allow`",
            "Every callback runs (as the reference's `invoke_hook` calls them all); the first answer other than `Continue`, in registry order, decides, and later decisions are ignored (logged at debug level). `Skip` drops the message (no reply, no pairing, no authorisation), `Rewrite` replaces its text, `Allow` dispatches it as is.",
        ),
    }
}

/// The type a plugin's accessor for a field of `kind` returns.
fn accessor_type(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Str => "`&str`",
        FieldKind::OptStr => "`Option<&str>`",
        FieldKind::Json => "`Json` (`.value()` parses it)",
        FieldKind::Int => "`i64`",
        FieldKind::OptInt => "`Option<i64>`",
        FieldKind::Bool => "`bool`",
        FieldKind::Float => "`f64`",
    }
}

/// `doc` on one line (the table's docs are wrapped source comments).
fn one_line(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The event types, by hook: the name of the typed view a plugin's closure receives, which
/// is also the name of the host-side payload struct. Written as paths, so a wrong name does
/// not compile; a hook missing here fails the test.
macro_rules! event_types {
    ($($Event:ident),* $(,)?) => {
        &[$((hermes_hooks_abi::hooks::payload::$Event::HOOK, stringify!($Event))),*]
    };
}

const EVENT_TYPES: &[(&str, &str)] = event_types![
    PreToolCallEvent,
    PostToolCallEvent,
    PreLlmCallEvent,
    PostLlmCallEvent,
    SessionStartEvent,
    SessionEndEvent,
    SessionFinalizeEvent,
    SessionResetEvent,
    SubagentStopEvent,
    SubagentStartEvent,
    PreVerifyEvent,
    StreamStartEvent,
    StreamDeltaEvent,
    StreamEndEvent,
    InterimMessageEvent,
    ApiRequestErrorEvent,
    KanbanTaskClaimedEvent,
    KanbanTaskCompletedEvent,
    KanbanTaskBlockedEvent,
    GatewayDispatchEvent,
    ApprovalRequestEvent,
    ApprovalResponseEvent,
    TransformToolResultEvent,
    TransformTerminalOutputEvent,
    ApiRequestEvent,
    ApiResponseEvent,
    TransformLlmOutputEvent,
];

fn event_type(hook: &HookSpec) -> &'static str {
    EVENT_TYPES
        .iter()
        .find(|(name, _)| *name == hook.name)
        .map(|(_, ty)| *ty)
        .unwrap_or_else(|| panic!("add the event type of `{}` to EVENT_TYPES", hook.name))
}

fn plugin_hooks_section() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| hook | since | returns | fires |\n|---|---|---|---|");
    for hook in HOOKS {
        let (returns, _) = outcome_doc(hook.outcome);
        let first = one_line(hook.doc);
        let first = first
            .split(". ")
            .next()
            .unwrap_or_default()
            .trim_end_matches('.');
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | {} | {} | {first}. |",
            hook.name, hook.name, hook.since, returns
        );
    }
    for hook in HOOKS {
        let (returns, combine) = outcome_doc(hook.outcome);
        let _ = writeln!(out, "\n### `{}`\n", hook.name);
        let _ = writeln!(out, "{}\n", one_line(hook.doc));
        let _ = writeln!(
            out,
            "- **Register:** `ctx.{}(|e| ...)`; the event is `hermes_hooks_abi::hooks::{}` (typed accessors below), the host-side payload `hooks::payload::{}`.",
            hook.name,
            event_type(hook),
            event_type(hook)
        );
        let _ = writeln!(out, "- **Since:** interface {}.", hook.since);
        let _ = writeln!(out, "- **Returns:** {returns}.");
        let _ = writeln!(out, "- **Combining:** {combine}\n");
        let _ = writeln!(
            out,
            "| field | accessor returns | since | meaning |\n|---|---|---|---|"
        );
        for f in hook.fields {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                f.name,
                accessor_type(f.kind),
                f.since,
                one_line(f.doc)
            );
        }
    }
    out
}

fn shell_payloads_section() -> String {
    let mut out = String::from(
        "| event | `tool_name` | `tool_input` | `session_id` from | `extra` keys, in order | an answer |\n|---|---|---|---|---|---|\n",
    );
    for event in schema::events() {
        let payload = schema::payload_schema(event).unwrap();
        let props = &payload["properties"];
        let kind = |key: &str| match props[key]["type"].as_str() {
            Some("null") => "null".to_string(),
            _ => "the tool".to_string(),
        };
        let tool_input = match props["tool_input"]["type"].as_str() {
            Some("null") => "null",
            _ => "its arguments",
        };
        let session = props["session_id"]["description"]
            .as_str()
            .unwrap_or_default();
        let session = match session.split('`').nth(1) {
            Some(field) if session.starts_with("The ") => format!("`{field}`"),
            _ => "always `\"\"`".to_string(),
        };
        let extra: Vec<String> = props["extra"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| format!("`{}`", k.as_str().unwrap_or_default()))
            .collect();
        let answer = match hermes_hooks_abi::hooks::spec(event).map(|s| s.outcome) {
            Some(OutcomeKind::ToolDecision) => "block, modify or approve",
            Some(OutcomeKind::Context) => "context",
            Some(OutcomeKind::Verify) => "continue",
            _ => "ignored",
        };
        let _ = writeln!(
            out,
            "| `{event}` | {} | {tool_input} | {session} | {} | {answer} |",
            kind("tool_name"),
            extra.join(", ")
        );
    }
    out
}

/// Replaces the text between `<!-- begin generated: NAME ... -->` and
/// `<!-- end generated: NAME -->` in `doc` with `body`.
fn with_section(doc: &str, name: &str, body: &str) -> String {
    let begin = format!("<!-- begin generated: {name}");
    let end = format!("<!-- end generated: {name} -->");
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("{HOOKS_MD} has no `{begin} ... -->` marker"));
    let start = start + doc[start..].find("-->\n").expect("the begin marker ends") + 4;
    let stop = doc
        .find(&end)
        .unwrap_or_else(|| panic!("{HOOKS_MD} has no `{end}` marker"));
    format!("{}\n{body}\n{}", &doc[..start], &doc[stop..])
}

#[test]
fn the_generated_sections_of_hooks_md_are_up_to_date() {
    let path = workspace().join(HOOKS_MD);
    let doc = std::fs::read_to_string(&path).unwrap();
    let fresh = with_section(&doc, "plugin-hooks", &plugin_hooks_section());
    let fresh = with_section(&fresh, "shell-payloads", &shell_payloads_section());
    if std::env::var_os("HERMES_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    assert!(
        doc == fresh,
        "{HOOKS_MD} is out of date with the hook table; run \
         `HERMES_BLESS=1 cargo test -p hermes-tests --test it docs` and review the diff"
    );
}

/// The `### \`name\`` subsections of the `## ` section whose title starts with `title`, with
/// their text.
fn subsections(doc: &str, title: &str) -> Vec<(String, String)> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(title))
        .unwrap_or_else(|| panic!("{HOOKS_MD} has no `## {title}` section"));
    section
        .split("\n### ")
        .skip(1)
        .filter_map(|sub| {
            let name = sub.strip_prefix('`')?.split('`').next()?.to_string();
            Some((name, sub.to_string()))
        })
        .collect()
}

#[test]
fn every_plugin_hook_is_documented_with_every_field_and_nothing_else_is() {
    let doc = std::fs::read_to_string(workspace().join(HOOKS_MD)).unwrap();
    let documented = subsections(&doc, "Plugin hooks");
    let names: BTreeSet<&str> = documented.iter().map(|(n, _)| n.as_str()).collect();
    let table: BTreeSet<&str> = HOOKS.iter().map(|h| h.name).collect();
    let missing: Vec<_> = table.difference(&names).collect();
    let unknown: Vec<_> = names.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "hooks not documented in {HOOKS_MD}: {missing:?}"
    );
    assert!(
        unknown.is_empty(),
        "documented hooks that are not in HOOKS: {unknown:?}"
    );
    for hook in HOOKS {
        let text = &documented.iter().find(|(n, _)| n == hook.name).unwrap().1;
        for f in hook.fields {
            assert!(
                text.contains(&format!("| `{}` |", f.name)),
                "{HOOKS_MD}: `{}` does not document its field `{}`",
                hook.name,
                f.name
            );
        }
    }
}

#[test]
fn every_shell_hook_event_in_the_docs_exists_and_every_event_is_there() {
    let doc = std::fs::read_to_string(workspace().join(HOOKS_MD)).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Shell hooks"))
        .expect("a `## Shell hooks` section");
    let table = section
        .split("<!-- begin generated: shell-payloads")
        .nth(1)
        .and_then(|t| t.split("<!-- end generated: shell-payloads").next())
        .expect("the shell-payloads table inside `## Shell hooks`");
    let rows: BTreeSet<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let events: BTreeSet<&str> = schema::events().into_iter().collect();
    assert_eq!(rows, events);
}

/// The ```yaml blocks of a doc, in order.
fn yaml_blocks(doc: &str) -> Vec<String> {
    doc.split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_session_script_docs_examples_run() {
    let doc = std::fs::read_to_string(workspace().join("docs/session-scripts.md")).unwrap();
    let blocks = yaml_blocks(&doc);
    assert_eq!(blocks.len(), 2, "{doc}");
    // Every key the tables name appears in an example, and the examples run as written
    // (the script formats reject unknown keys, so a wrong key fails here).
    for key in [
        "model",
        "platform",
        "session_id",
        "turns",
        "user",
        "steps",
        "tool",
        "args",
        "tools",
        "final",
        "echo",
    ] {
        assert!(
            blocks[0].contains(&format!("{key}:")),
            "the example lacks `{key}`"
        );
    }
    for key in ["model", "replies", "match", "steps"] {
        assert!(
            blocks[1].contains(&format!("{key}:")),
            "the example lacks `{key}`"
        );
    }
    let home = hermes_tests::support::TestHome::new();
    let work = tempfile::tempdir().unwrap();
    let session = work.path().join("session.yaml");
    std::fs::write(&session, &blocks[0]).unwrap();
    std::fs::write(work.path().join("notes.txt"), "notes").unwrap();
    let cwd = work.path().to_str().unwrap();
    let run = home.hermes(
        &[
            "run",
            session.to_str().unwrap(),
            "--cwd",
            cwd,
            "--approvals",
            "deny",
        ],
        &[],
    );
    run.expect_code(0);
    assert!(
        run.stdout().contains("user: Clean up the build directory"),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout().contains("  -> write_file"),
        "{}",
        run.describe()
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("out.txt")).unwrap(),
        "hi"
    );
    let script = work.path().join("gateway.yaml");
    std::fs::write(&script, &blocks[1]).unwrap();
    let gateway = home.hermes(
        &[
            "gateway",
            "run",
            "--stdin",
            "--script",
            script.to_str().unwrap(),
            "--cwd",
            cwd,
            "--trace",
            "off",
        ],
        &[],
    );
    gateway.expect_code(0);
}
