//! A test plugin that prints to stdout in `register` and in every callback, as careless
//! plugins do: none of it may reach a protocol the host speaks on stdout.

use hermes_hooks_abi::hooks::HOOKS;
use hermes_hooks_abi::prelude::*;

/// Registers a printing callback for every hook and for every `agent:*` gateway event.
pub fn register(ctx: &mut PluginContext) {
    println!("noisy: register");
    for hook in HOOKS {
        ctx.register_raw(hook.name, "print", move |_view| {
            println!("noisy: {}", hook.name);
            Ok(None)
        });
    }
    ctx.on_gateway_event("agent:*", |e| println!("noisy: gateway {}", e.event_type()));
}

hermes_hooks_abi::export_plugin!(register);
