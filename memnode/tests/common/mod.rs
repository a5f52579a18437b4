//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};

/// Checks `text` against the Prometheus text exposition format (0.0.4) and returns every
/// sample as `name{labels}` → value.
///
/// Rules checked: every line is a `# HELP name text`, a `# TYPE name type` (type one of
/// counter, gauge, histogram, summary, untyped), another comment, or a sample
/// `name{label="value",...} number`; metric and label names are valid; every sample's
/// family has both HELP and TYPE before its first sample; no family is declared twice;
/// no sample repeats; counters are finite and non-negative; the text ends with a newline.
pub fn parse_prometheus(text: &str) -> Result<BTreeMap<String, f64>, String> {
    fn valid_name(n: &str, allow_colon: bool) -> bool {
        let mut chars = n.chars();
        match chars.next() {
            Some(c) if c.is_ascii_alphabetic() || c == '_' || (allow_colon && c == ':') => {}
            _ => return false,
        }
        chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (allow_colon && c == ':'))
    }
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("exposition does not end with a newline".into());
    }
    let mut help = HashSet::new();
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = |msg: String| format!("line {}: {msg}: {line:?}", i + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            if !valid_name(name, true) {
                return Err(at("bad metric name in HELP".into()));
            }
            if !help.insert(name.to_owned()) {
                return Err(at("duplicate HELP".into()));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap_or_default();
            let kind = parts.next().unwrap_or_default();
            if !valid_name(name, true) {
                return Err(at("bad metric name in TYPE".into()));
            }
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(at(format!("bad type {kind:?}")));
            }
            if parts.next().is_some() {
                return Err(at("trailing text after TYPE".into()));
            }
            if types.insert(name.to_owned(), kind.to_owned()).is_some() {
                return Err(at("duplicate TYPE".into()));
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| at("sample without a value".into()))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().map_err(|_| at(format!("bad value {v:?}")))?,
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let inner = rest
                    .strip_suffix('}')
                    .ok_or_else(|| at("unterminated label set".into()))?;
                (n, Some(inner))
            }
            None => (series, None),
        };
        if !valid_name(name, true) {
            return Err(at("bad metric name".into()));
        }
        if let Some(inner) = labels {
            let mut seen = HashSet::new();
            let mut rest = inner;
            while !rest.is_empty() {
                let (lname, after) = rest
                    .split_once("=\"")
                    .ok_or_else(|| at("label without =\"".into()))?;
                if !valid_name(lname, false) || !seen.insert(lname) {
                    return Err(at(format!("bad or repeated label name {lname:?}")));
                }
                let mut end = None;
                let mut escaped = false;
                for (j, c) in after.char_indices() {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            end = Some(j);
                            break;
                        }
                        _ => {}
                    }
                }
                let end = end.ok_or_else(|| at("unterminated label value".into()))?;
                rest = &after[end + 1..];
                rest = rest.strip_prefix(',').unwrap_or(rest);
            }
        }
        let family = types
            .keys()
            .filter(|f| name == f.as_str() || name.starts_with(&format!("{f}_")))
            .max_by_key(|f| f.len())
            .cloned()
            .ok_or_else(|| at("sample before its TYPE".into()))?;
        if !help.contains(&family) {
            return Err(at("sample without HELP".into()));
        }
        if types.get(&family).map(String::as_str) == Some("counter")
            && !(value.is_finite() && value >= 0.0)
        {
            return Err(at("counter is negative or not finite".into()));
        }
        if samples.insert(series.to_owned(), value).is_some() {
            return Err(at("duplicate sample".into()));
        }
    }
    for name in &help {
        if !types.contains_key(name) {
            return Err(format!("{name} has HELP but no TYPE"));
        }
    }
    Ok(samples)
}

#[test]
fn checker_rejects_bad_expositions() {
    let good =
        "# HELP a_total A.\n# TYPE a_total counter\na_total{r=\"x\"} 1\na_total{r=\"y\"} 2\n";
    assert_eq!(parse_prometheus(good).unwrap().len(), 2);
    for bad in [
        "a_total 1\n",
        "# TYPE a counter\na 1\n",
        "# HELP a A.\n# TYPE a counter\na x\n",
        "# HELP a A.\n# TYPE a counter\na{r=\"x} 1\n",
        "# HELP a A.\n# TYPE a counter\na -1\n",
        "# HELP a A.\n# TYPE a bogus\na 1\n",
        "# HELP a A.\n# TYPE a counter\na 1\na 1\n",
        "# HELP a A.\n# TYPE a counter\n1a 1\n",
        "# HELP a A.\n# TYPE a counter\na 1",
    ] {
        assert!(parse_prometheus(bad).is_err(), "{bad:?} accepted");
    }
}
