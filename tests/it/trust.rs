//! What the host refuses to load or run for what its files are: a plugin library outside its
//! directory, a plugin name that is not plain, and (as sshd's StrictModes) plugin, gateway
//! hook and shell hook files that someone else can write or owns. Real files, real modes,
//! the real `hermes` binary.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hermes_tests::support::TestHome;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `chown` to nobody (65534); `false`, with the reason printed, where this user cannot.
fn give_away(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; chown reads it only.
    if unsafe { libc::chown(c.as_ptr(), 65534, u32::MAX) } == 0 {
        return true;
    }
    let err = std::io::Error::last_os_error();
    eprintln!(
        "skipped the ownership part: cannot give {} to uid 65534 ({err}); only root can",
        path.display()
    );
    false
}

/// A recorder plugin installed as `plugins/<dir>/` and enabled.
fn plugin(home: &TestHome, dir: &str) -> std::path::PathBuf {
    let log = home.path().join("calls.log");
    let dest = home.install(
        dir,
        "recorder",
        Some(dir),
        Some(&format!("{{log: '{}', tag: {dir}}}", log.display())),
    );
    home.config(&format!("plugins:\n  enabled: [{dir}]\n"));
    dest
}

fn list_json(home: &TestHome) -> serde_json::Value {
    let run = home.hermes(&["plugins", "list", "--json"], &[]);
    run.expect_code(0);
    serde_json::from_str(&run.stdout()).unwrap()
}

#[test]
fn a_library_outside_the_plugin_directory_is_refused_through_dot_dots_or_symlinks() {
    let home = TestHome::new();
    let dest = plugin(&home, "p");
    let outside = home.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::rename(dest.join("librecorder.so"), outside.join("libx.so")).unwrap();
    let manifest = std::fs::read_to_string(dest.join("plugin.yaml")).unwrap();
    let escaped = manifest.replace("library: librecorder.so", "library: ../../outside/libx.so");
    std::fs::write(dest.join("plugin.yaml"), &escaped).unwrap();

    let (registry, report) = home.load();
    let error = report.plugins[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("`library: ../../outside/libx.so` resolves to")
            && error.contains("outside the directory")
            && error.contains(&dest.join("plugin.yaml").display().to_string()),
        "{error}"
    );
    assert!(registry.entries("pre_tool_call").is_empty());

    // The same library through a symlink inside the directory: still outside.
    std::os::unix::fs::symlink(outside.join("libx.so"), dest.join("librecorder.so")).unwrap();
    std::fs::write(dest.join("plugin.yaml"), &manifest).unwrap();
    let list = list_json(&home);
    let error = list["plugins"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("resolves to") && error.contains("outside/libx.so"),
        "{list}"
    );
    let run = home.hermes(&["plugins", "list"], &[]);
    assert!(run.stdout().contains("not loaded: "), "{}", run.describe());

    // Moved back inside (a symlink that stays inside is fine), it loads.
    std::fs::remove_file(dest.join("librecorder.so")).unwrap();
    std::fs::rename(outside.join("libx.so"), dest.join("libreal.so")).unwrap();
    std::os::unix::fs::symlink(dest.join("libreal.so"), dest.join("librecorder.so")).unwrap();
    let (_, report) = home.load();
    assert!(report.plugins[0].loaded(), "{:?}", report.plugins[0].error);
}

#[test]
fn a_plugin_name_that_is_not_plain_is_refused_at_discovery_and_at_install() {
    let home = TestHome::new();
    let dest = plugin(&home, "p");
    let manifest = std::fs::read_to_string(dest.join("plugin.yaml")).unwrap();
    for bad in ["../evil", "a.b", "x y"] {
        let text = manifest.replace("name: p", &format!("name: '{bad}'"));
        std::fs::write(dest.join("plugin.yaml"), text).unwrap();
        home.config(&format!("plugins:\n  enabled: [p, '{bad}']\n"));
        let (_, report) = home.load();
        let error = report.plugins[0].error.clone().unwrap_or_default();
        assert!(
            error.contains(&format!("plugin name '{bad}'"))
                && error.contains("letters, digits, '-' and '_' only"),
            "{bad}: {error}"
        );
    }

    // Install checks the name before building anything.
    let krate = tempfile::tempdir().unwrap();
    std::fs::write(
        krate.path().join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(
        krate.path().join("plugin.yaml"),
        "name: ../../escape\nversion: 0.1.0\nlibrary: libx.so\n",
    )
    .unwrap();
    let path = krate.path().display().to_string();
    let run = home.hermes(&["plugins", "install", &path], &[]);
    assert_ne!(run.code(), 0, "{}", run.describe());
    assert!(
        run.stderr()
            .contains("plugin name '../../escape' contains a path separator"),
        "{}",
        run.describe()
    );
    assert!(!home.path().join("escape").exists());

    // And never writes through a symlinked plugins/<name>.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        krate.path().join("plugin.yaml"),
        "name: linked\nversion: 0.1.0\nlibrary: libx.so\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), home.path().join("plugins/linked")).unwrap();
    let run = home.hermes(&["plugins", "install", &path], &[]);
    assert_ne!(run.code(), 0, "{}", run.describe());
    assert!(
        run.stderr().contains("is a symbolic link"),
        "{}",
        run.describe()
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[test]
fn plugin_files_others_can_write_are_refused_with_the_fix_and_listed() {
    let home = TestHome::new();
    let dest = plugin(&home, "p");
    let library = dest.join("librecorder.so");

    chmod(&dest, 0o777);
    let list = list_json(&home);
    let error = list["plugins"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("plugin 'p' not loaded: ")
            && error.contains(&format!(
                "{} (plugin directory) is writable by",
                dest.display()
            ))
            && error.contains(&format!("chmod go-w {}", dest.display()))
            && error.contains("hooks.strict_permissions: false"),
        "{list}"
    );
    chmod(&dest, 0o755);

    chmod(&library, 0o666);
    let run = home.hermes(&["plugins", "list"], &[]);
    let text = run.stdout();
    assert!(
        text.contains("not loaded: plugin 'p' not loaded: ")
            && text.contains("(plugin library) is writable by")
            && text.contains(&format!("chmod go-w {}", library.display())),
        "{}",
        run.describe()
    );
    // The agent does not load it either: the warning names the file.
    let run = home.terminal_session(&["true"], &[]);
    assert!(
        run.stderr().contains("(plugin library) is writable by"),
        "{}",
        run.describe()
    );

    // On a shared machine, the refusal becomes a warning and the plugin loads.
    home.config("plugins:\n  enabled: [p]\nhooks:\n  strict_permissions: false\n");
    let list = list_json(&home);
    let plugin = &list["plugins"][0];
    assert_eq!(plugin["enabled"], true, "{list}");
    let warning = plugin["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("allowed because hooks.strict_permissions is false"),
        "{list}"
    );
    let run = home.hermes(&["plugins", "list"], &[]);
    assert!(
        run.stdout().contains("      warning: ") && run.stdout().contains("  p 0.1.0  enabled"),
        "{}",
        run.describe()
    );
    home.config("plugins:\n  enabled: [p]\n");
    chmod(&library, 0o755);
    assert_eq!(list_json(&home)["plugins"][0]["enabled"], true);

    // Owned by another user (not root): refused.
    if give_away(&library) {
        let error = list_json(&home)["plugins"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            error.contains("is owned by uid 65534, not by you") && error.contains("chown "),
            "{error}"
        );
    }
}

#[test]
fn a_shell_hook_script_others_can_write_is_not_run_and_doctor_says_why() {
    let home = TestHome::new();
    let marker = home.path().join("ran");
    let script = home.script(
        "hooks/guard.sh",
        &format!(
            "#!/bin/sh\ntouch {}\necho '{{\"action\":\"block\",\"message\":\"no\"}}'\n",
            marker.display()
        ),
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {}\n",
        script.display()
    ));
    let accept = [("HERMES_ACCEPT_HOOKS", "1")];
    // Approved and run while its mode is right.
    let run = home.terminal_session(&["true"], &accept);
    assert!(marker.exists(), "{}", run.describe());
    std::fs::remove_file(&marker).unwrap();

    chmod(&script, 0o777);
    let run = home.terminal_session(&["true"], &accept);
    assert!(!marker.exists(), "{}", run.describe());
    assert!(
        run.stderr().contains(&format!(
            "not run: {} (shell hook script) is writable by",
            script.display()
        )) && run
            .stderr()
            .contains(&format!("chmod go-w {}", script.display())),
        "{}",
        run.describe()
    );
    let doctor = home.hermes(&["hooks", "doctor"], &[]);
    let text = doctor.stdout();
    assert!(
        text.contains("✗ shell hook for pre_tool_call")
            && text.contains("skipped JSON smoke test — the script fails the permission check")
            && text.contains("issue(s) found"),
        "{}",
        doctor.describe()
    );
    assert!(!marker.exists(), "doctor must not run it either");
    let test = home.hermes(&["hooks", "test", "pre_tool_call"], &[]);
    assert!(
        test.stdout().contains("✗ shell hook for pre_tool_call")
            && test.stdout().contains("chmod go-w"),
        "{}",
        test.describe()
    );
    let test = home.hermes(&["hooks", "test", "pre_tool_call", "--json"], &[]);
    assert!(
        test.stdout().contains("\"error\"") && test.stdout().contains("not run"),
        "{}",
        test.describe()
    );
    assert!(!marker.exists(), "hooks test must not run it either");

    // Its directory counts too: anyone could replace the script.
    chmod(&script, 0o755);
    chmod(script.parent().unwrap(), 0o777);
    let doctor = home.hermes(&["hooks", "doctor"], &[]);
    assert!(
        doctor
            .stdout()
            .contains("(directory of a shell hook script) is writable"),
        "{}",
        doctor.describe()
    );
    chmod(script.parent().unwrap(), 0o755);
    let doctor = home.hermes(&["hooks", "doctor"], &[]);
    assert!(
        !doctor.stdout().contains("writable")
            && doctor.stdout().contains("All shell hooks look healthy"),
        "{}",
        doctor.describe()
    );

    // Lenient: run, with the warning.
    home.config(&format!(
        "hooks:\n  strict_permissions: false\n  pre_tool_call:\n    - command: {}\n",
        script.display()
    ));
    chmod(&script, 0o757);
    let run = home.terminal_session(&["true"], &accept);
    assert!(marker.exists(), "{}", run.describe());
    assert!(
        run.stderr()
            .contains("allowed because hooks.strict_permissions is false"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_config_others_can_write_is_not_read_and_every_command_says_why() {
    let home = TestHome::new();
    let marker = home.path().join("ran");
    let script = home.script(
        "hooks/guard.sh",
        &format!("#!/bin/sh\ntouch {}\necho '{{}}'\n", marker.display()),
    );
    // What another user would write to get a command run as you: a hook, approved by
    // the config itself.
    home.config(&format!(
        "hooks_auto_accept: true\nhooks:\n  pre_tool_call:\n    - command: {}\n",
        script.display()
    ));
    let config = home.path().join("config.yaml");
    let run = home.terminal_session(&["true"], &[]);
    assert!(marker.exists(), "{}", run.describe());
    std::fs::remove_file(&marker).unwrap();

    chmod(&config, 0o646);
    let run = home.terminal_session(&["true"], &[]);
    assert!(!marker.exists(), "{}", run.describe());
    let refusal = format!(
        "{}: it is writable by others (mode 0646): another user could change what runs as you",
        config.display()
    );
    let fix = format!("run `chmod go-w {}`", config.display());
    let says_why = |text: &str| text.contains(&refusal) && text.contains(&fix);
    assert!(says_why(&run.stderr()), "{}", run.describe());
    let list = home.hermes(&["hooks", "list"], &[]);
    assert!(says_why(&list.stderr()), "{}", list.describe());
    assert!(!marker.exists(), "hooks list must not run it");
    // A command that edits the config leaves it alone rather than rewrite it.
    let enable = home.hermes(&["plugins", "enable", "anything"], &[]);
    assert!(
        enable.code() != 0 && says_why(&enable.stderr()),
        "{}",
        enable.describe()
    );
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("hooks_auto_accept: true"),
        "the file was rewritten"
    );

    // Someone else's file is refused the same way, whatever its mode.
    chmod(&config, 0o644);
    if give_away(&config) {
        let run = home.terminal_session(&["true"], &[]);
        assert!(!marker.exists(), "{}", run.describe());
        assert!(
            run.stderr().contains(&format!(
                "{}: it is owned by uid 65534, not by you",
                config.display()
            )),
            "{}",
            run.describe()
        );
        let c = std::ffi::CString::new(config.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; chown reads it only.
        assert_eq!(
            unsafe { libc::chown(c.as_ptr(), libc::geteuid(), u32::MAX) },
            0
        );
    }

    // Fixed: read and run again.
    let run = home.terminal_session(&["true"], &[]);
    assert!(marker.exists(), "{}", run.describe());
}

#[test]
fn a_script_made_writable_after_registration_is_refused_at_the_next_firing() {
    use hermes_host::registry::Registry;
    use hermes_host::shell::{self, Consent};
    let home = TestHome::new();
    let script = home.script(
        "guard.sh",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"v1\"}'\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {}\n      fail_closed: true\n",
        script.display()
    ));
    let h = home.home();
    let (config, _) = h.load_config();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), 1, "{:?}", report.warnings);
    let event = hermes_hooks_abi::hooks::payload::PreToolCallEvent {
        tool_name: "terminal",
        args: "{}",
        ..Default::default()
    };
    let blocked = |r: &Registry| r.pre_tool_call(&event).blocked.map(|b| b.message);
    assert_eq!(blocked(&registry), Some("v1".into()));
    chmod(&script, 0o646);
    // fail_closed: not run, and the call is blocked naming the hook.
    let message = blocked(&registry).unwrap_or_default();
    assert!(
        message.contains("failed closed: its script fails the ownership and permission check"),
        "{message}"
    );
}

#[test]
fn gateway_hook_files_others_can_write_are_refused_and_listed() {
    let home = TestHome::new();
    let dir = home.path().join("hooks/exec");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("HOOK.yaml"), "events: ['agent:*']\n").unwrap();
    let handler = dir.join("handler");
    std::fs::write(&handler, "#!/bin/sh\ncat > /dev/null\n").unwrap();
    chmod(&handler, 0o755);
    let hooks = |home: &TestHome| -> serde_json::Value {
        let run = home.hermes(&["gateway", "hooks", "--json"], &[]);
        run.expect_code(0);
        serde_json::from_str(&run.stdout()).unwrap()
    };
    assert_eq!(
        hooks(&home)["loaded"][0]["name"],
        "exec",
        "{}",
        hooks(&home)
    );

    for (path, mode, role) in [
        (&dir, 0o777, "gateway hook directory"),
        (&handler, 0o757, "gateway hook handler"),
    ] {
        chmod(path, mode);
        let list = hooks(&home);
        assert_eq!(list["loaded"], serde_json::json!([]), "{list}");
        let skipped = &list["skipped"][0];
        let reason = skipped["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("{} ({role}) is writable by", path.display()))
                && reason.contains(&format!("chmod go-w {}", path.display())),
            "{list}"
        );
        assert!(
            skipped["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("[hooks] Error loading hook exec: "),
            "{list}"
        );
        let text = home.hermes(&["gateway", "hooks"], &[]).stdout();
        assert!(text.contains(&format!("({role}) is writable by")), "{text}");
        chmod(path, 0o755);
    }

    // Lenient: loaded, with the warning shown.
    std::fs::write(
        home.path().join("config.yaml"),
        "hooks:\n  strict_permissions: false\n",
    )
    .unwrap();
    chmod(&handler, 0o777);
    let list = hooks(&home);
    assert_eq!(list["loaded"][0]["name"], "exec", "{list}");
    assert!(
        list["loaded"][0]["warnings"][0]
            .as_str()
            .unwrap_or_default()
            .contains("allowed because hooks.strict_permissions is false"),
        "{list}"
    );
    let text = home.hermes(&["gateway", "hooks"], &[]).stdout();
    assert!(text.contains("      warning: "), "{text}");
}

#[test]
fn a_gateway_hook_library_outside_its_directory_is_refused() {
    let home = TestHome::new();
    let dir = home.path().join("hooks/native");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(home.path().join("libx.so"), "").unwrap();
    std::fs::write(
        dir.join("HOOK.yaml"),
        "events: ['agent:*']\nlibrary: ../../libx.so\n",
    )
    .unwrap();
    let run = home.hermes(&["gateway", "hooks", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let reason = list["skipped"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("`library: ../../libx.so` resolves to")
            && reason.contains("outside the directory"),
        "{list}"
    );
}
