//! Tests of dmkv's deployment files, run by `cargo test --workspace`.
//!
//! The Helm chart (`helm/dmkv`) is tested in Python (`helm/tests`), because the real Helm
//! library and the Kubernetes schemas are available there as PyPI packages
//! (`helm-python-sdk`, `kubernetes-validate`). `tests/helm.rs` runs those tests with
//! pytest, handing them the `memnode` and `metadata` binaries whose flags the chart's
//! container arguments are checked against. This crate has no code of its own.
