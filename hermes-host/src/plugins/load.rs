//! Loading a plugin library and running its `register`. Libraries are loaded once per
//! process and never unloaded: callbacks point into them for the rest of the process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use abi_stable::library::lib_header_from_path;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RStr, RString};
use hermes_hooks_abi::core::{
    HookCallbackBox, HostLogger_TO, HostLoggerBox, PluginModRef, Registrar, Registrar_TO,
    RegistrarMut,
};

use super::library_file;
use super::manifest::Manifest;
use crate::logging::PluginLogger;

/// The interface version of this host.
pub const HOST_ABI_VERSION: &str = hermes_hooks_abi::sdk::ABI_VERSION;

/// A library that passed the checks, with what the plugin says about itself.
#[derive(Clone, Copy)]
pub struct Library {
    module: PluginModRef,
}

impl Library {
    /// The interface version the plugin was built against.
    pub fn abi_version(&self) -> &'static str {
        self.module.abi_version().as_str()
    }

    /// `debug` or `release`.
    pub fn build_profile(&self) -> &'static str {
        self.module.build_profile().as_str()
    }

    /// The plugin's wrapped `register`, as its root module holds it.
    pub(crate) fn register_entry(&self) -> extern "C" fn(RegistrarMut<'_>) -> RResult<(), RString> {
        self.module.register()
    }
}

/// What `register` registered.
pub struct Registration {
    /// `(hook, callback name, callback)` in registration order.
    pub hooks: Vec<(String, String, HookCallbackBox)>,
    /// The error `register` returned (hooks registered before it stay).
    pub error: Option<String>,
}

/// Loads `path` once per process and checks that it is a compatible plugin.
///
/// # Errors
///
/// One line that names the library, the plugin, both interface versions and what to do.
pub fn load_library(path: &Path, plugin_name: &str) -> Result<Library, String> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, PluginModRef>>> = OnceLock::new();
    let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let cache = LOADED.get_or_init(Default::default);
    // A poisoned lock only means another thread panicked while inserting; the map is fine.
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(module) = cache.get(&key) {
        return Ok(Library { module: *module });
    }
    let module = check_and_load(path, plugin_name)?;
    cache.insert(key, module);
    Ok(Library { module })
}

fn check_and_load(path: &Path, name: &str) -> Result<PluginModRef, String> {
    let shown = path.display();
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let expected = library_file::for_crate(name);
    if let Some(platform) = library_file::foreign_platform(&file_name) {
        return Err(format!(
            "{shown}: plugin '{name}' is a library for {platform}, and this host loads {}; build the plugin on this machine (`cargo build --release`, or `hermes plugins install <crate dir>`) and set `library: {expected}`",
            library_file::pattern()
        ));
    }
    if !path.is_file() {
        let foreign = path
            .parent()
            .and_then(|dir| std::fs::read_dir(dir).ok())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find_map(|f| library_file::foreign_platform(&f).map(|p| (f, p)));
        return Err(match foreign {
            Some((other, platform)) => format!(
                "{shown}: plugin '{name}' has no library there, only {other}, a library for {platform}; build the plugin on this machine with `cargo build --release` (or `hermes plugins install <crate dir>`)"
            ),
            None => format!(
                "{shown}: plugin '{name}' has no library there; build the plugin with `cargo build --release` and copy its {} here, or run `hermes plugins install <crate dir>`",
                library_file::for_crate(name)
            ),
        });
    }
    // The loader trusts the headers: a file cut short would be mapped past its end and kill
    // the host with SIGBUS at the first touch.
    super::elf::check_elf(path).map_err(|why| {
        format!(
            "{shown}: plugin '{name}' cannot be loaded ({why}); it must be a shared library built for this machine: rebuild it with `cargo build --release` from a crate with crate-type = [\"cdylib\"]"
        )
    })?;
    // SAFETY: loading a library runs its initialisers; a plugin directory is trusted by
    // placement, as in the reference. The library is never unloaded (forgotten below).
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
        // The loader's text usually starts with the path again.
        let why = e.to_string();
        let why = why.strip_prefix(&format!("{shown}: ")).unwrap_or(&why).to_string();
        format!(
            "{shown}: plugin '{name}' cannot be loaded ({why}); it must be a shared library built for this machine: rebuild it with `cargo build --release` from a crate with crate-type = [\"cdylib\"]"
        )
    })?;
    let plugin_version = read_c_string(&lib, b"hermes_plugin_abi_version\0");
    let is_abi_stable = unsafe {
        lib.get::<*const u8>(abi_stable::library::ROOT_MODULE_LOADER_NAME_WITH_NUL.as_bytes())
    }
    .is_ok();
    std::mem::forget(lib);
    let Some(plugin_version) = plugin_version else {
        return Err(if is_abi_stable {
            format!(
                "{shown}: plugin '{name}' is an abi_stable library but not a hermes plugin (no `hermes_plugin_abi_version` symbol); export it with `hermes_hooks_abi::export_plugin!(register)`"
            )
        } else {
            format!(
                "{shown}: plugin '{name}' is not a hermes plugin (it exports no `hermes_plugin_abi_version`); build it from a crate with crate-type = [\"cdylib\"] that calls `hermes_hooks_abi::export_plugin!(register)`"
            )
        });
    };
    let incompatible = |reason: &str| {
        format!(
            "{shown}: plugin '{name}' was built against hermes-hooks-abi {plugin_version}, this host speaks {HOST_ABI_VERSION}: {reason}"
        )
    };
    if major(&plugin_version) != major(HOST_ABI_VERSION) {
        return Err(incompatible(&format!(
            "the major versions differ; rebuild the plugin against hermes-hooks-abi {}.x",
            major(HOST_ABI_VERSION)
        )));
    }
    // Same major, different layout: a plugin built against a modified or mismatched copy of
    // the interface (a fork, another abi_stable). abi_stable's report ends with the reason.
    let fix = if is_newer(&plugin_version, HOST_ABI_VERSION) {
        format!(
            "upgrade hermes, or rebuild the plugin against hermes-hooks-abi {}",
            major_minor(HOST_ABI_VERSION)
        )
    } else {
        format!("rebuild the plugin against hermes-hooks-abi {HOST_ABI_VERSION}")
    };
    let layout = |e: abi_stable::library::LibraryError| {
        incompatible(&format!("{}; {fix}", decisive_lines(&e.to_string())))
    };
    let header = lib_header_from_path(path).map_err(layout)?;
    header.init_root_module::<PluginModRef>().map_err(layout)
}

fn read_c_string(lib: &libloading::Library, symbol: &[u8]) -> Option<String> {
    // SAFETY: export_plugin! defines this symbol as `extern "C" fn() -> *const c_char`
    // returning a pointer to a static NUL-terminated string.
    unsafe {
        let f = lib
            .get::<extern "C" fn() -> *const std::ffi::c_char>(symbol)
            .ok()?;
        let ptr = f();
        if ptr.is_null() {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(ptr).to_string_lossy().into_owned())
    }
}

fn major(version: &str) -> &str {
    version.split('.').next().unwrap_or(version)
}

/// `1.2` of `1.2.3`.
fn major_minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Whether interface `plugin` is a later minor of the same major than `host`.
fn is_newer(plugin: &str, host: &str) -> bool {
    let minor = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u64>().ok());
    major(plugin) == major(host) && minor(plugin) > minor(host)
}

/// The warning for a plugin built against a later minor interface than the host's: it
/// loads (a newer plugin in an older host is promised to), but what the later interface
/// added is missing here, and the user should know which side to update.
pub(crate) fn newer_interface_warning(
    library: &Path,
    plugin: &str,
    version: &str,
) -> Option<String> {
    is_newer(version, HOST_ABI_VERSION).then(|| {
        let host = major_minor(HOST_ABI_VERSION);
        format!(
            "{}: plugin '{plugin}' was built against hermes-hooks-abi {version}, newer than this host's {HOST_ABI_VERSION}: it loads, but hooks and fields added after {host} do not reach it here; upgrade hermes, or rebuild the plugin against hermes-hooks-abi {host}",
            library.display()
        )
    })
}

/// abi_stable's reports run to hundreds of lines; the reason is in the last few.
fn decisive_lines(report: &str) -> String {
    let lines: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    tail.join(" | ")
}

/// Runs the plugin's `register` with a registrar that collects its callbacks.
pub fn register(library: Library, manifest: &Manifest, dir: &Path) -> Registration {
    register_fn(library.register_entry(), manifest, dir)
}

/// [`register`] for a plugin given by its wrapped `register` function: a library's, or that
/// of a plugin linked into this binary.
pub(crate) fn register_fn(
    register: extern "C" fn(RegistrarMut<'_>) -> RResult<(), RString>,
    manifest: &Manifest,
    dir: &Path,
) -> Registration {
    let mut registrar = HostRegistrar {
        plugin_name: manifest.name.clone(),
        dir: dir.to_path_buf(),
        config: manifest.config.clone(),
        hooks: Vec::new(),
    };
    let result = register(Registrar_TO::from_ptr(&mut registrar, TD_Opaque));
    Registration {
        hooks: registrar.hooks,
        error: result.err().map(RString::into_string).into(),
    }
}

struct HostRegistrar {
    plugin_name: String,
    dir: PathBuf,
    config: serde_json::Value,
    hooks: Vec<(String, String, HookCallbackBox)>,
}

impl Registrar for HostRegistrar {
    fn register_hook(
        &mut self,
        hook: RStr<'_>,
        callback_name: RStr<'_>,
        callback: HookCallbackBox,
    ) {
        self.hooks
            .push((hook.to_string(), callback_name.to_string(), callback));
    }

    fn host_abi_version(&self) -> RString {
        RString::from(HOST_ABI_VERSION)
    }

    fn plugin_name(&self) -> RString {
        RString::from(self.plugin_name.as_str())
    }

    fn host_call(&self, capability: RStr<'_>, _args_json: RStr<'_>) -> RResult<RString, RString> {
        match capability.as_str() {
            "plugin.dir" => RResult::ROk(
                serde_json::Value::String(self.dir.display().to_string())
                    .to_string()
                    .into(),
            ),
            "plugin.config" => RResult::ROk(self.config.to_string().into()),
            other => RResult::RErr(format!("unknown capability '{other}'").into()),
        }
    }

    fn logger(&self) -> HostLoggerBox {
        HostLogger_TO::from_value(PluginLogger::new(&self.plugin_name), TD_Opaque)
    }
}

/// Checks a module type name, so a typo in the root module name fails a test, not a user.
#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::library::RootModule;

    #[test]
    fn root_module_is_looked_up_by_its_published_name() {
        assert_eq!(PluginModRef::NAME, "hermes_plugin");
    }

    #[test]
    fn only_a_later_minor_of_the_same_major_is_newer() {
        assert!(is_newer("1.2.0", "1.1.0"));
        assert!(is_newer("1.10.0", "1.9.3"));
        assert!(!is_newer("1.1.5", "1.1.0"));
        assert!(!is_newer("1.0.0", "1.1.0"));
        assert!(!is_newer("2.0.0", "1.1.0"));
        assert!(!is_newer("junk", "1.1.0"));
    }

    #[test]
    fn long_reports_are_trimmed_to_their_last_lines() {
        let report = "a\n\nb\nc\nd\n";
        assert_eq!(decisive_lines(report), "b | c | d");
    }
}
