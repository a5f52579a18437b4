//! `dmkv_<service>_build_info{version, commit, rustc} 1`: which build a service runs.
//!
//! The version is the service's own (`CARGO_PKG_VERSION`); the commit is the one named by
//! `DMKV_BUILD_COMMIT` when the workspace was built (the image build passes it), and the
//! compiler is the `rustc --version` that built it (recorded by this crate's build
//! script). A label that is not known is left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::family::{Families, Family, Labels};

/// The commit this workspace was built from, when the build named it.
pub const COMMIT: Option<&str> = option_env!("DMKV_BUILD_COMMIT");
/// The compiler that built it (`rustc 1.95.0 (...)`), when the build script could ask.
pub const RUSTC: Option<&str> = option_env!("DMKV_RUSTC_VERSION");

/// One service's build information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// The service (`memnode`, `metadata`, `switch`): the metric is
    /// `dmkv_<service>_build_info`.
    pub service: String,
    /// Its version.
    pub version: String,
    /// The commit, if known.
    pub commit: Option<String>,
    /// The compiler, if known.
    pub rustc: Option<String>,
}

impl BuildInfo {
    /// `service` at `version`, with this build's commit and compiler.
    pub fn of_this_build(service: &str, version: &str) -> BuildInfo {
        BuildInfo {
            service: service.to_owned(),
            version: version.to_owned(),
            commit: COMMIT
                .filter(|c| !c.trim().is_empty())
                .map(|c| c.trim().to_owned()),
            rustc: RUSTC.filter(|r| !r.is_empty()).map(str::to_owned),
        }
    }

    /// The metric family.
    pub fn family(&self) -> Family {
        let mut labels: Labels = vec![("version".to_owned(), self.version.clone())];
        if let Some(c) = &self.commit {
            labels.push(("commit".to_owned(), c.clone()));
        }
        if let Some(r) = &self.rustc {
            labels.push(("rustc".to_owned(), r.clone()));
        }
        Family::info(
            &format!("dmkv_{}_build_info", self.service),
            "The running build: always 1; version, commit (when known) and compiler in labels",
            labels,
        )
    }
}

impl Collector for BuildInfo {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        Families(vec![self.family()]).encode(encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};

    #[test]
    fn labels_what_is_known() {
        let info = BuildInfo {
            service: "memnode".into(),
            version: "0.1.0".into(),
            commit: Some("abc123".into()),
            rustc: None,
        };
        let mut r = prometheus_client::registry::Registry::default();
        r.register_collector(Box::new(info));
        let text = encode(&r, Format::Prometheus).unwrap();
        assert!(
            text.contains("dmkv_memnode_build_info{version=\"0.1.0\",commit=\"abc123\"} 1\n"),
            "{text}"
        );
        let this = BuildInfo::of_this_build("x", "1");
        assert!(this.rustc.unwrap().starts_with("rustc "));
    }
}
