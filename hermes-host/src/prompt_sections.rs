//! System prompt sections plugins add (`ctx.register_system_prompt_section` in Hermes): short,
//! bounded texts rendered once when a session starts and sent to the model at the head of
//! every request of that session, whatever kind of plugin wrote them.
//!
//! The rules are the reference's, because a plugin tuned for Hermes's budget must fit here
//! too: sections render in the order of their ids, at most [`MAX_SECTIONS`] of them; a
//! section's text is stripped and skipped (with a warning naming it) when it is empty, holds
//! a container marker, or is longer than its `max_chars`; the whole container, markers and
//! headings included, stays within [`MAX_TOTAL_CHARS`]. The rendered text is the
//! reference's container ([`START`] ... [`END`]), so the section can be found again in a
//! stored prompt.

use std::sync::Arc;

use serde_json::Value;

/// The one position the reference offers: after the agent's memory.
pub const POSITIONS: &[&str] = &["after_memory"];

/// The most characters one section may have, and its default `max_chars`.
pub const MAX_SECTION_CHARS: usize = 4_000;

/// How many sections one session's prompt may carry.
pub const MAX_SECTIONS: usize = 32;

/// The most characters all sections of a session may take, container included.
pub const MAX_TOTAL_CHARS: usize = 8_000;

/// The marker that opens the sections in a prompt.
pub const START: &str = "<!-- hermes-plugin-sections:start -->";

/// The marker that closes them.
pub const END: &str = "<!-- hermes-plugin-sections:end -->";

const HEADING: &str = "## Plugin Context: ";

/// What a plugin declared about a section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionSpec {
    /// Its id: 1 to 128 of `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit.
    pub id: String,
    /// Where it goes; `after_memory`.
    pub position: String,
    /// The most characters its text may have.
    pub max_chars: usize,
    /// The plugin that registered it.
    pub source: String,
}

/// Renders the sections of one plugin.
pub trait SectionSource: Send + Sync {
    /// The text of section `id` for a session described by `info` (`session_id`,
    /// `platform`, `model`, ...): `Ok(None)` when it has nothing to say this time.
    ///
    /// # Errors
    ///
    /// The plugin's renderer failed; the section is skipped with the message.
    fn render(&self, id: &str, info: &Value) -> Result<Option<String>, String>;
}

/// Whether `id` is a section id the reference accepts.
///
/// ```
/// use hermes_host::prompt_sections::valid_id;
/// assert!(valid_id("team.rules"));
/// assert!(!valid_id("Team Rules"));
/// ```
pub fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// Every section of one load.
#[derive(Clone, Default)]
pub struct PromptSections {
    sections: Vec<(SectionSpec, Arc<dyn SectionSource>)>,
}

impl std::fmt::Debug for PromptSections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.sections.iter().map(|(s, _)| &s.id))
            .finish()
    }
}

impl PromptSections {
    /// Adds a section.
    ///
    /// # Errors
    ///
    /// The id, position or `max_chars` break the rules above, or another plugin has the id;
    /// the message is the reference's.
    pub fn add(&mut self, spec: SectionSpec, source: Arc<dyn SectionSource>) -> Result<(), String> {
        if !valid_id(&spec.id) {
            return Err(format!(
                "Plugin '{}': system prompt section id must be 1-128 lowercase characters using letters, numbers, '.', '_', or '-'",
                spec.source
            ));
        }
        if !POSITIONS.contains(&spec.position.as_str()) {
            return Err(format!(
                "Plugin '{}': system prompt section position must be one of: {}",
                spec.source,
                POSITIONS.join(", ")
            ));
        }
        if !(1..=MAX_SECTION_CHARS).contains(&spec.max_chars) {
            return Err(format!(
                "Plugin '{}': system prompt section max_chars must be between 1 and {MAX_SECTION_CHARS}",
                spec.source
            ));
        }
        if let Some((first, _)) = self.sections.iter().find(|(s, _)| s.id == spec.id) {
            return Err(format!(
                "Plugin '{}': system prompt section '{}' is already registered by plugin '{}'",
                spec.source, spec.id, first.source
            ));
        }
        self.sections.push((spec, source));
        Ok(())
    }

    /// Whether no plugin registered a section.
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    /// Every section, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &SectionSpec> {
        self.sections.iter().map(|(s, _)| s)
    }

    /// The sections for a new session described by `info`, as the text to put at the head
    /// of its prompt; `None` when none has anything to say. Skipped sections are logged
    /// with the reason, as in the reference.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::prompt_sections::{PromptSections, SectionSource, SectionSpec};
    /// struct Rules;
    /// impl SectionSource for Rules {
    ///     fn render(&self, _: &str, info: &serde_json::Value) -> Result<Option<String>, String> {
    ///         Ok(Some(format!("Answer in English on {}.", info["platform"].as_str().unwrap_or("?"))))
    ///     }
    /// }
    /// let mut sections = PromptSections::default();
    /// let spec = SectionSpec { id: "team.rules".into(), position: "after_memory".into(), max_chars: 200, source: "demo".into() };
    /// sections.add(spec, Arc::new(Rules)).unwrap();
    /// let text = sections.render(&serde_json::json!({"platform": "cli"})).unwrap();
    /// assert!(text.contains("## Plugin Context: team.rules"));
    /// assert!(text.contains("Answer in English on cli."));
    /// ```
    pub fn render(&self, info: &Value) -> Option<String> {
        let mut order: Vec<&(SectionSpec, Arc<dyn SectionSource>)> = self.sections.iter().collect();
        order.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        let mut blocks: Vec<String> = Vec::new();
        let mut total = START.len() + END.len() + 2;
        for (spec, source) in order {
            let skip = |why: &str| {
                tracing::warn!(
                    "Plugin system prompt section {} ({}) {why}",
                    spec.id,
                    spec.source
                );
            };
            if blocks.len() >= MAX_SECTIONS {
                skip(&format!(
                    "exceeded the section-count budget ({MAX_SECTIONS}) and was skipped"
                ));
                continue;
            }
            let text = match source.render(&spec.id, info) {
                Ok(Some(text)) => text.trim().to_string(),
                Ok(None) => continue,
                Err(why) => {
                    skip(&format!("raised and was skipped: {why}"));
                    continue;
                }
            };
            if text.is_empty() {
                continue;
            }
            if text.contains(START) || text.contains(END) {
                skip("contained a reserved persistence marker and was skipped");
                continue;
            }
            let chars = text.chars().count();
            if chars > spec.max_chars {
                skip(&format!(
                    "exceeded max_chars ({chars} > {}) and was skipped",
                    spec.max_chars
                ));
                continue;
            }
            let block = format!(
                "{HEADING}{}\n<!-- hermes-plugin-section-chars:{chars} -->\n\n{text}",
                spec.id
            );
            let cost = block.chars().count() + if blocks.is_empty() { 0 } else { 2 };
            if total + cost > MAX_TOTAL_CHARS {
                skip(&format!(
                    "exceeded the aggregate session budget ({MAX_TOTAL_CHARS} chars) and was skipped"
                ));
                continue;
            }
            total += cost;
            tracing::info!(
                "Session plugin prompt section: id={} plugin={} position={} chars={chars}",
                spec.id,
                spec.source,
                spec.position
            );
            blocks.push(block);
        }
        if blocks.is_empty() {
            return None;
        }
        Some(format!("{START}\n{}\n{END}", blocks.join("\n\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str);

    impl SectionSource for Fixed {
        fn render(&self, _: &str, _: &Value) -> Result<Option<String>, String> {
            Ok(Some(self.0.to_string()))
        }
    }

    fn spec(id: &str, max_chars: usize) -> SectionSpec {
        SectionSpec {
            id: id.into(),
            position: "after_memory".into(),
            max_chars,
            source: "p".into(),
        }
    }

    #[test]
    fn sections_render_by_id_and_the_rules_skip_what_breaks_them() {
        let mut sections = PromptSections::default();
        sections
            .add(spec("b", 100), Arc::new(Fixed(" second ")))
            .unwrap();
        sections
            .add(spec("a", 100), Arc::new(Fixed("first")))
            .unwrap();
        sections
            .add(spec("c", 3), Arc::new(Fixed("too long")))
            .unwrap();
        sections
            .add(spec("d", 100), Arc::new(Fixed(START)))
            .unwrap();
        sections
            .add(spec("e", 100), Arc::new(Fixed("   ")))
            .unwrap();
        let text = sections.render(&Value::Null).unwrap();
        let first = text.find("first").unwrap();
        let second = text.find("second").unwrap();
        assert!(first < second, "{text}");
        assert!(!text.contains("too long"), "{text}");
        assert_eq!(text.matches(HEADING).count(), 2, "{text}");
        assert!(text.starts_with(START) && text.ends_with(END));
        assert!(text.contains("<!-- hermes-plugin-section-chars:6 -->\n\nsecond"));
    }

    #[test]
    fn registration_refuses_bad_ids_positions_sizes_and_a_taken_id() {
        let mut sections = PromptSections::default();
        assert!(
            sections
                .add(spec("Bad Id", 10), Arc::new(Fixed("")))
                .is_err()
        );
        assert!(sections.add(spec("ok", 0), Arc::new(Fixed(""))).is_err());
        assert!(sections.add(spec("ok", 4001), Arc::new(Fixed(""))).is_err());
        let mut elsewhere = spec("ok", 10);
        elsewhere.position = "before_memory".into();
        assert!(sections.add(elsewhere, Arc::new(Fixed(""))).is_err());
        sections.add(spec("ok", 10), Arc::new(Fixed(""))).unwrap();
        let taken = sections
            .add(spec("ok", 10), Arc::new(Fixed("")))
            .unwrap_err();
        assert!(
            taken.contains("already registered by plugin 'p'"),
            "{taken}"
        );
    }

    #[test]
    fn the_aggregate_budget_keeps_the_prompt_bounded() {
        static LONG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "x".repeat(3_800));
        struct Long;
        impl SectionSource for Long {
            fn render(&self, _: &str, _: &Value) -> Result<Option<String>, String> {
                Ok(Some(LONG.clone()))
            }
        }
        let mut sections = PromptSections::default();
        for id in ["a", "b", "c"] {
            sections.add(spec(id, 4_000), Arc::new(Long)).unwrap();
        }
        let text = sections.render(&Value::Null).unwrap();
        assert_eq!(text.matches(HEADING).count(), 2);
        assert!(text.chars().count() <= MAX_TOTAL_CHARS);
    }
}
