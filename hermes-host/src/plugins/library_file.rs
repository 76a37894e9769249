//! Library file names by platform: what a plugin's `library:` must look like here, and which
//! platform a file that does not was built for, so that a plugin copied from another
//! machine is refused with a message that says so instead of a loader error.

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX, OS};

/// The library file cargo builds for crate `crate_name` on this platform: `libmy_plugin.so`
/// on Linux, `libmy_plugin.dylib` on macOS, `my_plugin.dll` on Windows.
///
/// ```
/// let name = hermes_host::plugins::library_file::for_crate("my-plugin");
/// assert!(name.contains("my_plugin"));
/// assert!(hermes_host::plugins::library_file::is_native(&name));
/// ```
pub fn for_crate(crate_name: &str) -> String {
    format!("{DLL_PREFIX}{}{DLL_SUFFIX}", crate_name.replace('-', "_"))
}

/// Whether `file_name` is a shared library of this platform (by its suffix).
///
/// ```
/// use hermes_host::plugins::library_file::{for_crate, is_native};
/// assert!(is_native(&for_crate("x")));
/// assert!(!is_native("plugin.yaml"));
/// ```
pub fn is_native(file_name: &str) -> bool {
    file_name.ends_with(DLL_SUFFIX) && file_name.starts_with(DLL_PREFIX)
}

/// The platform `file_name` is a shared library for, when that is not this one: `macOS` for
/// `*.dylib`, `Windows` for `*.dll`, `Linux` for `*.so`. `None` for this platform's
/// libraries and for anything that is not a library.
///
/// ```
/// use hermes_host::plugins::library_file::foreign_platform;
/// assert_eq!(foreign_platform("plugin.yaml"), None);
/// if cfg!(target_os = "linux") {
///     assert_eq!(foreign_platform("libx.dylib"), Some("macOS"));
///     assert_eq!(foreign_platform("libx.so"), None);
/// }
/// ```
pub fn foreign_platform(file_name: &str) -> Option<&'static str> {
    const KINDS: [(&str, &str); 3] = [(".so", "Linux"), (".dylib", "macOS"), (".dll", "Windows")];
    KINDS
        .iter()
        .find(|(suffix, _)| file_name.ends_with(suffix))
        .filter(|(suffix, _)| *suffix != DLL_SUFFIX)
        .map(|(_, platform)| *platform)
}

/// How this platform's libraries are named, for messages: `lib*.so on linux`.
pub fn pattern() -> String {
    format!("{DLL_PREFIX}*{DLL_SUFFIX} on {OS}")
}
