//! The one place that names what the Rust model and the P4 program share: port and
//! direction numbers, RoCEv2 opcodes, header layouts, mode bits, register names, widths
//! and sizes, table names and sizes, and counter names.
//!
//! `p4/include/spec.p4` is generated from this module by [`p4_include`] (also
//! `accel-p4 gen-spec`); a test regenerates it and fails when the committed file
//! differs, so the P4 source cannot drift from the model that is actually tested.

use std::fmt::Write as _;

/// Name of the P4 program.
pub const PROGRAM: &str = "dmkv_accel";
/// Bumped whenever a layout, register or table changes incompatibly.
pub const SPEC_VERSION: u32 = 1;

/// Switch port facing the clients (compute nodes).
pub const PORT_CLIENT: u8 = 0;
/// Switch port facing the memory nodes.
pub const PORT_MEMNODE: u8 = 1;
/// Number of ports the model has.
pub const NUM_PORTS: u8 = 2;

/// Direction of a packet: client → memnode (requests).
pub const DIR_UP: u32 = 0;
/// Direction of a packet: memnode → client (responses).
pub const DIR_DOWN: u32 = 1;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of UDP.
pub const IP_PROTO_UDP: u8 = 17;
/// UDP port of RoCEv2.
pub const ROCE_UDP_PORT: u16 = 4791;

/// RC opcodes (BTH byte 0) the switch understands.
pub mod opcode {
    /// RDMA WRITE First.
    pub const WRITE_FIRST: u8 = 0x06;
    /// RDMA WRITE Middle.
    pub const WRITE_MIDDLE: u8 = 0x07;
    /// RDMA WRITE Last.
    pub const WRITE_LAST: u8 = 0x08;
    /// RDMA WRITE Last with Immediate.
    pub const WRITE_LAST_IMM: u8 = 0x09;
    /// RDMA WRITE Only.
    pub const WRITE_ONLY: u8 = 0x0A;
    /// RDMA WRITE Only with Immediate.
    pub const WRITE_ONLY_IMM: u8 = 0x0B;
    /// RDMA READ Request.
    pub const READ_REQUEST: u8 = 0x0C;
    /// RDMA READ Response First.
    pub const READ_RESPONSE_FIRST: u8 = 0x0D;
    /// RDMA READ Response Middle.
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0E;
    /// RDMA READ Response Last.
    pub const READ_RESPONSE_LAST: u8 = 0x0F;
    /// RDMA READ Response Only.
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    /// Acknowledge.
    pub const ACKNOWLEDGE: u8 = 0x11;
    /// ATOMIC Acknowledge.
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// CmpSwap.
    pub const COMPARE_SWAP: u8 = 0x13;
    /// FetchAdd.
    pub const FETCH_ADD: u8 = 0x14;

    /// Every opcode with its P4 constant name.
    pub const ALL: &[(&str, u8)] = &[
        ("OP_WRITE_FIRST", WRITE_FIRST),
        ("OP_WRITE_MIDDLE", WRITE_MIDDLE),
        ("OP_WRITE_LAST", WRITE_LAST),
        ("OP_WRITE_LAST_IMM", WRITE_LAST_IMM),
        ("OP_WRITE_ONLY", WRITE_ONLY),
        ("OP_WRITE_ONLY_IMM", WRITE_ONLY_IMM),
        ("OP_READ_REQUEST", READ_REQUEST),
        ("OP_READ_RESPONSE_FIRST", READ_RESPONSE_FIRST),
        ("OP_READ_RESPONSE_MIDDLE", READ_RESPONSE_MIDDLE),
        ("OP_READ_RESPONSE_LAST", READ_RESPONSE_LAST),
        ("OP_READ_RESPONSE_ONLY", READ_RESPONSE_ONLY),
        ("OP_ACKNOWLEDGE", ACKNOWLEDGE),
        ("OP_ATOMIC_ACKNOWLEDGE", ATOMIC_ACKNOWLEDGE),
        ("OP_COMPARE_SWAP", COMPARE_SWAP),
        ("OP_FETCH_ADD", FETCH_ADD),
    ];
}

/// AETH syndrome bytes the switch emits.
pub mod syndrome {
    /// ACK with the "invalid credit count" value ConnectX and the memnode use.
    pub const ACK: u8 = 0x1F;
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQUENCE: u8 = 0x60;
    /// NAK: invalid request.
    pub const NAK_INVALID_REQUEST: u8 = 0x61;
    /// NAK: remote access error.
    pub const NAK_REMOTE_ACCESS: u8 = 0x62;
}

/// One header field: name and width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Field name (as in the P4 header type).
    pub name: &'static str,
    /// Width in bits.
    pub bits: u32,
}

/// A header layout: the P4 header type and its fields in wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// P4 header type name.
    pub name: &'static str,
    /// Fields, most significant first.
    pub fields: &'static [Field],
}

impl Header {
    /// Length in bytes.
    pub const fn len(&self) -> usize {
        let mut bits = 0;
        let mut i = 0;
        while i < self.fields.len() {
            bits += self.fields[i].bits;
            i += 1;
        }
        (bits / 8) as usize
    }

    /// Whether the header has no fields (never, for the headers here).
    pub const fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

const fn f(name: &'static str, bits: u32) -> Field {
    Field { name, bits }
}

/// Ethernet II.
pub const ETHERNET: Header = Header {
    name: "ethernet_h",
    fields: &[f("dst_addr", 48), f("src_addr", 48), f("ether_type", 16)],
};
/// IPv4 without options (frames with options are not RoCE the switch handles).
pub const IPV4: Header = Header {
    name: "ipv4_h",
    fields: &[
        f("version", 4),
        f("ihl", 4),
        f("tos", 8),
        f("total_len", 16),
        f("identification", 16),
        f("flags", 3),
        f("frag_offset", 13),
        f("ttl", 8),
        f("protocol", 8),
        f("hdr_checksum", 16),
        f("src_addr", 32),
        f("dst_addr", 32),
    ],
};
/// UDP.
pub const UDP: Header = Header {
    name: "udp_h",
    fields: &[
        f("src_port", 16),
        f("dst_port", 16),
        f("length", 16),
        f("checksum", 16),
    ],
};
/// Base Transport Header.
pub const BTH: Header = Header {
    name: "bth_h",
    fields: &[
        f("opcode", 8),
        f("solicited", 1),
        f("mig_req", 1),
        f("pad_count", 2),
        f("tver", 4),
        f("pkey", 16),
        f("fecn", 1),
        f("becn", 1),
        f("rsvd0", 6),
        f("dest_qpn", 24),
        f("ack_req", 1),
        f("rsvd1", 7),
        f("psn", 24),
    ],
};
/// RDMA Extended Transport Header.
pub const RETH: Header = Header {
    name: "reth_h",
    fields: &[f("va", 64), f("rkey", 32), f("dma_len", 32)],
};
/// Atomic Extended Transport Header.
pub const ATOMIC_ETH: Header = Header {
    name: "atomic_eth_h",
    fields: &[
        f("va", 64),
        f("rkey", 32),
        f("swap_add", 64),
        f("compare", 64),
    ],
};
/// ACK Extended Transport Header.
pub const AETH: Header = Header {
    name: "aeth_h",
    fields: &[f("syndrome", 8), f("msn", 24)],
};
/// Atomic ACK Extended Transport Header.
pub const ATOMIC_ACK_ETH: Header = Header {
    name: "atomic_ack_eth_h",
    fields: &[f("original", 64)],
};
/// The invariant CRC trailer (little-endian on the wire).
pub const ICRC: Header = Header {
    name: "icrc_h",
    fields: &[f("icrc", 32)],
};

/// Every header, in parse order.
pub const HEADERS: &[Header] = &[
    ETHERNET,
    IPV4,
    UDP,
    BTH,
    RETH,
    ATOMIC_ETH,
    AETH,
    ATOMIC_ACK_ETH,
    ICRC,
];

/// Mode register bits: which functions run. Forwarding always runs.
pub mod mode {
    /// Clover write steering (SwordBox §4.4.2). Not implemented yet.
    pub const WRITE_STEER: u32 = 1 << 0;
    /// Clover read steering (SwordBox §4.4.2). Not implemented yet.
    pub const READ_STEER: u32 = 1 << 1;
    /// Atomic replacement: CAS → WRITE (SwordBox §4.3). Not implemented yet.
    pub const ATOMIC_REPLACE: u32 = 1 << 2;
    /// Switch-resident atomics (sync seed §5.4).
    pub const SWITCH_ATOMICS: u32 = 1 << 3;
    /// Switch-assisted optimistic latching (sync seed §5.5). Not implemented yet.
    pub const OPT_LATCH: u32 = 1 << 4;
    /// Fault injection (tests only).
    pub const FAULTS: u32 = 1 << 5;

    /// Every bit with its name (as in the admin API and `--mode`).
    pub const ALL: &[(&str, u32)] = &[
        ("write_steer", WRITE_STEER),
        ("read_steer", READ_STEER),
        ("atomic_replace", ATOMIC_REPLACE),
        ("switch_atomics", SWITCH_ATOMICS),
        ("opt_latch", OPT_LATCH),
        ("faults", FAULTS),
    ];

    /// Bits of the functions the model implements today.
    pub const IMPLEMENTED: u32 = SWITCH_ATOMICS | FAULTS;
}

/// Connections (queue pairs) the switch tracks: per-connection registers are indexed
/// by a connection id below this (installed by the control plane with the routes).
pub const MAX_CONNS: usize = 256;
/// Width of a connection id.
pub const CONN_ID_BITS: u32 = 8;
/// Switch-owned 64-bit words answered by switch-resident atomics.
pub const ATOMIC_SLOTS: usize = 1024;
/// Entries per route table (one per connection and direction).
pub const ROUTE_TABLE_SIZE: usize = MAX_CONNS;
/// Entries of the switch-owned address range table.
pub const ATOMIC_RANGE_TABLE_SIZE: usize = 4;
/// Fault probabilities are in units of 1/`FAULT_SCALE`.
pub const FAULT_SCALE: u32 = 65_536;

/// Bit set in PSN-valued registers whose value is valid (PSNs are 24-bit).
pub const PSN_VALID: u32 = 1 << 24;

/// Which kind of register a [`RegisterSpec`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterKind {
    /// An array of single cells.
    Single,
    /// An array of lo/hi cell pairs updated by one dual-width ALU action (a 64-bit value
    /// split into two 32-bit halves; Tofino's paired register).
    Pair,
}

/// A register array: name (same in the model and the P4), cell width, cell count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterSpec {
    /// Name.
    pub name: &'static str,
    /// Width of one cell in bits (at most 32).
    pub width: u32,
    /// Number of cells (a power of two; indices are masked).
    pub size: usize,
    /// Single cells or lo/hi pairs.
    pub kind: RegisterKind,
    /// The control block that owns it.
    pub control: &'static str,
    /// What it holds.
    pub doc: &'static str,
}

const fn reg(
    name: &'static str,
    width: u32,
    size: usize,
    control: &'static str,
    doc: &'static str,
) -> RegisterSpec {
    RegisterSpec {
        name,
        width,
        size,
        kind: RegisterKind::Single,
        control,
        doc,
    }
}

/// The `mode` register.
pub const REG_MODE: RegisterSpec = reg("mode", 32, 1, "Ingress", "function enable bits (MODE_*)");
/// Upstream (memnode-side) PSN up to which the memnode has answered, per connection.
pub const REG_CONN_ACKED: RegisterSpec = reg(
    "conn_acked",
    32,
    MAX_CONNS,
    "ConnTrack",
    "next memnode-side PSN without a response | PSN_VALID",
);
/// Next expected client PSN (lo, with [`PSN_VALID`]) and the PSN offset (hi: client PSN
/// minus memnode PSN, mod 2^24) per connection.
pub const REG_CONN_EPSN: RegisterSpec = RegisterSpec {
    name: "conn_epsn",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "ConnTrack",
    doc: "lo: next expected client PSN | PSN_VALID; hi: PSN offset (client - memnode)",
};
/// The last switch answer per connection: its client PSN (lo) and the memnode-side PSN
/// boundary at that moment (hi), both with [`PSN_VALID`].
pub const REG_CONN_SW: RegisterSpec = RegisterSpec {
    name: "conn_sw",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "SwitchAtomics",
    doc: "lo: client PSN of the last switch answer | PSN_VALID; hi: next memnode PSN then | PSN_VALID",
};
/// MSN offset (lo) and the last MSN the memnode sent (hi) per connection.
pub const REG_CONN_MSN: RegisterSpec = RegisterSpec {
    name: "conn_msn",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "ConnTrack",
    doc: "lo: messages answered by the switch (MSN offset); hi: last MSN from the memnode",
};
/// The switch-owned words (lo/hi pair).
pub const REG_ATOMIC_WORD: RegisterSpec = RegisterSpec {
    name: "atomic_word",
    width: 32,
    size: ATOMIC_SLOTS,
    kind: RegisterKind::Pair,
    control: "SwitchAtomics",
    doc: "switch-owned 64-bit words (lo/hi)",
};
/// Result of the last switch-answered atomic per connection (lo/hi pair).
pub const REG_CONN_RESULT: RegisterSpec = RegisterSpec {
    name: "conn_result",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "SwitchAtomics",
    doc: "original value returned by the last switch-answered atomic (lo/hi)",
};
/// Fault-injection random state per direction (xorshift32).
pub const REG_FAULT_RNG: RegisterSpec = reg(
    "fault_rng",
    32,
    2,
    "FaultInject",
    "xorshift32 state per direction (seeded by the control plane)",
);

/// Every register, in pipeline order.
pub const REGISTERS: &[RegisterSpec] = &[
    REG_MODE,
    REG_CONN_ACKED,
    REG_CONN_EPSN,
    REG_CONN_SW,
    REG_CONN_MSN,
    REG_ATOMIC_WORD,
    REG_CONN_RESULT,
    REG_FAULT_RNG,
];

/// A match-action table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    /// Name.
    pub name: &'static str,
    /// Entries.
    pub size: usize,
    /// Key fields (all exact match).
    pub keys: &'static [&'static str],
    /// Action names.
    pub actions: &'static [&'static str],
}

/// Requests from clients: (source address, source port, destination QPN) → connection
/// id and the upstream addressing.
pub const TABLE_ROUTE_UP: TableSpec = TableSpec {
    name: "route_up",
    size: ROUTE_TABLE_SIZE,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["to_memnode(conn, src, dst, client_qpn, pmtu_log2)", "drop"],
};
/// Responses from memnodes: (source address, source port, destination QPN) → connection
/// id and the downstream addressing.
pub const TABLE_ROUTE_DOWN: TableSpec = TableSpec {
    name: "route_down",
    size: ROUTE_TABLE_SIZE,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["to_client(conn, src, dst)", "drop"],
};
/// The switch-owned address range: rkey → base VA and number of words.
pub const TABLE_ATOMIC_RANGE: TableSpec = TableSpec {
    name: "atomic_range",
    size: ATOMIC_RANGE_TABLE_SIZE,
    keys: &["hdr.atomic_eth.rkey"],
    actions: &["switch_owned(base_va, slots)", "not_owned"],
};

/// Fault policy per direction: probabilities in 1/`FAULT_SCALE` and the delay.
pub const TABLE_FAULT_POLICY: TableSpec = TableSpec {
    name: "fault_policy",
    size: 2,
    keys: &["meta.dir"],
    actions: &[
        "faults(drop, duplicate, reorder, delay, delay_us)",
        "no_faults",
    ],
};

/// Every table.
pub const TABLES: &[TableSpec] = &[
    TABLE_ROUTE_UP,
    TABLE_ROUTE_DOWN,
    TABLE_ATOMIC_RANGE,
    TABLE_FAULT_POLICY,
];

/// Counters per function (what the admin API and `/metrics` report).
pub const COUNTERS: &[(&str, &[&str])] = &[
    (
        "forward",
        &["forwarded", "missed", "malformed", "bad_icrc", "rewritten"],
    ),
    (
        "switch_atomics",
        &[
            "answered",
            "replayed",
            "deferred",
            "stale",
            "refused",
            "translated",
        ],
    ),
    ("faults", &["dropped", "duplicated", "reordered", "delayed"]),
];

/// `p4/include/spec.p4`, generated from this module.
pub fn p4_include() -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "// GENERATED from accel-p4/src/spec.rs by `accel-p4 gen-spec`. Do not edit:\n\
         // the test `spec_p4_matches_the_spec_module` fails when this file drifts.\n\
         #ifndef DMKV_SPEC_P4\n#define DMKV_SPEC_P4\n"
    );
    let _ = writeln!(w, "#define DMKV_SPEC_VERSION {SPEC_VERSION}\n");
    let _ = writeln!(w, "// Ports and directions");
    let _ = writeln!(w, "const bit<9> PORT_CLIENT = {PORT_CLIENT};");
    let _ = writeln!(w, "const bit<9> PORT_MEMNODE = {PORT_MEMNODE};");
    let _ = writeln!(w, "const bit<1> DIR_UP = {DIR_UP};");
    let _ = writeln!(w, "const bit<1> DIR_DOWN = {DIR_DOWN};\n");
    let _ = writeln!(w, "// Protocol numbers");
    let _ = writeln!(w, "const bit<16> ETHERTYPE_IPV4 = 0x{ETHERTYPE_IPV4:04x};");
    let _ = writeln!(w, "const bit<8> IP_PROTO_UDP = {IP_PROTO_UDP};");
    let _ = writeln!(w, "const bit<16> ROCE_UDP_PORT = {ROCE_UDP_PORT};\n");
    let _ = writeln!(w, "// RC opcodes (BTH byte 0)");
    for (name, v) in opcode::ALL {
        let _ = writeln!(w, "const bit<8> {name} = 0x{v:02x};");
    }
    let _ = writeln!(w, "\n// AETH syndromes");
    for (name, v) in [
        ("SYNDROME_ACK", syndrome::ACK),
        ("SYNDROME_NAK_PSN_SEQUENCE", syndrome::NAK_PSN_SEQUENCE),
        (
            "SYNDROME_NAK_INVALID_REQUEST",
            syndrome::NAK_INVALID_REQUEST,
        ),
        ("SYNDROME_NAK_REMOTE_ACCESS", syndrome::NAK_REMOTE_ACCESS),
    ] {
        let _ = writeln!(w, "const bit<8> {name} = 0x{v:02x};");
    }
    let _ = writeln!(w, "\n// Mode register bits");
    for (name, v) in mode::ALL {
        let _ = writeln!(w, "const bit<32> MODE_{} = 0x{v:x};", name.to_uppercase());
    }
    let _ = writeln!(w, "\n// Sizes");
    for (name, v) in [
        ("MAX_CONNS", MAX_CONNS),
        ("ATOMIC_SLOTS", ATOMIC_SLOTS),
        ("ROUTE_TABLE_SIZE", ROUTE_TABLE_SIZE),
        ("ATOMIC_RANGE_TABLE_SIZE", ATOMIC_RANGE_TABLE_SIZE),
        ("FAULT_SCALE", FAULT_SCALE as usize),
    ] {
        let _ = writeln!(w, "#define {name} {v}");
    }
    let _ = writeln!(w, "typedef bit<{CONN_ID_BITS}> conn_id_t;");
    let _ = writeln!(w, "const bit<32> PSN_VALID = 0x{PSN_VALID:x};\n");
    let _ = writeln!(w, "// Header layouts");
    for h in HEADERS {
        let _ = writeln!(w, "header {} {{  // {} bytes", h.name, h.len());
        for fld in h.fields {
            let _ = writeln!(w, "    bit<{}> {};", fld.bits, fld.name);
        }
        let _ = writeln!(w, "}}");
    }
    let _ = writeln!(
        w,
        "\n// Registers: DMKV_REGISTER(name, cell width, cells) / DMKV_REGISTER_PAIR(name, cells)\n\
         // are defined by the architecture shim (tna/ or v1model/) before this file is included."
    );
    for r in REGISTERS {
        let upper = r.name.to_uppercase();
        let _ = writeln!(w, "// {}.{}: {}", r.control, r.name, r.doc);
        let _ = writeln!(w, "#define REG_{upper}_SIZE {}", r.size);
        let _ = writeln!(w, "#define REG_{upper}_WIDTH {}", r.width);
        match r.kind {
            RegisterKind::Single => {
                let _ = writeln!(
                    w,
                    "#define DECLARE_REG_{upper} DMKV_REGISTER({}, {}, {})",
                    r.name, r.width, r.size
                );
            }
            RegisterKind::Pair => {
                let _ = writeln!(
                    w,
                    "#define DECLARE_REG_{upper} DMKV_REGISTER_PAIR({}, {})",
                    r.name, r.size
                );
            }
        }
    }
    let _ = writeln!(w, "\n// Tables (all keys exact)");
    for t in TABLES {
        let _ = writeln!(
            w,
            "// {}: key ({}) -> {}",
            t.name,
            t.keys.join(", "),
            t.actions.join(" | ")
        );
        let _ = writeln!(w, "#define TABLE_{}_SIZE {}", t.name.to_uppercase(), t.size);
    }
    let _ = writeln!(w, "\n#endif  // DMKV_SPEC_P4");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_match_the_wire_crate() {
        assert_eq!(ETHERNET.len(), 14);
        assert_eq!(IPV4.len(), 20);
        assert_eq!(UDP.len(), 8);
        assert_eq!(BTH.len(), verbs::wire::BTH_LEN);
        assert_eq!(RETH.len(), verbs::wire::RETH_LEN);
        assert_eq!(ATOMIC_ETH.len(), verbs::wire::ATOMIC_ETH_LEN);
        assert_eq!(AETH.len(), verbs::wire::AETH_LEN);
        assert_eq!(ATOMIC_ACK_ETH.len(), verbs::wire::ATOMIC_ACK_ETH_LEN);
        assert_eq!(ICRC.len(), verbs::wire::ICRC_LEN);
        for h in HEADERS {
            let bits: u32 = h.fields.iter().map(|f| f.bits).sum();
            assert_eq!(bits % 8, 0, "{}", h.name);
        }
    }

    #[test]
    fn opcodes_match_the_wire_crate() {
        assert_eq!(opcode::ALL.len(), verbs::wire::Opcode::ALL.len());
        for ((_, v), op) in opcode::ALL.iter().zip(verbs::wire::Opcode::ALL) {
            assert_eq!(*v, op.as_u8());
        }
        assert_eq!(ROCE_UDP_PORT, verbs::wire::ROCE_UDP_PORT);
    }

    #[test]
    fn registers_are_switch_shaped() {
        let mut names = std::collections::HashSet::new();
        for r in REGISTERS {
            assert!(r.width <= 32 && r.width > 0, "{}", r.name);
            assert!(r.size.is_power_of_two(), "{}", r.name);
            assert!(names.insert(r.name), "duplicate register {}", r.name);
        }
        assert_eq!(1usize << CONN_ID_BITS, MAX_CONNS);
        let mut bits = 0;
        for (_, b) in mode::ALL {
            assert_eq!(b.count_ones(), 1);
            assert_eq!(bits & b, 0);
            bits |= b;
        }
    }
}
