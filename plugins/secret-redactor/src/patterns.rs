//! The secret patterns, and the redaction they drive.
//!
//! A pattern replaces its whole match with `[REDACTED:<kind>]`, unless it has a group named
//! `secret`: then only that group is replaced, so `password=hunter2` keeps its key and
//! becomes `password=[REDACTED:secret]`.

use regex::{Captures, Regex};
use serde_json::Value;

/// The built-in patterns, as `(kind, pattern)`, applied in this order.
///
/// Private keys go first so no other pattern sees their body. The assignment pattern goes
/// last and skips values that start with `[`, so a value redacted by an earlier pattern
/// keeps its more precise kind.
pub const BUILT_IN: &[(&str, &str)] = &[
    // A whole PEM block; a block cut off before its END line is redacted to the end.
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*$)",
    ),
    ("aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b",
    ),
    ("slack_token", r"\bxox[baprs]-[A-Za-z0-9-]{10,}"),
    ("openai_key", r"\bsk-[A-Za-z0-9_-]{20,}"),
    (
        "bearer_token",
        r"(?i)\bbearer[ \t]+(?P<secret>[A-Za-z0-9\-._~+/]{20,}=*)",
    ),
    // `password=…`, `api_key: …`, `"client_secret": "…"`, `GITHUB_TOKEN=…`: the key stays.
    (
        "secret",
        r#"(?i)\b[a-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key)["']?[ \t]*[:=][ \t]*["']?(?P<secret>[^\s"',;&\[][^\s"',;&]*)"#,
    ),
];

/// One compiled pattern and the kind named in its marker.
struct Pattern {
    kind: String,
    regex: Regex,
}

impl Pattern {
    /// The text that replaces one match.
    fn replacement(&self, caps: &Captures<'_>) -> String {
        let marker = format!("[REDACTED:{}]", self.kind);
        match (caps.get(0), caps.name("secret")) {
            (Some(whole), Some(secret)) => {
                let text = whole.as_str();
                let start = secret.start() - whole.start();
                let end = secret.end() - whole.start();
                format!("{}{marker}{}", &text[..start], &text[end..])
            }
            _ => marker,
        }
    }
}

/// Every pattern in force, in the order they are applied.
pub struct Redactor(Vec<Pattern>);

impl Redactor {
    /// Compiles the [`BUILT_IN`] patterns, then each entry of the config's `patterns` (a list
    /// of `{name, pattern}`). Returns the redactor and one warning per skipped entry.
    pub fn from_config(config: &Value) -> (Redactor, Vec<String>) {
        let mut warnings = Vec::new();
        let mut patterns = Vec::new();
        for (kind, pattern) in BUILT_IN {
            match Regex::new(pattern) {
                Ok(regex) => patterns.push(Pattern {
                    kind: (*kind).to_string(),
                    regex,
                }),
                Err(err) => warnings.push(invalid_regex("built-in", pattern, &err)),
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
                    let kind = entry
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("custom");
                    match Regex::new(pattern) {
                        Ok(regex) => patterns.push(Pattern {
                            kind: kind.to_string(),
                            regex,
                        }),
                        Err(err) => warnings.push(invalid_regex(&at, pattern, &err)),
                    }
                }
            }
            Some(_) => warnings
                .push("config `patterns` must be a list of {name, pattern}; ignored".to_string()),
        }
        (Redactor(patterns), warnings)
    }

    /// `text` with every secret replaced, or `None` when it holds none.
    pub fn redact(&self, text: &str) -> Option<String> {
        let mut current = text.to_string();
        let mut changed = false;
        for pattern in &self.0 {
            let replaced = pattern
                .regex
                .replace_all(&current, |caps: &Captures<'_>| pattern.replacement(caps));
            if let std::borrow::Cow::Owned(next) = replaced {
                current = next;
                changed = true;
            }
        }
        changed.then_some(current)
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

    fn redact(text: &str) -> Option<String> {
        let (redactor, warnings) = Redactor::from_config(&Value::Null);
        assert_eq!(warnings, Vec::<String>::new());
        redactor.redact(text)
    }

    const GITHUB: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

    #[test]
    fn redacts_aws_access_key_ids() {
        assert_eq!(
            redact("aws_access_key_id = AKIAIOSFODNN7EXAMPLE").as_deref(),
            Some("aws_access_key_id = [REDACTED:aws_access_key_id]")
        );
    }

    #[test]
    fn redacts_github_tokens_inside_urls() {
        let text = format!("git clone https://{GITHUB}@github.com/acme/app.git");
        assert_eq!(
            redact(&text).as_deref(),
            Some("git clone https://[REDACTED:github_token]@github.com/acme/app.git")
        );
        assert_eq!(redact("ghp_tooShort123"), None);
    }

    #[test]
    fn redacts_slack_tokens() {
        assert_eq!(
            redact("SLACK=xoxb-2048-4096-AbCdEfGhIjKl done").as_deref(),
            Some("SLACK=[REDACTED:slack_token] done")
        );
    }

    #[test]
    fn redacts_a_whole_private_key_block() {
        let text = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\nAAAAC3NzaC1lZDI1NTE5\n-----END OPENSSH PRIVATE KEY-----\nsaved";
        assert_eq!(
            redact(text).as_deref(),
            Some("key:\n[REDACTED:private_key]\nsaved")
        );
    }

    #[test]
    fn redacts_a_private_key_cut_off_before_its_end() {
        let text = "head -c 60 id_rsa\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA";
        assert_eq!(
            redact(text).as_deref(),
            Some("head -c 60 id_rsa\n[REDACTED:private_key]")
        );
    }

    #[test]
    fn redacts_assigned_values_but_keeps_their_keys() {
        assert_eq!(
            redact("DB_PASSWORD=hunter2 api_key: abc123 client_secret='s3cr3t' GITHUB_TOKEN=x1")
                .as_deref(),
            Some(
                "DB_PASSWORD=[REDACTED:secret] api_key: [REDACTED:secret] client_secret='[REDACTED:secret]' GITHUB_TOKEN=[REDACTED:secret]"
            )
        );
        assert_eq!(
            redact(r#"{"password": "hunter2", "user": "bob"}"#).as_deref(),
            Some(r#"{"password": "[REDACTED:secret]", "user": "bob"}"#)
        );
        assert_eq!(
            redact("https://api.example.com/cb?client_secret=abc&state=1").as_deref(),
            Some("https://api.example.com/cb?client_secret=[REDACTED:secret]&state=1")
        );
    }

    #[test]
    fn redacts_bearer_tokens_but_keeps_the_scheme() {
        assert_eq!(
            redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl")
                .as_deref(),
            Some("Authorization: Bearer [REDACTED:bearer_token]")
        );
    }

    #[test]
    fn redacts_sk_style_api_keys_with_their_precise_kind() {
        assert_eq!(
            redact("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345").as_deref(),
            Some("export OPENAI_API_KEY=[REDACTED:openai_key]")
        );
    }

    #[test]
    fn redacts_every_secret_in_one_text() {
        let text = format!("token {GITHUB} and key AKIAIOSFODNN7EXAMPLE and password=pw");
        assert_eq!(
            redact(&text).as_deref(),
            Some(
                "token [REDACTED:github_token] and key [REDACTED:aws_access_key_id] and password=[REDACTED:secret]"
            )
        );
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        let text = "max_tokens: 4096, tokens=12, the token count is 5\nEnter password:\nok\ntask-1234567890abcdefghijklmnop\nthe bearer of bad news";
        assert_eq!(redact(text), None);
    }

    #[test]
    fn redacted_text_is_left_alone_the_second_time() {
        let once = redact(
            "password=pw Authorization: Bearer abcdefghijklmnopqrstuvwxyz AKIAIOSFODNN7EXAMPLE",
        )
        .unwrap();
        assert_eq!(redact(&once), None);
    }

    #[test]
    fn configured_patterns_add_kinds_and_may_keep_context() {
        let config = json!({"patterns": [
            {"name": "employee_id", "pattern": r"\bEMP-\d{6}\b"},
            {"name": "session", "pattern": r"\bsid=(?P<secret>\w+)"},
        ]});
        let (redactor, warnings) = Redactor::from_config(&config);
        assert!(warnings.is_empty());
        assert_eq!(
            redactor.redact("EMP-004211 logged in, sid=a81f").as_deref(),
            Some("[REDACTED:employee_id] logged in, sid=[REDACTED:session]")
        );
    }

    #[test]
    fn invalid_configured_patterns_are_skipped_with_a_warning_naming_them() {
        let config = json!({"patterns": [
            {"name": "broken", "pattern": "[a-"},
            {"name": "nothing"},
            {"name": "ticket", "pattern": r"\bTCK-\d+"},
        ]});
        let (redactor, warnings) = Redactor::from_config(&config);
        assert_eq!(
            warnings,
            vec![
                "config `patterns[0]`: invalid regex '[a-' (unclosed character class); skipped",
                "config `patterns[1]`: no `pattern` string; skipped",
            ]
        );
        assert_eq!(
            redactor.redact("see TCK-12").as_deref(),
            Some("see [REDACTED:ticket]")
        );
    }
}
