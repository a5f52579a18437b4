//! `measurementtype` and its settings: which of YCSB's `OneMeasurement` kinds summarises each
//! operation's latencies in the report.
//!
//! - `hdrhistogram` (the default): HdrHistogram percentiles (`hdrhistogram.percentiles`);
//! - `histogram`: YCSB's `OneMeasurementHistogram`, per-millisecond buckets `0` … `N-1` and `>N`
//!   (`histogram.buckets`, default 1000), exact average, variance, min and max;
//! - `timeseries`: YCSB's `OneMeasurementTimeSeries`, the average latency of every
//!   `timeseries.granularity` milliseconds (default 1000) as `[OP], time-ms, average-us` rows;
//! - `hdrhistogram+histogram`: YCSB's `TwoInOneMeasurement`, both reports one after the other.

use crate::props::{PropError, Properties};
use serde::{Deserialize, Serialize};

/// Which report each operation gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MeasurementType {
    /// HdrHistogram percentiles (YCSB's `OneMeasurementHdrHistogram`).
    #[default]
    #[serde(rename = "hdrhistogram")]
    HdrHistogram,
    /// Per-millisecond buckets (YCSB's `OneMeasurementHistogram`).
    #[serde(rename = "histogram")]
    Histogram,
    /// Average latency per time unit (YCSB's `OneMeasurementTimeSeries`).
    #[serde(rename = "timeseries")]
    TimeSeries,
    /// The HdrHistogram report, then the bucket report (YCSB's `TwoInOneMeasurement`).
    #[serde(rename = "hdrhistogram+histogram")]
    HdrAndHistogram,
}

impl MeasurementType {
    /// The `measurementtype` values, as YCSB spells them.
    pub const NAMES: [&'static str; 4] = [
        "hdrhistogram",
        "histogram",
        "timeseries",
        "hdrhistogram+histogram",
    ];

    /// Parse a `measurementtype` value.
    pub fn parse(value: &str) -> Option<MeasurementType> {
        match value.trim() {
            "hdrhistogram" => Some(MeasurementType::HdrHistogram),
            "histogram" => Some(MeasurementType::Histogram),
            "timeseries" => Some(MeasurementType::TimeSeries),
            "hdrhistogram+histogram" => Some(MeasurementType::HdrAndHistogram),
            _ => None,
        }
    }

    /// The `measurementtype` value naming this type.
    pub fn name(self) -> &'static str {
        match self {
            MeasurementType::HdrHistogram => "hdrhistogram",
            MeasurementType::Histogram => "histogram",
            MeasurementType::TimeSeries => "timeseries",
            MeasurementType::HdrAndHistogram => "hdrhistogram+histogram",
        }
    }

    /// Whether millisecond buckets are kept.
    pub fn keeps_buckets(self) -> bool {
        matches!(
            self,
            MeasurementType::Histogram | MeasurementType::HdrAndHistogram
        )
    }

    /// Whether a time series is kept.
    pub fn keeps_series(self) -> bool {
        self == MeasurementType::TimeSeries
    }

    /// The property listing the percentiles this type reports: YCSB reads
    /// `timeseries.percentiles` for time series and `hdrhistogram.percentiles` otherwise.
    pub fn percentiles_property(self) -> &'static str {
        match self {
            MeasurementType::TimeSeries => "timeseries.percentiles",
            _ => "hdrhistogram.percentiles",
        }
    }
}

/// `measurementtype` with the settings of its kind, read from the properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasurementConfig {
    /// `measurementtype`.
    pub kind: MeasurementType,
    /// `histogram.buckets`: millisecond buckets before the `>N` overflow bucket.
    pub buckets: usize,
    /// `histogram.verbose`: print the buckets (default true; see `docs/ycsb.md`).
    pub verbose_buckets: bool,
    /// `timeseries.granularity` in milliseconds.
    pub granularity_ms: u64,
}

/// The most buckets `histogram.buckets` may ask for (each costs 8 bytes per thread and operation).
pub const MAX_BUCKETS: u64 = 1_000_000;

impl Default for MeasurementConfig {
    fn default() -> Self {
        MeasurementConfig {
            kind: MeasurementType::HdrHistogram,
            buckets: 1000,
            verbose_buckets: true,
            granularity_ms: 1000,
        }
    }
}

impl MeasurementConfig {
    /// Read `measurementtype`, `histogram.buckets`, `histogram.verbose` and
    /// `timeseries.granularity`; an unknown type or a bad number is an error.
    pub fn from_props(props: &Properties) -> Result<MeasurementConfig, PropError> {
        let d = MeasurementConfig::default();
        let kind = match props.get("measurementtype") {
            None => d.kind,
            Some(v) => MeasurementType::parse(v).ok_or_else(|| {
                props.invalid(
                    "measurementtype",
                    format!(
                        "unknown type; use one of {}",
                        MeasurementType::NAMES.join(", ")
                    ),
                )
            })?,
        };
        let buckets = props.get_u64("histogram.buckets", d.buckets as u64)?;
        if buckets == 0 || buckets > MAX_BUCKETS {
            return Err(props.invalid(
                "histogram.buckets",
                format!("must be between 1 and {MAX_BUCKETS}"),
            ));
        }
        let granularity_ms = props.get_u64("timeseries.granularity", d.granularity_ms)?;
        if granularity_ms == 0 {
            return Err(props.invalid("timeseries.granularity", "must be at least 1 (ms)"));
        }
        let verbose_buckets = match props.get("histogram.verbose").map(str::trim) {
            None => d.verbose_buckets,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(_) => return Err(props.invalid("histogram.verbose", "expected true or false")),
        };
        Ok(MeasurementConfig {
            kind,
            buckets: buckets as usize,
            verbose_buckets,
            granularity_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.set(*k, *v);
        }
        p
    }

    #[test]
    fn every_type_and_its_settings_parse() {
        assert_eq!(
            MeasurementConfig::from_props(&props(&[])).unwrap(),
            MeasurementConfig::default()
        );
        for name in MeasurementType::NAMES {
            let c = MeasurementConfig::from_props(&props(&[("measurementtype", name)])).unwrap();
            assert_eq!(c.kind.name(), name);
        }
        let c = MeasurementConfig::from_props(&props(&[
            ("measurementtype", "histogram"),
            ("histogram.buckets", "20"),
            ("histogram.verbose", "false"),
            ("timeseries.granularity", "250"),
        ]))
        .unwrap();
        assert_eq!(c.kind, MeasurementType::Histogram);
        assert_eq!(
            (c.buckets, c.verbose_buckets, c.granularity_ms),
            (20, false, 250)
        );
    }

    #[test]
    fn unknown_types_and_bad_settings_are_refused() {
        let e = MeasurementConfig::from_props(&props(&[("measurementtype", "raw")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("measurementtype=raw") && e.contains("timeseries"),
            "{e}"
        );
        for (k, v) in [
            ("histogram.buckets", "0"),
            ("histogram.buckets", "many"),
            ("timeseries.granularity", "0"),
            ("histogram.verbose", "yes"),
        ] {
            assert!(
                MeasurementConfig::from_props(&props(&[(k, v)])).is_err(),
                "{k}={v}"
            );
        }
    }
}
