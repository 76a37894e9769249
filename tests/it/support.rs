//! Building what the tests load, once per test run, and temporary homes.
//!
//! The plugins are built by a nested `cargo build` into `target/it`, a target directory of
//! their own, so the nested build never waits on the outer `cargo test`'s lock. The frozen
//! 1.0 and the 2.0 fixtures are workspaces of their own with their own target directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The crates the tests load, all built in debug mode into `target/it`.
pub const PACKAGES: &[&str] = &[
    "audit-log",
    "guardrail",
    "memory",
    "secret-redactor",
    "metrics",
    "faulty",
    "recorder",
    "compat-v1_1",
    "noop",
    "gateway-ack",
    "noisy",
    "crashy",
    "soak",
    "toolbox",
    // Not a plugin: the embedding example, a binary.
    "embed",
];

/// What the nested builds produced.
pub struct Built {
    target: PathBuf,
    fixtures_1_0: PathBuf,
    fixtures_2_0: PathBuf,
}

impl Built {
    /// `lib<name>.so` of a workspace package.
    pub fn lib(&self, package: &str) -> PathBuf {
        self.target
            .join("debug")
            .join(format!("lib{}.so", package.replace('-', "_")))
    }

    /// The `hermes` binary.
    pub fn hermes(&self) -> PathBuf {
        self.target.join("debug").join("hermes")
    }

    /// A binary of the workspace built beside `hermes` (the embedding example).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.target.join("debug").join(name)
    }

    /// The target directory the plugins were built in (for `hermes plugins install`).
    pub fn target_dir(&self) -> &Path {
        &self.target
    }

    /// The plugin built against the frozen 1.0 interface.
    pub fn plugin_v1_0(&self) -> PathBuf {
        self.fixtures_1_0.join("debug").join("libplugin_v1_0.so")
    }

    /// The host built against the frozen 1.0 interface.
    pub fn host_v1_0(&self) -> PathBuf {
        self.fixtures_1_0.join("debug").join("host-v1_0")
    }

    /// The plugin built against the incompatible 2.0 interface.
    pub fn plugin_v2_0(&self) -> PathBuf {
        self.fixtures_2_0.join("debug").join("libplugin_v2_0.so")
    }
}

/// Builds everything once per test run and returns where it is.
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = workspace();
        let target = root.join("target").join("it");
        let mut args: Vec<String> = vec!["build".into(), "-p".into(), "hermes-host".into()];
        for p in PACKAGES {
            args.push("-p".into());
            args.push((*p).into());
        }
        cargo(&root, &args, &target);
        let fixtures = root.join("tests").join("fixtures");
        let fixtures_1_0 = root.join("target").join("it-abi-1.0");
        cargo(&fixtures.join("abi-1.0"), &["build".into()], &fixtures_1_0);
        let fixtures_2_0 = root.join("target").join("it-abi-2.0");
        cargo(&fixtures.join("abi-2.0"), &["build".into()], &fixtures_2_0);
        Built {
            target,
            fixtures_1_0,
            fixtures_2_0,
        }
    })
}

/// A plugin built against a copy of the current interface that calls itself 1.4.0: what a
/// user has when their plugin is newer than their `hermes`. Made at test time (a workspace
/// in `target/it-abi-1.2` with a copy of `hermes-hooks-abi` and of the `noop` plugin,
/// renamed `plugin-v1_2`), so it can never drift from the interface it copies.
pub fn plugin_v1_2() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = workspace();
            let dir = root.join("target").join("it-abi-1.2");
            let _ = std::fs::remove_dir_all(&dir);
            copy_dir(&root.join("hermes-hooks-abi/src"), &dir.join("hermes-hooks-abi/src"));
            let abi_toml = std::fs::read_to_string(root.join("hermes-hooks-abi/Cargo.toml"))
                .expect("hermes-hooks-abi/Cargo.toml");
            let abi_toml = abi_toml.replacen("version = \"1.3.0\"", "version = \"1.4.0\"", 1);
            assert!(abi_toml.contains("version = \"1.4.0\""), "the interface is no longer 1.3.0: update this fixture");
            write(&dir.join("hermes-hooks-abi/Cargo.toml"), &abi_toml);
            copy_dir(&root.join("tests/plugins/noop/src"), &dir.join("plugin-v1_2/src"));
            let plugin_toml = std::fs::read_to_string(root.join("tests/plugins/noop/Cargo.toml"))
                .expect("noop's Cargo.toml")
                .replacen("name = \"noop\"", "name = \"plugin-v1_2\"", 1);
            write(&dir.join("plugin-v1_2/Cargo.toml"), &plugin_toml);
            // The workspace's own settings, members replaced, so the copies build as here.
            let workspace_toml =
                std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
            let shared = workspace_toml
                .split_once("[workspace.package]")
                .map(|(_, rest)| rest)
                .expect("[workspace.package] in Cargo.toml");
            write(
                &dir.join("Cargo.toml"),
                &format!(
                    "[workspace]\nresolver = \"3\"\nmembers = [\"hermes-hooks-abi\", \"plugin-v1_2\"]\n\n[workspace.package]{shared}"
                ),
            );
            std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
            let target = root.join("target").join("it");
            cargo(&dir, &["build".into(), "--offline".into(), "-p".into(), "plugin-v1_2".into()], &target);
            target.join("debug").join("libplugin_v1_2.so")
        })
        .clone()
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create a fixture directory");
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a fixture directory");
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let path = entry.expect("a directory entry").path();
        let dest = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap_or_else(|e| panic!("copy {}: {e}", path.display()));
        }
    }
}

/// `examples/static-host`, built once: a workspace of its own (guardrail linked in with its
/// `static` feature) built offline with the workspace's `Cargo.lock`, into a target
/// directory of its own: guardrail's rlib has no hash in its file name (the package also
/// builds a cdylib), so a build with other features in the same directory would replace it.
pub fn static_host() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = workspace();
            let dir = root.join("examples").join("static-host");
            std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
            let target = root.join("target").join("it-static");
            cargo(&dir, &["build".into(), "--offline".into()], &target);
            target.join("debug").join("static-host")
        })
        .clone()
}

/// `lib<package>.so` built in release mode into `target/it-release`, for benchmarks: a debug
/// plugin would measure the optimiser, not the boundary.
pub fn release_lib(package: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let target = BUILT.get_or_init(|| {
        let root = workspace();
        let target = root.join("target").join("it-release");
        let args: Vec<String> = ["build", "--release", "-p", "noop", "-p", "soak"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        cargo(&root, &args, &target);
        target
    });
    target
        .join("release")
        .join(format!("lib{}.so", package.replace('-', "_")))
}

fn cargo(dir: &Path, args: &[String], target: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(dir)
        .args(args)
        .arg("--target-dir")
        .arg(target)
        .env_remove("RUSTFLAGS")
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo in {}: {e}", dir.display()));
    assert!(
        status.success(),
        "cargo {args:?} failed in {}",
        dir.display()
    );
}

/// A temporary `$HERMES_HOME`.
pub struct TestHome {
    dir: tempfile::TempDir,
}

impl Default for TestHome {
    fn default() -> Self {
        TestHome::new()
    }
}

impl TestHome {
    /// An empty home.
    pub fn new() -> TestHome {
        TestHome {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// The home directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The resolved home, for the library API.
    pub fn home(&self) -> hermes_host::home::Home {
        hermes_host::home::Home::at(self.path())
    }

    /// Installs a built workspace plugin as `plugins/<dir>` with its own plugin.yaml, with
    /// `name` and `config` replaced when given.
    pub fn install(
        &self,
        dir: &str,
        package: &str,
        name: Option<&str>,
        config: Option<&str>,
    ) -> PathBuf {
        let src = workspace().join(plugin_crate_dir(package));
        let manifest = std::fs::read_to_string(src.join("plugin.yaml"))
            .expect("the package has a plugin.yaml");
        self.install_lib(dir, &built().lib(package), &manifest, name, config)
    }

    /// Installs the release build of a workspace plugin (see [`release_lib`]).
    pub fn install_release(
        &self,
        dir: &str,
        package: &str,
        name: Option<&str>,
        config: Option<&str>,
    ) -> PathBuf {
        let src = workspace().join(plugin_crate_dir(package));
        let manifest = std::fs::read_to_string(src.join("plugin.yaml"))
            .expect("the package has a plugin.yaml");
        self.install_lib(dir, &release_lib(package), &manifest, name, config)
    }

    /// Installs `lib` as `plugins/<dir>` with the given manifest text.
    pub fn install_lib(
        &self,
        dir: &str,
        lib: &Path,
        manifest: &str,
        name: Option<&str>,
        config: Option<&str>,
    ) -> PathBuf {
        let dest = self.path().join("plugins").join(dir);
        std::fs::create_dir_all(&dest).expect("create the plugin dir");
        let file = lib.file_name().expect("a library file name");
        std::fs::copy(lib, dest.join(file))
            .unwrap_or_else(|e| panic!("copy {}: {e}", lib.display()));
        let mut text: String = manifest
            .lines()
            .filter(|l| !(name.is_some() && l.starts_with("name:")))
            .map(|l| format!("{l}\n"))
            .collect();
        if let Some(name) = name {
            text.push_str(&format!("name: {name}\n"));
        }
        if let Some(config) = config {
            text.push_str(&format!("config: {config}\n"));
        }
        std::fs::write(dest.join("plugin.yaml"), text).expect("write plugin.yaml");
        dest
    }

    /// Writes an executable script `name` into the home and returns its path.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path().join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the script's directory");
        }
        std::fs::write(&path, body).expect("write the script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make the script executable");
        path
    }

    /// Installs gateway hook `hooks/recorder` for `agent:*`: an executable handler that
    /// appends each event's JSON, and a newline, to `events`.
    pub fn gateway_recorder(&self, events: &Path) {
        use std::os::unix::fs::PermissionsExt as _;
        let hook = self.path().join("hooks/recorder");
        std::fs::create_dir_all(&hook).expect("create the hook directory");
        std::fs::write(
            hook.join("HOOK.yaml"),
            "name: recorder\nevents: [\"agent:*\"]\n",
        )
        .expect("write HOOK.yaml");
        let handler = hook.join("handler");
        let body = format!("#!/bin/sh\ncat >> {0}\necho >> {0}\n", events.display());
        std::fs::write(&handler, body).expect("write the handler");
        std::fs::set_permissions(&handler, std::fs::Permissions::from_mode(0o755))
            .expect("make the handler executable");
    }

    /// Writes `config.yaml`.
    pub fn config(&self, text: &str) {
        std::fs::write(self.path().join("config.yaml"), text).expect("write config.yaml");
    }

    /// Runs `hermes --home <this home> <args>` with `env` set.
    pub fn hermes(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(built().hermes());
        cmd.arg("--home").arg(self.path()).args(args);
        cmd.env_remove("HERMES_LOG")
            .env_remove("RUST_LOG")
            .env_remove("HERMES_SAFE_MODE");
        cmd.env_remove("HERMES_ENABLE_PROJECT_PLUGINS");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = cmd.output().expect("run hermes");
        Run {
            args: args.iter().map(|s| s.to_string()).collect(),
            output,
        }
    }

    /// Runs `hermes run` on a scripted session of one turn that calls the terminal tool with
    /// each of `commands` in turn, then answers `done` (tool approvals denied, no trace).
    pub fn terminal_session(&self, commands: &[&str], env: &[(&str, &str)]) -> Run {
        let work = tempfile::tempdir().expect("a temporary directory");
        let mut text = String::from("turns:\n  - user: go\n    steps:\n");
        for c in commands {
            text.push_str(&format!(
                "      - tool: terminal\n        args: {{command: '{c}'}}\n"
            ));
        }
        text.push_str("      - final: done\n");
        let file = work.path().join("s.yaml");
        std::fs::write(&file, text).expect("write the session");
        let (file, cwd) = (
            file.display().to_string(),
            work.path().display().to_string(),
        );
        self.hermes(
            &[
                "run",
                &file,
                "--cwd",
                &cwd,
                "--approvals",
                "deny",
                "--trace",
                "off",
            ],
            env,
        )
    }

    /// Loads the home's plugins through the public API.
    pub fn load(
        &self,
    ) -> (
        hermes_host::registry::Registry,
        hermes_host::plugins::LoadReport,
    ) {
        let home = self.home();
        let (config, problem) = home.load_config();
        assert!(problem.is_none(), "{problem:?}");
        let mut registry = hermes_host::registry::Registry::new();
        let report = hermes_host::plugins::load_all(
            &home,
            &config.plugins,
            &Default::default(),
            &mut registry,
        );
        (registry, report)
    }

    /// The path with this home's directory replaced by `$HOME`, for comparing output.
    pub fn mask(&self, text: &str) -> String {
        text.replace(&self.path().display().to_string(), "$HOME")
    }
}

/// `plugins/<package>` or `tests/plugins/<package>`.
pub fn plugin_crate_dir(package: &str) -> PathBuf {
    let examples = Path::new("plugins").join(package);
    if workspace().join(&examples).is_dir() {
        examples
    } else {
        Path::new("tests").join("plugins").join(package)
    }
}

/// A finished `hermes` run, with output that explains itself when an assertion fails.
pub struct Run {
    args: Vec<String>,
    output: Output,
}

impl Run {
    /// Standard output.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Standard error.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The exit code (-1 when killed by a signal).
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }

    /// Asserts exit code `code`, printing the run when it differs.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(self.code(), code, "{}", self.describe());
        self
    }

    /// The command, exit code, stdout and stderr, framed.
    pub fn describe(&self) -> String {
        format!(
            "\n--- hermes {} (exit {})\n--- stdout\n{}\n--- stderr\n{}\n---",
            self.args.join(" "),
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }
}

/// The cargo-generate version the template test installs when none is on `PATH`: the newest
/// that builds with `--locked` on this toolchain (rustc 1.95; 0.24 and later lock
/// dependencies that need rustc 1.96). Building it needs `pkg-config` and `libssl-dev`.
pub const CARGO_GENERATE_VERSION: &str = "0.23.14";

/// A `cargo generate` command: the `cargo generate` on `PATH` if there is one, else
/// `cargo-generate` from `$HERMES_TOOLS_DIR/bin` (default `target/tools/bin`), installed there
/// with `cargo install --locked` at [`CARGO_GENERATE_VERSION`] the first time.
pub fn cargo_generate() -> Command {
    static TOOL: OnceLock<Option<PathBuf>> = OnceLock::new();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let tool = TOOL.get_or_init(|| {
        let on_path = Command::new(&cargo)
            .args(["generate", "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
        if on_path {
            return None;
        }
        let root = std::env::var_os("HERMES_TOOLS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target").join("tools"));
        let bin = root.join("bin").join("cargo-generate");
        let works = |bin: &Path| {
            Command::new(bin)
                .args(["generate", "--version"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !works(&bin) {
            let status = Command::new(&cargo)
                .args(["install", "cargo-generate", "--locked", "--version"])
                .arg(CARGO_GENERATE_VERSION)
                .arg("--root")
                .arg(&root)
                .env_remove("CARGO_TARGET_DIR")
                .env_remove("RUSTFLAGS")
                .status()
                .unwrap_or_else(|e| panic!("cannot run cargo install: {e}"));
            assert!(
                status.success() && works(&bin),
                "cannot install cargo-generate {CARGO_GENERATE_VERSION} into {} (building it needs pkg-config and libssl-dev: `apt-get install pkg-config libssl-dev`)",
                root.display()
            );
        }
        Some(bin)
    });
    match tool {
        Some(bin) => {
            let mut cmd = Command::new(bin);
            cmd.arg("generate");
            cmd
        }
        None => {
            let mut cmd = Command::new(cargo);
            cmd.arg("generate");
            cmd
        }
    }
}

/// Runs `cmd`, and panics with its command line, stdout and stderr when it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        output.status.success(),
        "\n--- {cmd:?} ({})\n--- stdout\n{}\n--- stderr\n{}\n---",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `(allocations, bytes)` live in the `soak` test plugin's own allocator, as it answers
/// them to `pre_llm_call` (`live=<n> bytes=<n>`).
pub fn soak_plugin_live(registry: &hermes_host::registry::Registry) -> (i64, i64) {
    let llm = hermes_hooks_abi::hooks::payload::PreLlmCallEvent {
        session_id: "s-1",
        user_message: "count",
        ..Default::default()
    };
    let text = registry.pre_llm_call(&llm).unwrap_or_default();
    let number = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in the soak plugin's answer {text:?}"))
    };
    (number("live="), number("bytes="))
}
