//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

/// Checks `text` against the Prometheus text exposition format with the strict
/// checker the services share ([`telemetry::prom::parse`]) and returns every sample
/// as `name{labels}` → value.
pub fn parse_prometheus(text: &str) -> Result<BTreeMap<String, f64>, String> {
    telemetry::prom::parse(text).map(|e| e.series())
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
