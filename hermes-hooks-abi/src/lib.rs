//! The stable interface between hermes-hooks plugins and the host that loads them.
//!
//! A plugin is a `cdylib` crate that depends on this crate, writes a `register` function and
//! exports it with [`export_plugin!`]. The host (`hermes-host`) loads the library from
//! `$HERMES_HOME/plugins/<name>/`, checks that it speaks a compatible interface, calls
//! `register`, and from then on calls the plugin's typed closures at every lifecycle point of
//! the agent: before and after each tool call and model call, at session start and end, in
//! the gateway, around approvals, and to transform what the model and the user see.
//!
//! # The one hard design choice
//!
//! A plugin built today must still load in next year's host, and a plugin built next year
//! should still load in today's host. abi_stable checks type layouts at load time and
//! refuses a plugin as soon as a type reachable from the root module changed, so this crate
//! is split in two:
//!
//! - [`core`] holds the few types that cross the boundary, and they are frozen for the whole
//!   of major version 1. Hooks are named by string, payload fields are named values read by
//!   name, replies carry an action name: growth happens in data, never in layout.
//! - [`sdk`] and [`hooks`] are typed sugar compiled into the plugin: one typed event and one
//!   typed outcome per hook, generated from a single table. They can grow in any release.
//!
//! Interface versions: the crate version is the interface version. Same major loads, in both
//! directions: a 1.0 plugin in a 1.1 host (the hooks it never registers simply have no
//! callback from it), and a 1.1 plugin in a 1.0 host (the hooks the host does not know are
//! reported as unknown and kept, and fields the host does not send read as absent).
//!
//! # Example: a whole plugin
//!
//! ```
//! use hermes_hooks_abi::prelude::*;
//!
//! /// Blocks `rm -rf` and tells the model what the user prefers.
//! fn register(ctx: &mut PluginContext) {
//!     ctx.pre_tool_call(|e| {
//!         let command = e.args().value()["command"].as_str().unwrap_or_default().to_string();
//!         if e.tool_name() == "terminal" && command.contains("rm -rf") {
//!             tracing::warn!(%command, "blocked");
//!             return ToolDecision::block("recursive delete is not allowed here");
//!         }
//!         ToolDecision::Continue
//!     });
//!     ctx.pre_llm_call(|e| e.is_first_turn().then(|| "The user prefers short answers.".into()));
//! }
//!
//! // In the plugin crate (crate-type = ["cdylib", "rlib"]):
//! hermes_hooks_abi::export_plugin!(register);
//!
//! // And in its tests, without building a library:
//! use hermes_hooks_abi::sdk::testing::{LocalHost, field};
//! let host = LocalHost::register("guard", register);
//! let replies = host.fire("pre_tool_call", &[
//!     field::str("tool_name", "terminal"),
//!     field::json("args", r#"{"command": "rm -rf /tmp/x"}"#),
//! ]);
//! let reply = replies[0].as_ref().unwrap().as_ref().unwrap();
//! assert_eq!(reply.action.as_str(), "block");
//! ```
//!
//! # What a plugin may and may not do
//!
//! - Callbacks are synchronous and run on the caller's thread; a plugin that needs IO owns
//!   its runtime. `tokio::spawn` from a callback panics: the host's runtime is not the
//!   plugin's.
//! - A panic never crosses the boundary: it is caught, logged by the host as
//!   `Hook '<event>' callback <plugin>::<callback> raised: <message>`, and the next callback
//!   runs.
//! - `tracing` works as usual inside a plugin and reaches the host's log, filtered by the
//!   host's level before formatting.

#![deny(missing_docs)]

pub mod core;
pub mod hooks;
pub mod sdk;

/// The abi_stable version this interface is built on, for the macros.
#[doc(hidden)]
pub use abi_stable;

/// Everything a plugin's `register` usually needs.
///
/// ```
/// use hermes_hooks_abi::prelude::*;
/// fn register(_ctx: &mut PluginContext) {}
/// ```
pub mod prelude {
    pub use crate::hooks::*;
    pub use crate::sdk::offer::{MiddlewareKind, MiddlewareOutcome};
    pub use crate::sdk::{DispatchDecision, Json, PluginContext, ToolDecision, VerifyDecision};
}

/// Exports a plugin's root module, wrapping `register` so that nothing unwinds into the host.
///
/// Put it once at the top level of a `cdylib` crate, naming the plugin's register function,
/// which takes `&mut PluginContext` and returns `()` or `Result<(), impl Display>`.
///
/// It also exports two plain C symbols, `hermes_plugin_abi_version` and
/// `hermes_plugin_build_profile`, which the host reads before abi_stable's layout check so
/// that an incompatible plugin is refused with both interface versions named.
///
/// ```
/// use hermes_hooks_abi::prelude::*;
/// fn register(ctx: &mut PluginContext) -> Result<(), String> {
///     ctx.on_session_end(|e| tracing::info!(session = e.session_id(), "session ended"));
///     Ok(())
/// }
/// hermes_hooks_abi::export_plugin!(register);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($register:path) => {
        extern "C" fn __hermes_register(
            registrar: $crate::core::RegistrarMut<'_>,
        ) -> $crate::abi_stable::std_types::RResult<(), $crate::abi_stable::std_types::RString> {
            $crate::sdk::__run_register(registrar, $register)
        }

        $crate::__export_plugin_symbols!();
    };
}

/// The half of [`export_plugin!`] that depends on how the plugin is linked: library symbols
/// for a `cdylib` the host loads, or a static registration (feature `static` of the plugin
/// crate) for a plugin linked into the host binary.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_plugin_symbols {
    () => {
        // In a block, so that the `feature = "static"` test (made in the plugin crate, which
        // need not declare such a feature) is not reported as an unexpected cfg.
        #[allow(unexpected_cfgs)]
        const _: () = {
            #[cfg(feature = "static")]
            $crate::sdk::statics::__submit! {
                $crate::sdk::statics::StaticPlugin::__new(
                    env!("CARGO_PKG_NAME"),
                    env!("CARGO_PKG_VERSION"),
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/plugin.yaml")),
                    __hermes_register,
                )
            }

            // The symbol abi_stable 0.11 looks up (`abi_stable::library::ROOT_MODULE_LOADER_NAME`),
            // spelled out so that plugin crates need no direct abi_stable dependency.
            #[cfg(not(feature = "static"))]
            #[doc(hidden)]
            #[unsafe(no_mangle)]
            #[allow(non_upper_case_globals)]
            pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi_stable::library::LibHeader = {
                extern "C" fn __hermes_erased_root() -> $crate::abi_stable::library::RootModuleResult {
                    $crate::abi_stable::library::__call_root_module_loader(__hermes_root_module)
                }
                // SAFETY: the constructor returns the module type named here.
                unsafe {
                    $crate::abi_stable::library::LibHeader::from_constructor::<$crate::core::PluginModRef>(
                        __hermes_erased_root,
                        $crate::abi_stable::library::CheckTypeLayout::Yes,
                    )
                }
            };

            #[cfg(not(feature = "static"))]
            fn __hermes_root_module() -> $crate::core::PluginModRef {
                $crate::sdk::__root_module(
                    env!("CARGO_PKG_NAME"),
                    if cfg!(debug_assertions) { "debug" } else { "release" },
                    __hermes_register,
                )
            }

            /// The interface version this plugin was built against, as a C string.
            #[cfg(not(feature = "static"))]
            #[unsafe(no_mangle)]
            pub extern "C" fn hermes_plugin_abi_version() -> *const ::std::ffi::c_char {
                $crate::sdk::__ABI_VERSION_CSTR.as_ptr()
            }

            /// `debug` or `release`, as a C string.
            #[cfg(not(feature = "static"))]
            #[unsafe(no_mangle)]
            pub extern "C" fn hermes_plugin_build_profile() -> *const ::std::ffi::c_char {
                if cfg!(debug_assertions) { c"debug".as_ptr() } else { c"release".as_ptr() }
            }
        };
    };
}
