//! YCSB properties: workload files (`-P`, Java `.properties` syntax) and `-p key=value` overrides.
//!
//! As in YCSB, every `-P` file is read in order (a later file overrides an earlier one) and every
//! `-p` override wins over all files, wherever it stands on the command line.

use std::collections::BTreeMap;
use std::path::Path;

/// A property error: a bad file, or a value that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum PropError {
    #[error("cannot read workload file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("property {key}={value}: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
    #[error("-p expects key=value, got {0:?}")]
    BadOverride(String),
}

/// An ordered string map with typed getters that apply YCSB's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Properties {
    map: BTreeMap<String, String>,
}

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse Java `.properties` text: `#`/`!` comments, `key=value`, `key: value` or
    /// `key value`, backslash line continuations and the usual escapes.
    pub fn parse_str(text: &str) -> Self {
        let mut props = Properties::new();
        props.merge_str(text);
        props
    }

    /// Add the properties of `text`, overriding existing keys.
    pub fn merge_str(&mut self, text: &str) {
        let mut logical = String::new();
        let mut continuing = false;
        for raw in text.lines() {
            let line = raw.trim_start();
            if !continuing && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
                continue;
            }
            // An odd number of trailing backslashes continues the line.
            let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
            if trailing % 2 == 1 {
                logical.push_str(&line[..line.len() - 1]);
                continuing = true;
                continue;
            }
            logical.push_str(line);
            continuing = false;
            self.parse_logical(&logical);
            logical.clear();
        }
        if !logical.is_empty() {
            self.parse_logical(&logical);
        }
    }

    fn parse_logical(&mut self, line: &str) {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut key = String::new();
        while i < chars.len() {
            let c = chars[i];
            if c == '\\' && i + 1 < chars.len() {
                key.push(unescape(chars[i + 1]));
                i += 2;
                continue;
            }
            if c == '=' || c == ':' || c.is_whitespace() {
                break;
            }
            key.push(c);
            i += 1;
        }
        // Skip whitespace, at most one separator, whitespace.
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && (chars[i] == '=' || chars[i] == ':') {
            i += 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        while i < chars.len() {
            if chars[i] == '\\' && i + 1 < chars.len() {
                value.push(unescape(chars[i + 1]));
                i += 2;
            } else {
                value.push(chars[i]);
                i += 1;
            }
        }
        if !key.is_empty() {
            self.map.insert(key, value);
        }
    }

    /// Read a workload file and merge it.
    pub fn merge_file(&mut self, path: impl AsRef<Path>) -> Result<(), PropError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PropError::Io {
            path: path.display().to_string(),
            source,
        })?;
        self.merge_str(&text);
        Ok(())
    }

    /// Parse one `-p key=value` argument.
    pub fn parse_override(arg: &str) -> Result<(String, String), PropError> {
        match arg.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(PropError::BadOverride(arg.to_string())),
        }
    }

    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.map.insert(key.into(), value.into());
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    pub fn get_or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.get(key).unwrap_or(default)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.map.iter()
    }

    fn parsed<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, PropError>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|e: T::Err| PropError::Invalid {
                key: key.to_string(),
                value: v.to_string(),
                reason: e.to_string(),
            }),
        }
    }

    pub fn get_i64(&self, key: &str, default: i64) -> Result<i64, PropError> {
        self.parsed(key, default)
    }

    pub fn get_u64(&self, key: &str, default: u64) -> Result<u64, PropError> {
        self.parsed(key, default)
    }

    pub fn get_f64(&self, key: &str, default: f64) -> Result<f64, PropError> {
        self.parsed(key, default)
    }

    /// Java's `Boolean.parseBoolean`: only "true" (any case) is true.
    pub fn get_bool(&self, key: &str, default: bool) -> bool {
        match self.get(key) {
            None => default,
            Some(v) => v.trim().eq_ignore_ascii_case("true"),
        }
    }

    pub fn invalid(&self, key: &str, reason: impl Into<String>) -> PropError {
        PropError::Invalid {
            key: key.to_string(),
            value: self.get(key).unwrap_or("").to_string(),
            reason: reason.into(),
        }
    }
}

fn unescape(c: char) -> char {
    match c {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\u{c}',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_properties_syntax() {
        let p = Properties::parse_str(
            "# comment\n! other comment\n  a=1\nb : two words \nc 3\nd=x\\\n   y\ne=\nf=a\\=b\n",
        );
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.get("b"), Some("two words "));
        assert_eq!(p.get("c"), Some("3"));
        assert_eq!(p.get("d"), Some("xy"));
        assert_eq!(p.get("e"), Some(""));
        assert_eq!(p.get("f"), Some("a=b"));
    }
}
