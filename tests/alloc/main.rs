//! Firing a hook that decides nothing allocates nothing: a counting global allocator (per
//! thread, so the test harness's own threads do not count) around real firings of the
//! `noop` plugin built from source, and of hooks nobody registered. What a plugin allocates
//! inside its own library uses that library's allocator and is not counted: the claim is
//! about the host's dispatch.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use hermes_hooks_abi::hooks::payload::{
    PreLlmCallEvent, PreToolCallEvent, TransformToolResultEvent,
};
use hermes_tests::support::{TestHome, soak_plugin_live};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread.
    static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// const-initialised thread-local without a destructor, so touching it never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        LIVE_BYTES.with(|b| b.set(b.get() + layout.size() as i64));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.with(|b| b.set(b.get() - layout.size() as i64));
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        LIVE_BYTES.with(|b| b.set(b.get() + new_size as i64 - layout.size() as i64));
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations on this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn event() -> PreToolCallEvent<'static> {
    PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls -la"}"#,
        session_id: "s-1",
        task_id: "t-1",
        tool_call_id: "c-1",
        ..Default::default()
    }
}

#[test]
fn firings_that_decide_nothing_allocate_nothing() {
    // The counter sees the host's allocations (a plugin's cdylib has its own allocator).
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8]))), 1);
    for (callbacks, read_field) in [(1, false), (10, false), (10, true)] {
        let home = TestHome::new();
        let config = format!("{{count: {callbacks}, read_field: {read_field}}}");
        home.install("noop", "noop", None, Some(&config));
        home.config("plugins:\n  enabled: [noop]\n");
        let (registry, report) = home.load();
        assert!(report.plugins[0].loaded(), "{:?}", report.plugins);
        let e = event();
        // Warm up once: lazily initialised statics may allocate the first time.
        let _ = registry.pre_tool_call(&e);
        let n = allocations(|| {
            for _ in 0..1000 {
                assert!(registry.pre_tool_call(&e).blocked.is_none());
            }
        });
        assert_eq!(
            n, 0,
            "{callbacks} callback(s), read_field {read_field}: {n} allocations in 1000 firings"
        );
        // A hook nobody registered: nothing at all.
        let llm = PreLlmCallEvent {
            session_id: "s-1",
            user_message: "hi",
            ..Default::default()
        };
        let n = allocations(|| {
            for _ in 0..1000 {
                assert!(registry.pre_llm_call(&llm).is_none());
            }
        });
        assert_eq!(n, 0, "an empty hook allocated {n} times in 1000 firings");
    }
}

#[test]
fn the_host_frees_every_string_a_plugin_returns_and_every_payload_it_lends() {
    const LEN: usize = 64 << 10;
    let home = TestHome::new();
    home.install("soak", "soak", None, Some(&format!("{{len: {LEN}}}")));
    home.config("plugins:\n  enabled: [soak]\n");
    let (registry, report) = home.load();
    assert!(report.plugins[0].loaded(), "{:?}", report.plugins);
    let transform = TransformToolResultEvent {
        tool_name: "read_file",
        args: "{}",
        result: "short",
        ..Default::default()
    };
    let block = event();
    let panic = PreToolCallEvent {
        tool_name: "panic",
        ..event()
    };
    let fire_all = |n: usize| {
        for _ in 0..n {
            assert_eq!(
                registry.transform_tool_result(&transform).map(|s| s.len()),
                Some(LEN)
            );
            assert_eq!(
                registry.pre_tool_call(&block).blocked.map(|b| b.message),
                Some("soak blocks terminal".to_string())
            );
            assert!(registry.pre_tool_call(&panic).blocked.is_none());
        }
    };
    // Warm up: the first panic and the first firing of each hook may set up statics.
    fire_all(3);
    let (plugin_before, host_before) = (soak_plugin_live(&registry), LIVE_BYTES.with(Cell::get));
    fire_all(10_000);
    let (plugin_after, host_after) = (soak_plugin_live(&registry), LIVE_BYTES.with(Cell::get));
    // Every 64 KiB string the plugin returned, every block message and every panic message
    // went back to the plugin's allocator: a single one kept would show here.
    assert_eq!(
        plugin_after, plugin_before,
        "the plugin's live (allocations, bytes) after 10,000 firings of each kind"
    );
    // And the host's copies were dropped: nothing grows with the firings (10,000 strings of
    // 64 KiB kept would be 640 MB).
    let grown = host_after - host_before;
    assert!(
        grown < 4096,
        "the host holds {grown} more bytes after 30,000 firings"
    );
}
