//! The memory store: a JSON-lines file, read into a cache on first use and appended to for
//! every new memory.

use std::{
    collections::BTreeSet,
    io,
    path::PathBuf,
    sync::{Mutex, PoisonError},
    time::SystemTime,
};

use serde_json::{Value, json};

use crate::{jsonl, timestamp, words};

/// How many characters of each text a memory keeps.
pub const MAX_CHARS: usize = 500;

/// What a memory holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Memory {
    /// One finished turn: the user's message and the model's answer.
    Exchange {
        /// The user's message.
        user: String,
        /// The model's final response.
        assistant: String,
    },
    /// A fact the user asked to keep with `remember: <fact>`.
    Fact(String),
}

/// One remembered item, as one line of the store.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// When it was stored, in RFC 3339.
    pub ts: String,
    /// The session it came from.
    pub session_id: String,
    /// What it holds.
    pub memory: Memory,
}

impl Entry {
    /// The memory a finished turn leaves: the fact after `remember:` when the user's message
    /// has one, else the exchange itself. Each text is cut to [`MAX_CHARS`] characters.
    pub fn from_turn(session_id: &str, user: &str, assistant: &str, at: SystemTime) -> Entry {
        let memory = match fact_to_remember(user) {
            Some(fact) => Memory::Fact(truncate(fact)),
            None => Memory::Exchange {
                user: truncate(user),
                assistant: truncate(assistant),
            },
        };
        Entry {
            ts: timestamp::rfc3339(at),
            session_id: session_id.to_string(),
            memory,
        }
    }

    /// The store line: `{"ts", "session_id", "user", "assistant"}` or
    /// `{"ts", "session_id", "fact"}`.
    pub fn to_json(&self) -> Value {
        match &self.memory {
            Memory::Exchange { user, assistant } => json!({
                "ts": self.ts,
                "session_id": self.session_id,
                "user": user,
                "assistant": assistant,
            }),
            Memory::Fact(fact) => json!({
                "ts": self.ts,
                "session_id": self.session_id,
                "fact": fact,
            }),
        }
    }

    /// Reads a store line back; `None` when it holds neither a fact nor an exchange.
    pub fn from_json(line: &Value) -> Option<Entry> {
        let text = |key: &str| line.get(key).and_then(Value::as_str).map(str::to_string);
        let memory = match (text("fact"), text("user"), text("assistant")) {
            (Some(fact), _, _) => Memory::Fact(fact),
            (None, None, None) => return None,
            (None, user, assistant) => Memory::Exchange {
                user: user.unwrap_or_default(),
                assistant: assistant.unwrap_or_default(),
            },
        };
        Some(Entry {
            ts: text("ts").unwrap_or_default(),
            session_id: text("session_id").unwrap_or_default(),
            memory,
        })
    }

    /// The entry as a list item of the recalled context, on one line.
    pub fn bullet(&self) -> String {
        match &self.memory {
            Memory::Fact(fact) => format!("- {}", one_line(fact)),
            Memory::Exchange { user, assistant } => {
                format!("- {} → {}", one_line(user), one_line(assistant))
            }
        }
    }

    fn words(&self) -> BTreeSet<String> {
        match &self.memory {
            Memory::Fact(fact) => words::significant(fact),
            Memory::Exchange { user, assistant } => {
                let mut all = words::significant(user);
                all.extend(words::significant(assistant));
                all
            }
        }
    }
}

/// The fact in `message` after a `remember:` (any case), up to the end of its line.
pub fn fact_to_remember(message: &str) -> Option<&str> {
    const MARKER: &[u8] = b"remember:";
    let at = message
        .as_bytes()
        .windows(MARKER.len())
        .position(|window| window.eq_ignore_ascii_case(MARKER))?;
    // The marker is ASCII, so `at + MARKER.len()` is a character boundary.
    let rest = &message[at + MARKER.len()..];
    let fact = rest.lines().next().unwrap_or_default().trim();
    (!fact.is_empty()).then_some(fact)
}

fn truncate(text: &str) -> String {
    text.chars().take(MAX_CHARS).collect()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An entry with its significant words, worked out once when it enters the cache.
struct Indexed {
    entry: Entry,
    words: BTreeSet<String>,
}

impl Indexed {
    fn new(entry: Entry) -> Indexed {
        let words = entry.words();
        Indexed { entry, words }
    }
}

/// The store at one path, with its entries cached (oldest first) after the first use.
pub struct Store {
    path: PathBuf,
    cache: Mutex<Option<Vec<Indexed>>>,
}

impl Store {
    /// A store kept in the JSON-lines file at `path`; nothing is read until it is used.
    pub fn new(path: PathBuf) -> Store {
        Store {
            path,
            cache: Mutex::new(None),
        }
    }

    /// Appends `entry` to the file and to the cache. A failed write is logged, and the entry
    /// is still recalled for as long as this process runs.
    pub fn add(&self, entry: Entry) {
        let indexed = Indexed::new(entry);
        // Inside the lock, after the first load: the new line is read only once, and two
        // turns of this process append in the order they reach the cache.
        self.with_entries(|entries| {
            jsonl::append_or_warn(&self.path, &indexed.entry.to_json());
            entries.push(indexed);
        });
    }

    /// The entries sharing at least one significant word with `message`, newest first, at
    /// most `max_items`.
    pub fn recall(&self, message: &str, max_items: usize) -> Vec<Entry> {
        let wanted = words::significant(message);
        if wanted.is_empty() || max_items == 0 {
            return Vec::new();
        }
        self.with_entries(|entries| {
            entries
                .iter()
                .rev()
                .filter(|indexed| !indexed.words.is_disjoint(&wanted))
                .take(max_items)
                .map(|indexed| indexed.entry.clone())
                .collect()
        })
    }

    /// Runs `f` on the cached entries, loading them from the file the first time.
    fn with_entries<T>(&self, f: impl FnOnce(&mut Vec<Indexed>) -> T) -> T {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let entries =
            cache.get_or_insert_with(|| self.load().into_iter().map(Indexed::new).collect());
        f(entries)
    }

    /// Every readable entry of the file, oldest first; unreadable lines are skipped with a
    /// warning, and a missing file is an empty store.
    fn load(&self) -> Vec<Entry> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Vec::new(),
            Err(err) => {
                tracing::warn!(
                    "{}: cannot read the memory store: {err}",
                    self.path.display()
                );
                return Vec::new();
            }
        };
        let mut skipped = 0;
        let entries: Vec<Entry> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .filter_map(|line| {
                let entry = serde_json::from_str(line)
                    .ok()
                    .and_then(|v| Entry::from_json(&v));
                skipped += usize::from(entry.is_none());
                entry
            })
            .collect();
        if skipped > 0 {
            tracing::warn!(
                "{}: skipped {skipped} unreadable lines",
                self.path.display()
            );
        }
        entries
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn exchange(user: &str, assistant: &str) -> Entry {
        Entry::from_turn("s1", user, assistant, at(1_709_210_096))
    }

    fn bullets(entries: &[Entry]) -> Vec<String> {
        entries.iter().map(Entry::bullet).collect()
    }

    #[test]
    fn an_exchange_is_stored_as_one_json_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.jsonl");
        let store = Store::new(path.clone());
        store.add(exchange("Which shell do I use?", "You use fish."));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"ts\":\"2024-02-29T12:34:56.000Z\",\"session_id\":\"s1\",\"user\":\"Which shell do I use?\",\"assistant\":\"You use fish.\"}\n"
        );
    }

    #[test]
    fn remember_stores_only_the_fact() {
        let entry = exchange("ok, REMEMBER:  my editor is Helix \nand thanks", "Noted.");
        assert_eq!(entry.memory, Memory::Fact("my editor is Helix".to_string()));
        assert_eq!(
            entry.to_json().to_string(),
            r#"{"ts":"2024-02-29T12:34:56.000Z","session_id":"s1","fact":"my editor is Helix"}"#
        );
    }

    #[test]
    fn an_empty_remember_is_an_ordinary_exchange() {
        assert_eq!(fact_to_remember("remember:   "), None);
        assert_eq!(fact_to_remember("do you remember me?"), None);
        assert_eq!(fact_to_remember("Rémi says remember: tabs"), Some("tabs"));
    }

    #[test]
    fn each_text_is_cut_to_500_characters() {
        let entry = exchange(&"é".repeat(600), &"b".repeat(501));
        let Memory::Exchange { user, assistant } = entry.memory else {
            panic!("an exchange")
        };
        assert_eq!((user.chars().count(), assistant.len()), (500, 500));
        assert_eq!(user, "é".repeat(500));
    }

    #[test]
    fn recall_returns_entries_sharing_a_word_newest_first_at_most_max_items() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("memory.jsonl"));
        store.add(exchange(
            "remember: the staging database is postgres 16",
            "",
        ));
        store.add(exchange(
            "How do I restart nginx?",
            "systemctl restart nginx",
        ));
        store.add(exchange(
            "Backup the database tonight",
            "Scheduled the database backup.",
        ));
        store.add(exchange(
            "remember: database passwords live in the vault",
            "",
        ));
        store.add(exchange(
            "remember: production database is read-only on fridays",
            "",
        ));
        let recalled = store.recall("Can I migrate the Database now?", 3);
        assert_eq!(
            bullets(&recalled),
            vec![
                "- production database is read-only on fridays",
                "- database passwords live in the vault",
                "- Backup the database tonight → Scheduled the database backup.",
            ]
        );
        assert_eq!(
            bullets(&store.recall("nginx keeps crashing", 3)),
            vec!["- How do I restart nginx? → systemctl restart nginx"]
        );
        assert_eq!(store.recall("what is this about?", 3), Vec::new());
        assert_eq!(store.recall("database", 0), Vec::new());
    }

    #[test]
    fn an_existing_file_is_read_once_on_first_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.jsonl");
        std::fs::write(
            &path,
            concat!(
                "{\"ts\":\"t1\",\"session_id\":\"old\",\"fact\":\"the cluster is called orion\"}\n",
                "not json\n",
                "{\"something\":\"else\"}\n",
                "\n",
                "{\"ts\":\"t2\",\"session_id\":\"old\",\"user\":\"deploy orion\",\"assistant\":\"Deployed.\"}\n",
            ),
        )
        .unwrap();
        let store = Store::new(path.clone());
        assert_eq!(
            bullets(&store.recall("is orion healthy?", 5)),
            vec![
                "- deploy orion → Deployed.",
                "- the cluster is called orion"
            ]
        );
        // Written behind the store's back after the first use: the cache does not see it.
        jsonl::append(&path, &json!({"fact": "orion has 12 nodes"})).unwrap();
        assert_eq!(store.recall("orion", 5).len(), 2);
        assert_eq!(Store::new(path).recall("orion", 5).len(), 3);
    }

    #[test]
    fn the_first_add_loads_the_file_before_writing_so_nothing_is_recalled_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.jsonl");
        std::fs::write(&path, "{\"fact\":\"grafana runs on port 3000\"}\n").unwrap();
        let store = Store::new(path);
        store.add(exchange("remember: grafana admin user is ops", ""));
        assert_eq!(
            bullets(&store.recall("grafana", 5)),
            vec!["- grafana admin user is ops", "- grafana runs on port 3000"]
        );
    }

    #[test]
    fn multi_line_texts_are_recalled_on_one_line() {
        let entry = exchange("list\n  the   files", "a.txt\nb.txt");
        assert_eq!(entry.bullet(), "- list the files → a.txt b.txt");
    }

    #[test]
    fn a_store_that_cannot_be_written_still_recalls_for_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_path_buf());
        store.add(exchange("remember: the wifi password is on the fridge", ""));
        assert_eq!(
            bullets(&store.recall("wifi", 3)),
            vec!["- the wifi password is on the fridge"]
        );
    }
}
