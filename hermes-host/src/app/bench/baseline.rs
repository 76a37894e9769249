//! Saved runs: `--save-baseline NAME` writes `<dir>/NAME.json` (the JSON document with
//! each row's kept samples), `--baseline NAME` reads it back for comparison.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::report::SCHEMA_VERSION;

/// A baseline's rows: key → samples (nanoseconds per firing).
#[derive(Clone, Debug, Default)]
pub struct Baseline {
    /// `(key, p50_ns, samples)` in saved order.
    pub rows: Vec<(String, u64, Vec<u64>)>,
}

/// Where baseline `name` lives in `dir`.
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// Checks that `name` is usable as a file name.
///
/// # Errors
///
/// A name with a path separator or that is empty.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
        return Err(format!(
            "baseline name '{name}' must be a plain file name (letters, digits, - and _)"
        ));
    }
    Ok(())
}

/// Writes `document` (which holds samples) as baseline `name` in `dir`, atomically.
///
/// # Errors
///
/// The directory or the file cannot be written; the message names the path.
pub fn save(dir: &Path, name: &str, document: &Value) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create the baseline directory {}: {e}",
            dir.display()
        )
    })?;
    let target = path(dir, name);
    let temporary = dir.join(format!(".{name}.json.tmp-{}", std::process::id()));
    let text = serde_json::to_string(document).map_err(|e| e.to_string())?;
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, &target))
        .map_err(|e| format!("cannot write the baseline {}: {e}", target.display()))?;
    Ok(target)
}

/// Reads baseline `name` from `dir`.
///
/// # Errors
///
/// A missing file (naming `--save-baseline` as the way to make it), unreadable JSON, or
/// another schema version.
pub fn load(dir: &Path, name: &str) -> Result<Baseline, String> {
    let file = path(dir, name);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "no baseline '{name}' in {} (save one with `hermes bench --save-baseline {name}`)",
                dir.display()
            )
        } else {
            format!("cannot read the baseline {}: {e}", file.display())
        }
    })?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the baseline {} is not valid JSON: {e}", file.display()))?;
    if doc["schema_version"].as_u64() != Some(SCHEMA_VERSION) {
        return Err(format!(
            "the baseline {} has schema version {}, this hermes writes {SCHEMA_VERSION}; save it again",
            file.display(),
            doc["schema_version"]
        ));
    }
    let rows = doc["results"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let key = format!(
                        "{}|{}|{}|{}",
                        r["system"].as_str().unwrap_or_default(),
                        r["event"].as_str().unwrap_or_default(),
                        r["hook"].as_str().unwrap_or_default(),
                        r["measure"].as_str().unwrap_or_default()
                    );
                    let samples = r["samples"]
                        .as_array()
                        .map(|s| s.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default();
                    (key, r["p50_ns"].as_u64().unwrap_or(0), samples)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Baseline { rows })
}
