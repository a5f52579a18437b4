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
/// Port of the switch's control-plane CPU (P4 only: the model's control plane calls
/// into the pipeline directly). Control packets ([`LATCH_RELEASE`]) come and go here.
pub const PORT_CPU: u8 = 2;

/// Direction of a packet: client → memnode (requests).
pub const DIR_UP: u32 = 0;
/// Direction of a packet: memnode → client (responses).
pub const DIR_DOWN: u32 = 1;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of the control plane's latch-release packets (IEEE local experimental).
pub const ETHERTYPE_LATCH_RELEASE: u16 = 0x88B5;
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
/// The first 8 payload bytes, parsed where a function reads or writes them: the stamp
/// word of a tuple READ response (optimistic latching) and the value of a WRITE made
/// from an atomic (atomic replacement). Little-endian, as the word sits in memory.
pub const PAYLOAD_WORD: Header = Header {
    name: "payload_word_h",
    fields: &[f("word", 64)],
};
/// The Clover node fields after the header word (node bytes 8..32) of a node WRITE,
/// parsed by the steering functions (all little-endian, as in memory).
pub const CLOVER_PREFIX: Header = Header {
    name: "clover_prefix_h",
    fields: &[
        f("chain_id", 64),
        f("key_len", 16),
        f("class", 8),
        f("rsvd", 8),
        f("value_len", 32),
        f("version", 32),
        f("crc", 32),
    ],
};
/// The invariant CRC trailer (little-endian on the wire).
pub const ICRC: Header = Header {
    name: "icrc_h",
    fields: &[f("icrc", 32)],
};

/// A control packet of the latch lease (after Ethernet, EtherType
/// [`ETHERTYPE_LATCH_RELEASE`], from and back to [`PORT_CPU`]): release `tuple` if its
/// `tuple_version` cell still holds `cell`, the value the control plane saw latched for
/// the whole lease — a compare-then-write in the data plane, so a latch taken between
/// the control plane's read and the release is never clobbered. `result` comes back 1
/// when released, 0 when the cell had changed. The model's `Pipeline::break_latch` is
/// the same conditional update, made atomic by the pipeline lock.
pub const LATCH_RELEASE: Header = Header {
    name: "latch_release_h",
    fields: &[f("tuple", 32), f("cell", 32), f("result", 32)],
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
    PAYLOAD_WORD,
    CLOVER_PREFIX,
    ICRC,
    LATCH_RELEASE,
];

/// Mode register bits: which functions run. Forwarding always runs.
pub mod mode {
    /// Clover write steering (SwordBox §4.4.2): node version and link CAS redirected to
    /// the tracked key's committed tail.
    pub const WRITE_STEER: u32 = 1 << 0;
    /// Clover read steering (SwordBox §4.4.2): node READs of a stale address redirected to
    /// the tracked key's committed tail.
    pub const READ_STEER: u32 = 1 << 1;
    /// Atomic replacement: CAS/FAA on tracked lock words → WRITE on one multiplexed
    /// upstream QP (SwordBox §4.1–§4.4.1).
    pub const ATOMIC_REPLACE: u32 = 1 << 2;
    /// Switch-resident atomics (sync seed §5.4).
    pub const SWITCH_ATOMICS: u32 = 1 << 3;
    /// Switch-assisted optimistic latching (sync seed §5.5, Table 2).
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
    pub const IMPLEMENTED: u32 =
        WRITE_STEER | READ_STEER | ATOMIC_REPLACE | SWITCH_ATOMICS | OPT_LATCH | FAULTS;
}

/// Connections (queue pairs) the switch tracks: per-connection registers are indexed
/// by a connection id below this (installed by the control plane with the routes).
pub const MAX_CONNS: usize = 256;
/// Width of a connection id.
pub const CONN_ID_BITS: u32 = 8;
/// Switch-owned 64-bit words answered by switch-resident atomics.
pub const ATOMIC_SLOTS: usize = 1024;
/// Switch answers remembered per connection (`answer_psn`, `answer_result`), by client
/// PSN mod `ANSWER_RING`: a retransmitted request is answered again as long as no later
/// answer of its connection took its cell, which cannot happen while the connection has
/// fewer than `ANSWER_RING` PSNs between its oldest unacknowledged request and its newest
/// (the verbs default send queue, 256 single-packet requests, fits; so does the memnode's
/// ring of 256 atomic results it keeps for the same purpose).
pub const ANSWER_RING: usize = 256;
/// Cells of `answer_psn` / `answer_result`.
pub const ANSWER_SLOTS: usize = MAX_CONNS * ANSWER_RING;
/// Entries per route table (one per connection and direction).
pub const ROUTE_TABLE_SIZE: usize = MAX_CONNS;
/// Entries of the switch-owned address range table.
pub const ATOMIC_RANGE_TABLE_SIZE: usize = 4;
/// Fault probabilities are in units of 1/`FAULT_SCALE`.
pub const FAULT_SCALE: u32 = 65_536;

/// Bit set in PSN-valued registers whose value is valid (PSNs are 24-bit).
pub const PSN_VALID: u32 = 1 << 24;
/// Bit of `conn_epsn.lo`: the connection has a request in flight on a multiplexed
/// upstream QP (atomic replacement); new requests on it are held (dropped) until its
/// answer has been returned.
pub const CONN_PENDING: u32 = 1 << 25;
/// Bit of `conn_epsn.lo`: the memnode-side PSN just below the next expected one is a
/// diverted request's filler; its ACK need not be awaited before the next answer.
pub const CONN_FILLER_LAST: u32 = 1 << 26;

/// Tracked lock words (atomic replacement): cache slots.
pub const LOCK_SLOTS: usize = 256;
/// Multiplexed upstream QPs (one per memnode with tracked words).
pub const MUX_QPS: usize = 4;
/// Map entries per multiplexed QP (upstream PSN → connection), a ring indexed by the
/// low bits of the upstream PSN.
pub const MUX_RING: usize = 1024;
/// Entries of the tracked-lock table.
pub const TRACKED_LOCK_TABLE_SIZE: usize = LOCK_SLOTS;
/// Bit of `lock_state`: the cached value in `lock_word` is valid.
pub const LOCK_CACHED: u32 = 1 << 25;
/// Tuples whose versions the switch holds (optimistic latching).
pub const LATCH_TUPLES: usize = 4096;
/// Outstanding tuple requests the switch remembers per connection (by PSN mod
/// `LATCH_PER_CONN`): as many PSNs as the answer ring ([`ANSWER_RING`]), so a connection
/// with fewer than that many PSNs in flight never loses a READ's version or a WRITE's
/// unlatch to a later request.
pub const LATCH_PER_CONN: usize = 256;
/// log2 of [`LATCH_PER_CONN`].
pub const LATCH_PER_CONN_LOG2: u32 = 8;
/// Cells of `client_tuple` / `client_version`.
pub const LATCH_CONN_SLOTS: usize = MAX_CONNS * LATCH_PER_CONN;
/// Entries of the latch-region table.
pub const LATCH_REGION_TABLE_SIZE: usize = 4;
/// Entries of the scope tables (`conn_window`, `conn_window_last`): the windows of
/// every scoped connection together (a session's grant covers one table's extents on
/// one memory node; tables grow by leases, so a few dozen windows per connection).
pub const WINDOW_TABLE_SIZE: usize = 4096;
/// The memory key the scope check writes into a denied request: no memory node
/// registers memory or a queue pair under key 0, so the node answers the request with
/// NAK(remote access error) at its own PSN, exactly as it would a wrong key.
pub const INVALID_RKEY: u32 = 0;
/// Bit 63 of the stamp word the switch writes over the first 8 bytes of every packet of
/// a tuple READ response: the switch saw this read (the stamp is meaningful).
pub const STAMP_PRESENT: u64 = 1 << 63;
/// Bit 62 of the stamp word: the tuple's version changed (or was latched) between the
/// READ request and this response packet — its data may be torn; read again.
pub const STAMP_INVALID: u64 = 1 << 62;
/// Bits 32–44 of the stamp word: the payload bytes of the packet that carries it (the
/// path MTU for a First or Middle packet), so a reader knows where the response's other
/// packets, and their stamps, begin.
pub const STAMP_BYTES_SHIFT: u32 = 32;
/// Mask of the packet-bytes field of the stamp word (after the shift).
pub const STAMP_BYTES_MASK: u64 = 0x1FFF;
/// Bits 0–22 of the stamp word: the version the READ was judged against.
pub const STAMP_VERSION_MASK: u64 = (1 << 23) - 1;

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
/// The client PSNs of a connection's switch answers (switch-owned atomics and
/// intercepted requests), a ring indexed by PSN: a retransmission is replayed only if its
/// PSN is still there.
pub const REG_ANSWER_PSN: RegisterSpec = reg(
    "answer_psn",
    32,
    ANSWER_SLOTS,
    "SwitchAtomics",
    "index conn * ANSWER_RING + client PSN mod ANSWER_RING: client PSN of a switch answer | PSN_VALID",
);
/// The value each switch-owned atomic in `answer_psn` returned (lo/hi pair, same index).
pub const REG_ANSWER_RESULT: RegisterSpec = RegisterSpec {
    name: "answer_result",
    width: 32,
    size: ANSWER_SLOTS,
    kind: RegisterKind::Pair,
    control: "SwitchAtomics",
    doc: "index as answer_psn: original value the switch-answered atomic returned (lo/hi)",
};
/// Next upstream PSN per multiplexed QP.
pub const REG_MUX_NEXT_PSN: RegisterSpec = reg(
    "mux_next_psn",
    32,
    MUX_QPS,
    "AtomicReplace",
    "next PSN the switch sends on the multiplexed QP | PSN_VALID",
);
/// Map entries: upstream PSN → the client connection whose request it carries.
pub const REG_MUX_RING: RegisterSpec = reg(
    "mux_ring",
    32,
    MUX_RING * MUX_QPS,
    "AtomicReplace",
    "index mux * MUX_RING + (upstream PSN mod MUX_RING): upstream PSN << 8 | conn",
);
/// The last re-sent request per multiplexed QP: its upstream PSN (lo) and connection (hi).
pub const REG_MUX_RESEND: RegisterSpec = RegisterSpec {
    name: "mux_resend",
    width: 32,
    size: MUX_QPS,
    kind: RegisterKind::Pair,
    control: "AtomicReplace",
    doc: "lo: upstream PSN of the last re-sent request | PSN_VALID; hi: its connection",
};
/// Per connection: the upstream PSN of its diverted request.
pub const REG_REPL_UP: RegisterSpec = reg(
    "repl_up",
    32,
    MAX_CONNS,
    "AtomicReplace",
    "upstream PSN of the connection's diverted request | PSN_VALID | mux << 25",
);
/// Per connection: the lock slot of its diverted request and how it went up.
pub const REG_REPL_SLOT: RegisterSpec = reg(
    "repl_slot",
    32,
    MAX_CONNS,
    "AtomicReplace",
    "slot | 1 << 16 if sent as the original atomic (cache fill) | 1 << 17 if FAA",
);
/// Per connection: the original value its diverted request returns (lo/hi).
pub const REG_REPL_ORIG: RegisterSpec = RegisterSpec {
    name: "repl_orig",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "AtomicReplace",
    doc: "original value returned by the connection's diverted request (lo/hi)",
};
/// Per connection: the compare operand of a cache-filling CAS (lo/hi).
pub const REG_REPL_CMP: RegisterSpec = RegisterSpec {
    name: "repl_cmp",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "AtomicReplace",
    doc: "compare operand of the connection's diverted request (lo/hi)",
};
/// Per connection: the swap/add operand of a cache-filling atomic (lo/hi).
pub const REG_REPL_SWP: RegisterSpec = RegisterSpec {
    name: "repl_swp",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "AtomicReplace",
    doc: "swap (CAS) or add (FAA) operand of the connection's diverted request (lo/hi)",
};
/// Per lock slot: whether the cached value is valid, and the upstream PSN of the last
/// atomic sent unconverted for it (the one whose answer fills the cache).
pub const REG_LOCK_STATE: RegisterSpec = reg(
    "lock_state",
    32,
    LOCK_SLOTS,
    "AtomicReplace",
    "LOCK_CACHED | or the upstream PSN of the last unconverted atomic | PSN_VALID",
);
/// Per lock slot: the cached value of the tracked word (lo/hi).
pub const REG_LOCK_WORD: RegisterSpec = RegisterSpec {
    name: "lock_word",
    width: 32,
    size: LOCK_SLOTS,
    kind: RegisterKind::Pair,
    control: "AtomicReplace",
    doc: "cached value of the tracked word, in upstream PSN order (lo/hi)",
};
/// Per tuple: the version (even: free, odd: latched) and the latch holder.
pub const REG_TUPLE_VERSION: RegisterSpec = reg(
    "tuple_version",
    32,
    LATCH_TUPLES,
    "OptLatch",
    "bits 0-22: version (even = free, odd = latched); bits 23-31: holder connection + 1",
);
/// Outstanding tuple READs and WRITEs per connection, by upstream PSN.
pub const REG_CLIENT_TUPLE: RegisterSpec = reg(
    "client_tuple",
    32,
    LATCH_CONN_SLOTS,
    "OptLatch",
    "index conn * LATCH_PER_CONN + PSN mod LATCH_PER_CONN: valid << 31 | write << 30 | (PSN >> LATCH_PER_CONN_LOG2 mod 2^14) << 16 | tuple",
);
/// The version each outstanding tuple READ saw when it went up.
pub const REG_CLIENT_VERSION: RegisterSpec = reg(
    "client_version",
    32,
    LATCH_CONN_SLOTS,
    "OptLatch",
    "index as client_tuple: tuple_version cell when the READ went up",
);
/// Per connection: the multi-packet READ response in progress, so that its Middle and
/// Last packets, which carry neither address nor first PSN, are stamped against the
/// READ's entry in `client_tuple` / `client_version`.
pub const REG_READ_CURSOR: RegisterSpec = RegisterSpec {
    name: "read_cursor",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "OptLatch",
    doc: "lo: first PSN of the READ response in progress | PSN_VALID; hi: the PSN its next packet must have",
};
/// Fault-injection random state per direction (xorshift32).
pub const REG_FAULT_RNG: RegisterSpec = reg(
    "fault_rng",
    32,
    2,
    "FaultInject",
    "xorshift32 state per direction (seeded by the control plane)",
);

/// Clover keys (chain ids) whose tails the steering functions track.
pub const STEER_KEYS: usize = 1024;
/// Entries of the node-address → key hash (read steering's write cache).
pub const STEER_ADDRS: usize = 8192;
/// In-flight link CASes / steered READs remembered per connection (indexed by PSN).
pub const STEER_RING: usize = 16;
/// Cells of the per-connection rings.
pub const STEER_CONN_SLOTS: usize = MAX_CONNS * STEER_RING;
/// Node size classes (WRITE/READ lengths) the steering functions track.
pub const STEER_CLASSES: usize = 8;
/// Clover node layout: offset of the chain id in a node.
pub const CLOVER_CHAIN_ID_AT: usize = 8;
/// Clover node layout: offset of the 32-bit version in a node.
pub const CLOVER_VERSION_AT: usize = 24;
/// Clover header word: a successor is linked.
pub const CLOVER_HAS_SUCCESSOR: u64 = 1 << 63;
/// Clover header word: tombstone flag.
pub const CLOVER_TOMBSTONE: u64 = 1 << 62;
/// Clover header word: the successor fields (zero while no successor is linked). The
/// switch's answers put markers there (see `functions::write_steer`).
pub const CLOVER_SUCCESSOR_FIELDS: u64 = (1 << 46) - 1;
/// Committed tails older than this (µs) are not used for read steering (must stay
/// below the clients' reclamation grace period).
pub const STEER_MAX_AGE_US: u32 = 10_000;

/// Next expected client PSN per connection (steering acts on first transmissions only).
pub const REG_STEER_EPSN: RegisterSpec = reg(
    "steer_epsn",
    32,
    MAX_CONNS,
    "WriteSteer",
    "next expected client PSN | PSN_VALID",
);
/// Committed tail address per tracked key.
pub const REG_STEER_TAIL_VA: RegisterSpec = RegisterSpec {
    name: "steer_tail_va",
    width: 32,
    size: STEER_KEYS,
    kind: RegisterKind::Pair,
    control: "SteerCache",
    doc: "VA of the key's committed tail node (lo/hi; 0: unknown)",
};
/// Committed tail header word per tracked key.
pub const REG_STEER_TAIL_HDR: RegisterSpec = RegisterSpec {
    name: "steer_tail_hdr",
    width: 32,
    size: STEER_KEYS,
    kind: RegisterKind::Pair,
    control: "SteerCache",
    doc: "header word of the committed tail (lo/hi)",
};
/// Committed tail version per tracked key.
pub const REG_STEER_TAIL_VER: RegisterSpec = reg(
    "steer_tail_ver",
    32,
    STEER_KEYS,
    "SteerCache",
    "version of the committed tail",
);
/// Commit time per tracked key.
pub const REG_STEER_TAIL_TS: RegisterSpec = reg(
    "steer_tail_ts",
    32,
    STEER_KEYS,
    "SteerCache",
    "ingress time (µs) the tail was committed",
);
/// The pending node WRITE per connection: its key and the PSN its CAS must have.
pub const REG_STEER_PEND: RegisterSpec = RegisterSpec {
    name: "steer_pend",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "lo: PSN of the following CAS | PSN_VALID; hi: key slot",
};
/// The pending node's address per connection.
pub const REG_STEER_PEND_VA: RegisterSpec = RegisterSpec {
    name: "steer_pend_va",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "VA of the node the pending WRITE wrote (lo/hi)",
};
/// The pending node's header and version per connection.
pub const REG_STEER_PEND_NODE: RegisterSpec = RegisterSpec {
    name: "steer_pend_node",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "lo: low half of the node's header word; hi: the node's version as sent",
};
/// The pending node's header, high half, per connection.
pub const REG_STEER_PEND_HDR_HI: RegisterSpec = reg(
    "steer_pend_hdr_hi",
    32,
    MAX_CONNS,
    "WriteSteer",
    "high half of the pending node's header word",
);
/// In-flight link CASes: PSN, flags and key slot.
pub const REG_STEER_CAS: RegisterSpec = RegisterSpec {
    name: "steer_cas",
    width: 32,
    size: STEER_CONN_SLOTS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "lo: CAS PSN | PSN_VALID | STEERED<<25; hi: key slot",
};
/// In-flight link CASes: the compare value as sent to the memnode.
pub const REG_STEER_CAS_CMP: RegisterSpec = RegisterSpec {
    name: "steer_cas_cmp",
    width: 32,
    size: STEER_CONN_SLOTS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "compare value as sent (lo/hi)",
};
/// In-flight link CASes: the target address as sent.
pub const REG_STEER_CAS_TGT: RegisterSpec = RegisterSpec {
    name: "steer_cas_tgt",
    width: 32,
    size: STEER_CONN_SLOTS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "CAS target VA as sent (lo/hi)",
};
/// In-flight link CASes: the new node's address.
pub const REG_STEER_CAS_NODE_VA: RegisterSpec = RegisterSpec {
    name: "steer_cas_node_va",
    width: 32,
    size: STEER_CONN_SLOTS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "VA of the node being linked (lo/hi)",
};
/// In-flight link CASes: the new node's header.
pub const REG_STEER_CAS_NODE_HDR: RegisterSpec = RegisterSpec {
    name: "steer_cas_node_hdr",
    width: 32,
    size: STEER_CONN_SLOTS,
    kind: RegisterKind::Pair,
    control: "WriteSteer",
    doc: "header word of the node being linked (lo/hi)",
};
/// In-flight link CASes: the new node's version.
pub const REG_STEER_CAS_NODE_VER: RegisterSpec = reg(
    "steer_cas_node_ver",
    32,
    STEER_CONN_SLOTS,
    "WriteSteer",
    "version of the node being linked",
);
/// Read steering's write cache: a tag of the node address per hash slot.
pub const REG_STEER_ADDR_TAG: RegisterSpec = reg(
    "steer_addr_tag",
    32,
    STEER_ADDRS,
    "SteerCache",
    "low 32 bits of (node VA >> 6) of the last node written to this hash slot",
);
/// Read steering's write cache: the key slot.
pub const REG_STEER_ADDR_KEY: RegisterSpec = reg(
    "steer_addr_key",
    32,
    STEER_ADDRS,
    "SteerCache",
    "key slot + 1 of the node in this hash slot (0: empty or untracked)",
);
/// Read steering's write cache: the node's version (after the tail registers, whose
/// version a node WRITE's may be rewritten from).
pub const REG_STEER_ADDR_VER: RegisterSpec = reg(
    "steer_addr_ver",
    32,
    STEER_ADDRS,
    "SteerCache",
    "version of the node in this hash slot",
);
/// Steered READs in flight: PSN and the address they were sent to.
pub const REG_STEER_RD: RegisterSpec = RegisterSpec {
    name: "steer_rd",
    width: 32,
    size: STEER_CONN_SLOTS,
    kind: RegisterKind::Pair,
    control: "ReadSteer",
    doc: "lo: READ PSN | PSN_VALID; hi: low 32 bits of (steered VA >> 6)",
};
/// Steered READs in flight: high bits of the address.
pub const REG_STEER_RD_HI: RegisterSpec = reg(
    "steer_rd_hi",
    32,
    STEER_CONN_SLOTS,
    "ReadSteer",
    "high bits of (steered VA >> 6)",
);

/// Every register, in pipeline order.
pub const REGISTERS: &[RegisterSpec] = &[
    REG_MODE,
    REG_CONN_ACKED,
    REG_CONN_EPSN,
    REG_CONN_SW,
    REG_ANSWER_PSN,
    REG_CONN_MSN,
    REG_ATOMIC_WORD,
    REG_ANSWER_RESULT,
    REG_MUX_NEXT_PSN,
    REG_MUX_RING,
    REG_MUX_RESEND,
    REG_REPL_UP,
    REG_REPL_SLOT,
    REG_REPL_ORIG,
    REG_REPL_CMP,
    REG_REPL_SWP,
    REG_LOCK_STATE,
    REG_LOCK_WORD,
    REG_TUPLE_VERSION,
    REG_CLIENT_TUPLE,
    REG_CLIENT_VERSION,
    REG_READ_CURSOR,
    REG_STEER_EPSN,
    REG_STEER_PEND,
    REG_STEER_ADDR_TAG,
    REG_STEER_ADDR_KEY,
    REG_STEER_TAIL_VER,
    REG_STEER_TAIL_VA,
    REG_STEER_TAIL_HDR,
    REG_STEER_TAIL_TS,
    REG_STEER_PEND_VA,
    REG_STEER_PEND_NODE,
    REG_STEER_PEND_HDR_HI,
    REG_STEER_ADDR_VER,
    REG_STEER_CAS,
    REG_STEER_CAS_CMP,
    REG_STEER_CAS_TGT,
    REG_STEER_CAS_NODE_VA,
    REG_STEER_CAS_NODE_HDR,
    REG_STEER_CAS_NODE_VER,
    REG_STEER_RD,
    REG_STEER_RD_HI,
    REG_FAULT_RNG,
    REG_COPY_ACKED,
    REG_MIRROR_CONN,
    REG_MIRROR_CONN_SET,
    REG_MIRROR_BPSN0,
    REG_MIRROR_BPSN1,
    REG_MIRROR_HELD,
    REG_MIRROR_HELD_AETH,
    REG_MIRROR_NEXT0,
    REG_MIRROR_NEXT1,
    REG_MIRROR_ACKED0,
    REG_MIRROR_ACKED1,
    REG_MIRROR_OWNER0,
    REG_MIRROR_OWNER1,
    REG_LB_CURSOR,
    REG_LB_MAP,
    REG_LB_MAPQ,
    REG_LB_FILL_KEY,
    REG_LB_FILL_VA,
    REG_LB_NEXT0,
    REG_LB_NEXT1,
    REG_LB_OWNER0,
    REG_LB_OWNER1,
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

/// Tracked lock words (atomic replacement): (rkey, VA) → cache slot and the
/// multiplexed QP their requests go up on.
pub const TABLE_TRACKED_LOCK: TableSpec = TableSpec {
    name: "tracked_lock",
    size: TRACKED_LOCK_TABLE_SIZE,
    keys: &["hdr.atomic_eth.rkey", "hdr.atomic_eth.va"],
    actions: &["tracked(slot, mux)", "untracked"],
};
/// Multiplexed upstream QPs: mux id → addressing of the memnode's responder QP.
pub const TABLE_MUX_UP: TableSpec = TableSpec {
    name: "mux_up",
    size: MUX_QPS,
    keys: &["meta.mux"],
    actions: &["to_mux(src, dst, memnode_qpn)"],
};
/// Responses on a multiplexed QP: (memnode address, switch QPN) → mux id.
pub const TABLE_MUX_DOWN: TableSpec = TableSpec {
    name: "mux_down",
    size: MUX_QPS,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["from_mux(mux)", "miss"],
};
/// Connection → client addressing (answers built from a multiplexed QP's responses).
pub const TABLE_CONN_CLIENT: TableSpec = TableSpec {
    name: "conn_client",
    size: MAX_CONNS,
    keys: &["meta.conn"],
    actions: &["to_client(src, dst, client_qpn)"],
};
/// Connection → where its fillers write (0 bytes at a valid address of the client's
/// memnode) and the memnode's QPN (to re-send a filler from a sequence NAK).
pub const TABLE_CONN_FILLER: TableSpec = TableSpec {
    name: "conn_filler",
    size: MAX_CONNS,
    keys: &["meta.conn"],
    actions: &["filler(rkey, va, memnode_qpn)"],
};
/// Tuples whose versions the switch holds: rkey → base VA, stride, tuples, first id.
pub const TABLE_LATCH_REGION: TableSpec = TableSpec {
    name: "latch_region",
    size: LATCH_REGION_TABLE_SIZE,
    keys: &["hdr.reth.rkey / hdr.atomic_eth.rkey"],
    actions: &[
        "latched_tuples(base_va, stride_log2, tuples, first_tuple)",
        "none",
    ],
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

/// Tracked Clover keys: chain id (node bytes 8..16) → key slot (the control plane
/// installs the hottest keys).
pub const TABLE_STEER_KEYS: TableSpec = TableSpec {
    name: "steer_keys",
    size: STEER_KEYS,
    keys: &["meta.chain_id"],
    actions: &["tracked(slot)", "untracked"],
};
/// Tracked node size classes: WRITE/READ DMA length → tracked.
pub const TABLE_STEER_CLASSES: TableSpec = TableSpec {
    name: "steer_classes",
    size: STEER_CLASSES,
    keys: &["hdr.reth.dma_len"],
    actions: &["node_class", "not_a_node"],
};

/// Switch-initiated copies running at once (zero-sided RDMA): each owns one queue pair
/// to its source memnode and one to its target memnode.
pub const COPY_SLOTS: usize = 16;

/// Responses on a copy's source QP: (memnode address, memnode port, switch QPN) → the
/// copy slot and the static state of its READ→WRITE conversion.
pub const TABLE_COPY_SRC: TableSpec = TableSpec {
    name: "copy_src",
    size: COPY_SLOTS,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &[
        "read_to_write(slot, src_psn, dst_psn, dst_va, dst_rkey, src, dst, dst_qpn, pmtu_log2, len)",
        "miss",
    ],
};
/// Responses on a copy's target QP: (memnode address, memnode port, switch QPN) → the
/// copy slot (its WRITE ACKs and NAKs).
pub const TABLE_COPY_DST: TableSpec = TableSpec {
    name: "copy_dst",
    size: COPY_SLOTS,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["write_answer(slot, dst_psn)", "miss"],
};

/// Replicas of a multicast copy besides the `copy_src` entry's own target.
pub const COPY_REPLICAS: usize = 7;

/// The multicast group of copy slot `s` is `COPY_MCAST_GROUP_BASE + s` (groups
/// below it belong to replica sets of replicated WRITEs).
pub const COPY_MCAST_GROUP_BASE: usize = 64;

/// Multicast copies: (copy slot, replica) → one more WRITE target of every READ
/// response the slot converts (replica 1 up; on a Tofino the multicast group of the
/// slot makes the replicas and egress rewrites each one).
pub const TABLE_COPY_MCAST: TableSpec = TableSpec {
    name: "copy_mcast",
    size: COPY_SLOTS * COPY_REPLICAS,
    keys: &["meta.copy_slot", "meta.copy_replica"],
    actions: &[
        "replica_write(dst_psn, dst_va, dst_rkey, dst, dst_qpn)",
        "miss",
    ],
};

/// The target-side PSN up to which a copy's WRITEs are acknowledged, per copy slot.
pub const REG_COPY_ACKED: RegisterSpec = reg(
    "copy_acked",
    32,
    COPY_SLOTS,
    "ZeroCopy",
    "packets of the copy acknowledged by the target (cumulative, from its first PSN) | PSN_VALID",
);

/// Replica sets the switch replicates WRITEs to (switch replication of writes): each
/// has a primary and up to [`MIRROR_BACKUPS`] backups, one switch-owned queue pair
/// (a *lane*) per backup.
pub const MIRROR_SETS: usize = 32;
/// Backups per replica set the switch WRITEs to (tables of up to three copies).
pub const MIRROR_BACKUPS: usize = 2;
/// Lane PSNs remembered per (set, backup) to find which connection a backup's ACK
/// belongs to (low bits of the lane PSN).
pub const MIRROR_OWNERS: usize = 256;
/// `mirror_conn` bit: the connection's replicated WRITE at the PSN in bits 0–23 waits
/// for its backups (the primary's ACK is held).
pub const MIRROR_ACTIVE: u32 = 1 << 25;
/// `mirror_conn` bit: a second replicated WRITE arrived while one was waiting; every
/// later replicated WRITE on the connection is dropped (the client's queue pair fails).
pub const MIRROR_POISONED: u32 = 1 << 26;

/// Replicated WRITEs: the alias memory key a client puts in the RETH → the replica
/// set and the primary's real key.
pub const TABLE_MIRROR_RKEY: TableSpec = TableSpec {
    name: "mirror_rkey",
    size: MIRROR_SETS,
    keys: &["hdr.reth.rkey"],
    actions: &["replicate(set, rkey)", "miss"],
};
/// A set's lanes: (set, backup) → the backup's addressing for the WRITE the switch
/// makes (the lane's QPN on the backup, its key, the VA offset from the primary's).
pub const TABLE_MIRROR_LANE: TableSpec = TableSpec {
    name: "mirror_lane",
    size: MIRROR_SETS * MIRROR_BACKUPS,
    keys: &["meta.mirror_set", "meta.mirror_backup"],
    actions: &["lane(src, dst, qpn, rkey, va_delta)", "miss"],
};
/// Answers on lanes: (backup address, backup port, switch QPN) → (set, backup).
pub const TABLE_MIRROR_ACK: TableSpec = TableSpec {
    name: "mirror_ack",
    size: MIRROR_SETS * MIRROR_BACKUPS,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["lane_answer(set, backup)", "miss"],
};

/// Per connection: the replicated WRITE waiting for its backups.
pub const REG_MIRROR_CONN: RegisterSpec = reg(
    "mirror_conn",
    32,
    MAX_CONNS,
    "MirrorWrite",
    "client PSN of the last replicated WRITE | PSN_VALID | MIRROR_ACTIVE (waiting) | MIRROR_POISONED",
);
/// Per connection: the replica set of its waiting WRITE.
pub const REG_MIRROR_CONN_SET: RegisterSpec = reg(
    "mirror_conn_set",
    8,
    MAX_CONNS,
    "MirrorWrite",
    "replica set of the connection's last replicated WRITE",
);
/// Per connection: the lane PSN of its waiting WRITE's copy on backup 0.
pub const REG_MIRROR_BPSN0: RegisterSpec = reg(
    "mirror_bpsn0",
    32,
    MAX_CONNS,
    "MirrorWrite",
    "lane PSN of the waiting WRITE on the set's backup 0",
);
/// Per connection: the lane PSN of its waiting WRITE's copy on backup 1.
pub const REG_MIRROR_BPSN1: RegisterSpec = reg(
    "mirror_bpsn1",
    32,
    MAX_CONNS,
    "MirrorWrite",
    "lane PSN of the waiting WRITE on the set's backup 1",
);
/// Per connection: the PSN of the latest primary ACK held back.
pub const REG_MIRROR_HELD: RegisterSpec = reg(
    "mirror_held",
    32,
    MAX_CONNS,
    "MirrorWrite",
    "PSN of the latest held primary acknowledgement | PSN_VALID",
);
/// Per connection: the AETH of the latest primary ACK held back.
pub const REG_MIRROR_HELD_AETH: RegisterSpec = reg(
    "mirror_held_aeth",
    32,
    MAX_CONNS,
    "MirrorWrite",
    "AETH (syndrome << 24 | MSN) of the latest held primary acknowledgement",
);
/// Per set: next PSN of the lane to backup 0.
pub const REG_MIRROR_NEXT0: RegisterSpec = reg(
    "mirror_next0",
    32,
    MIRROR_SETS,
    "MirrorWrite",
    "next PSN of the lane to backup 0",
);
/// Per set: next PSN of the lane to backup 1.
pub const REG_MIRROR_NEXT1: RegisterSpec = reg(
    "mirror_next1",
    32,
    MIRROR_SETS,
    "MirrorWrite",
    "next PSN of the lane to backup 1",
);
/// Per set: lane PSN up to which backup 0 acknowledged (cumulative).
pub const REG_MIRROR_ACKED0: RegisterSpec = reg(
    "mirror_acked0",
    32,
    MIRROR_SETS,
    "MirrorWrite",
    "lane PSN backup 0 acknowledged up to | PSN_VALID",
);
/// Per set: lane PSN up to which backup 1 acknowledged (cumulative).
pub const REG_MIRROR_ACKED1: RegisterSpec = reg(
    "mirror_acked1",
    32,
    MIRROR_SETS,
    "MirrorWrite",
    "lane PSN backup 1 acknowledged up to | PSN_VALID",
);
/// Per (set, lane PSN low bits): the connection whose WRITE took that PSN on backup 0.
pub const REG_MIRROR_OWNER0: RegisterSpec = reg(
    "mirror_owner0",
    16,
    MIRROR_SETS * MIRROR_OWNERS,
    "MirrorWrite",
    "connection | 0x100 of the WRITE at this PSN of the lane to backup 0",
);
/// Per (set, lane PSN low bits): the connection whose WRITE took that PSN on backup 1.
pub const REG_MIRROR_OWNER1: RegisterSpec = reg(
    "mirror_owner1",
    16,
    MIRROR_SETS * MIRROR_OWNERS,
    "MirrorWrite",
    "connection | 0x100 of the WRITE at this PSN of the lane to backup 1",
);

/// Load-balanced READs: the longest READ balanced (one response packet at the lanes'
/// path MTU).
pub const LB_MAX_LEN: u32 = 1024;
/// Load-balanced READs: client PSNs remembered per connection (`lb_map`, `lb_mapq`).
pub const LB_MAP_SLOTS: usize = 64;
/// Load-balanced READs: lane PSNs mapped back to their client per set and backup
/// (`lb_owner0/1`).
pub const LB_OWNER_SLOTS: usize = 256;
/// `lb_map`: the member that served the READ sits at these bits (0 = the primary).
pub const LB_MAP_MEMBER_SHIFT: u32 = 25;
/// `lb_map` bit: the lane answered the READ's lane PSN (a retransmission takes a new one).
pub const LB_MAP_ANSWERED: u32 = 1 << 27;

/// Load-balanced READs: a set's read alias key → the set, the primary's real key, its
/// backup count and which backups serve.
pub const TABLE_BALANCE_RKEY: TableSpec = TableSpec {
    name: "balance_rkey",
    size: MIRROR_SETS,
    keys: &["hdr.reth.rkey"],
    actions: &["balance(set, rkey, backups, serving)", "miss"],
};
/// A set's read lanes: (set, backup) → the backup's addressing for the READ the
/// switch sends (the lane's QPN on the backup, its key, the VA offset from the
/// primary's).
pub const TABLE_BALANCE_LANE: TableSpec = TableSpec {
    name: "balance_lane",
    size: MIRROR_SETS * MIRROR_BACKUPS,
    keys: &["meta.lb_set", "meta.lb_backup"],
    actions: &["read_lane(src, dst, qpn, rkey, va_delta)", "miss"],
};
/// Answers on read lanes: (backup address, backup port, switch QPN) → (set, backup).
pub const TABLE_BALANCE_ANSWER: TableSpec = TableSpec {
    name: "balance_answer",
    size: MIRROR_SETS * MIRROR_BACKUPS,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["read_lane_answer(set, backup)", "miss"],
};

/// The client's addressing for read-lane answers, by connection: a copy of
/// `conn_client` for the P4 program (a table is applied in one control; the control
/// plane writes every `conn_client` entry into both). The model reads `conn_client`.
pub const TABLE_BALANCE_CLIENT: TableSpec = TableSpec {
    name: "balance_client",
    size: MAX_CONNS,
    keys: &["meta.conn"],
    actions: &["to_client(src, dst, client_qpn)", "miss"],
};

/// Per set: the round-robin cursor (the member after the last one chosen).
pub const REG_LB_CURSOR: RegisterSpec = reg(
    "lb_cursor",
    32,
    MIRROR_SETS,
    "ReadBalance",
    "per set: the member after the last one chosen",
);
/// Per connection and client PSN slot: which member served the balanced READ.
pub const REG_LB_MAP: RegisterSpec = reg(
    "lb_map",
    32,
    MAX_CONNS * LB_MAP_SLOTS,
    "ReadBalance",
    "per connection and PSN slot: client PSN | valid | member << 25 | answered << 27",
);
/// Per connection and client PSN slot: the lane PSN the READ took.
pub const REG_LB_MAPQ: RegisterSpec = reg(
    "lb_mapq",
    32,
    MAX_CONNS * LB_MAP_SLOTS,
    "ReadBalance",
    "per connection and PSN slot: the lane PSN the READ took",
);
/// Per connection: key (lo) and QPN (hi) of the primary for fillers sent again.
pub const REG_LB_FILL_KEY: RegisterSpec = RegisterSpec {
    name: "lb_fill_key",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "ReadBalance",
    doc: "per connection: lo the primary's key, hi the primary's QPN of the last balanced READ",
};
/// Per connection: the address of the last balanced READ (for fillers sent again).
pub const REG_LB_FILL_VA: RegisterSpec = RegisterSpec {
    name: "lb_fill_va",
    width: 32,
    size: MAX_CONNS,
    kind: RegisterKind::Pair,
    control: "ReadBalance",
    doc: "per connection: the address of the last balanced READ (lo, hi)",
};
/// Per set: the next PSN of the read lane to backup 0.
pub const REG_LB_NEXT0: RegisterSpec = reg(
    "lb_next0",
    32,
    MIRROR_SETS,
    "ReadBalance",
    "per set: next PSN on the read lane to backup 0",
);
/// Per set: the next PSN of the read lane to backup 1.
pub const REG_LB_NEXT1: RegisterSpec = reg(
    "lb_next1",
    32,
    MIRROR_SETS,
    "ReadBalance",
    "per set: next PSN on the read lane to backup 1",
);
/// Per set and lane PSN slot (backup 0): the client connection and PSN of the READ.
pub const REG_LB_OWNER0: RegisterSpec = RegisterSpec {
    name: "lb_owner0",
    width: 32,
    size: MIRROR_SETS * LB_OWNER_SLOTS,
    kind: RegisterKind::Pair,
    control: "ReadBalance",
    doc: "per set and lane PSN slot (backup 0): lo conn | client PSN << 8, hi lane PSN | valid",
};
/// Per set and lane PSN slot (backup 1): the client connection and PSN of the READ.
pub const REG_LB_OWNER1: RegisterSpec = RegisterSpec {
    name: "lb_owner1",
    width: 32,
    size: MIRROR_SETS * LB_OWNER_SLOTS,
    kind: RegisterKind::Pair,
    control: "ReadBalance",
    doc: "per set and lane PSN slot (backup 1): lo conn | client PSN << 8, hi lane PSN | valid",
};

/// Flow rings' control QPs and doorbells the switch serves at once.
pub const FLOW_PUNT_ENTRIES: usize = 64;

/// Packets for the switch CPU's flow engine: answers on a flow ring's control QP (from
/// the ring's memnode) and doorbells (from a producer): (source address, source port,
/// destination QPN) → the ring.
pub const TABLE_FLOW_PUNT: TableSpec = TableSpec {
    name: "flow_punt",
    size: FLOW_PUNT_ENTRIES,
    keys: &["hdr.ipv4.src_addr", "hdr.udp.src_port", "hdr.bth.dest_qpn"],
    actions: &["punt(ring)", "miss"],
};

/// Every table.
pub const TABLES: &[TableSpec] = &[
    TABLE_ROUTE_UP,
    TABLE_ROUTE_DOWN,
    TABLE_ATOMIC_RANGE,
    TABLE_TRACKED_LOCK,
    TABLE_MUX_UP,
    TABLE_MUX_DOWN,
    TABLE_CONN_CLIENT,
    TABLE_CONN_FILLER,
    TABLE_LATCH_REGION,
    TABLE_STEER_KEYS,
    TABLE_STEER_CLASSES,
    TABLE_FAULT_POLICY,
    TABLE_CONN_SCOPED,
    TABLE_CONN_WINDOW,
    TABLE_CONN_WINDOW_LAST,
    TABLE_COPY_SRC,
    TABLE_COPY_DST,
    TABLE_FLOW_PUNT,
    TABLE_MIRROR_RKEY,
    TABLE_MIRROR_LANE,
    TABLE_MIRROR_ACK,
    TABLE_COPY_MCAST,
    TABLE_BALANCE_RKEY,
    TABLE_BALANCE_LANE,
    TABLE_BALANCE_ANSWER,
    TABLE_BALANCE_CLIENT,
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
    (
        "atomic_replace",
        &[
            "converted",
            "filled",
            "answered",
            "replayed",
            "resent",
            "held",
            "stale",
            "fillers",
        ],
    ),
    (
        "opt_latch",
        &[
            "latched",
            "latch_refused",
            "versions_read",
            "reads_valid",
            "reads_invalid",
            "unlatched",
            "unlatched_writes",
            "fillers",
            "broken",
            "parts_unstamped",
        ],
    ),
    (
        "write_steer",
        &["steered", "missed", "converted", "versioned", "committed"],
    ),
    ("read_steer", &["steered", "missed", "converted"]),
    ("faults", &["dropped", "duplicated", "reordered", "delayed"]),
    ("scope", &["checked", "denied"]),
    ("zero_copy", &["converted", "acked", "naks", "stale"]),
    ("flow_punt", &["punted"]),
    (
        "mirror_write",
        &[
            "replicated",
            "copies",
            "recopied",
            "held",
            "released",
            "passed",
            "stale",
            "busy",
            "lane_acks",
            "lane_naks",
        ],
    ),
];

/// Connections the scope check confines to their windows: connection id → `scoped`.
/// Connections without an entry (made with the switch's admin token) are not checked.
pub const TABLE_CONN_SCOPED: TableSpec = TableSpec {
    name: "conn_scoped",
    size: ROUTE_TABLE_SIZE,
    keys: &["meta.conn"],
    actions: &["scoped", "NoAction"],
};
/// The windows of scoped connections, matched on a request's first byte:
/// (connection id exact, RETH/AtomicETH address range) → the window's id and rights.
pub const TABLE_CONN_WINDOW: TableSpec = TableSpec {
    name: "conn_window",
    size: WINDOW_TABLE_SIZE,
    keys: &["meta.conn", "meta.scope_first (range)"],
    actions: &["window(window_id, read, write)", "NoAction"],
};
/// The same windows matched on a request's last byte (a P4 table is applied once per
/// packet, so the control plane writes every window into both tables); a request is
/// inside its connection's windows when both lookups hit the same window.
pub const TABLE_CONN_WINDOW_LAST: TableSpec = TableSpec {
    name: "conn_window_last",
    size: WINDOW_TABLE_SIZE,
    keys: &["meta.conn", "meta.scope_last (range)"],
    actions: &["window_last(window_id)", "NoAction"],
};

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
    let _ = writeln!(w, "const bit<9> PORT_CPU = {PORT_CPU};");
    let _ = writeln!(w, "const bit<1> DIR_UP = {DIR_UP};");
    let _ = writeln!(w, "const bit<1> DIR_DOWN = {DIR_DOWN};\n");
    let _ = writeln!(w, "// Protocol numbers");
    let _ = writeln!(w, "const bit<16> ETHERTYPE_IPV4 = 0x{ETHERTYPE_IPV4:04x};");
    let _ = writeln!(
        w,
        "const bit<16> ETHERTYPE_LATCH_RELEASE = 0x{ETHERTYPE_LATCH_RELEASE:04x};"
    );
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
        ("ANSWER_RING", ANSWER_RING),
        ("ROUTE_TABLE_SIZE", ROUTE_TABLE_SIZE),
        ("ATOMIC_RANGE_TABLE_SIZE", ATOMIC_RANGE_TABLE_SIZE),
        ("LOCK_SLOTS", LOCK_SLOTS),
        ("MUX_QPS", MUX_QPS),
        ("COPY_SLOTS", COPY_SLOTS),
        ("MIRROR_SETS", MIRROR_SETS),
        ("MIRROR_BACKUPS", MIRROR_BACKUPS),
        ("MIRROR_OWNERS", MIRROR_OWNERS),
        ("LB_MAX_LEN", LB_MAX_LEN as usize),
        ("LB_MAP_SLOTS", LB_MAP_SLOTS),
        ("LB_OWNER_SLOTS", LB_OWNER_SLOTS),
        ("LB_MAP_MEMBER_SHIFT", LB_MAP_MEMBER_SHIFT as usize),
        ("MUX_RING", MUX_RING),
        ("LATCH_TUPLES", LATCH_TUPLES),
        ("LATCH_PER_CONN", LATCH_PER_CONN),
        ("LATCH_PER_CONN_LOG2", LATCH_PER_CONN_LOG2 as usize),
        ("WINDOW_TABLE_SIZE", WINDOW_TABLE_SIZE),
        ("STEER_KEYS", STEER_KEYS),
        ("STEER_ADDRS", STEER_ADDRS),
        ("STEER_RING", STEER_RING),
        ("STEER_CLASSES", STEER_CLASSES),
        ("STEER_MAX_AGE_US", STEER_MAX_AGE_US as usize),
        ("FAULT_SCALE", FAULT_SCALE as usize),
        ("COPY_REPLICAS", COPY_REPLICAS),
        ("COPY_MCAST_GROUP_BASE", COPY_MCAST_GROUP_BASE),
    ] {
        let _ = writeln!(w, "#define {name} {v}");
    }
    let _ = writeln!(w, "typedef bit<{CONN_ID_BITS}> conn_id_t;");
    let _ = writeln!(w, "const bit<32> PSN_VALID = 0x{PSN_VALID:x};");
    let _ = writeln!(w, "const bit<32> CONN_PENDING = 0x{CONN_PENDING:x};");
    let _ = writeln!(
        w,
        "const bit<32> CONN_FILLER_LAST = 0x{CONN_FILLER_LAST:x};"
    );
    let _ = writeln!(w, "const bit<32> LOCK_CACHED = 0x{LOCK_CACHED:x};");
    let _ = writeln!(w, "const bit<32> MIRROR_ACTIVE = 0x{MIRROR_ACTIVE:x};");
    let _ = writeln!(w, "const bit<32> MIRROR_POISONED = 0x{MIRROR_POISONED:x};");
    let _ = writeln!(w, "const bit<32> LB_MAP_ANSWERED = 0x{LB_MAP_ANSWERED:x};");
    let _ = writeln!(w, "const bit<32> INVALID_RKEY = 0x{INVALID_RKEY:x};");
    let _ = writeln!(w, "const bit<64> STAMP_PRESENT = 0x{STAMP_PRESENT:x};");
    let _ = writeln!(w, "const bit<64> STAMP_INVALID = 0x{STAMP_INVALID:x};");
    let _ = writeln!(w, "const bit<8> STAMP_BYTES_SHIFT = {STAMP_BYTES_SHIFT};");
    let _ = writeln!(
        w,
        "const bit<64> STAMP_BYTES_MASK = 0x{STAMP_BYTES_MASK:x};"
    );
    let _ = writeln!(
        w,
        "const bit<64> STAMP_VERSION_MASK = 0x{STAMP_VERSION_MASK:x};\n"
    );
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
        // The switch steers one-sided verbs; SENDs pass it as plain RoCE traffic.
        let one_sided: Vec<_> = verbs::wire::Opcode::ALL
            .into_iter()
            .filter(|op| !op.is_send())
            .collect();
        assert_eq!(opcode::ALL.len(), one_sided.len());
        for ((_, v), op) in opcode::ALL.iter().zip(one_sided) {
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
