//! The spool: events a gateway could not publish, kept on disk in order until the broker
//! returns, bounded in bytes.
//!
//! `$HERMES_HOME/spool/events/` holds segments named by a sequence number
//! (`00000000000000000001.jsonl`), one event per line. New events go to the newest
//! segment (a new one past 1 MiB); the oldest is read back first, and removed once all of
//! it was published (rewritten with what is left when only part was). A spool left by a
//! gateway that was killed is republished by the next one.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A segment past this size is closed and a new one started.
const SEGMENT_BYTES: u64 = 1 << 20;

/// One event waiting to be published.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Outgoing {
    /// Unique across the fleet: the broker drops a second message with the same id.
    pub id: String,
    /// The gateway event, such as `agent:start`.
    pub event: String,
    /// Its subject.
    pub subject: String,
    /// The context, as JSON.
    pub body: String,
    /// When the gateway emitted it, in microseconds since the epoch.
    #[serde(default)]
    pub at: u64,
}

/// The spool directory and what it holds.
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    bytes: u64,
    events: u64,
    /// The segment being appended to, and its size.
    current: Option<(PathBuf, u64)>,
}

impl Spool {
    /// Opens (creating) the spool at `dir`, counting what a previous run left there.
    ///
    /// # Errors
    ///
    /// When the directory cannot be created.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Spool, String> {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut spool = Spool {
            dir: dir.to_path_buf(),
            max_bytes,
            bytes: 0,
            events: 0,
            current: None,
        };
        for segment in spool.segments() {
            if let Ok(text) = std::fs::read_to_string(&segment) {
                spool.bytes += text.len() as u64;
                spool.events += text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
            }
        }
        Ok(spool)
    }

    /// The segments, oldest first.
    fn segments(&self) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        found.sort();
        found
    }

    /// Events waiting.
    pub fn len(&self) -> u64 {
        self.events
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// Appends `events` in order. Returns how many did not fit (the newest: what is kept
    /// stays in order) or could not be written.
    pub fn append(&mut self, events: &[Outgoing]) -> u64 {
        let mut lost = 0;
        for event in events {
            let Ok(line) = serde_json::to_string(event) else {
                lost += 1;
                continue;
            };
            let size = line.len() as u64 + 1;
            if self.bytes + size > self.max_bytes {
                lost += 1;
                continue;
            }
            let path = match &self.current {
                Some((path, written)) if written + size <= SEGMENT_BYTES => path.clone(),
                _ => self.new_segment(),
            };
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
            match written {
                Ok(()) => {
                    self.bytes += size;
                    self.events += 1;
                    let before = self.current.as_ref().map_or(0, |(_, w)| *w);
                    self.current = Some((path, before + size));
                }
                Err(e) => {
                    tracing::warn!("cannot write the event spool {}: {e}", path.display());
                    lost += 1;
                }
            }
        }
        lost
    }

    fn new_segment(&mut self) -> PathBuf {
        let next = self
            .segments()
            .last()
            .and_then(|p| p.file_stem()?.to_str()?.parse::<u64>().ok())
            .map_or(1, |n| n + 1);
        let path = self.dir.join(format!("{next:020}.jsonl"));
        self.current = Some((path.clone(), 0));
        path
    }

    /// The oldest segment's events, to publish in order.
    pub fn oldest(&self) -> Option<(PathBuf, Vec<Outgoing>)> {
        let path = self.segments().into_iter().next()?;
        let events = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        Some((path, events))
    }

    /// The first `published` events of `segment` (as [`oldest`](Spool::oldest) gave it)
    /// reached the broker: the segment is removed, or rewritten with the rest.
    pub fn published(&mut self, segment: &Path, events: &[Outgoing], published: usize) {
        let sent: u64 = events[..published]
            .iter()
            .map(|e| serde_json::to_string(e).map_or(0, |l| l.len() as u64 + 1))
            .sum();
        self.bytes = self.bytes.saturating_sub(sent);
        self.events = self.events.saturating_sub(published as u64);
        if self.current.as_ref().is_some_and(|(p, _)| p == segment) {
            self.current = None;
        }
        if published >= events.len() {
            let _ = std::fs::remove_file(segment);
            return;
        }
        let rest: String = events[published..]
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .map(|l| l + "\n")
            .collect();
        let tmp = segment.with_extension("tmp");
        if std::fs::write(&tmp, rest).is_ok() {
            let _ = std::fs::rename(&tmp, segment);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(i: usize) -> Outgoing {
        Outgoing {
            id: format!("i-{i}"),
            event: "agent:start".into(),
            subject: "hermes.events.agent.start".into(),
            body: format!("{{\"n\":{i}}}"),
            at: 0,
        }
    }

    #[test]
    fn events_come_back_in_order_survive_a_restart_and_the_bound_drops_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), 10_000).unwrap();
        let events: Vec<Outgoing> = (0..5).map(event).collect();
        assert_eq!(spool.append(&events), 0);
        // A restart finds them.
        let mut spool = Spool::open(dir.path(), 10_000).unwrap();
        assert_eq!(spool.len(), 5);
        let (segment, back) = spool.oldest().unwrap();
        assert_eq!(back, events);
        spool.published(&segment, &back, 2);
        let (segment, rest) = spool.oldest().unwrap();
        assert_eq!(rest, events[2..]);
        spool.published(&segment, &rest, 3);
        assert!(spool.is_empty() && spool.oldest().is_none());
        // Full: the newest are refused and counted.
        let mut small = Spool::open(&dir.path().join("small"), 200).unwrap();
        let lost = small.append(&(0..10).map(event).collect::<Vec<_>>());
        assert!(lost > 0 && small.len() + lost == 10, "{lost}");
        assert_eq!(small.oldest().unwrap().1[0], event(0));
    }
}
