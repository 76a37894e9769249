//! Helpers for plugins that keep data in files: where the file goes, appending JSON lines
//! safely, and timestamps.
//!
//! ```
//! use hermes_hooks_abi::sdk::data::{jsonl, location, timestamp};
//! let dir = tempfile_dir();
//! let path = location::resolve(&serde_json::Value::Null, Some(&dir), None, "audit.jsonl");
//! jsonl::append(&path, &serde_json::json!({"ts": timestamp::rfc3339(std::time::SystemTime::now())})).unwrap();
//! assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
//! # fn tempfile_dir() -> std::path::PathBuf {
//! #     let d = std::env::temp_dir().join(format!("hermes-data-doc-{}", std::process::id()));
//! #     std::fs::create_dir_all(&d).unwrap();
//! #     d
//! # }
//! ```

pub mod jsonl;
pub mod location;
pub mod timestamp;
