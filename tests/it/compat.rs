//! Interface compatibility, proven with real builds: a plugin built against the frozen 1.0
//! copy loads and fires in this (1.1) host; a plugin built against 1.1 loads in a host built
//! on 1.0 (its 1.1 hook reported, its 1.1 field absent); a 2.0 plugin is refused with one
//! line while the others load.

use hermes_hooks_abi::hooks::payload::{PreLlmCallEvent, PreToolCallEvent};
use hermes_tests::support::{TestHome, built, plugin_v1_2, workspace};

const V1_0_MANIFEST: &str = "name: plugin-v1_0\nversion: 0.1.0\nlibrary: libplugin_v1_0.so\n";
const V2_0_MANIFEST: &str = "name: plugin-v2_0\nversion: 0.1.0\nlibrary: libplugin_v2_0.so\n";

#[test]
fn a_plugin_built_against_the_frozen_1_0_interface_loads_and_fires_in_this_host() {
    let home = TestHome::new();
    home.install_lib("old", &built().plugin_v1_0(), V1_0_MANIFEST, None, None);
    home.config("plugins:\n  enabled: [plugin-v1_0]\n");
    let (registry, report) = home.load();
    let plugin = &report.plugins[0];
    assert!(plugin.loaded(), "{:?}", plugin.error);
    assert_eq!(plugin.abi_version.as_deref(), Some("1.0.0"));
    let verdict = registry.pre_tool_call(&PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "rm -rf build"}"#,
        turn_id: Some("t-7"),
        ..Default::default()
    });
    assert_eq!(
        verdict.blocked.map(|b| b.message).as_deref(),
        Some("v1.0 plugin blocks rm in terminal")
    );
    let context = registry.pre_llm_call(&PreLlmCallEvent {
        session_id: "s-1",
        ..Default::default()
    });
    assert_eq!(
        context.as_deref(),
        Some("context from a 1.0 plugin for s-1")
    );
}

#[test]
fn the_frozen_copy_differs_from_the_current_interface_only_by_additions() {
    // The core (everything abi_stable checks) must be byte-identical to the frozen 1.0 copy.
    let current =
        std::fs::read_to_string(workspace().join("hermes-hooks-abi/src/core/mod.rs")).unwrap();
    let frozen = std::fs::read_to_string(
        workspace().join("tests/fixtures/abi-1.0/hermes-hooks-abi/src/core/mod.rs"),
    )
    .unwrap();
    assert_eq!(
        current, frozen,
        "the frozen core changed: old plugins would stop loading"
    );
}

#[test]
fn a_plugin_built_against_1_1_loads_in_a_host_built_on_1_0() {
    let out = std::process::Command::new(built().host_v1_0())
        .arg(built().lib("compat-v1_1"))
        .arg("compat-v1_1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // It is built against the workspace's interface (1.1 or later), and uses what 1.1
    // added.
    let loaded = format!(
        "loaded compat-v1_1: interface {} (host 1.0.0)",
        hermes_hooks_abi::sdk::ABI_VERSION
    );
    assert_eq!(
        lines,
        [
            loaded.as_str(),
            "registered pre_tool_call register::{{closure}}",
            "unknown hook pre_api_request (kept, never fired by this host)",
            "unknown hook pre_verify (kept, never fired by this host)",
            "unknown hook @tool/compat_echo (kept, never fired by this host)",
            "fired pre_tool_call register::{{closure}}: block v1.1 plugin saw terminal with turn_id=None",
        ]
    );
}

#[test]
fn the_same_1_1_plugin_sees_its_new_field_in_a_1_1_host() {
    let home = TestHome::new();
    home.install("compat", "compat-v1_1", None, None);
    home.config("plugins:\n  enabled: [compat-v1_1]\n");
    let (registry, report) = home.load();
    assert!(report.plugins[0].unknown_hooks.is_empty());
    assert_eq!(
        report.plugins[0].hooks,
        ["pre_tool_call", "pre_api_request", "pre_verify"]
    );
    assert_eq!(report.plugins[0].tools, ["compat_echo"]);
    let echoed = registry.tools().dispatch(
        "compat_echo",
        &serde_json::json!({"a": 1}),
        &Default::default(),
        &hermes_host::tools::no_dispatch,
    );
    assert_eq!(echoed.as_deref(), Some(r#"{"a":1}"#));
    let verdict = registry.pre_tool_call(&PreToolCallEvent {
        tool_name: "terminal",
        turn_id: Some("t-7"),
        ..Default::default()
    });
    assert_eq!(
        verdict.blocked.map(|b| b.message).as_deref(),
        Some("v1.1 plugin saw terminal with turn_id=Some(\"t-7\")")
    );
}

#[test]
fn an_incompatible_plugin_is_refused_with_one_line_and_the_others_load() {
    let home = TestHome::new();
    home.install_lib("new", &built().plugin_v2_0(), V2_0_MANIFEST, None, None);
    home.install_lib("old", &built().plugin_v1_0(), V1_0_MANIFEST, None, None);
    home.config("plugins:\n  enabled: [plugin-v1_0, plugin-v2_0]\n");
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    run.expect_code(0);
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let new = &list["plugins"][0];
    let error = new["error"].as_str().unwrap();
    let lib = home.path().join("plugins/new/libplugin_v2_0.so");
    assert_eq!(
        error,
        format!(
            "{}: plugin 'plugin-v2_0' was built against hermes-hooks-abi 2.0.0, this host speaks 1.3.0: the major versions differ; rebuild the plugin against hermes-hooks-abi 1.x",
            lib.display()
        )
    );
    assert_eq!(list["plugins"][1]["enabled"], true);
    // One warning line in the log, too.
    let stderr = run.stderr();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("plugin-v2_0"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.describe());
}

#[test]
fn a_plugin_newer_than_the_host_loads_with_a_message_naming_both_versions() {
    let home = TestHome::new();
    let manifest = "name: plugin-v1_2\nversion: 0.1.0\nlibrary: libplugin_v1_2.so\n";
    let dir = home.install_lib("newer", &plugin_v1_2(), manifest, None, None);
    home.config("plugins:\n  enabled: [plugin-v1_2]\n");
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    run.expect_code(0);
    let host = hermes_host::plugins::HOST_ABI_VERSION;
    let host_minor = host.rsplit_once('.').map(|(mm, _)| mm).unwrap();
    let expected = format!(
        "{}: plugin 'plugin-v1_2' was built against hermes-hooks-abi 1.4.0, newer than this host's {host}: it loads, but hooks and fields added after {host_minor} do not reach it here; upgrade hermes, or rebuild the plugin against hermes-hooks-abi {host_minor}",
        dir.join("libplugin_v1_2.so").display()
    );
    assert!(run.stderr().contains(&expected), "{}", run.describe());
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(list["plugins"][0]["enabled"], true, "{list:#}");
    assert_eq!(list["plugins"][0]["abi_version"], "1.4.0");
    let fired = home.hermes(&["plugins", "fire", "pre_tool_call"], &[]);
    assert!(
        fired.stdout().contains("plugin-v1_2::noop  no opinion"),
        "{}",
        fired.describe()
    );
    // A plugin of the host's own interface gets no such line.
    let same = TestHome::new();
    same.install("noop", "noop", None, None);
    same.config("plugins:\n  enabled: [noop]\n");
    let run = same.hermes(&["plugins", "list"], &[]);
    assert!(
        !run.stderr().contains("newer than this host"),
        "{}",
        run.describe()
    );
}
