//! The one control-plane HTTP client: every call to a metadata service, a memory
//! node's admin API or a switch's admin API goes through [`HttpClient`] (a blocking
//! `ureq` agent with its connection pool).
//!
//! Base URLs are `host:port`, `http://host:port` or `https://host:port` (a trailing `/`
//! is fine). `https://` verifies the server's certificate against what the client
//! trusts ([`crate::tls::ClientTls`]: a CA bundle, else the public web roots).

use std::io::ErrorKind;
use std::time::Duration;

use crate::error::ClientError;
use crate::error_body::ErrorBody;
use crate::tls::{ClientTls, default_tls};
use crate::trace_context;

/// Largest answer accepted.
pub const MAX_RESPONSE: u64 = 64 << 20;

/// Idle connections a client (with its clones) keeps for reuse.
pub const MAX_IDLE: usize = 16;

/// Connect and I/O timeouts of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting (resolving included).
    pub connect: Duration,
    /// Sending the request and receiving the answer, each.
    pub io: Duration,
}

impl Timeouts {
    /// The same `timeout` for connecting and for each exchange.
    pub fn uniform(timeout: Duration) -> Timeouts {
        Timeouts {
            connect: timeout,
            io: timeout,
        }
    }
}

impl Default for Timeouts {
    /// 10 s each.
    fn default() -> Self {
        Timeouts::uniform(Duration::from_secs(10))
    }
}

/// A raw HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Headers as (lower-case name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A request that failed, and whether it may have reached the service.
#[derive(Debug)]
struct Failure {
    /// Why.
    pub error: ClientError,
    /// Whether the request may have been sent (it failed after connecting).
    pub sent: bool,
}

/// Whether sending a request twice does no more than sending it once (`method`,
/// `path` with its query).
pub type Idempotent = fn(&str, &str) -> bool;

/// Reads and PUTs.
fn reads_and_puts(method: &str, _path: &str) -> bool {
    matches!(method, "GET" | "PUT")
}

/// First pause between retries of a request that could not reach the service.
const RETRY_PAUSE: Duration = Duration::from_millis(10);
/// Longest pause between retries.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// A blocking HTTP client of one service (`http://host:port` or `https://host:port`),
/// sending a bearer token when it has one. Clones share the connection pool.
#[derive(Debug, Clone)]
pub struct HttpClient {
    scheme: &'static str,
    host_port: String,
    tls: ClientTls,
    token: Option<String>,
    timeouts: Timeouts,
    retry: Duration,
    idempotent: Idempotent,
    agent: ureq::Agent,
}

/// The scheme (`http` without one) and `host:port` of a base URL.
fn scheme_host_port(url: &str) -> Result<(&'static str, String), ClientError> {
    let t = url.trim();
    let (scheme, t) = match (t.strip_prefix("https://"), t.strip_prefix("http://")) {
        (Some(rest), _) => ("https", rest),
        (None, Some(rest)) => ("http", rest),
        (None, None) => ("http", t),
    };
    let t = t.trim_end_matches('/');
    if t.is_empty() || t.contains('/') || t.contains("://") || !t.contains(':') {
        return Err(ClientError::InvalidAddress(url.to_owned()));
    }
    Ok((scheme, t.to_owned()))
}

/// `host:port` of a base URL.
#[cfg(test)]
fn host_port(url: &str) -> Result<String, ClientError> {
    scheme_host_port(url).map(|(_, hp)| hp)
}

/// The agent of a client: the one place connection and TLS settings are made.
fn agent(timeouts: Timeouts, tls: &ClientTls) -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(tls.ureq_config())
        .http_status_as_error(false)
        .proxy(None)
        .user_agent("dmkv")
        .no_delay(true)
        .max_redirects(0)
        .max_idle_connections_per_host(MAX_IDLE)
        .timeout_resolve(Some(timeouts.connect))
        .timeout_connect(Some(timeouts.connect))
        .timeout_send_request(Some(timeouts.io))
        .timeout_send_body(Some(timeouts.io))
        .timeout_recv_response(Some(timeouts.io))
        .timeout_recv_body(Some(timeouts.io))
        .build()
        .new_agent()
}

impl HttpClient {
    /// A client of the service at `url` with the default timeouts, no token and the
    /// process's TLS trust ([`crate::tls::default_tls`]; fails when the CA bundle
    /// `DMKV_TLS_CA_FILE` names cannot be read).
    pub fn new(url: &str) -> Result<HttpClient, ClientError> {
        let (scheme, host_port) = scheme_host_port(url)?;
        let timeouts = Timeouts::default();
        let tls = default_tls()?;
        Ok(HttpClient {
            scheme,
            host_port,
            agent: agent(timeouts, &tls),
            tls,
            token: None,
            timeouts,
            retry: Duration::ZERO,
            idempotent: reads_and_puts,
        })
    }

    /// Trusts `tls` on `https://` URLs instead of the process's trust (a new
    /// connection pool).
    pub fn with_tls(mut self, tls: ClientTls) -> HttpClient {
        self.agent = agent(self.timeouts, &tls);
        self.tls = tls;
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request (none for `None` or
    /// an empty token).
    pub fn with_token(mut self, token: Option<String>) -> HttpClient {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// Connect and I/O timeouts (a new connection pool).
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> HttpClient {
        self.timeouts = timeouts;
        self.agent = agent(timeouts, &self.tls);
        self
    }

    /// Retry requests that fail because the service cannot be reached (it is
    /// restarting, say) for up to `window`, pausing 10 ms, doubling up to 250 ms,
    /// between attempts. A request that could not connect is always retried; one
    /// that failed after it was sent only when `idempotent` says sending it twice is
    /// harmless, since the service may have executed it. Answers with an error status
    /// are never retried. The default window is zero (fail at once); the default
    /// `idempotent` allows GET and PUT.
    pub fn with_retry(mut self, window: Duration, idempotent: Idempotent) -> HttpClient {
        self.retry = window;
        self.idempotent = idempotent;
        self
    }

    /// The retry window (see [`HttpClient::with_retry`]).
    pub fn retry_window(&self) -> Duration {
        self.retry
    }

    /// The timeouts.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// `host:port` of the service.
    pub fn host_port(&self) -> &str {
        &self.host_port
    }

    /// The service's base URL, `http://host:port` or `https://host:port`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.host_port)
    }

    /// Sends one request and returns the answer, whatever its status (retrying as
    /// [`HttpClient::with_retry`] says). `body` is sent as `application/json`.
    pub fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<RawResponse, ClientError> {
        let started = std::time::Instant::now();
        let span = trace_context::client_span(method, &self.host_port, path);
        let traceparent = trace_context::traceparent(&span);
        let _entered = span.enter();
        let mut pause = RETRY_PAUSE;
        let mut first = true;
        loop {
            match self.exchange(method, path, body, traceparent.as_deref()) {
                Ok(r) => {
                    trace_context::record_status(&span, r.status);
                    return Ok(r);
                }
                Err(f) => {
                    let retry = matches!(f.error, ClientError::Io { .. })
                        && (!f.sent || (self.idempotent)(method, path));
                    // A pooled connection the service closed while it idled fails
                    // the first attempt (broken pipe, reset): repeat it at once on
                    // a new connection, whatever the retry window.
                    if retry && std::mem::take(&mut first) {
                        continue;
                    }
                    if !retry || started.elapsed() + pause > self.retry {
                        trace_context::record_failure(&span);
                        return Err(f.error);
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
            }
        }
    }

    /// One attempt, sending `traceparent` if any; a failure says whether the request
    /// may have reached the service.
    fn exchange(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
        traceparent: Option<&str>,
    ) -> Result<RawResponse, Failure> {
        let uri = format!("{}://{}{path}", self.scheme, self.host_port);
        let mut builder = ureq::http::Request::builder()
            .method(method)
            .uri(uri.as_str())
            .header("accept", "application/json, text/plain");
        if let Some(t) = &self.token {
            builder = builder.header("authorization", format!("Bearer {t}"));
        }
        if let Some(tp) = traceparent {
            builder = builder.header(trace_context::TRACEPARENT, tp);
        }
        let bad_request = |e: ureq::http::Error| Failure {
            error: ClientError::InvalidAddress(format!("{uri}: {e}")),
            sent: false,
        };
        let answer = match body {
            Some(b) => {
                let request = builder
                    .header("content-type", "application/json")
                    .body(b.to_vec())
                    .map_err(bad_request)?;
                self.agent.run(request)
            }
            None => {
                let request = builder.body(()).map_err(bad_request)?;
                self.agent.run(request)
            }
        };
        let mut answer = answer.map_err(|e| self.failure(method, path, e))?;
        let status = answer.status().as_u16();
        let headers = answer
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = answer
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE)
            .read_to_vec()
            .map_err(|e| Failure {
                sent: true,
                ..self.failure(method, path, e)
            })?;
        Ok(RawResponse {
            status,
            headers,
            body,
        })
    }

    /// A `ureq` error as a [`ClientError`]: failures to connect are I/O errors of a
    /// request that was not sent; failures after are I/O errors of one that may have
    /// been; everything else is a protocol error.
    fn failure(&self, method: &str, path: &str, e: ureq::Error) -> Failure {
        let io = |what: &str, kind: ErrorKind, why: String, sent: bool| Failure {
            error: ClientError::Io {
                context: format!("{what} {method} {path} to {}", self.host_port),
                source: std::io::Error::new(kind, why),
            },
            sent,
        };
        let connecting = "connecting for";
        let exchanging = "sending or reading the answer to";
        match e {
            ureq::Error::Io(source)
                if source
                    .get_ref()
                    .is_some_and(|e| e.downcast_ref::<rustls::Error>().is_some()) =>
            {
                let why = source
                    .get_ref()
                    .and_then(|e| e.downcast_ref::<rustls::Error>())
                    .map(|e| tls_failure(&self.host_port, &self.tls, e))
                    .unwrap_or_else(|| source.to_string());
                Failure {
                    error: ClientError::Protocol(why),
                    sent: false,
                }
            }
            ureq::Error::Io(source) => {
                let refused = matches!(
                    source.kind(),
                    ErrorKind::ConnectionRefused
                        | ErrorKind::AddrNotAvailable
                        | ErrorKind::HostUnreachable
                        | ErrorKind::NetworkUnreachable
                );
                let what = if refused { connecting } else { exchanging };
                Failure {
                    error: ClientError::Io {
                        context: format!("{what} {method} {path} to {}", self.host_port),
                        source,
                    },
                    sent: !refused,
                }
            }
            ureq::Error::HostNotFound => io(
                connecting,
                ErrorKind::NotFound,
                "host not found".into(),
                false,
            ),
            ureq::Error::ConnectionFailed => io(
                connecting,
                ErrorKind::ConnectionRefused,
                "connection failed".into(),
                false,
            ),
            ureq::Error::Timeout(t) => {
                let before = matches!(t, ureq::Timeout::Resolve | ureq::Timeout::Connect);
                let what = if before { connecting } else { exchanging };
                io(
                    what,
                    ErrorKind::TimedOut,
                    format!("timed out ({t})"),
                    !before,
                )
            }
            ureq::Error::Rustls(e) => Failure {
                error: ClientError::Protocol(tls_failure(&self.host_port, &self.tls, &e)),
                sent: false,
            },
            ureq::Error::BodyExceedsLimit(n) => Failure {
                error: ClientError::Protocol(format!(
                    "answer to {method} {path} exceeds {n} bytes"
                )),
                sent: true,
            },
            other => Failure {
                error: ClientError::Protocol(format!("{method} {path}: {other}")),
                sent: true,
            },
        }
    }

    /// Sends a request, expects one of the `expect` statuses and decodes the JSON answer.
    pub fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
        expect: &[u16],
    ) -> Result<T, ClientError> {
        let r = self.request(method, path, body)?;
        expect_json(method, path, &r, expect)
    }

    /// Sends a request that answers 204 No Content.
    pub fn no_content(&self, method: &'static str, path: &str) -> Result<(), ClientError> {
        let r = self.request(method, path, None)?;
        expect_no_content(method, path, &r)
    }
}

/// What a failed TLS exchange with `host_port` tells a user, with the likely fix when
/// the server's certificate was refused.
fn tls_failure(host_port: &str, tls: &ClientTls, e: &rustls::Error) -> String {
    let trusted = match tls.ca_file() {
        Some(f) => format!("the CA certificates in {}", f.display()),
        None => format!(
            "the public web roots only (no --tls-ca-file or {})",
            crate::tls::CA_FILE_ENV
        ),
    };
    match e {
        rustls::Error::InvalidCertificate(why) => format!(
            "TLS with {host_port}: the server's certificate is not trusted ({why:?}); \
             this client trusts {trusted}"
        ),
        other => format!("TLS with {host_port} failed: {other} (is it serving HTTPS?)"),
    }
}

/// Nothing when `r` is 204 No Content, its error otherwise.
pub fn expect_no_content(
    method: &'static str,
    path: &str,
    r: &RawResponse,
) -> Result<(), ClientError> {
    if r.status == 204 {
        Ok(())
    } else {
        Err(http_error(method, path, r))
    }
}

/// `r`'s JSON body when its status is one of `expect`, its error otherwise.
pub fn expect_json<T: serde::de::DeserializeOwned>(
    method: &'static str,
    path: &str,
    r: &RawResponse,
    expect: &[u16],
) -> Result<T, ClientError> {
    if !expect.contains(&r.status) {
        return Err(http_error(method, path, r));
    }
    serde_json::from_slice(&r.body).map_err(|e| {
        ClientError::Protocol(format!(
            "{method} {path}: body is not the expected JSON: {e}"
        ))
    })
}

/// The error an answer with an unexpected status stands for (its [`ErrorBody`], when
/// it has one).
pub fn http_error(method: &'static str, path: &str, r: &RawResponse) -> ClientError {
    let (code, message) = match serde_json::from_slice::<ErrorBody>(&r.body) {
        Ok(e) => (e.code, e.error),
        Err(_) => (
            "unknown".to_owned(),
            String::from_utf8_lossy(&r.body).chars().take(200).collect(),
        ),
    };
    ClientError::Http {
        method,
        path: path.to_owned(),
        status: r.status,
        code,
        message,
    }
}

/// A request body as JSON.
pub fn json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(v).map_err(|e| ClientError::Protocol(format!("encoding the request: {e}")))
}

/// Percent-encodes a query value.
pub fn encode_query(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(host_port("127.0.0.1:80").unwrap(), "127.0.0.1:80");
        assert_eq!(host_port("http://localhost:9/").unwrap(), "localhost:9");
        assert_eq!(
            scheme_host_port("https://x:1/").unwrap(),
            ("https", "x:1".to_owned())
        );
        assert_eq!(scheme_host_port("x:1").unwrap(), ("http", "x:1".to_owned()));
        assert!(host_port("https://").is_err());
        assert!(host_port("ftp://x:1").is_err());
        assert!(host_port("x").is_err());
        assert!(host_port("http://x:1/v1").is_err());
        assert_eq!(
            HttpClient::new("localhost:1").unwrap().url(),
            "http://localhost:1"
        );
        assert_eq!(
            HttpClient::new("https://localhost:1").unwrap().url(),
            "https://localhost:1"
        );
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode_query("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn error_answers_carry_their_code() {
        let r = RawResponse {
            status: 404,
            headers: vec![("content-type".into(), "application/json".into())],
            body: br#"{"error":"no table t","code":"table_not_found"}"#.to_vec(),
        };
        let e = http_error("GET", "/v1/tables/t", &r);
        assert_eq!((e.status(), e.code()), (Some(404), Some("table_not_found")));
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        let r = RawResponse {
            body: b"plain".to_vec(),
            ..r
        };
        assert_eq!(http_error("GET", "/", &r).code(), Some("unknown"));
    }

    #[test]
    fn a_connection_dropped_without_an_answer_is_retried_once_on_a_new_one() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            // The first connection is dropped after the request, as a service
            // closing an idle pooled connection would; the second is answered.
            for answer in [false, true, false] {
                let (mut c, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf);
                if answer {
                    let body = "{}";
                    let _ = write!(
                        c,
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                } else if buf.starts_with(b"POST") {
                    return;
                }
            }
        });
        let c = HttpClient::new(&addr.to_string()).unwrap();
        let r = c.request("GET", "/healthz", None).expect("retried");
        assert_eq!(r.status, 200);
        // A POST that may have reached the service is not repeated.
        let e = c.request("POST", "/v1/x", Some(b"{}")).unwrap_err();
        assert!(matches!(e, ClientError::Io { .. }), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn unreachable_services_fail_before_sending() {
        let c = HttpClient::new("127.0.0.1:1").unwrap();
        let f = c.exchange("GET", "/healthz", None, None).unwrap_err();
        assert!(!f.sent, "{:?}", f.error);
        assert!(matches!(f.error, ClientError::Io { .. }), "{}", f.error);
        assert!(f.error.to_string().contains("connect"), "{}", f.error);
    }
}
