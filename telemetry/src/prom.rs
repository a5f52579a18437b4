//! A strict reader of the Prometheus text exposition format (0.0.4), used to scrape the
//! services' `/metrics` (the metadata service's cluster view) and to check them in tests.
//!
//! Rules checked: every line is a `# HELP name text`, a `# TYPE name type` (counter,
//! gauge, histogram, summary or untyped), another comment, or a sample
//! `name{label="value",...} number`; metric and label names are valid; a sample's family
//! has HELP and TYPE before its first sample, and its samples form one group right after
//! its TYPE (no other family's TYPE or samples in between); no family is declared twice;
//! no sample repeats; counters are finite and non-negative; histograms have `le` buckets that never
//! decrease, a `+Inf` bucket equal to `_count`, and a `_sum`; the text ends with a newline.

use std::collections::{BTreeMap, HashMap, HashSet};

/// One sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name (`dmkv_memnode_naks_total`, `x_bucket`, ...).
    pub name: String,
    /// Labels in order of appearance, values unescaped.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Family name → type.
    pub types: BTreeMap<String, String>,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// Samples named `name`.
    pub fn get<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The sum of every sample named `name` (0 if none).
    pub fn sum(&self, name: &str) -> f64 {
        self.get(name).map(|s| s.value).sum()
    }

    /// The sample `name` whose label `key` is `value`.
    pub fn value(&self, name: &str, key: &str, value: &str) -> Option<f64> {
        self.get(name)
            .find(|s| s.label(key) == Some(value))
            .map(|s| s.value)
    }

    /// The single unlabelled sample `name`.
    pub fn scalar(&self, name: &str) -> Option<f64> {
        self.get(name)
            .find(|s| s.labels.is_empty())
            .map(|s| s.value)
    }

    /// `name{labels}` → value, labels as written (for tests comparing scrapes).
    pub fn series(&self) -> BTreeMap<String, f64> {
        self.samples
            .iter()
            .map(|s| {
                let key = if s.labels.is_empty() {
                    s.name.clone()
                } else {
                    let l: Vec<String> = s
                        .labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                        .collect();
                    format!("{}{{{}}}", s.name, l.join(","))
                };
                (key, s.value)
            })
            .collect()
    }
}

/// Escapes a label value for the exposition format.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn valid_name(n: &str, allow_colon: bool) -> bool {
    let mut chars = n.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || (allow_colon && c == ':') => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (allow_colon && c == ':'))
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        v => v.parse().ok(),
    }
}

/// Parses and checks `text` (see the module documentation).
pub fn parse(text: &str) -> Result<Exposition, String> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("exposition does not end with a newline".into());
    }
    let mut help = HashSet::new();
    let mut out = Exposition::default();
    let mut seen_series = HashSet::new();
    let mut families_of: Vec<String> = Vec::new();
    // The family whose TYPE came last: samples belong to it.
    let mut current: Option<String> = None;
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
            if out.types.insert(name.to_owned(), kind.to_owned()).is_some() {
                return Err(at("duplicate TYPE".into()));
            }
            current = Some(name.to_owned());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| at("sample without a value".into()))?;
        let value = parse_value(value).ok_or_else(|| at(format!("bad value {value:?}")))?;
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
        let mut parsed = Vec::new();
        if let Some(inner) = labels {
            let mut names = HashSet::new();
            let mut rest = inner;
            while !rest.is_empty() {
                let (lname, after) = rest
                    .split_once("=\"")
                    .ok_or_else(|| at("label without =\"".into()))?;
                if !valid_name(lname, false) || !names.insert(lname) {
                    return Err(at(format!("bad or repeated label name {lname:?}")));
                }
                let mut end = None;
                let mut escaped = false;
                let mut v = String::new();
                for (j, c) in after.char_indices() {
                    match (escaped, c) {
                        (true, 'n') => {
                            v.push('\n');
                            escaped = false;
                        }
                        (true, c) => {
                            v.push(c);
                            escaped = false;
                        }
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            end = Some(j);
                            break;
                        }
                        (false, c) => v.push(c),
                    }
                }
                let end = end.ok_or_else(|| at("unterminated label value".into()))?;
                parsed.push((lname.to_owned(), v));
                rest = &after[end + 1..];
                if !rest.is_empty() {
                    rest = rest
                        .strip_prefix(',')
                        .ok_or_else(|| at("labels not separated by ','".into()))?;
                }
            }
        }
        let family = out
            .types
            .keys()
            .filter(|f| name == f.as_str() || name.starts_with(&format!("{f}_")))
            .max_by_key(|f| f.len())
            .cloned()
            .ok_or_else(|| at("sample before its TYPE".into()))?;
        if !help.contains(&family) {
            return Err(at("sample without HELP".into()));
        }
        if current.as_deref() != Some(family.as_str()) {
            return Err(at(format!(
                "sample of {family} outside its group (after the TYPE of {})",
                current.as_deref().unwrap_or("nothing")
            )));
        }
        let kind = out.types.get(&family).map(String::as_str);
        if kind == Some("counter") && !(value.is_finite() && value >= 0.0) {
            return Err(at("counter is negative or not finite".into()));
        }
        if kind == Some("histogram") {
            let suffix = &name[family.len()..];
            if !["_bucket", "_sum", "_count"].contains(&suffix) {
                return Err(at("histogram sample is not _bucket, _sum or _count".into()));
            }
            let has_le = parsed.iter().any(|(k, _)| k == "le");
            if (suffix == "_bucket") != has_le {
                return Err(at("le label on a non-bucket or missing on a bucket".into()));
            }
        }
        if !seen_series.insert(series.to_owned()) {
            return Err(at("duplicate sample".into()));
        }
        families_of.push(family);
        out.samples.push(Sample {
            name: name.to_owned(),
            labels: parsed,
            value,
        });
    }
    for name in &help {
        if !out.types.contains_key(name) {
            return Err(format!("{name} has HELP but no TYPE"));
        }
    }
    check_histograms(&out, &families_of)?;
    Ok(out)
}

/// Buckets never decrease, `+Inf` equals `_count`, and every series has a `_sum`.
fn check_histograms(exp: &Exposition, families_of: &[String]) -> Result<(), String> {
    // (family, labels without le) → (le, value) list, count, has sum.
    type Key = (String, Vec<(String, String)>);
    let mut buckets: HashMap<Key, Vec<(f64, f64)>> = HashMap::new();
    let mut counts: HashMap<Key, f64> = HashMap::new();
    let mut sums: HashSet<Key> = HashSet::new();
    for (s, family) in exp.samples.iter().zip(families_of) {
        if exp.types.get(family).map(String::as_str) != Some("histogram") {
            continue;
        }
        let rest: Vec<(String, String)> = s
            .labels
            .iter()
            .filter(|(k, _)| k != "le")
            .cloned()
            .collect();
        let key = (family.clone(), rest);
        match &s.name[family.len()..] {
            "_bucket" => {
                let le = s.label("le").unwrap_or_default();
                let le = parse_value(le)
                    .filter(|v| !v.is_nan())
                    .ok_or_else(|| format!("{}: bad le {le:?}", s.name))?;
                buckets.entry(key).or_default().push((le, s.value));
            }
            "_count" => {
                counts.insert(key, s.value);
            }
            _ => {
                sums.insert(key);
            }
        }
    }
    for (key, mut b) in buckets {
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
        if b.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{} {:?}: buckets decrease", key.0, key.1));
        }
        let inf = b.last().filter(|x| x.0 == f64::INFINITY).map(|x| x.1);
        let Some(inf) = inf else {
            return Err(format!("{} {:?}: no +Inf bucket", key.0, key.1));
        };
        if counts.get(&key) != Some(&inf) {
            return Err(format!(
                "{} {:?}: _count is not the +Inf bucket",
                key.0, key.1
            ));
        }
        if !sums.contains(&key) {
            return Err(format!("{} {:?}: no _sum", key.0, key.1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_and_values() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total{r=\"x\\\"y\",s=\"z\"} 1\na_total 2\n";
        let e = parse(text).unwrap();
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.value("a_total", "r", "x\"y"), Some(1.0));
        assert_eq!(e.scalar("a_total"), Some(2.0));
        assert_eq!(e.sum("a_total"), 3.0);
        assert!(e.series().contains_key("a_total{r=\"x\\\"y\",s=\"z\"}"));
    }

    #[test]
    fn histograms_are_checked() {
        let ok = "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n";
        assert!(parse(ok).is_ok());
        for bad in [
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_sum 0.3\nh_count 1\n",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 3\n",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",
            "# HELP h H.\n# TYPE h histogram\nh_total 2\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rejects_bad_expositions() {
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
            "# HELP a A.\n# TYPE a counter\na{r=\"x\"s=\"y\"} 1\n",
            // A family's samples split by another family.
            "# HELP a A.\n# TYPE a counter\n# HELP b B.\n# TYPE b counter\nb 1\na 1\n",
            "# HELP a A.\n# TYPE a counter\na{x=\"1\"} 1\n# HELP b B.\n# TYPE b counter\nb 1\na{x=\"2\"} 1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
