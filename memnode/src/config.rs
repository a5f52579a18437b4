//! Settings of a memory node and the parsing of their textual forms (sizes, addresses).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use verbs::mem::ReadOrder;

use crate::auth::AdminAuth;
use crate::rdma_serving::RdmaServeConfig;
use crate::receive_path::ReceivePath;
use crate::response_port::ResponsePort;
use verbs::net::OffloadMode;

/// Default soft-RoCE listen address (all interfaces, the RoCEv2 UDP port).
pub const DEFAULT_LISTEN: &str = "0.0.0.0:4791";

/// Default admin HTTP listen address.
pub const DEFAULT_ADMIN: &str = "127.0.0.1:9791";

/// Default base virtual address of the memory region. Not 0, so that a zeroed
/// pointer never names valid remote memory.
pub const DEFAULT_BASE_VA: u64 = 0x1000_0000_0000;

/// Default queue-pair idle timeout in seconds (`--qp-idle-timeout`).
pub const DEFAULT_QP_IDLE_TIMEOUT_SECS: u64 = 300;

/// Default number of queue pairs a node serves at once.
pub const DEFAULT_MAX_QPS: usize = 4096;

/// Most RPC worker threads a node runs.
pub const MAX_RPC_WORKERS: usize = 256;

/// Write-based RPC request rings a node with workers holds by default (`--rpc-rings`).
pub const DEFAULT_RPC_RINGS: usize = 64;

/// Most request rings a node holds (each is a few slots of about 4 KiB).
pub const MAX_RPC_RINGS: usize = 4096;

/// Largest capacity accepted (1 TiB): beyond that a typo is more likely than intent.
pub const MAX_CAPACITY: u64 = 1 << 40;

/// Everything a memory node needs to start.
#[derive(Debug, Clone)]
pub struct MemnodeConfig {
    /// Soft-RoCE UDP listen address (IPv4; port 0 picks one).
    pub listen: SocketAddr,
    /// Admin HTTP listen address (port 0 picks one).
    pub admin: SocketAddr,
    /// Bytes of memory to serve (rounded up to a multiple of 64).
    pub capacity: u64,
    /// Back the region by a shared-memory file at this path (for the `shm` transport).
    pub shm: Option<PathBuf>,
    /// Try 2 MiB huge pages first (falls back to normal pages with a warning).
    pub hugepages: bool,
    /// Make the whole region resident at start, as registering it with an RDMA NIC
    /// pins it (`--prefault`): accesses then take no first-touch page faults, and
    /// the node holds `capacity` bytes of memory from the start.
    pub prefault: bool,
    /// Order in which multi-line READs observe their 64-byte lines.
    pub read_order: ReadOrder,
    /// Model the NIC's atomic lock table, holding each slot this long (busy wait).
    /// `None` = no lock-table model.
    pub lock_table_hold: Option<Duration>,
    /// Virtual address of the region's first byte (64-byte aligned, non-zero).
    pub base_va: u64,
    /// Queue pairs served at once; further creations are refused with 409.
    pub max_qps: usize,
    /// Where requests are read from (UDP socket, or a packet socket that sees the
    /// real IP headers).
    pub receive: ReceivePath,
    /// Where responses go on the client's host (its source port, or 4791).
    pub response_port: ResponsePort,
    /// UDP segmentation offload of the soft-RoCE socket (`--udp-offload`): by
    /// default ([`OffloadMode::Auto`]) runs of datagrams to and from clients on
    /// loopback that coalesce too move as one buffer.
    pub udp_offload: OffloadMode,
    /// Keep the region in this file across restarts, with its identity in
    /// `PATH.meta` (see [`crate::region_file`]).
    pub region_file: Option<PathBuf>,
    /// The name the node registers under; recorded in a new region file and checked
    /// when it is reopened.
    pub name: Option<String>,
    /// Destroy a queue pair that received no request for this long (`None`: never).
    pub qp_idle_timeout: Option<Duration>,
    /// Serve the admin API over HTTPS only with this certificate and key (`None`:
    /// plain HTTP).
    pub tls: Option<dmkv_service::ServerTls>,
    /// Who may call the admin API ([`AdminAuth::open`]: anyone).
    pub auth: AdminAuth,
    /// RPC worker threads (`--rpc-workers`); 0 keeps the node passive (SENDs are
    /// refused), see [`crate::rpc`].
    pub rpc_workers: usize,
    /// Write-based RPC request rings (`--rpc-rings`), used only with RPC workers; 0:
    /// requests only by SEND. See [`crate::rpc::rings`].
    pub rpc_rings: usize,
    /// Serve the region through this RDMA NIC too (`--transport rdma`; needs the `rdma`
    /// cargo feature). `None`: soft RoCE only.
    pub rdma: Option<RdmaServeConfig>,
}

impl MemnodeConfig {
    /// A configuration serving `capacity` bytes of anonymous memory, soft RoCE and admin
    /// HTTP both on 127.0.0.1 with ephemeral ports: what in-process tests and embedded
    /// clusters want.
    pub fn local(capacity: u64) -> MemnodeConfig {
        MemnodeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            capacity,
            shm: None,
            hugepages: false,
            prefault: false,
            read_order: ReadOrder::Ascending,
            lock_table_hold: None,
            base_va: DEFAULT_BASE_VA,
            max_qps: DEFAULT_MAX_QPS,
            receive: ReceivePath::Udp,
            response_port: ResponsePort::Client,
            udp_offload: verbs::net::offload_from_env(),
            region_file: None,
            name: None,
            qp_idle_timeout: None,
            tls: None,
            auth: AdminAuth::open(),
            rpc_workers: 0,
            rpc_rings: DEFAULT_RPC_RINGS,
            rdma: None,
        }
    }

    /// Checks values that cannot be checked by their types alone.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.capacity == 0 {
            return Err(ConfigError::Invalid(
                "capacity must be at least 1 byte".into(),
            ));
        }
        if self.capacity > MAX_CAPACITY {
            return Err(ConfigError::Invalid(format!(
                "capacity {} exceeds the 1 TiB limit",
                self.capacity
            )));
        }
        if !self.listen.is_ipv4() {
            return Err(ConfigError::Invalid(format!(
                "listen address {} is not IPv4: RoCEv2 over UDP needs IPv4",
                self.listen
            )));
        }
        if self.base_va == 0 || !self.base_va.is_multiple_of(64) {
            return Err(ConfigError::Invalid(format!(
                "base VA {:#x} must be non-zero and 64-byte aligned",
                self.base_va
            )));
        }
        if self.base_va.checked_add(self.capacity).is_none() {
            return Err(ConfigError::Invalid(format!(
                "base VA {:#x} plus capacity {} overflows the 64-bit address space",
                self.base_va, self.capacity
            )));
        }
        if self.region_file.is_some() && (self.shm.is_some() || self.hugepages) {
            return Err(ConfigError::Invalid(
                "a region file is its own backing: it excludes --shm and --hugepages".into(),
            ));
        }
        if self.qp_idle_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::Invalid(
                "the queue-pair idle timeout must be positive (no timeout: none)".into(),
            ));
        }
        if self.max_qps == 0 {
            return Err(ConfigError::Invalid("max QPs must be at least 1".into()));
        }
        if self.rpc_workers > MAX_RPC_WORKERS {
            return Err(ConfigError::Invalid(format!(
                "{} RPC workers is more than the {MAX_RPC_WORKERS} a node runs",
                self.rpc_workers
            )));
        }
        if self.rpc_rings > MAX_RPC_RINGS {
            return Err(ConfigError::Invalid(format!(
                "{} RPC request rings is more than the {MAX_RPC_RINGS} a node holds",
                self.rpc_rings
            )));
        }
        Ok(())
    }
}

/// A setting could not be parsed or is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A size such as `64MiB` could not be parsed.
    #[error(
        "invalid size {input:?}: {reason} (examples: 4096, 512k, 64MiB, 1GiB, 100MB; k/m/g/t and KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000)"
    )]
    Size {
        /// What was given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An address such as `0x100000000000` could not be parsed.
    #[error("invalid address {input:?}: expected a decimal or 0x-prefixed hexadecimal number")]
    Address {
        /// What was given.
        input: String,
    },
    /// A value is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// Parses a byte size: a non-negative integer with an optional unit.
///
/// Units (case-insensitive unless noted): none or `b` = bytes; `k`, `m`, `g`, `t` and
/// `KiB`, `MiB`, `GiB`, `TiB` = powers of 1024; `KB`, `MB`, `GB`, `TB` = powers of 1000.
/// Whitespace between number and unit and `_` separators in the number are allowed.
pub fn parse_size(input: &str) -> Result<u64, ConfigError> {
    let err = |reason: &str| ConfigError::Size {
        input: input.to_owned(),
        reason: reason.to_owned(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let digits: String = num.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return Err(err("it does not start with a number"));
    }
    let n: u64 = digits.parse().map_err(|_| err("the number is too large"))?;
    let unit = unit.trim();
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ if unit.starts_with('.') => return Err(err("fractions are not supported")),
        _ => return Err(err("unknown unit")),
    };
    n.checked_mul(multiplier)
        .ok_or_else(|| err("the size overflows 64 bits"))
}

/// Formats a byte count for humans (`64 MiB`, `1.5 GiB`, `100 B`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, size) in UNITS {
        if bytes >= size {
            if bytes.is_multiple_of(size) {
                return format!("{} {name}", bytes / size);
            }
            return format!("{:.2} {name}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} B")
}

/// Parses a virtual address: decimal or `0x`-prefixed hexadecimal, `_` separators allowed.
pub fn parse_va(input: &str) -> Result<u64, ConfigError> {
    let err = || ConfigError::Address {
        input: input.to_owned(),
    };
    let s: String = input.trim().chars().filter(|&c| c != '_').collect();
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("64 mib"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1_000b"), Ok(1000));
        assert_eq!(parse_size(" 2TiB "), Ok(2 << 40));
        for bad in [
            "",
            "abc",
            "1.5GiB",
            "12 parsecs",
            "-1",
            "99999999999999999999",
            "20000000T",
        ] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.to_string().contains("invalid size"), "{bad}: {e}");
        }
    }

    #[test]
    fn size_formatting() {
        assert_eq!(format_size(100), "100 B");
        assert_eq!(format_size(64 << 20), "64 MiB");
        assert_eq!(format_size(3 << 29), "1.50 GiB");
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_va("0x1000_0000_0000"), Ok(0x1000_0000_0000));
        assert_eq!(parse_va("4096"), Ok(4096));
        assert!(parse_va("0xZZ").is_err());
        assert!(parse_va("").is_err());
    }

    #[test]
    fn validation() {
        assert!(MemnodeConfig::local(1 << 20).validate().is_ok());
        let mut c = MemnodeConfig::local(0);
        assert!(c.validate().is_err());
        c.capacity = 4096;
        c.base_va = 3;
        assert!(c.validate().is_err());
        c.base_va = u64::MAX - 63;
        assert!(c.validate().is_err());
        let mut c = MemnodeConfig::local(4096);
        c.rpc_workers = MAX_RPC_WORKERS;
        assert!(c.validate().is_ok());
        c.rpc_workers = MAX_RPC_WORKERS + 1;
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("RPC workers"), "{e}");
    }
}
