//! The guardrail's rules: which terminal commands are blocked, and why.

use regex::Regex;
use serde_json::Value;

/// The built-in rules, as `(pattern, reason)`, checked in this order (the first match gives
/// the reason).
///
/// "Command position" below means the start of the text or right after `;`, `&`, `|`, `(`,
/// a backtick or a newline, so `grep sudo auth.log` is not taken for `sudo`.
pub const DEFAULTS: &[(&str, &str)] = &[
    // `rm -rf` / `rm -fr` (any flag order or extra flags) of /, /*, ~, ~/, *, $HOME.
    (
        r"\brm\s+-[a-zA-Z]*(?:[rR][a-zA-Z]*f|f[a-zA-Z]*[rR])[a-zA-Z]*\s+(?:/\*?|~/?\*?|\*|\$HOME/?\*?)(?:[\s;&|)]|$)",
        "recursive delete of /, ~ or *",
    ),
    // `mkfs`, `mkfs.ext4`, ... in command position, also right after `sudo`.
    (
        r"(?:^|[;&|(`\n])\s*(?:sudo\s+)?mkfs\b",
        "formatting a filesystem with mkfs",
    ),
    // `dd ... of=/dev/<disk>`; `of=/dev/null` stays allowed.
    (
        r"\bdd\s[^;&|\n]*\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk|mapper/|md|dm-)",
        "dd writing onto a disk device",
    ),
    // `:(){ :|:& };:`, with any spacing.
    (r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", "fork bomb"),
    // `chmod -R 777 /` (or `a+rwx`, `--recursive`).
    (
        r"\bchmod\s+(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\s+(?:0?777|a\+rwx)\s+/(?:[\s;&|)]|$)",
        "recursive chmod 777 of /",
    ),
    // `curl ... | sh`, `wget -qO- ... | sudo bash`, ...
    (
        r"\b(?:curl|wget)\b[^|;\n]*\|\s*(?:sudo\s+)?(?:ba|da|fi|k|z)?sh\b",
        "piping a download into a shell",
    ),
    // `sudo` in command position; last, so that `sudo rm -rf /` gets the precise reason.
    (
        r"(?:^|[;&|(`\n])\s*sudo\b",
        "privilege escalation with sudo",
    ),
];

/// One rule: a compiled pattern and the reason given when it matches.
pub struct Rule {
    regex: Regex,
    reason: String,
}

impl Rule {
    /// The block message the model sees:
    /// `Blocked by guardrail: <reason> (pattern '<pattern>')`.
    pub fn block_message(&self) -> String {
        format!(
            "Blocked by guardrail: {} (pattern '{}')",
            self.reason,
            self.regex.as_str()
        )
    }

    /// Why this rule blocks.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// The rules in force, in the order they are checked.
pub struct Rules(Vec<Rule>);

impl Rules {
    /// Compiles the rules once, from the plugin's config.
    ///
    /// The built-in [`DEFAULTS`] come first unless `default_patterns` is `false`, then each
    /// entry of `patterns` (a list of `{pattern, reason}`). Returns the rules and one warning
    /// for each entry that was skipped (an invalid regex, a missing pattern) or config value
    /// that was ignored.
    pub fn from_config(config: &Value) -> (Rules, Vec<String>) {
        let mut warnings = Vec::new();
        let mut rules = Vec::new();
        let use_defaults = match config.get("default_patterns") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(on)) => *on,
            Some(other) => {
                warnings.push(format!(
                    "config `default_patterns` must be true or false, not {other}; using the defaults"
                ));
                true
            }
        };
        if use_defaults {
            for (pattern, reason) in DEFAULTS {
                match Regex::new(pattern) {
                    Ok(regex) => rules.push(Rule {
                        regex,
                        reason: (*reason).to_string(),
                    }),
                    Err(err) => warnings.push(invalid_regex("built-in", pattern, &err)),
                }
            }
        }
        match config.get("patterns") {
            None | Some(Value::Null) => {}
            Some(Value::Array(entries)) => {
                for (index, entry) in entries.iter().enumerate() {
                    let at = format!("config `patterns[{index}]`");
                    let Some(pattern) = entry.get("pattern").and_then(Value::as_str) else {
                        warnings.push(format!("{at}: no `pattern` string; skipped"));
                        continue;
                    };
                    let reason = entry
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("matches a configured pattern");
                    match Regex::new(pattern) {
                        Ok(regex) => rules.push(Rule {
                            regex,
                            reason: reason.to_string(),
                        }),
                        Err(err) => warnings.push(invalid_regex(&at, pattern, &err)),
                    }
                }
            }
            Some(_) => warnings
                .push("config `patterns` must be a list of {pattern, reason}; ignored".to_string()),
        }
        (Rules(rules), warnings)
    }

    /// The first rule whose pattern matches somewhere in `command`.
    pub fn first_match(&self, command: &str) -> Option<&Rule> {
        self.0.iter().find(|rule| rule.regex.is_match(command))
    }

    /// Whether there are no rules at all (the guardrail then blocks nothing).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `<at>: invalid regex '<pattern>' (<what is wrong>); skipped`, on one line.
fn invalid_regex(at: &str, pattern: &str, err: &regex::Error) -> String {
    let text = err.to_string();
    let what = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("invalid");
    let what = what.trim().trim_start_matches("error: ");
    format!("{at}: invalid regex '{pattern}' ({what}); skipped")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_built_in_pattern_compiles() {
        let (rules, warnings) = Rules::from_config(&Value::Null);
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(rules.0.len(), DEFAULTS.len());
    }

    #[test]
    fn invalid_configured_regex_is_skipped_with_a_warning_naming_it() {
        let config = json!({"patterns": [
            {"pattern": "rm (", "reason": "broken"},
            {"pattern": r"\bshutdown\b", "reason": "shutting down the machine"},
        ]});
        let (rules, warnings) = Rules::from_config(&config);
        assert_eq!(
            warnings,
            vec!["config `patterns[0]`: invalid regex 'rm (' (unclosed group); skipped"]
        );
        assert_eq!(rules.0.len(), DEFAULTS.len() + 1);
        assert_eq!(
            rules.first_match("shutdown -h now").map(Rule::reason),
            Some("shutting down the machine")
        );
    }

    #[test]
    fn entries_without_a_pattern_are_skipped_with_a_warning() {
        let config = json!({"patterns": [{"reason": "nothing to match"}, "sudo"]});
        let (rules, warnings) = Rules::from_config(&config);
        assert_eq!(
            warnings,
            vec![
                "config `patterns[0]`: no `pattern` string; skipped",
                "config `patterns[1]`: no `pattern` string; skipped",
            ]
        );
        assert_eq!(rules.0.len(), DEFAULTS.len());
    }

    #[test]
    fn a_configured_pattern_without_a_reason_gets_a_generic_one() {
        let config = json!({"default_patterns": false, "patterns": [{"pattern": "shred"}]});
        let (rules, _) = Rules::from_config(&config);
        let rule = rules.first_match("shred -u secrets.txt").unwrap();
        assert_eq!(
            rule.block_message(),
            "Blocked by guardrail: matches a configured pattern (pattern 'shred')"
        );
    }

    #[test]
    fn malformed_config_values_fall_back_to_the_defaults_with_warnings() {
        let config = json!({"default_patterns": "no", "patterns": {"pattern": "x"}});
        let (rules, warnings) = Rules::from_config(&config);
        assert_eq!(
            warnings,
            vec![
                r#"config `default_patterns` must be true or false, not "no"; using the defaults"#,
                "config `patterns` must be a list of {pattern, reason}; ignored",
            ]
        );
        assert_eq!(rules.0.len(), DEFAULTS.len());
    }
}
