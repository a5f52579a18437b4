//! Where the catalog keeps what in the store: `n/ids` (id counters), `m/<id>`
//! memnodes, `l/<id>` leases, `t/<name>` tables, `c/<table>\0<key>` chain ids,
//! `ci/<table>\0<chain id>` their keys, `h/<table>\0<chain id>` tail hints.

/// The id counters.
pub(super) const IDS_KEY: &[u8] = b"n/ids";

/// Prefix of every memnode record.
pub(super) const MEMNODES: &[u8] = b"m/";
/// Prefix of every lease record.
pub(super) const LEASES: &[u8] = b"l/";
/// Prefix of every table record.
pub(super) const TABLES: &[u8] = b"t/";

/// A memnode's record.
pub(super) fn mkey(id: u64) -> Vec<u8> {
    format!("m/{id:016x}").into_bytes()
}

/// A lease's record.
pub(super) fn lkey(id: u64) -> Vec<u8> {
    format!("l/{id:016x}").into_bytes()
}

/// A table's record.
pub(super) fn tkey(name: &str) -> Vec<u8> {
    format!("t/{name}").into_bytes()
}

/// The prefix of one table's chain keys of one `kind` (`c`, `ci` or `h`).
pub(super) fn chain_prefix(kind: &str, table: &str) -> Vec<u8> {
    let mut k = format!("{kind}/{table}").into_bytes();
    k.push(0);
    k
}

/// The chain id of `key` in `table`.
pub(super) fn ckey(table: &str, key: &[u8]) -> Vec<u8> {
    let mut k = chain_prefix("c", table);
    k.extend_from_slice(key);
    k
}

/// The key of chain `chain_id` in `table`.
pub(super) fn cikey(table: &str, chain_id: u64) -> Vec<u8> {
    let mut k = chain_prefix("ci", table);
    k.extend_from_slice(format!("{chain_id:016x}").as_bytes());
    k
}

/// The tail hint of chain `chain_id` in `table`.
pub(super) fn hkey(table: &str, chain_id: u64) -> Vec<u8> {
    let mut k = chain_prefix("h", table);
    k.extend_from_slice(format!("{chain_id:016x}").as_bytes());
    k
}
