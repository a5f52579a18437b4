//! Whether a test can run on an RDMA device here, and the skip it prints otherwise.
//!
//! The device is `$DMKV_RDMA_DEVICE`, else the first one libibverbs lists (a NIC, or
//! rxe: `rdma link add rxe0 type rxe netdev eth0`). Without one — or in a build without
//! the `rdma` feature — a test prints `SKIPPED: <test>: <reason>` and passes, unless
//! `DMKV_REQUIRE_RDMA=1`, which makes that a failure.

/// The variable that turns a skip into a failure.
pub const REQUIRE_VAR: &str = "DMKV_REQUIRE_RDMA";

/// Why RDMA tests cannot run here, or `None` when a device can be opened.
pub fn unavailable() -> Option<String> {
    #[cfg(feature = "rdma")]
    {
        verbs::transport::rdma::probe()
            .err()
            .map(|why| format!("no RDMA device ({why})"))
    }
    #[cfg(not(feature = "rdma"))]
    {
        Some("built without the `rdma` feature".to_owned())
    }
}

/// Whether `test` can run: `true` with a device; otherwise prints the skip and returns
/// `false`, or panics when [`REQUIRE_VAR`] is `1`.
pub fn ready(test: &str) -> bool {
    let Some(why) = unavailable() else {
        return true;
    };
    assert!(
        std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
        "{test}: {REQUIRE_VAR}=1 but {why}"
    );
    println!("SKIPPED: {test}: {why}; set {REQUIRE_VAR}=1 to fail instead");
    false
}
