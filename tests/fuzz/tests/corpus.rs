//! Replays every committed seed (`fuzz/corpus/<target>/`) and every crash the fuzzer once
//! found (`fuzz/regressions/<target>/`) through its target, so `cargo test` keeps them
//! fixed without the fuzzer installed. A panic in a target fails the test and names the
//! file; `fuzz/run` is what finds new ones.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

#[test]
fn every_seed_and_regression_runs_through_its_target_without_a_panic() {
    let mut replayed = 0;
    for (name, target) in hermes_fuzz_targets::TARGETS {
        let seeds = files(&fuzz_dir().join("corpus").join(name));
        // A target without seeds would be replayed by nothing here and start cold.
        assert!(
            seeds.len() >= 3,
            "fuzz/corpus/{name}/ has {} seed file(s); commit a few real inputs for it",
            seeds.len()
        );
        let regressions = files(&fuzz_dir().join("regressions").join(name));
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(
                outcome.is_ok(),
                "target {name} panicked on {}; run `fuzz/run --target {name} {}` to see it",
                file.display(),
                file.display()
            );
            replayed += 1;
        }
    }
    hermes_fuzz_targets::clean_scratch();
    println!("replayed {replayed} corpus files");
}

#[test]
fn every_target_has_a_fuzz_binary() {
    for (name, _) in hermes_fuzz_targets::TARGETS {
        let binary = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&binary)
            .unwrap_or_else(|e| panic!("{}: {e}; add a fuzz binary for {name}", binary.display()));
        assert!(
            text.contains(&format!("hermes_fuzz_targets::{name}(")),
            "{} does not call hermes_fuzz_targets::{name}",
            binary.display()
        );
    }
}
