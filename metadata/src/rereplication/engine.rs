//! Who moves the bulk of a new member's bytes: the service itself (its copy passes
//! alone: READ the primary, compare, WRITE the difference) or the switch accelerator
//! (a zero-sided copy: the switch READs the primary and turns every response into a
//! WRITE to the new member, with no CPU at either memory node or at the service),
//! after which the service's passes check and write only what changed since.

use std::fmt;

/// The copy engine of re-replication, drain and rejoin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CopyEngine {
    /// The service's copy passes move every byte.
    #[default]
    Cpu,
    /// The switch at `admin_url` copies each extent first; the passes follow.
    Switch {
        /// The switch's admin URL (`http://host:port`).
        admin_url: String,
        /// Bytes per READ of the switch's copies (`None`: the switch's default); with
        /// `window`, what bounds a copy's rate.
        chunk: Option<u32>,
        /// READs in flight per copy (`None`: the switch's default).
        window: Option<u32>,
    },
}

impl CopyEngine {
    /// The engine named `name` (`cpu` or `switch`); `switch` copies through the
    /// accelerator at `accelerator`, which it needs.
    pub fn parse(name: &str, accelerator: Option<&str>) -> Result<CopyEngine, String> {
        match name.trim() {
            "cpu" => Ok(CopyEngine::Cpu),
            "switch" => match accelerator.map(str::trim).filter(|a| !a.is_empty()) {
                Some(a) => Ok(CopyEngine::Switch {
                    admin_url: a.to_owned(),
                    chunk: None,
                    window: None,
                }),
                None => Err(
                    "the switch copy engine needs the accelerator's admin URL (--accelerator)"
                        .into(),
                ),
            },
            other => Err(format!("unknown copy engine {other:?}: use cpu or switch")),
        }
    }
}

impl fmt::Display for CopyEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopyEngine::Cpu => f.write_str("cpu"),
            CopyEngine::Switch { admin_url, .. } => write!(f, "switch at {admin_url}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_are_parsed_and_switch_needs_an_accelerator() {
        assert_eq!(CopyEngine::parse("cpu", None), Ok(CopyEngine::Cpu));
        assert_eq!(
            CopyEngine::parse("switch", Some("http://127.0.0.1:9")),
            Ok(CopyEngine::Switch {
                admin_url: "http://127.0.0.1:9".into(),
                chunk: None,
                window: None,
            })
        );
        let e = CopyEngine::parse("switch", None).unwrap_err();
        assert!(e.contains("--accelerator"), "{e}");
        assert!(CopyEngine::parse("switch", Some(" ")).is_err());
        let e = CopyEngine::parse("gpu", None).unwrap_err();
        assert!(e.contains("cpu or switch"), "{e}");
        assert_eq!(CopyEngine::default(), CopyEngine::Cpu);
    }
}
