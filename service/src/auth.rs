//! Bearer tokens: reading one from a request and comparing it with a secret without
//! telling an attacker anything through the time it takes.

use axum::http::{HeaderMap, header};

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive,
/// surrounding blanks ignored), if the request carries one.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// Whether `offered` equals `secret`, in a time that depends only on the length of
/// `offered` (which its sender knows): no early exit on the first differing byte, and
/// nothing about the secret's length either — every byte of `offered` is compared with
/// a byte of the secret (cycling through it), and a length mismatch is folded into the
/// same accumulator.
pub fn token_matches(offered: &[u8], secret: &[u8]) -> bool {
    if secret.is_empty() {
        return false;
    }
    let mut diff = u8::from(offered.len() != secret.len());
    for (i, &x) in offered.iter().enumerate() {
        let y = secret[i % secret.len()];
        diff |= std::hint::black_box(x ^ y);
    }
    std::hint::black_box(diff) == 0 && !offered.is_empty()
}

/// Whether `headers` carry `Authorization: Bearer <secret>`.
pub fn authorized(headers: &HeaderMap, secret: &str) -> bool {
    bearer_token(headers).is_some_and(|t| token_matches(t.as_bytes(), secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_exactly() {
        assert!(token_matches(b"secret", b"secret"));
        for wrong in [
            &b""[..],
            b"s",
            b"secre",
            b"secreT",
            b"secrets",
            b"secretsecret",
        ] {
            assert!(!token_matches(wrong, b"secret"), "{wrong:?}");
        }
        // A repetition of the secret is not the secret.
        assert!(!token_matches(b"abab", b"ab"));
        assert!(!token_matches(b"", b""));
    }

    #[test]
    fn bearer_headers() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "t"));
        h.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        assert!(authorized(&h, "t"));
        assert!(!authorized(&h, "tt"));
        h.insert(header::AUTHORIZATION, "bearer  t ".parse().unwrap());
        assert!(authorized(&h, "t"));
        assert_eq!(bearer_token(&h), Some("t"));
        h.insert(header::AUTHORIZATION, "Basic t".parse().unwrap());
        assert!(!authorized(&h, "t"));
        assert_eq!(bearer_token(&h), None);
    }
}
