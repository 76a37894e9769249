//! `cargo bench`: each callback of this plugin fired through the in-process test host
//! (`LocalHost`), with no library built and no home. For what a hook costs inside a real
//! agent, with the host's dispatch and the other hooks around it, install the plugin and
//! run `hermes bench`.

use criterion::{Criterion, criterion_group, criterion_main};
use hermes_hooks_abi::sdk::testing::{LocalHost, field};

fn callbacks(c: &mut Criterion) {
    let host = LocalHost::register("{{project-name}}", {{crate_name}}::register);
    // The payload `hermes bench` and `hermes hooks test` fire by default.
    let args = r#"{"command": "echo hello"}"#;
    let fields = [
        field::str("tool_name", "terminal"),
        field::json("args", args),
        field::str("session_id", "test-session"),
        field::str("platform", "cli"),
    ];
    for hook in host.hook_names() {
        c.bench_function(hook, |b| b.iter(|| host.fire(hook, &fields)));
    }
}

criterion_group!(benches, callbacks);
criterion_main!(benches);
