//! The `matcher` of a shell hook: for a Hermes-format hook, a regex that must match the
//! whole tool name; for a `format: claude` hook, Claude Code's rule (a name or a list of
//! names, else a regex found anywhere in the value).

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
    rule: Rule,
}

/// How a matcher compares.
#[derive(Clone, Debug)]
enum Rule {
    /// Hermes: the regex must match the whole value.
    Whole(Regex),
    /// Claude Code: the regex may match anywhere in the value.
    Anywhere(Regex),
    /// Claude Code: the value is one of these names.
    Names(Vec<String>),
    /// A pattern that did not compile: the value equals it.
    Literal,
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
        Self::compiled(source, &format!(r"\A(?:{source})\z"), Rule::Whole)
    }

    /// Compiles `raw` with Claude Code's rule, for a `format: claude` hook: `*`, an empty
    /// pattern or only whitespace means "no matcher" (`None`); a pattern of only letters,
    /// digits, `_`, `-`, spaces, `,` and `|` is a name or a list of names (`Write|Edit`),
    /// each equal to the whole value; anything else is a regular expression that may match
    /// anywhere in the value (`Edit.*` matches `NotebookEdit`, `^mcp__` every MCP tool).
    /// A pattern that does not compile falls back to literal equality with a warning.
    ///
    /// ```
    /// use hermes_host::shell::matcher::Matcher;
    /// let names = Matcher::claude("startup|resume").0.unwrap();
    /// assert!(names.matches("resume") && !names.matches("startup2"));
    /// let regex = Matcher::claude("^mcp__memory__").0.unwrap();
    /// assert!(regex.matches("mcp__memory__create") && !regex.matches("x_mcp__memory__"));
    /// assert!(Matcher::claude("*").0.is_none());
    /// ```
    pub fn claude(raw: &str) -> (Option<Matcher>, Option<String>) {
        let source = raw.trim();
        if source.is_empty() || source == "*" {
            return (None, None);
        }
        let plain = source
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | ',' | '|'));
        if plain {
            let names = source
                .split(['|', ','])
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            let matcher = Matcher {
                source: source.to_string(),
                rule: Rule::Names(names),
            };
            return (Some(matcher), None);
        }
        Self::compiled(source, source, Rule::Anywhere)
    }

    /// `source` compiled as `pattern` into `rule`, or a literal matcher and the reference's
    /// warning `shell hook matcher '<m>' is invalid (<err>) — treating as literal equality`.
    fn compiled(
        source: &str,
        pattern: &str,
        rule: fn(Regex) -> Rule,
    ) -> (Option<Matcher>, Option<String>) {
        let (rule, warning) = match Regex::new(pattern) {
            Ok(regex) => (rule(regex), None),
            Err(e) => (
                Rule::Literal,
                Some(format!(
                    "shell hook matcher {} is invalid ({}) — treating as literal equality",
                    repr_str(source),
                    regex_error_reason(&e)
                )),
            ),
        };
        let matcher = Matcher {
            source: source.to_string(),
            rule,
        };
        (Some(matcher), warning)
    }

    /// The pattern as configured (stripped).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the pattern is a regex (false: names, or literal equality for a pattern that
    /// did not compile).
    pub fn is_regex(&self) -> bool {
        matches!(self.rule, Rule::Whole(_) | Rule::Anywhere(_))
    }

    /// Whether `value` (a tool name, or for a Claude hook the field its event matches on)
    /// matches: by the regex, by one of the names, or by equality for a pattern that did
    /// not compile.
    pub fn matches(&self, value: &str) -> bool {
        match &self.rule {
            Rule::Whole(regex) | Rule::Anywhere(regex) => regex.is_match(value),
            Rule::Names(names) => names.iter().any(|n| n == value),
            Rule::Literal => value == self.source,
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
    fn claudes_rule_names_are_whole_and_other_patterns_match_anywhere() {
        let c = |p: &str| Matcher::claude(p).0.unwrap();
        assert!(c("Bash").matches("Bash") && !c("Bash").matches("BashOutput"));
        assert!(c("Write, Edit").matches("Edit") && !c("Write, Edit").matches("Write, Edit"));
        assert!(c("Edit.*").matches("NotebookEdit"));
        assert!(c("mcp__.*__write.*").matches("mcp__fs__write_file"));
        assert!(!c("^Bash$").matches("BashOutput"));
        assert!(c(" startup|clear|compact ").matches("compact"));
        assert!(!c("startup|clear|compact").matches("resume"));
        assert!(Matcher::claude("").0.is_none() && Matcher::claude(" * ").0.is_none());
        let (literal, warning) = Matcher::claude("a[b");
        assert!(literal.unwrap().matches("a[b") && warning.is_some());
    }

    #[test]
    fn whitespace_is_stripped_and_blank_means_none() {
        assert_eq!(m("  terminal\n").as_str(), "terminal");
        assert!(Matcher::new("").0.is_none());
    }
}
