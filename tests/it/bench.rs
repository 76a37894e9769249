//! `hermes bench` against real hooks: a sleeping shell hook, the no-op plugin, a gateway
//! handler, a replayed trace; baselines, regression and budget gates, exit codes, and a home
//! left exactly as it was.

use std::time::{Duration, Instant};

use serde_json::Value;

use hermes_tests::support::{Run, TestHome, built};

/// A home with one allowlisted pre_tool_call shell hook that sleeps as long as the file
/// `delay` says (seconds).
fn sleeping_home(delay: &str) -> (TestHome, String) {
    let home = TestHome::new();
    std::fs::write(home.path().join("delay"), delay).unwrap();
    let hook = home.script(
        "slow.sh",
        "#!/bin/sh\ncat > /dev/null\nsleep \"$(cat \"$HERMES_HOME/delay\")\"\n",
    );
    let command = hook.display().to_string();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {command}\n"
    ));
    home.hermes(&["hooks", "allow", &command], &[])
        .expect_code(0);
    (home, command)
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{e}: {}", run.describe()))
}

/// The result row of `system`/`measure` (first match).
fn row<'a>(doc: &'a Value, system: &str, measure: &str) -> &'a Value {
    doc["results"]
        .as_array()
        .and_then(|rows| {
            rows.iter()
                .find(|r| r["system"] == system && r["measure"] == measure)
        })
        .unwrap_or_else(|| panic!("no {system} {measure} row in {doc:#}"))
}

/// `hermes bench pre_tool_call --iterations N --warmup 1 --json`, which must succeed.
fn bench_pre_tool_call(home: &TestHome, iterations: &str) -> Value {
    let run = home.hermes(
        &[
            "bench",
            "pre_tool_call",
            "--iterations",
            iterations,
            "--warmup",
            "1",
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    json_of(&run)
}

/// Asserts that the shell hook's row and its bare spawn both took at least 20 ms, with no
/// errors.
fn assert_both_took_20ms(doc: &Value) {
    let hook = row(doc, "shell", "callback");
    assert_eq!(hook["errors"].as_u64(), Some(0), "{hook:#}");
    assert!(hook["p50_ns"].as_u64().unwrap() >= 20_000_000, "{hook:#}");
    assert!(
        hook["bare_p50_ns"].as_u64().unwrap() >= 20_000_000,
        "{hook:#}"
    );
}

#[test]
fn a_shell_hook_that_sleeps_20ms_measures_at_least_that_with_the_bare_spawn_beside() {
    let (home, _) = sleeping_home("0.02");
    let allowlist = home.path().join("shell-hooks-allowlist.json");
    let before = std::fs::read(&allowlist).unwrap();
    let doc = bench_pre_tool_call(&home, "6");
    assert_eq!(doc["schema_version"], 1);
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            hermes_tests::support::workspace().join("schema/bench.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    crate::schema::validate(&schema, &schema, &doc).unwrap_or_else(|e| panic!("{e}\n{doc:#}"));
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    let hook = row(&doc, "shell", "callback");
    assert_eq!(hook["n"].as_u64(), Some(6), "{hook:#}");
    assert_both_took_20ms(&doc);
    assert!(hook["overhead_p50_ns"].is_i64(), "{hook:#}");
    let event = row(&doc, "all", "event");
    assert!(event["p50_ns"].as_u64().unwrap() >= 20_000_000, "{event:#}");
    // The bench changed nothing in the home.
    assert_eq!(std::fs::read(&allowlist).unwrap(), before);
    assert!(!home.path().join("bench").exists());
}

#[test]
fn a_hook_not_allowlisted_is_skipped_with_a_note_and_accept_hooks_records_nothing() {
    let home = TestHome::new();
    let hook = home.script("ok.sh", "#!/bin/sh\ncat > /dev/null\n");
    let command = hook.display().to_string();
    home.config(&format!(
        "hooks:\n  on_session_start:\n    - command: {command}\n"
    ));
    let run = home.hermes(&["bench", "--iterations", "2"], &[]);
    run.expect_code(0);
    assert!(
        run.stdout()
            .contains(&format!("approve it with `hermes hooks allow '{command}'`")),
        "{}",
        run.describe()
    );
    let run = home.hermes(
        &[
            "--accept-hooks",
            "bench",
            "--iterations",
            "2",
            "--warmup",
            "0",
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    assert_eq!(row(&json_of(&run), "shell", "callback")["n"], 2);
    assert!(
        !home.path().join("shell-hooks-allowlist.json").exists(),
        "--accept-hooks in a bench wrote the allowlist"
    );
}

#[test]
fn a_native_noop_callback_is_timed_in_batches_under_a_millisecond() {
    let home = TestHome::new();
    home.install("noop", "noop", None, None);
    home.config("plugins:\n  enabled: [noop]\n");
    let run = home.hermes(
        &[
            "bench",
            "--system",
            "native",
            "--duration",
            "200ms",
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    let doc = json_of(&run);
    let callback = row(&doc, "native", "callback");
    assert_eq!(callback["hook"], "noop::noop");
    assert!(
        callback["p50_ns"].as_u64().unwrap() < 1_000_000,
        "{callback:#}"
    );
    assert!(callback["batch"].as_u64().unwrap() > 1, "{callback:#}");
    assert!(callback["n"].as_u64().unwrap() > 1000, "{callback:#}");
    assert!(callback["dispatch_empty_ns"].is_u64(), "{callback:#}");
    row(&doc, "all", "event");
}

#[test]
fn a_baseline_round_trip_passes_unchanged_and_fails_a_hook_made_4x_slower() {
    let (home, _) = sleeping_home("0.01");
    let common = ["--system", "shell", "--iterations", "15", "--warmup", "1"];
    let mut save = vec!["bench", "--save-baseline", "before"];
    save.extend(common);
    home.hermes(&save, &[]).expect_code(0);
    assert!(home.path().join("bench/before.json").is_file());

    let mut compare = vec![
        "bench",
        "--baseline",
        "before",
        "--fail-on-regression",
        "50",
    ];
    compare.extend(common);
    let same = home.hermes(&compare, &[]);
    same.expect_code(0);
    assert!(
        same.stdout().contains("change against the baseline"),
        "{}",
        same.describe()
    );

    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("bench/before.json")).unwrap(),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            hermes_tests::support::workspace().join("schema/bench.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    crate::schema::validate(&schema, &schema, &saved).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(home.path().join("delay"), "0.04").unwrap();
    let slower = home.hermes(&compare, &[]);
    slower.expect_code(1);
    assert!(
        slower.stdout().contains("regression: shell pre_tool_call"),
        "{}",
        slower.describe()
    );

    let missing = home.hermes(&["bench", "--baseline", "nothing"], &[]);
    missing.expect_code(2);
    assert!(
        missing.stderr().contains("--save-baseline nothing"),
        "{}",
        missing.describe()
    );
}

#[test]
fn budgets_pass_fail_and_refuse_bad_syntax_with_exit_codes_0_1_2() {
    let (home, _) = sleeping_home("0.02");
    let base = [
        "bench",
        "pre_tool_call",
        "--iterations",
        "3",
        "--warmup",
        "0",
    ];
    let with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        home.hermes(&args, &[])
    };
    with(&["--budget", "pre_tool_call=10s"]).expect_code(0);
    let over = with(&["--budget", "pre_tool_call=1ms"]);
    over.expect_code(1);
    assert!(
        over.stdout()
            .contains("budget exceeded: pre_tool_call p99 is"),
        "{}",
        over.describe()
    );
    assert!(
        over.stdout()
            .contains("slowest hook: shell_hook[pre_tool_call:"),
        "{}",
        over.describe()
    );
    with(&["--budget", "pre_tool_call=1ms", "--budget-stat", "p50"]).expect_code(1);
    let bad = with(&["--budget", "pre_tool_call=fast"]);
    bad.expect_code(2);
    assert!(
        bad.stderr().contains("'fast' is not a duration"),
        "{}",
        bad.describe()
    );

    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    home.config(&format!(
        "{config}bench:\n  budgets:\n    pre_tool_call: 1ms\n"
    ));
    with(&[]).expect_code(1);
    home.config(&format!("{config}bench:\n  budgets: [1ms]\n"));
    let malformed = with(&[]);
    malformed.expect_code(2);
    assert!(
        malformed.stderr().contains("config.yaml"),
        "{}",
        malformed.describe()
    );
    home.config(&config);

    let unknown = home.hermes(&["bench", "pre_tool_cal"], &[]);
    unknown.expect_code(2);
    assert!(
        unknown.stderr().contains("did you mean 'pre_tool_call'"),
        "{}",
        unknown.describe()
    );
}

#[test]
fn replay_fires_the_payloads_a_real_trace_recorded() {
    let home = TestHome::new();
    let seen = home.path().join("seen.jsonl");
    let hook = home.script(
        "record.sh",
        &format!(
            "#!/bin/sh\ncat >> '{}'\necho >> '{}'\n",
            seen.display(),
            seen.display()
        ),
    );
    let command = hook.display().to_string();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {command}\n"
    ));
    home.hermes(&["hooks", "allow", &command], &[])
        .expect_code(0);
    let work = tempfile::tempdir().unwrap();
    let session = work.path().join("s.yaml");
    std::fs::write(
        &session,
        "turns:\n  - user: go\n    steps:\n      - tool: terminal\n        args: {command: echo replayed-marker}\n      - final: done\n",
    )
    .unwrap();
    let trace = work.path().join("trace.jsonl");
    let cwd = work.path().display().to_string();
    let (session, trace_arg) = (session.display().to_string(), trace.display().to_string());
    home.hermes(
        &[
            "run",
            &session,
            "--cwd",
            &cwd,
            "--approvals",
            "deny",
            "--trace",
            "json",
            "--trace-file",
            &trace_arg,
        ],
        &[],
    )
    .expect_code(0);
    std::fs::remove_file(&seen).unwrap();

    let run = home.hermes(
        &[
            "bench",
            "--replay",
            &trace_arg,
            "--system",
            "shell",
            "--iterations",
            "3",
            "--warmup",
            "0",
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    let doc = json_of(&run);
    let hook = row(&doc, "shell", "callback");
    assert_eq!(
        (hook["event"].as_str(), hook["n"].as_u64()),
        (Some("pre_tool_call"), Some(3))
    );
    let payloads = std::fs::read_to_string(&seen).unwrap();
    assert!(payloads.contains("echo replayed-marker"), "{payloads}");

    let garbage = work.path().join("garbage.jsonl");
    std::fs::write(&garbage, "not json\n").unwrap();
    let bad = home.hermes(&["bench", "--replay", &garbage.display().to_string()], &[]);
    bad.expect_code(2);
    assert!(bad.stderr().contains("line 1"), "{}", bad.describe());
}

#[test]
fn a_gateway_hook_reports_emit_delivery_and_event_and_html_has_plots() {
    let home = TestHome::new();
    let dir = home.path().join("hooks/ack");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("HOOK.yaml"), "events: [agent:start]\n").unwrap();
    home.script("hooks/ack/handler", "#!/bin/sh\ncat > /dev/null\n");
    let html = home.path().join("report.html");
    let run = home.hermes(
        &[
            "bench",
            "agent:start",
            "--iterations",
            "5",
            "--warmup",
            "1",
            "--json",
            "--html",
            &html.display().to_string(),
        ],
        &[],
    );
    run.expect_code(0);
    let doc = json_of(&run);
    assert_eq!(row(&doc, "gateway", "emit")["n"], 5);
    let delivery = row(&doc, "gateway", "delivery");
    assert_eq!(
        (delivery["hook"].as_str(), delivery["n"].as_u64()),
        (Some("ack"), Some(5))
    );
    assert!(
        delivery["p50_ns"].as_u64() >= row(&doc, "gateway", "emit")["p50_ns"].as_u64(),
        "{doc:#}"
    );
    row(&doc, "gateway", "event");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<svg") && page.contains("agent:start"),
        "{page}"
    );
    assert!(!page.contains("http://") || page.contains("http://www.w3.org/2000/svg"));
}

#[test]
fn ctrl_c_prints_what_was_measured_and_exits_130() {
    let (home, _) = sleeping_home("0.01");
    let mut child = std::process::Command::new(built().hermes())
        .arg("--home")
        .arg(home.path())
        .args(["bench", "pre_tool_call", "--duration", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("interrupted: the results above"),
        "{stdout}"
    );
    assert!(stdout.contains("shell_hook[pre_tool_call:"), "{stdout}");
}

#[test]
fn a_claude_command_written_for_a_shell_is_spawned_bare_through_the_same_shell() {
    // The bare spawn must run what the hook runs: through a shell, with Claude's payload
    // and CLAUDE_PROJECT_DIR. Split into words, `cat` would get `>` and `&&` as files and
    // fail at once.
    let home = TestHome::new();
    let command = r#"grep -q '"hook_event_name":"PreToolUse"' && test -n "$CLAUDE_PROJECT_DIR" && sleep 0.02"#;
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: '{}'\n      format: claude\n",
        command.replace('\'', "''")
    ));
    home.hermes(&["hooks", "allow", command], &[])
        .expect_code(0);
    assert_both_took_20ms(&bench_pre_tool_call(&home, "4"));
}

#[test]
fn python_plugins_are_measured_as_their_own_system_one_round_trip_per_plugin() {
    let home = TestHome::new();
    let dir = home.path().join("plugins/py-guard");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.yaml"), "name: py-guard\n").unwrap();
    // Three callbacks, one of which sleeps 5 ms: the plugin's row is one round trip that
    // runs all three, so it takes at least that.
    std::fs::write(
        dir.join("__init__.py"),
        "import time\ndef a(**kw):\n    return None\ndef b(**kw):\n    time.sleep(0.005)\ndef c(**kw):\n    return None\n\
         def register(ctx):\n    for cb in (a, b, c):\n        ctx.register_hook('pre_tool_call', cb)\n",
    )
    .unwrap();
    home.config("plugins:\n  enabled: [py-guard]\n");
    let run = home.hermes(
        &[
            "bench",
            "pre_tool_call",
            "--system",
            "python",
            "--iterations",
            "20",
            "--warmup",
            "1",
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    let doc = json_of(&run);
    let plugin = row(&doc, "python", "plugin");
    assert_eq!(plugin["hook"], "py-guard (3 callbacks)", "{plugin:#}");
    assert_eq!(plugin["errors"].as_u64(), Some(0), "{plugin:#}");
    assert!(
        plugin["p50_ns"].as_u64().unwrap() >= 5_000_000,
        "{plugin:#}"
    );
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(
        rows.iter().filter(|r| r["system"] == "python").count(),
        1,
        "one row per plugin, not per callback: {doc:#}"
    );
    assert!(!rows.iter().any(|r| r["system"] == "native"), "{doc:#}");
}

/// What `check.js` found in a page rendered by headless Chromium: text boxes of one chart
/// that overlap, histograms whose counts do not sum to their sample count, hook names cut
/// off, and whether the page scrolls sideways at 100% zoom.
const CHECK_JS: &str = r#"
window.addEventListener('load', () => {
  const out = {charts: 0, overlaps: [], sums: [], clipped: [], histograms: 0, wide: false};
  for (const svg of document.querySelectorAll('svg')) {
    out.charts++;
    const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra] = boxes[i], [b, rb] = boxes[j];
      const apart = ra.right <= rb.left + 0.5 || rb.right <= ra.left + 0.5 || ra.bottom <= rb.top + 0.5 || rb.bottom <= ra.top + 0.5;
      if (!apart) out.overlaps.push(a + ' / ' + b);
    }
    if (svg.classList.contains('histogram')) {
      out.histograms++;
      const sum = [...svg.querySelectorAll('rect.bin')].reduce((s, r) => s + Number(r.dataset.count), 0);
      if (sum !== Number(svg.dataset.n)) out.sums.push(sum + ' != ' + svg.dataset.n);
    }
  }
  for (const td of document.querySelectorAll('td.name')) {
    if (td.scrollWidth > td.clientWidth + 1) out.clipped.push(td.textContent);
  }
  out.wide = document.documentElement.scrollWidth > window.innerWidth;
  const pre = document.createElement('pre');
  pre.id = 'check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
"#;

/// The report of a home with a sub-microsecond plugin, a millisecond shell hook and a
/// 20 ms one with a long name, as `hermes bench --html` writes it.
fn varied_report(home: &TestHome) -> std::path::PathBuf {
    home.install("noop", "noop", None, None);
    std::fs::write(home.path().join("delay"), "0.02").unwrap();
    let slow = home.script(
        "a-shell-hook-with-a-rather-long-name-that-must-stay-whole-in-the-report.sh",
        "#!/bin/sh\ncat > /dev/null\nsleep \"$(cat \"$HERMES_HOME/delay\")\"\n",
    );
    let fast = home.script("fast.sh", "#!/bin/sh\ncat > /dev/null\n");
    home.config(&format!(
        "plugins:\n  enabled: [noop]\nhooks:\n  pre_tool_call:\n    - command: {}\n    - command: {}\n",
        slow.display(),
        fast.display()
    ));
    for hook in [&slow, &fast] {
        home.hermes(&["hooks", "allow", &hook.display().to_string()], &[])
            .expect_code(0);
    }
    let html = home.path().join("report.html");
    home.hermes(
        &[
            "bench",
            "pre_tool_call",
            "--iterations",
            "40",
            "--warmup",
            "1",
            "--html",
            &html.display().to_string(),
        ],
        &[],
    )
    .expect_code(0);
    html
}

/// Renders `page` in headless Chromium at `width` pixels and returns the DOM after its
/// scripts ran.
fn chromium_dom(page: &std::path::Path, width: u32) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            &format!("--window-size={width},1200"),
            &format!("--user-data-dir={}", profile.path().display()),
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}); install Debian's chromium (.ci/run does)")
        });
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_html_report_renders_in_chromium_with_no_text_on_text_and_every_sample_counted() {
    let home = TestHome::new();
    let html = varied_report(&home);
    let page = std::fs::read_to_string(&html).unwrap();
    // Human tick labels only: no raw nanosecond numbers.
    for raw in ["500000.0", "2000000.0", "0.0<"] {
        assert!(!page.contains(raw), "{raw} in the page");
    }
    let checked = home.path().join("checked.html");
    std::fs::write(
        &checked,
        page.replace("</body>", &format!("<script>{CHECK_JS}</script></body>")),
    )
    .unwrap();
    let dom = chromium_dom(&checked, 1280);
    let json = dom
        .split("<pre id=\"check\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("the check did not run; the DOM:\n{dom}"));
    let found: Value = serde_json::from_str(&json.replace("&quot;", "\"")).unwrap();
    assert!(found["charts"].as_u64().unwrap() >= 5, "{found}");
    assert_eq!(found["histograms"], 4, "three hooks and the event: {found}");
    assert_eq!(found["overlaps"], serde_json::json!([]), "{found}");
    assert_eq!(found["sums"], serde_json::json!([]), "{found}");
    assert_eq!(found["clipped"], serde_json::json!([]), "{found}");
    assert_eq!(found["wide"], false, "the page scrolls sideways: {found}");
    // The long name is in the page whole.
    assert!(
        page.contains("a-shell-hook-with-a-rather-long-name-that-must-stay-whole-in-the-report.sh")
    );
}
