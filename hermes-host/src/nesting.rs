//! A bound on bracket nesting in the YAML and JSON files the host reads, checked before a
//! parser sees them.
//!
//! The YAML parser gives up at 128 levels, but only after its scanner has walked every
//! bracket, and for flow collections (`[[[[...` or `{a: {a: ...`) that walk is quadratic:
//! a 200 KB `config.yaml` of nested brackets took 25 s to refuse. A file a person writes
//! never nests a hundred levels deep, so anything deeper than [`MAX_NESTING`] is refused
//! here, in one pass, with the line where it went too deep. Imports nothing of this crate.

/// The deepest bracket nesting accepted in a YAML or JSON file.
pub const MAX_NESTING: usize = 128;

/// Checks the flow-collection nesting of YAML `text`: `[` and `{` outside quoted scalars and
/// comments. Brackets inside a plain scalar (`a[0]`) count too, which only matters past
/// [`MAX_NESTING`] of them.
///
/// # Errors
///
/// `line N: brackets nested deeper than 128 levels`, with what to do.
///
/// ```
/// use hermes_host::nesting::check_yaml;
/// assert!(check_yaml("hooks:\n  pre_tool_call: [{command: 'a [b'}]\n").is_ok());
/// let deep = format!("a: {}{}", "[".repeat(200), "]".repeat(200));
/// assert!(check_yaml(&deep).unwrap_err().starts_with("line 1: brackets nested deeper than 128"));
/// ```
pub fn check_yaml(text: &str) -> Result<(), String> {
    scan(text, Syntax::Yaml)
}

/// Checks the nesting of JSON `text`: `[` and `{` outside strings.
///
/// # Errors
///
/// `line N: brackets nested deeper than 128 levels`, with what to do.
///
/// ```
/// use hermes_host::nesting::check_json;
/// assert!(check_json(r#"{"a": ["[[[", {"b": 1}]}"#).is_ok());
/// assert!(check_json(&"[".repeat(129)).is_err());
/// ```
pub fn check_json(text: &str) -> Result<(), String> {
    scan(text, Syntax::Json)
}

#[derive(Clone, Copy, PartialEq)]
enum Syntax {
    Yaml,
    Json,
}

fn scan(text: &str, syntax: Syntax) -> Result<(), String> {
    let bytes = text.as_bytes();
    let (mut depth, mut line, mut i) = (0usize, 1usize, 0usize);
    // What came before, ignoring spaces: a quote opens a scalar only where a token starts.
    let mut token_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                line += 1;
                token_start = true;
            }
            b'"' if token_start || syntax == Syntax::Json => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    match bytes[i] {
                        b'\\' => i += 1,
                        b'\n' => line += 1,
                        _ => {}
                    }
                    i += 1;
                }
                token_start = false;
            }
            b'\'' if token_start && syntax == Syntax::Yaml => {
                i += 1;
                // '' is an escaped quote inside a single-quoted scalar.
                while i < bytes.len() {
                    match bytes[i] {
                        b'\'' if bytes.get(i + 1) == Some(&b'\'') => i += 1,
                        b'\'' => break,
                        b'\n' => line += 1,
                        _ => {}
                    }
                    i += 1;
                }
                token_start = false;
            }
            // A comment starts at a `#` that begins the line or follows a space.
            b'#' if syntax == Syntax::Yaml
                && (i == 0 || matches!(bytes[i - 1], b' ' | b'\t' | b'\n')) =>
            {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!(
                        "line {line}: brackets nested deeper than {MAX_NESTING} levels; no hermes file needs that many, so it is not read: fix or remove that part"
                    ));
                }
                token_start = true;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                token_start = false;
            }
            b' ' | b'\t' | b'\r' => {}
            b',' | b':' | b'-' | b'?' => token_start = true,
            _ => token_start = false,
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_files_pass_and_the_deep_line_is_named() {
        let config = "# a [ comment {\nhooks:\n  pre_tool_call:\n    - command: \"echo '[x\"\n      matcher: 'it''s ['\n    - {command: a, matcher: \"b\"}\nplugins: {enabled: [a, b]}\n";
        assert_eq!(check_yaml(config), Ok(()));
        let deep = format!("a: 1\nb: {}{}\n", "{a: ".repeat(129), "}".repeat(129));
        assert!(check_yaml(&deep).unwrap_err().starts_with("line 2: "));
        assert!(check_yaml(&format!("a: {}", "[".repeat(128))).is_ok());
        // A bracket in a quoted scalar or a comment is no nesting.
        let quoted = format!(
            "a: \"{}\"\nb: '{}' # {}\n",
            "[".repeat(300),
            "{".repeat(300),
            "[".repeat(300)
        );
        assert_eq!(check_yaml(&quoted), Ok(()));
        let json = format!("{{\"a\": \"{}\"}}", "[".repeat(300));
        assert_eq!(check_json(&json), Ok(()));
        assert!(
            check_json(&format!("{}\n{}", "[".repeat(10), "[".repeat(200)))
                .unwrap_err()
                .starts_with("line 2: ")
        );
    }
}
