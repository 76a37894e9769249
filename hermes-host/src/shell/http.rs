//! HTTP hooks (`url:` instead of `command:`): the payload a shell hook reads on stdin is
//! POSTed as the request body, and the response body is read as the hook's answer, in the
//! same format. A policy service then answers every tool call without a process start.
//!
//! - `Content-Type: application/json`; the configured `headers:` are added, and a `${VAR}`
//!   in a header value is replaced by that environment variable only when `VAR` is listed in
//!   `allowed_env_vars:` (anything else becomes empty, so a config file cannot leak secrets
//!   to a URL by naming them).
//! - A status outside 2xx, a failed connection, a timeout and a body that is not JSON are
//!   errors naming the URL (and the status); like every hook failure they are fail-open
//!   unless the hook is `fail_closed`.
//! - Redirects are not followed: the user approved this URL, not wherever it points.
//! - One [`Client`] per hook keeps its connections alive between firings; `https` is
//!   verified with the platform's certificate store.
//!
//! The outcome comes back as a [`RunResult`] with the body as `stdout`, so the answer is
//! evaluated by the same rules as a command's.
//!
//! ```
//! use hermes_host::shell::http::expand_header;
//! // SAFETY: a doctest is its own process, and nothing else reads the environment here.
//! unsafe { std::env::set_var("HERMES_DOC_TOKEN", "s3cret") };
//! let allowed = vec!["HERMES_DOC_TOKEN".to_string()];
//! assert_eq!(expand_header("Bearer ${HERMES_DOC_TOKEN}", &allowed), "Bearer s3cret");
//! assert_eq!(expand_header("Bearer ${HOME}", &allowed), "Bearer ");
//! ```

use std::io::Read as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use super::spawn::{OUTPUT_CAP, RunResult};

/// The `url:`, `headers:` and `allowed_env_vars:` of an HTTP hook entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpSpec {
    /// `http://` or `https://`, as written in `config.yaml` (trimmed).
    pub url: String,
    /// Extra request headers, in config order; values may hold `${VAR}`.
    pub headers: Vec<(String, String)>,
    /// The environment variables a header value may name.
    pub allowed_env_vars: Vec<String>,
}

impl HttpSpec {
    /// The `${VAR}` names in header values that `allowed_env_vars` does not list: each is
    /// sent as an empty string, and config parsing warns about it.
    ///
    /// ```
    /// let spec = hermes_host::shell::http::HttpSpec {
    ///     url: "http://127.0.0.1:9/".into(),
    ///     headers: vec![("Authorization".into(), "Bearer ${TOKEN} ${USER}".into())],
    ///     allowed_env_vars: vec!["TOKEN".into()],
    /// };
    /// assert_eq!(spec.unlisted_vars(), [("Authorization".to_string(), "USER".to_string())]);
    /// ```
    pub fn unlisted_vars(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, value) in &self.headers {
            for var in references(value) {
                if !self.allowed_env_vars.iter().any(|a| a == var) {
                    out.push((name.clone(), var.to_string()));
                }
            }
        }
        out
    }
}

/// Whether `text` names an HTTP hook target: `http://` or `https://` (any case).
///
/// ```
/// use hermes_host::shell::http::is_http_url;
/// assert!(is_http_url("https://policy.internal/hook") && is_http_url("HTTP://127.0.0.1:8080"));
/// assert!(!is_http_url("ftp://x") && !is_http_url("./hook.sh") && !is_http_url("http://"));
/// ```
pub fn is_http_url(text: &str) -> bool {
    let lower = text.get(..8).unwrap_or(text).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &text[8..]
    } else if lower.starts_with("http://") {
        &text[7..]
    } else {
        return false;
    };
    !rest.is_empty() && !rest.starts_with('/')
}

/// `value` cut at its `${NAME}` references: each piece is the text before a reference and
/// the reference's name; the last piece is the rest, with no name. An unclosed `${` is text.
fn segments(value: &str) -> Vec<(&str, Option<&str>)> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push((&rest[..start], Some(&after[..end])));
        rest = &after[end + 1..];
    }
    out.push((rest, None));
    out
}

/// The `${NAME}` references in `value`, in order.
fn references(value: &str) -> Vec<&str> {
    segments(value)
        .into_iter()
        .filter_map(|(_, name)| name)
        .collect()
}

/// `value` with each `${VAR}` replaced by the variable's value when `allowed` lists it, and
/// by nothing otherwise (or when it is unset). Text without `${` is returned unchanged.
pub fn expand_header(value: &str, allowed: &[String]) -> String {
    let mut out = String::with_capacity(value.len());
    for (text, name) in segments(value) {
        out.push_str(text);
        if let Some(name) = name.filter(|n| allowed.iter().any(|a| a == n)) {
            out.push_str(&std::env::var(name).unwrap_or_default());
        }
    }
    out
}

/// The connections of one HTTP hook, kept alive between firings.
pub struct Client {
    agent: ureq::Agent,
}

impl Default for Client {
    fn default() -> Self {
        Client::new()
    }
}

impl Client {
    /// A client that verifies `https` with the platform's roots, follows no redirect, and
    /// treats every status as an answer to look at (not as a transport error).
    pub fn new() -> Client {
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build();
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .tls_config(tls)
            .user_agent(concat!("hermes-hooks/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent =
            ureq::Agent::with_parts(config, DefaultConnector::new(), CachingResolver::default());
        Client { agent }
    }

    /// POSTs `body` to the hook's URL and waits at most `timeout` for the whole exchange.
    pub fn post(&self, spec: &HttpSpec, body: &[u8], timeout: Duration) -> RunResult {
        let started = Instant::now();
        let url = &spec.url;
        let failed = |error: String| RunResult {
            error: Some(error),
            elapsed: started.elapsed(),
            ..RunResult::default()
        };
        let mut request = self
            .agent
            .post(url.as_str())
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("Content-Type", "application/json");
        for (name, value) in &spec.headers {
            request = request.header(name.as_str(), expand_header(value, &spec.allowed_env_vars));
        }
        let mut response = match request.send(body) {
            Ok(response) => response,
            Err(ureq::Error::Timeout(_)) => {
                return RunResult {
                    timed_out: true,
                    elapsed: started.elapsed(),
                    ..RunResult::default()
                };
            }
            Err(e) => return failed(format!("POST {url} failed: {}", transport_error(&e))),
        };
        let status = response.status();
        let mut bytes = Vec::new();
        let mut reader = response.body_mut().as_reader();
        let read = (&mut reader)
            .take(OUTPUT_CAP as u64 + 1)
            .read_to_end(&mut bytes);
        if let Err(e) = read {
            let timed_out = e.kind() == std::io::ErrorKind::TimedOut
                || matches!(
                    e.get_ref()
                        .and_then(|inner| inner.downcast_ref::<ureq::Error>()),
                    Some(ureq::Error::Timeout(_))
                );
            if timed_out {
                return RunResult {
                    timed_out: true,
                    elapsed: started.elapsed(),
                    ..RunResult::default()
                };
            }
            return failed(format!(
                "POST {url}: reading the response ({status}) failed: {e}"
            ));
        }
        let mut dropped = 0;
        if bytes.len() > OUTPUT_CAP {
            bytes.truncate(OUTPUT_CAP);
            // Count, without keeping, what else the server sends (bounded by the timeout).
            dropped = 1 + std::io::copy(&mut reader, &mut std::io::sink()).unwrap_or(0);
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !status.is_success() {
            let head: String = text.trim().chars().take(200).collect();
            let reason = status.canonical_reason().unwrap_or("");
            let mut error = format!("POST {url} answered HTTP {} {reason}", status.as_u16());
            if !head.is_empty() {
                error.push_str(": ");
                error.push_str(&head);
            }
            return RunResult {
                http_status: Some(status.as_u16()),
                ..failed(error)
            };
        }
        RunResult {
            returncode: Some(0),
            stdout: text,
            stdout_dropped: dropped,
            elapsed: started.elapsed(),
            http_status: Some(status.as_u16()),
            ..RunResult::default()
        }
    }
}

/// How long a host name's addresses are reused before it is looked up again.
pub const DNS_CACHE: Duration = Duration::from_secs(30);

/// ureq's resolver, minus its cost on the hot path. With a deadline set, the default resolver
/// runs every lookup on a new thread so that it can give up at the deadline, and it does so
/// for each request, even one on a pooled connection and even for an IP literal: that thread
/// was three quarters of a loopback firing. An IP literal needs no lookup, and a host name's
/// addresses are kept for [`DNS_CACHE`].
#[derive(Debug, Default)]
struct CachingResolver {
    lookup: DefaultResolver,
    cache: Mutex<Option<(String, Instant, ResolvedSocketAddrs)>>,
}

impl Resolver for CachingResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let Some(authority) = uri.authority() else {
            return self.lookup.resolve(uri, config, timeout);
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            let port = authority
                .port_u16()
                .unwrap_or(if uri.scheme_str() == Some("https") {
                    443
                } else {
                    80
                });
            let mut addrs = self.empty();
            addrs.push(SocketAddr::new(ip, port));
            return Ok(addrs);
        }
        let key = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or(""),
            authority.as_str()
        );
        if let Ok(cache) = self.cache.lock() {
            if let Some((cached, at, addrs)) = cache.as_ref() {
                if *cached == key && at.elapsed() < DNS_CACHE {
                    return Ok(addrs.clone());
                }
            }
        }
        let addrs = self.lookup.resolve(uri, config, timeout)?;
        if let Ok(mut cache) = self.cache.lock() {
            *cache = Some((key, Instant::now(), addrs.clone()));
        }
        Ok(addrs)
    }
}

/// A transport error in words a user can act on.
fn transport_error(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused (is the hook's server running?)".into()
        }
        ureq::Error::HostNotFound => "host not found (check the URL's host name)".into(),
        ureq::Error::RedirectFailed => {
            "the server redirected; redirects are not followed (configure the final URL)".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_variables_expand() {
        // SAFETY: no other test reads or writes this variable, and no thread here reads
        // the environment while it is set.
        unsafe { std::env::set_var("HERMES_HTTP_UNIT_A", "a-value") };
        let allowed = vec!["HERMES_HTTP_UNIT_A".to_string()];
        assert_eq!(
            expand_header("x ${HERMES_HTTP_UNIT_A} y", &allowed),
            "x a-value y"
        );
        assert_eq!(expand_header("${PATH}", &allowed), "");
        assert_eq!(
            expand_header(
                "${HERMES_HTTP_UNIT_UNSET}",
                &["HERMES_HTTP_UNIT_UNSET".into()]
            ),
            ""
        );
        assert_eq!(
            expand_header("open ${ never closed", &allowed),
            "open ${ never closed"
        );
        assert_eq!(expand_header("$HOME plain", &allowed), "$HOME plain");
    }

    #[test]
    fn references_are_found_in_order() {
        assert_eq!(references("${A}-${B}${C"), ["A", "B"]);
    }
}
