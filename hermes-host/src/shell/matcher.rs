//! The `matcher` of a tool-event shell hook: a regex that must match the whole tool name.

use regex::Regex;

use crate::pyfmt::repr_str;

/// A tool-name matcher, compiled once when the config is parsed.
///
/// The regex must match the **whole** tool name (Python's `re.fullmatch`): `terminal` does not
/// match `terminal2`, and `terminal|file` matches both `terminal` and `file`. A pattern that
/// does not compile falls back to exact string equality.
///
/// The pattern is compiled by the `regex` crate, not Python's `re`: look-around and
/// back-references do not compile, so such a pattern falls back to equality (with the
/// reference's warning).
///
/// ```
/// use hermes_host::shell::matcher::Matcher;
/// let (m, warning) = Matcher::new(" terminal|file ");
/// let m = m.unwrap();
/// assert!(warning.is_none());
/// assert_eq!(m.as_str(), "terminal|file");
/// assert!(m.matches("file") && !m.matches("terminal2"));
/// ```
#[derive(Clone, Debug)]
pub struct Matcher {
    source: String,
    regex: Option<Regex>,
}

impl Matcher {
    /// Normalises and compiles `raw`: surrounding whitespace is stripped, an empty pattern
    /// means "no matcher" (`None`), and a pattern that does not compile comes back as a
    /// literal matcher plus the reference's warning
    /// `shell hook matcher '<m>' is invalid (<err>) — treating as literal equality`.
    ///
    /// ```
    /// use hermes_host::shell::matcher::Matcher;
    /// let (m, warning) = Matcher::new("terminal(");
    /// assert!(m.unwrap().matches("terminal("));
    /// assert!(warning.unwrap().starts_with("shell hook matcher 'terminal(' is invalid ("));
    /// assert!(Matcher::new("   ").0.is_none());
    /// ```
    pub fn new(raw: &str) -> (Option<Matcher>, Option<String>) {
        let source = raw.trim();
        if source.is_empty() {
            return (None, None);
        }
        match Regex::new(&format!(r"\A(?:{source})\z")) {
            Ok(regex) => (
                Some(Matcher {
                    source: source.to_string(),
                    regex: Some(regex),
                }),
                None,
            ),
            Err(e) => {
                let warning = format!(
                    "shell hook matcher {} is invalid ({}) — treating as literal equality",
                    repr_str(source),
                    regex_error_reason(&e)
                );
                (
                    Some(Matcher {
                        source: source.to_string(),
                        regex: None,
                    }),
                    Some(warning),
                )
            }
        }
    }

    /// The pattern as configured (stripped).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern compiled (false: literal equality).
    pub fn is_regex(&self) -> bool {
        self.regex.is_some()
    }

    /// Whether `tool_name` matches: a full regex match, or exact equality for a pattern that
    /// did not compile.
    pub fn matches(&self, tool_name: &str) -> bool {
        match &self.regex {
            Some(regex) => regex.is_match(tool_name),
            None => tool_name == self.source,
        }
    }
}

/// The one-line reason of a regex error (the crate's message spans several lines with a
/// caret diagram; the decisive part is the `error: ...` line).
fn regex_error_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or_else(|| text.lines().last().unwrap_or("").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str) -> Matcher {
        Matcher::new(p).0.unwrap()
    }

    #[test]
    fn the_regex_must_match_the_whole_tool_name() {
        assert!(m("terminal").matches("terminal"));
        assert!(!m("terminal").matches("terminal2"));
        assert!(!m("terminal").matches("my_terminal"));
        assert!(m("term.*").matches("terminal2"));
    }

    #[test]
    fn alternation_matches_every_branch_in_full() {
        let both = m("terminal|file");
        assert!(both.matches("terminal") && both.matches("file"));
        assert!(!both.matches("terminalfile"));
    }

    #[test]
    fn an_invalid_regex_falls_back_to_literal_equality_with_a_one_line_reason() {
        let (matcher, warning) = Matcher::new("a[b");
        let matcher = matcher.unwrap();
        assert!(!matcher.is_regex());
        assert!(matcher.matches("a[b") && !matcher.matches("ab"));
        assert_eq!(
            warning.unwrap(),
            "shell hook matcher 'a[b' is invalid (unclosed character class) — treating as literal equality"
        );
    }

    #[test]
    fn whitespace_is_stripped_and_blank_means_none() {
        assert_eq!(m("  terminal\n").as_str(), "terminal");
        assert!(Matcher::new("").0.is_none());
    }
}
