//! What a service's `GET /metrics` answers: its own metric families, its build info and
//! this process's `process_*` metrics, in a `prometheus-client` registry encoded in the
//! format the scraper asks for.
//!
//! Content negotiation follows the `Accept` header: a scraper that prefers
//! `application/openmetrics-text` (Prometheus itself does) gets OpenMetrics 1.0.0; every
//! other one (no header, `text/plain`, `*/*`, curl) gets the Prometheus text format 0.0.4,
//! which `promtool check metrics` and the metadata service's scraper read.

use prometheus_client::registry::Registry;

use crate::build_info::BuildInfo;
use crate::family::{Families, Family};
use crate::process::ProcessCollector;

/// `Content-Type` of the OpenMetrics text format.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of the Prometheus text format.
pub const PROMETHEUS_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format, version 0.0.4.
    Prometheus,
    /// OpenMetrics text, version 1.0.0.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it weighs
    /// `application/openmetrics-text` above `text/plain` (and above `*/*` when `text/plain`
    /// is not named), the Prometheus text otherwise (also without a header, or for one
    /// that cannot be read).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Prometheus;
        };
        let mut openmetrics: Option<f64> = None;
        let mut text: Option<f64> = None;
        let mut any: Option<f64> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            let slot = match media.as_str() {
                "application/openmetrics-text" => &mut openmetrics,
                "text/plain" | "text/*" => &mut text,
                "*/*" => &mut any,
                _ => continue,
            };
            *slot = Some(slot.map_or(q, |old: f64| old.max(q)));
        }
        let plain = text.or(any).unwrap_or(0.0);
        match openmetrics {
            Some(q) if q > 0.0 && q > plain => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// Encodes everything `registry` holds in `format`.
pub fn encode(registry: &Registry, format: Format) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    match format {
        Format::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?
        }
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, registry)?,
    }
    Ok(out)
}

/// A service's whole `/metrics` answer: `families`, then `dmkv_<service>_build_info`
/// (`version` given, commit and compiler as built) and the `process_*` metrics, as
/// `(content type, body)` in the format `accept` asks for.
pub fn render(
    service: &str,
    version: &str,
    families: Vec<Family>,
    accept: Option<&str>,
) -> Result<(&'static str, String), std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families)));
    registry.register_collector(Box::new(BuildInfo::of_this_build(service, version)));
    registry.register_collector(Box::new(ProcessCollector));
    let format = Format::negotiate(accept);
    Ok((format.content_type(), encode(&registry, format)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_format() {
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("garbage;;;q=x")), Format::Prometheus);
        // What Prometheus 2.x and 3.x send.
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        // Prometheus configured with scrape_protocols: [PrometheusText0.0.4, OpenMetricsText1.0.0].
        assert_eq!(
            Format::negotiate(Some(
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5"
            )),
            Format::Prometheus
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
    }

    #[test]
    fn a_service_answer_has_its_families_build_info_and_process_metrics() {
        let families = vec![Family::counter_value("dmkv_x_things_total", "Things", 2u64)];
        let (ct, body) = render("x", "1.2.3", families.clone(), None).unwrap();
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
        let e = crate::prom::parse(&body).unwrap_or_else(|err| panic!("{err}\n{body}"));
        assert_eq!(e.scalar("dmkv_x_things_total"), Some(2.0));
        assert_eq!(e.value("dmkv_x_build_info", "version", "1.2.3"), Some(1.0));
        assert!(e.scalar("process_open_fds").unwrap() >= 1.0);
        assert!(e.scalar("process_resident_memory_bytes").unwrap() > 0.0);
        assert!(e.scalar("process_start_time_seconds").unwrap() > 1.6e9);
        assert!(e.scalar("process_cpu_seconds_total").is_some());

        let (ct, body) =
            render("x", "1.2.3", families, Some("application/openmetrics-text")).unwrap();
        assert_eq!(ct, OPENMETRICS_CONTENT_TYPE);
        assert!(body.contains("# TYPE dmkv_x_build info\n"), "{body}");
        assert!(body.ends_with("# EOF\n"));
    }
}
