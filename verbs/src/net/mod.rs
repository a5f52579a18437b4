//! UDP sockets with datagram batching (`sendmmsg` / `recvmmsg`) where the OS offers them.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod packet_socket;
mod readiness;
mod sockopt;

pub use packet_socket::{PacketSocket, discard_incoming, interface_of};
pub use readiness::wait_readable_any;

use crate::wire::{BTH_LEN, ICRC_LEN, icrc_for_ip_id, rewrite_icrc_for_ip_id};

/// The IPv4 identification the kernel gives segment `j` of a segmented send from an
/// unconnected socket with DF set (the send's own id is 0; segments count up from it).
fn run_index_id(j: usize) -> u16 {
    j as u16
}

/// Datagrams moved per system call at most.
pub const BATCH: usize = 32;

/// `UDP_SEGMENT` (Linux ≥ 4.18): send one buffer the kernel cuts into datagrams.
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (Linux ≥ 5.0): receive datagrams of one flow coalesced into one buffer.
const UDP_GRO: libc::c_int = 104;
/// Most datagrams in one segmented send (the kernel's limit is 64).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one segmented send (one IP packet's worth).
const GSO_MAX_BYTES: usize = 65_000;
/// Receive buffers for coalesced datagrams.
const GRO_BUFS: usize = 8;
const GRO_BUF_BYTES: usize = 65_536;
/// Control buffer of one message: room for one `UDP_SEGMENT` / `UDP_GRO` header.
const CMSG_BUF: usize = 32;

/// The environment variable that chooses the [`OffloadMode`] of every
/// [`BatchSocket`] of the process: `auto` (the default), `1` / `true` / `on`
/// ([`OffloadMode::All`]) or `0` / `false` / `off` ([`OffloadMode::Off`]).
pub const OFFLOAD_ENV: &str = "DMKV_UDP_OFFLOAD";

/// How a [`BatchSocket`] uses UDP segmentation offload (`UDP_SEGMENT` sends of runs
/// of equal-length datagrams, `UDP_GRO` coalesced receives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffloadMode {
    /// Neither: every datagram is its own send and its own receive.
    Off,
    /// The default. A socket bound to a loopback address receives coalesced buffers
    /// and segments its sends only to peers that said they receive them too
    /// ([`BatchSocket::send_batch_marked`]): on loopback the kernel hands a segmented
    /// send whole to such a receiver, so each datagram keeps the ICRC of IP id 0 it
    /// was built with. Sockets bound elsewhere behave as [`OffloadMode::Off`].
    #[default]
    Auto,
    /// Both, whatever the address and the peer (see [`BatchSocket`] for what a peer
    /// reading through a plain UDP socket then sees).
    All,
}

impl OffloadMode {
    /// The name `--udp-offload` and [`OFFLOAD_ENV`] use.
    pub fn name(self) -> &'static str {
        match self {
            OffloadMode::Off => "off",
            OffloadMode::Auto => "auto",
            OffloadMode::All => "on",
        }
    }
}

impl std::str::FromStr for OffloadMode {
    type Err = String;

    fn from_str(s: &str) -> Result<OffloadMode, String> {
        match s.trim() {
            "auto" | "" => Ok(OffloadMode::Auto),
            "1" | "true" | "on" => Ok(OffloadMode::All),
            "0" | "false" | "off" => Ok(OffloadMode::Off),
            other => Err(format!(
                "unknown UDP offload mode {other:?}: use auto (coalesce on loopback with peers \
                 that agree), on (always) or off (never)"
            )),
        }
    }
}

impl std::fmt::Display for OffloadMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The [`OffloadMode`] [`OFFLOAD_ENV`] asks for ([`OffloadMode::Auto`] when it is
/// unset; an unknown value is reported once on stderr and taken as `auto`).
pub fn offload_from_env() -> OffloadMode {
    match std::env::var(OFFLOAD_ENV) {
        Err(_) => OffloadMode::Auto,
        Ok(v) => v.parse().unwrap_or_else(|e: String| {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| eprintln!("{OFFLOAD_ENV}: {e}; using auto"));
            OffloadMode::Auto
        }),
    }
}

/// Coalesced datagrams received but not yet handed out.
#[derive(Debug, Default)]
struct GroState {
    bufs: Vec<Vec<u8>>,
    pending: VecDeque<(Vec<u8>, SocketAddrV4)>,
}

/// A non-blocking IPv4 UDP socket that sends and receives in batches.
///
/// With [segmentation offload](BatchSocket::enable_offload) on, consecutive datagrams of
/// one length to one destination leave in a single `UDP_SEGMENT` send, and datagrams
/// of one flow arrive coalesced (`UDP_GRO`) and are split again here: the datagrams
/// are unchanged, fewer system calls and fewer trips through the network stack carry
/// them. On loopback the kernel never cuts them apart, so a capture on `lo` shows the
/// coalesced buffers, not RoCE frames; on a real interface the kernel (or the NIC)
/// segments them, and gives the segments of one send the IPv4 identifications 0, 1,
/// 2, … (an unconnected socket with DF set sends id 0). The ICRC covers the IP id, so
/// for a socket that [carries RoCE](BatchSocket::set_carries_roce) the datagram that
/// becomes segment `j` of a send leaves with the ICRC of id `j`, and segment `j` of a
/// coalesced receive is handed out with the ICRC of id 0 again: what this socket sends
/// and receives is exactly what a peer that sees the real IP headers checks. A peer
/// that reads through a plain UDP socket sees no IP header and assumes id 0, so it
/// accepts segments of such sends only when its kernel coalesces them (loopback;
/// GRO). Hence the default, [`OffloadMode::Auto`]: on loopback only, and only to peers
/// that said they coalesce.
#[derive(Debug)]
pub struct BatchSocket {
    socket: UdpSocket,
    local: SocketAddrV4,
    /// The kernel accepted `UDP_SEGMENT`: runs may leave as one send.
    gso: bool,
    /// Every run is segmented, whoever the peer ([`OffloadMode::All`]); else only
    /// runs to peers marked as coalescing.
    segment_all: bool,
    gro: Option<Mutex<GroState>>,
    carries_roce: bool,
    /// Datagrams sent as a later segment of a segmented send.
    segmented: AtomicU64,
}

fn to_sockaddr(addr: &SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

fn from_sockaddr(sa: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        std::net::Ipv4Addr::from(sa.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(sa.sin_port),
    )
}

/// A yield that gives the CPU away for longer than this means another thread with
/// work was waiting for it ([`BatchSocket::wait_readable_spin`] stops spinning then).
pub const CONTENDED_YIELD: Duration = Duration::from_micros(200);

impl BatchSocket {
    /// Bind to `addr` (port 0 picks one) with the [`OffloadMode`] of [`OFFLOAD_ENV`].
    /// Sets DF (no fragmentation) like RoCE NICs.
    pub fn bind(addr: SocketAddrV4) -> io::Result<BatchSocket> {
        BatchSocket::bind_with(addr, offload_from_env())
    }

    /// Bind to `addr` (port 0 picks one) with segmentation offload as `mode` says.
    pub fn bind_with(addr: SocketAddrV4, mode: OffloadMode) -> io::Result<BatchSocket> {
        let socket = UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        let fd = socket.as_raw_fd();
        let pmtu_do: libc::c_int = libc::IP_PMTUDISC_DO;
        sockopt::set(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, &pmtu_do)?;
        let size: libc::c_int = 4 << 20;
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            // Failure only means a smaller buffer.
            let _ = sockopt::set(fd, libc::SOL_SOCKET, opt, &size);
        }
        let local = match socket.local_addr()? {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "RoCEv2 over UDP needs IPv4",
                ));
            }
        };
        let mut s = BatchSocket {
            socket,
            local,
            gso: false,
            segment_all: false,
            gro: None,
            carries_roce: false,
            segmented: AtomicU64::new(0),
        };
        match mode {
            OffloadMode::Off => {}
            OffloadMode::Auto => {
                if local.ip().is_loopback() {
                    s.enable_coalescing();
                }
            }
            OffloadMode::All => {
                s.enable_offload();
            }
        }
        Ok(s)
    }

    fn set_udp_opt(&self, opt: libc::c_int, val: libc::c_int) -> bool {
        sockopt::set(self.socket.as_raw_fd(), libc::SOL_UDP, opt, &val).is_ok()
    }

    /// Turn on UDP segmentation offload (send, to every peer) and receive coalescing
    /// where the kernel supports them ([`OffloadMode::All`]); returns whether both are
    /// on. See the type's documentation.
    pub fn enable_offload(&mut self) -> bool {
        let both = self.enable_coalescing();
        self.segment_all = self.gso;
        both
    }

    /// Receive coalesced buffers, and segment sends to the peers a caller marks as
    /// coalescing too ([`BatchSocket::send_batch_marked`]) where the kernel supports
    /// both; returns whether it does ([`OffloadMode::Auto`] on loopback).
    pub fn enable_coalescing(&mut self) -> bool {
        // A per-socket segment size of 0 leaves plain sends alone; accepting the option
        // says the kernel knows UDP_SEGMENT.
        self.gso = self.set_udp_opt(UDP_SEGMENT, 0);
        if self.gro.is_none() && self.set_udp_opt(UDP_GRO, 1) {
            self.gro = Some(Mutex::new(GroState {
                bufs: (0..GRO_BUFS).map(|_| vec![0u8; GRO_BUF_BYTES]).collect(),
                pending: VecDeque::new(),
            }));
        }
        self.gso && self.gro.is_some()
    }

    /// Whether this socket receives coalesced buffers and can segment its sends: what
    /// it tells a peer that may then send it segmented runs
    /// ([`BatchSocket::send_batch_marked`]).
    pub fn coalesces(&self) -> bool {
        self.gso && self.gro.is_some()
    }

    /// Whether sends to `peer`, which said it receives coalesced buffers, may be
    /// segmented: this socket [coalesces](BatchSocket::coalesces) and `peer` is on
    /// loopback, where the kernel hands the send whole to the peer's socket.
    pub fn may_segment_to(&self, peer: SocketAddrV4) -> bool {
        self.coalesces() && peer.ip().is_loopback() && self.local.ip().is_loopback()
    }

    /// Declare that the datagrams are RoCEv2 packets (ICRC in the last 4 bytes), so
    /// segmented sends and coalesced receives keep each ICRC true to the IP id its
    /// datagram travels with (see the type's documentation). Off: datagrams are opaque
    /// and never changed.
    pub fn set_carries_roce(&mut self, on: bool) {
        self.carries_roce = on;
    }

    /// Datagrams sent so far as a later segment of a segmented send (each run of `n`
    /// counts `n - 1`): how much crossed the kernel coalesced.
    pub fn segmented_datagrams(&self) -> u64 {
        self.segmented.load(Ordering::Relaxed)
    }

    /// Whether segmentation offload is on for sending (to every peer) and for
    /// receiving.
    pub fn offload(&self) -> (bool, bool) {
        (self.gso && self.segment_all, self.gro.is_some())
    }

    /// The local address actually bound.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// Which local IPv4 address the kernel would use to reach `remote`.
    pub fn route_source(remote: SocketAddrV4) -> io::Result<std::net::Ipv4Addr> {
        let probe = UdpSocket::bind("0.0.0.0:0")?;
        probe.connect(remote)?;
        match probe.local_addr()? {
            SocketAddr::V4(a) => Ok(*a.ip()),
            SocketAddr::V6(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "RoCEv2 over UDP needs IPv4",
            )),
        }
    }

    /// Send datagrams, as many per system call as possible. Returns how many calls it
    /// took. Runs are segmented only with [`OffloadMode::All`].
    pub fn send_batch(&self, datagrams: &[(&[u8], SocketAddrV4)]) -> io::Result<usize> {
        self.send_batch_marked(datagrams, &[])
    }

    /// [`BatchSocket::send_batch`], where `coalescing[i]` says that datagram `i`'s
    /// destination receives coalesced buffers (it told us so, and
    /// [`BatchSocket::may_segment_to`] holds): runs of equal-length datagrams to such
    /// a peer leave as one segmented send. Missing entries count as `false`.
    pub fn send_batch_marked(
        &self,
        datagrams: &[(&[u8], SocketAddrV4)],
        coalescing: &[bool],
    ) -> io::Result<usize> {
        if self.gso && (self.segment_all || coalescing.iter().any(|&c| c)) {
            return self.send_segmented(datagrams, coalescing);
        }
        let mut calls = 0;
        for chunk in datagrams.chunks(BATCH) {
            let n = chunk.len();
            // SAFETY: these are plain C structs for which all-zero is a valid value.
            let mut addrs: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
            let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for (i, (bytes, to)) in chunk.iter().enumerate() {
                addrs[i] = to_sockaddr(to);
                iovs[i] = libc::iovec {
                    iov_base: bytes.as_ptr() as *mut libc::c_void,
                    iov_len: bytes.len(),
                };
            }
            for i in 0..n {
                msgs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_in).cast();
                msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                msgs[i].msg_hdr.msg_iov = &mut iovs[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: `msgs[..n]` are initialised headers whose pointers refer to `addrs`,
            // `iovs` and the caller's buffers, all alive for the call.
            calls += unsafe { self.sendmmsg_all(&mut msgs[..n]) }?;
        }
        Ok(calls)
    }

    /// `sendmmsg` until every message of `msgs` is sent (or dropped as unsendable);
    /// returns the system calls it took.
    ///
    /// # Safety
    /// Every header's name, iovec and control pointers must point at live memory of the
    /// advertised lengths.
    unsafe fn sendmmsg_all(&self, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
        let n = msgs.len();
        let mut calls = 0;
        let mut sent = 0usize;
        while sent < n {
            // SAFETY: valid fd; the caller vouches for the headers' pointers.
            let rc = unsafe {
                libc::sendmmsg(
                    self.socket.as_raw_fd(),
                    msgs[sent..n].as_mut_ptr(),
                    (n - sent) as libc::c_uint,
                    0,
                )
            };
            calls += 1;
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::WouldBlock => {
                        // Socket buffer full: wait until writable.
                        self.poll_fd(libc::POLLOUT, Some(Duration::from_millis(10)))?;
                        continue;
                    }
                    io::ErrorKind::Interrupted => continue,
                    // A datagram that cannot be sent (e.g. ICMP unreachable reported on a
                    // previous send) is dropped like a lost packet; retransmission covers it.
                    _ => {
                        sent += 1;
                        continue;
                    }
                }
            }
            sent += rc as usize;
        }
        Ok(calls)
    }

    /// `recvmmsg` without blocking: the number of headers filled, 0 when nothing waits.
    ///
    /// # Safety
    /// Every header's name, iovec and control pointers must point at live, writable
    /// memory of the advertised lengths.
    unsafe fn recvmmsg_now(&self, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
        loop {
            // SAFETY: valid fd; the caller vouches for the headers' pointers.
            let rc = unsafe {
                libc::recvmmsg(
                    self.socket.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    msgs.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => return Ok(0),
                // ICMP errors from earlier sends surface here on Linux: skip them.
                io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused => continue,
                _ => return Err(err),
            }
        }
    }

    /// Send with `UDP_SEGMENT`: runs of datagrams of one length (the last of a run may be
    /// shorter) to one destination go as one message, messages in order.
    /// Without [`OffloadMode::All`], only runs whose datagrams are all marked in
    /// `coalescing` are segmented.
    fn send_segmented(
        &self,
        datagrams: &[(&[u8], SocketAddrV4)],
        coalescing: &[bool],
    ) -> io::Result<usize> {
        let mut calls = 0;
        let may = |i: usize| self.segment_all || coalescing.get(i).copied().unwrap_or(false);
        // At most BATCH datagrams per round, so everything the call needs lives on the
        // stack: no allocation per send.
        let mut base = 0;
        while base < datagrams.len() {
            let chunk = &datagrams[base..(base + BATCH).min(datagrams.len())];
            // Runs of datagrams as (first index in `chunk`, length).
            let mut runs = [(0usize, 0usize); BATCH];
            let mut nruns = 0;
            let mut i = 0;
            while i < chunk.len() {
                let (first, to) = (chunk[i].0.len(), chunk[i].1);
                let mut n = 1;
                let mut bytes = first;
                while i + n < chunk.len()
                    && may(base + i)
                    && may(base + i + n)
                    && n < GSO_MAX_SEGMENTS
                    && chunk[i + n].1 == to
                    && chunk[i + n - 1].0.len() == first
                    && chunk[i + n].0.len() <= first
                    && bytes + chunk[i + n].0.len() <= GSO_MAX_BYTES
                {
                    bytes += chunk[i + n].0.len();
                    n += 1;
                }
                runs[nruns] = (i, n);
                nruns += 1;
                i += n;
            }
            let runs = &runs[..nruns];
            self.segmented
                .fetch_add((chunk.len() - nruns) as u64, Ordering::Relaxed);
            // SAFETY: plain C structs for which all-zero is a valid value.
            let mut addrs: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
            let mut icrcs = [[0u8; ICRC_LEN]; BATCH];
            // SAFETY: as above.
            let mut iovs: [libc::iovec; 2 * BATCH] = unsafe { std::mem::zeroed() };
            let mut iov_counts = [0usize; BATCH];
            let mut niov = 0;
            for (r, &(first, len)) in runs.iter().enumerate() {
                addrs[r] = to_sockaddr(&chunk[first].1);
                for j in 0..len {
                    let k = first + j;
                    let bytes = chunk[k].0;
                    // The ICRC each datagram leaves with: segment j of a send gets IP id j.
                    let renumbered = self.renumbers(bytes, len, j);
                    let body = if renumbered {
                        icrcs[k] = self.segment_icrc(bytes, run_index_id(j));
                        &bytes[..bytes.len() - ICRC_LEN]
                    } else {
                        bytes
                    };
                    iovs[niov] = libc::iovec {
                        iov_base: body.as_ptr() as *mut libc::c_void,
                        iov_len: body.len(),
                    };
                    niov += 1;
                    if renumbered {
                        iovs[niov] = libc::iovec {
                            iov_base: icrcs[k].as_ptr() as *mut libc::c_void,
                            iov_len: ICRC_LEN,
                        };
                        niov += 1;
                    }
                }
                iov_counts[r] = niov;
            }
            let mut cmsgs = [[0u8; CMSG_BUF]; BATCH];
            // SAFETY: plain C structs for which all-zero is a valid value.
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            let mut at = 0;
            for (r, &(first, len)) in runs.iter().enumerate() {
                let h = &mut msgs[r].msg_hdr;
                h.msg_name = (&mut addrs[r] as *mut libc::sockaddr_in).cast();
                h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
                h.msg_iov = iovs[at..].as_mut_ptr();
                h.msg_iovlen = (iov_counts[r] - at) as _;
                at = iov_counts[r];
                if len > 1 {
                    h.msg_control = cmsgs[r].as_mut_ptr().cast();
                    // SAFETY: CMSG_SPACE of a u16 fits in the CMSG_BUF-byte buffer.
                    h.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
                    // SAFETY: msg_control points at a zeroed buffer of msg_controllen bytes,
                    // so the first header exists and its data has room for a u16.
                    unsafe {
                        let c = libc::CMSG_FIRSTHDR(h);
                        (*c).cmsg_level = libc::SOL_UDP;
                        (*c).cmsg_type = UDP_SEGMENT;
                        (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                        let seg = chunk[first].0.len() as u16;
                        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
                    }
                }
            }
            // SAFETY: the headers' pointers refer to `addrs`, `iovs`, `icrcs`, `cmsgs`
            // and the caller's buffers, all alive for the call.
            calls += unsafe { self.sendmmsg_all(&mut msgs[..nruns]) }?;
            base += chunk.len();
        }
        Ok(calls)
    }

    /// Receive up to `bufs.len()` datagrams without blocking. Each result is (length, source).
    pub fn recv_batch(
        &self,
        bufs: &mut [Vec<u8>],
        out: &mut Vec<(usize, SocketAddrV4)>,
    ) -> io::Result<usize> {
        out.clear();
        if let Some(gro) = &self.gro {
            let mut g = gro.lock().unwrap_or_else(|p| p.into_inner());
            return self.recv_coalesced(&mut g, bufs, out);
        }
        let n = bufs.len().min(BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: plain C structs for which all-zero is a valid value.
        let mut addrs: [libc::sockaddr_in; BATCH] = unsafe { std::mem::zeroed() };
        let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, b) in bufs.iter_mut().take(n).enumerate() {
            iovs[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
        }
        for i in 0..n {
            msgs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_in).cast();
            msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
            msgs[i].msg_hdr.msg_iov = &mut iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: n initialised headers whose buffers (the caller's) are writable and alive.
        let got = unsafe { self.recvmmsg_now(&mut msgs[..n]) }?;
        for (m, a) in msgs.iter().zip(&addrs).take(got) {
            let truncated = m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            // A truncated datagram is reported with length 0 so the caller drops it.
            let len = if truncated { 0 } else { m.msg_len as usize };
            out.push((len, from_sockaddr(a)));
        }
        Ok(got)
    }

    /// Receive with `UDP_GRO`: hand out datagrams split from coalesced buffers, keeping
    /// those that do not fit `bufs` for the next call.
    fn recv_coalesced(
        &self,
        g: &mut GroState,
        bufs: &mut [Vec<u8>],
        out: &mut Vec<(usize, SocketAddrV4)>,
    ) -> io::Result<usize> {
        let want = bufs.len();
        // Copies a datagram into the next caller buffer; `renumber` is the IP id it
        // travelled with when its ICRC must be turned back to id 0's.
        let mut give = |bytes: &[u8],
                        from: SocketAddrV4,
                        renumber: Option<u16>,
                        out: &mut Vec<(usize, SocketAddrV4)>| {
            let i = out.len();
            let len = if bytes.len() <= bufs[i].len() {
                let b = &mut bufs[i][..bytes.len()];
                b.copy_from_slice(bytes);
                if let Some(id) = renumber {
                    rewrite_icrc_for_ip_id(b, id, 0);
                }
                bytes.len()
            } else {
                0
            };
            out.push((len, from));
        };
        while out.len() < want {
            let Some((bytes, from)) = g.pending.pop_front() else {
                break;
            };
            give(&bytes, from, None, out);
        }
        if out.len() == want {
            return Ok(out.len());
        }
        let n = GRO_BUFS.min(want - out.len());
        // SAFETY: plain C structs for which all-zero is a valid value.
        let mut addrs: [libc::sockaddr_in; GRO_BUFS] = unsafe { std::mem::zeroed() };
        let mut iovs: [libc::iovec; GRO_BUFS] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; GRO_BUFS] = unsafe { std::mem::zeroed() };
        let mut cmsgs = [[0u8; CMSG_BUF]; GRO_BUFS];
        for (i, b) in g.bufs.iter_mut().take(n).enumerate() {
            iovs[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
        }
        for i in 0..n {
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_in).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = cmsgs[i].as_mut_ptr().cast();
            h.msg_controllen = CMSG_BUF as _;
        }
        // SAFETY: n initialised headers whose buffers (`g.bufs`, `cmsgs`) are writable and
        // alive; with nothing waiting, what the pending queue gave is returned.
        let got = unsafe { self.recvmmsg_now(&mut msgs[..n]) }?;
        for i in 0..got {
            let m = &msgs[i];
            let from = from_sockaddr(&addrs[i]);
            let len = m.msg_len as usize;
            if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len == 0 {
                // Truncated (handed out with length 0, so the caller drops it) or
                // empty: one datagram either way, never coalesced.
                if out.len() < want {
                    out.push((0, from));
                } else {
                    g.pending.push_back((Vec::new(), from));
                }
                continue;
            }
            // The segment size, when the kernel coalesced several datagrams.
            let mut seg = len;
            // SAFETY: the kernel filled msg_control/msg_controllen; the CMSG macros walk
            // only within them.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                        seg = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>())
                            as usize;
                    }
                    c = libc::CMSG_NXTHDR(&m.msg_hdr, c);
                }
            }
            let data = &g.bufs[i][..len];
            let pieces = data.len().div_ceil(seg.max(1));
            for (j, piece) in data.chunks(seg.max(1)).enumerate() {
                // Segment j travelled with IP id j: it is handed out as sent with id 0,
                // as every datagram read through a UDP socket is taken to be.
                let renumber = self.renumbers(piece, pieces, j).then(|| run_index_id(j));
                if out.len() < want {
                    give(piece, from, renumber, out);
                } else {
                    let mut copy = piece.to_vec();
                    if let Some(id) = renumber {
                        rewrite_icrc_for_ip_id(&mut copy, id, 0);
                    }
                    g.pending.push_back((copy, from));
                }
            }
        }
        Ok(out.len())
    }

    /// Whether datagram `j` of a run of `run_len` sent (or received) together needs its
    /// ICRC renumbered: RoCE datagrams after the first of a run of several.
    fn renumbers(&self, datagram: &[u8], run_len: usize, j: usize) -> bool {
        self.carries_roce && run_len > 1 && j > 0 && datagram.len() >= BTH_LEN + ICRC_LEN
    }

    /// The ICRC bytes `datagram` leaves with as segment `id` of a segmented send.
    fn segment_icrc(&self, datagram: &[u8], id: u16) -> [u8; ICRC_LEN] {
        let mut icrc = [0u8; ICRC_LEN];
        if let Some(stored) = datagram.last_chunk::<ICRC_LEN>() {
            icrc = *stored;
            if self.carries_roce && id != 0 && datagram.len() >= BTH_LEN + ICRC_LEN {
                let value = icrc_for_ip_id(u32::from_le_bytes(icrc), datagram.len(), 0, id);
                icrc = value.to_le_bytes();
            }
        }
        icrc
    }

    fn has_pending(&self) -> bool {
        self.gro.as_ref().is_some_and(|g| {
            !g.lock()
                .unwrap_or_else(|p| p.into_inner())
                .pending
                .is_empty()
        })
    }

    /// Wait until the socket is readable or `timeout` passes (None = forever).
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        if self.has_pending() {
            return Ok(true);
        }
        self.poll_fd(libc::POLLIN, timeout)
    }

    /// Like [`BatchSocket::wait_readable`], but first busy-polls for up to `spin`.
    ///
    /// Sleeping in the kernel and being woken costs tens of microseconds on a loaded
    /// machine; an answer expected within a few microseconds is cheaper to spin for,
    /// as RDMA applications spin on their completion queues. The spin yields the CPU
    /// between polls, and stops as soon as one yield took longer than
    /// [`CONTENDED_YIELD`]: another thread that had work ran meanwhile, so the CPUs
    /// are oversubscribed and spinning would take time from whoever must answer;
    /// sleeping in the kernel then costs less (a woken sleeper runs soon).
    pub fn wait_readable_spin(
        &self,
        timeout: Option<Duration>,
        spin: Duration,
    ) -> io::Result<bool> {
        if self.has_pending() {
            return Ok(true);
        }
        if !spin.is_zero() {
            let start = std::time::Instant::now();
            let limit = timeout.map_or(spin, |t| t.min(spin));
            while start.elapsed() < limit {
                if self.poll_fd(libc::POLLIN, Some(Duration::ZERO))? {
                    return Ok(true);
                }
                let before = std::time::Instant::now();
                std::thread::yield_now();
                if before.elapsed() > CONTENDED_YIELD {
                    break;
                }
            }
        }
        self.poll_fd(libc::POLLIN, timeout)
    }

    fn poll_fd(&self, events: libc::c_short, timeout: Option<Duration>) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events,
            revents: 0,
        };
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: one valid pollfd; `ts_ptr` is null or points at `ts`, alive for the call.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, std::ptr::null()) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(err);
        }
        Ok(rc > 0)
    }
}

impl AsRawFd for BatchSocket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }
}

#[cfg(test)]
mod offload_tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Instant;

    fn receive_all(rx: &BatchSocket, n: usize) -> Vec<Vec<u8>> {
        let mut bufs: Vec<Vec<u8>> = (0..5).map(|_| vec![0u8; 2048]).collect();
        let mut meta = Vec::new();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < n && Instant::now() < deadline {
            if !rx.wait_readable(Some(Duration::from_millis(50))).unwrap() {
                continue;
            }
            rx.recv_batch(&mut bufs, &mut meta).unwrap();
            for (i, (len, _)) in meta.iter().enumerate() {
                got.push(bufs[i][..*len].to_vec());
            }
        }
        got
    }

    fn datagrams() -> Vec<Vec<u8>> {
        // Runs of equal sizes with a shorter tail, a longer one that must start a new
        // run, and single ones.
        let mut d: Vec<Vec<u8>> = (0..9u8).map(|i| vec![i; 700]).collect();
        d.push(vec![9; 300]);
        d.push(vec![10; 1000]);
        d.extend((11..20u8).map(|i| vec![i; 64]));
        d.push(vec![20; 1]);
        d
    }

    /// RoCE datagrams sent and received with offload on both ends arrive exactly as
    /// built (ICRC of IP id 0): the sender gave segment j the ICRC of id j, the
    /// receiver turned it back when it split the coalesced buffer.
    #[test]
    fn roce_offload_round_trips_every_icrc() {
        use crate::wire::IcrcPath;
        let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        let mut tx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
        let mut rx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
        for s in [&mut tx, &mut rx] {
            s.set_carries_roce(true);
            s.enable_offload();
        }
        let path = IcrcPath::new(tx.local_addr(), rx.local_addr());
        let payload = [7u8; 256];
        let d: Vec<Vec<u8>> = (0..20u32)
            .map(|psn| write_datagram(&path, psn, 0x1000, &payload))
            .collect();
        let to = rx.local_addr();
        let batch: Vec<(&[u8], SocketAddrV4)> = d.iter().map(|b| (b.as_slice(), to)).collect();
        tx.send_batch(&batch).unwrap();
        let got = receive_all(&rx, d.len());
        assert_eq!(got, d);
        for g in &got {
            path.verify(g).unwrap();
        }
    }

    /// Every combination of sender and receiver offload delivers the same datagrams in
    /// the same order (a plain receiver gets them segmented by the kernel).
    #[test]
    fn offload_keeps_datagrams_and_order() {
        for (send_off, recv_off) in [(true, true), (true, false), (false, true)] {
            let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
            let mut tx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
            let mut rx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
            if send_off {
                eprintln!("offload on: {}", tx.enable_offload());
            }
            if recv_off {
                rx.enable_offload();
            }
            let d = datagrams();
            let to = rx.local_addr();
            let batch: Vec<(&[u8], SocketAddrV4)> = d.iter().map(|b| (b.as_slice(), to)).collect();
            let calls = tx.send_batch(&batch).unwrap();
            if tx.offload().0 {
                assert_eq!(calls, 1, "one sendmmsg for every run");
            }
            let got = receive_all(&rx, d.len());
            assert_eq!(
                got, d,
                "send offload {send_off}, receive offload {recv_off}"
            );
        }
    }

    /// A WRITE-only RoCE datagram of `payload` at `va` (queue pair 9, memory key 1),
    /// with the ICRC of `path`.
    fn write_datagram(path: &crate::wire::IcrcPath, psn: u32, va: u64, payload: &[u8]) -> Vec<u8> {
        use crate::wire::{BthRepr, Opcode, PacketRepr, RethRepr};
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, 9, psn, false));
        repr.reth = Some(RethRepr {
            va,
            rkey: 1,
            dma_len: payload.len() as u32,
        });
        repr.payload = payload;
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, path).unwrap();
        buf
    }

    fn roce_datagrams(path: &crate::wire::IcrcPath, n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|psn| write_datagram(path, psn, 0x2000, &[5u8; 128]))
            .collect()
    }

    /// The default mode: loopback sockets coalesce, and segment only the runs marked
    /// as going to a coalescing peer. Marked runs reach a coalescing receiver in one
    /// system call with every ICRC intact; unmarked runs reach a plain receiver (one
    /// that cannot see IP ids) intact too, because they were never segmented.
    #[test]
    fn auto_mode_segments_only_marked_runs_and_every_receiver_checks_clean() {
        use crate::wire::IcrcPath;
        let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        let mut tx = BatchSocket::bind_with(lo, OffloadMode::Auto).unwrap();
        let mut coalescing = BatchSocket::bind_with(lo, OffloadMode::Auto).unwrap();
        let mut plain = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
        for s in [&mut tx, &mut coalescing, &mut plain] {
            s.set_carries_roce(true);
        }
        if !tx.coalesces() {
            eprintln!("kernel without UDP_SEGMENT/UDP_GRO: nothing to check");
            return;
        }
        assert!(coalescing.coalesces() && !plain.coalesces());
        assert_eq!(
            tx.offload(),
            (false, true),
            "auto never segments unmarked runs"
        );
        assert!(tx.may_segment_to(coalescing.local_addr()));
        assert!(!tx.may_segment_to(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4791)));
        let off_lo = BatchSocket::bind_with(lo, OffloadMode::Auto).unwrap();
        let elsewhere = BatchSocket::bind_with(
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            OffloadMode::Auto,
        )
        .unwrap();
        assert!(
            off_lo.coalesces() && !elsewhere.coalesces(),
            "auto is loopback only"
        );

        // Marked: one send carries the whole run.
        let to = coalescing.local_addr();
        let path = IcrcPath::new(tx.local_addr(), to);
        let d = roce_datagrams(&path, 12);
        let batch: Vec<(&[u8], SocketAddrV4)> = d.iter().map(|b| (b.as_slice(), to)).collect();
        let calls = tx.send_batch_marked(&batch, &[true; 12]).unwrap();
        assert_eq!(calls, 1);
        let got = receive_all(&coalescing, d.len());
        assert_eq!(got, d);
        for g in &got {
            path.verify(g).unwrap();
        }

        // Unmarked, to a plain receiver: never segmented, every ICRC as built.
        let to = plain.local_addr();
        let path = IcrcPath::new(tx.local_addr(), to);
        let d = roce_datagrams(&path, 12);
        let batch: Vec<(&[u8], SocketAddrV4)> = d.iter().map(|b| (b.as_slice(), to)).collect();
        tx.send_batch(&batch).unwrap();
        let got = receive_all(&plain, d.len());
        assert_eq!(got, d);
        for g in &got {
            path.verify(g).unwrap();
        }

        // Mixed marks in one batch: only the marked stretch is one run.
        let to = coalescing.local_addr();
        let path = IcrcPath::new(tx.local_addr(), to);
        let d = roce_datagrams(&path, 6);
        let batch: Vec<(&[u8], SocketAddrV4)> = d.iter().map(|b| (b.as_slice(), to)).collect();
        tx.send_batch_marked(&batch, &[false, true, true, true, false, false])
            .unwrap();
        let got = receive_all(&coalescing, d.len());
        assert_eq!(got, d);
        for g in &got {
            path.verify(g).unwrap();
        }
    }

    #[test]
    fn offload_modes_parse_and_unknown_ones_explain() {
        for m in [OffloadMode::Off, OffloadMode::Auto, OffloadMode::All] {
            assert_eq!(m.name().parse::<OffloadMode>(), Ok(m));
        }
        assert_eq!("1".parse::<OffloadMode>(), Ok(OffloadMode::All));
        assert_eq!("false".parse::<OffloadMode>(), Ok(OffloadMode::Off));
        let err = "fast".parse::<OffloadMode>().unwrap_err();
        assert!(err.contains("auto") && err.contains("off"), "{err}");
    }

    /// A coalescing receiver hands out an empty datagram as one datagram of length
    /// 0, like a plain one (nothing is lost on the way to the caller's accounting).
    #[test]
    fn coalescing_receiver_hands_out_empty_datagrams() {
        let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        let mut rx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
        rx.enable_coalescing();
        let tx = std::net::UdpSocket::bind(lo).unwrap();
        for payload in [&b""[..], b"x", b"", b"yz"] {
            tx.send_to(payload, rx.local_addr()).unwrap();
        }
        let mut bufs: Vec<Vec<u8>> = (0..2).map(|_| vec![0u8; 64]).collect();
        let mut meta = Vec::new();
        let mut lens = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while lens.len() < 4 && Instant::now() < deadline {
            if !rx.wait_readable(Some(Duration::from_millis(50))).unwrap() {
                continue;
            }
            rx.recv_batch(&mut bufs, &mut meta).unwrap();
            lens.extend(meta.iter().map(|(len, _)| *len));
        }
        assert_eq!(lens, vec![0, 1, 0, 2]);
    }

    /// More datagrams than one round of the segmented send holds, runs crossing the
    /// round's boundary, lengths changing and marks switching on and off: all arrive,
    /// in order, with every ICRC right for the header a UDP socket reads.
    #[test]
    fn long_batches_split_into_rounds_keep_order_and_icrcs() {
        use crate::wire::IcrcPath;
        let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        let mut tx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
        let mut rx = BatchSocket::bind_with(lo, OffloadMode::Off).unwrap();
        if !(tx.enable_coalescing() && rx.enable_coalescing()) {
            eprintln!("kernel without UDP_SEGMENT/UDP_GRO: nothing to check");
            return;
        }
        tx.set_carries_roce(true);
        rx.set_carries_roce(true);
        let to = rx.local_addr();
        let path = IcrcPath::new(tx.local_addr(), to);
        let mut d = roce_datagrams(&path, 75);
        // A longer datagram every 20th breaks runs; its ICRC is rebuilt after the edit.
        for (i, b) in d.iter_mut().enumerate() {
            if i % 20 == 19 {
                *b = write_datagram(&path, i as u32, 0x3000, &[9u8; 300]);
            }
        }
        let marks: Vec<bool> = (0..75).map(|i| i % 23 != 5).collect();
        let batch: Vec<(&[u8], SocketAddrV4)> = d.iter().map(|b| (b.as_slice(), to)).collect();
        let before = tx.segmented_datagrams();
        tx.send_batch_marked(&batch, &marks).unwrap();
        assert!(
            tx.segmented_datagrams() > before,
            "some runs were segmented"
        );
        let got = receive_all(&rx, d.len());
        assert_eq!(got.len(), d.len());
        assert_eq!(got, d);
        for g in &got {
            path.verify(g).unwrap();
        }
    }
}
