//! What crosses the ABI on every firing, for the leak test (`tests/alloc`) and the soak run
//! (`cargo bench -p hermes-tests --bench soak`):
//!
//! - `transform_tool_result` returns a string of `config.len` bytes (default 64 KiB);
//! - `pre_tool_call` blocks with a message, or panics when `tool_name` is `panic`;
//! - `pre_llm_call` answers, as its context, how many allocations of this library are live
//!   and how many bytes they hold: `live=<count> bytes=<bytes>`.
//!
//! The library has its own counting global allocator: strings it returns are freed by the
//! host through the vtable that came with them, so they are freed here, by this allocator.
//! A host that kept them would show as live allocations growing with every firing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use hermes_hooks_abi::prelude::*;

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// atomics, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Registers the three callbacks.
pub fn register(ctx: &mut PluginContext) {
    let len = ctx.config()["len"].as_u64().unwrap_or(64 << 10) as usize;
    ctx.transform_tool_result(move |_e| Some("x".repeat(len)));
    ctx.pre_tool_call(|e| {
        if e.tool_name() == "panic" {
            panic!("soak panics on purpose");
        }
        ToolDecision::block(format!("soak blocks {}", e.tool_name()))
    });
    ctx.pre_llm_call(|_e| {
        // Read both before formatting: the answer's own allocation is not counted in it.
        let (live, bytes) = (LIVE.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
        Some(format!("live={live} bytes={bytes}"))
    });
}

hermes_hooks_abi::export_plugin!(register);
