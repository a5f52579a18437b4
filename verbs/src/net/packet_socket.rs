//! A receive path that sees the real IPv4 header: an `AF_PACKET` socket on one
//! interface, filtered in the kernel to UDP datagrams for one port.
//!
//! A UDP socket hands out payloads only, so a RoCE responder behind one must assume
//! the IPv4 identification and flags its peer sent (id 0, DF: what Linux puts on a
//! datagram from an unconnected socket) when it checks the ICRC, which covers them.
//! It then drops valid packets from senders that number their datagrams (RoCE NICs,
//! scapy's defaults) and accepts packets whose ICRC is wrong for the header they
//! were sent with. Frames read here carry the header as sent, so the ICRC is checked
//! against it. Needs `CAP_NET_RAW`.

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `ETH_P_ALL`: every protocol (the filter narrows it down).
const ETH_P_ALL: u16 = 0x0003;

/// A non-blocking `AF_PACKET` socket receiving whole Ethernet frames that carry
/// IPv4/UDP datagrams (not fragments) for one destination port, as they arrived
/// (frames this host sends are skipped).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    interface: String,
    port: u16,
}

/// One classic BPF instruction (`struct sock_filter`).
fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The kernel filter: IPv4, UDP, not a fragment, destination port `port`.
fn port_filter(port: u16) -> [libc::sock_filter; 11] {
    const LDH_ABS: u16 = 0x28;
    const LDB_ABS: u16 = 0x30;
    const JEQ_K: u16 = 0x15;
    const JSET_K: u16 = 0x45;
    const LDXB_MSH: u16 = 0xb1;
    const LDH_IND: u16 = 0x48;
    const RET_K: u16 = 0x06;
    [
        insn(LDH_ABS, 0, 0, 12),            // EtherType
        insn(JEQ_K, 0, 8, 0x0800),          // IPv4?
        insn(LDB_ABS, 0, 0, 23),            // IP protocol
        insn(JEQ_K, 0, 6, 17),              // UDP?
        insn(LDH_ABS, 0, 0, 20),            // flags and fragment offset
        insn(JSET_K, 4, 0, 0x3FFF),         // MF or an offset: a fragment
        insn(LDXB_MSH, 0, 0, 14),           // X = IPv4 header length
        insn(LDH_IND, 0, 0, 16),            // UDP destination port
        insn(JEQ_K, 0, 1, u32::from(port)), // ours?
        insn(RET_K, 0, 0, 0x0004_0000),     // accept (up to 256 KiB)
        insn(RET_K, 0, 0, 0),               // drop
    ]
}

fn attach_filter(fd: libc::c_int, filter: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // `prog` points at `filter`, alive for the call; the kernel copies the program.
    super::sockopt::set(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

/// Make the kernel discard every datagram queued to `socket` (a UDP socket kept only
/// to send, and so that the port is taken and answers no ICMP "port unreachable"):
/// a filter that accepts nothing.
pub fn discard_incoming(socket: &impl AsRawFd) -> io::Result<()> {
    attach_filter(socket.as_raw_fd(), &[insn(0x06, 0, 0, 0)])
}

/// The interface that holds `addr` (`lo` for a loopback address), or `None` for the
/// unspecified address (every interface).
pub fn interface_of(addr: Ipv4Addr) -> io::Result<Option<String>> {
    if addr.is_unspecified() {
        return Ok(None);
    }
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family field is always valid.
            let family = unsafe { (*ifa.ifa_addr).sa_family };
            if i32::from(family) == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                if ip == addr || (addr.is_loopback() && ip.is_loopback()) {
                    // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                    let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
                    found = Some(name.to_string_lossy().into_owned());
                    break;
                }
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    match found {
        Some(name) => Ok(Some(name)),
        None => Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("no interface holds {addr}"),
        )),
    }
}

impl PacketSocket {
    /// Open a packet socket on `interface` (`None`: every interface) receiving the
    /// frames of UDP datagrams for `port`. Fails with `PermissionDenied` without
    /// `CAP_NET_RAW`.
    pub fn bind(interface: Option<&str>, port: u16) -> io::Result<PacketSocket> {
        // SAFETY: plain socket creation; the fd is owned right below.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL.to_be()),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Filter before binding, so no unfiltered frame is queued.
        attach_filter(fd.as_raw_fd(), &port_filter(port))?;
        let ifindex = match interface {
            None => 0,
            Some(name) => {
                let c = CString::new(name).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL")
                })?;
                // SAFETY: `c` is a valid NUL-terminated string.
                let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
                if index == 0 {
                    return Err(io::Error::last_os_error());
                }
                index as i32
            }
        };
        // SAFETY: all-zero is a valid sockaddr_ll; the fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: valid fd; `sll` is a sockaddr_ll of the advertised size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let size: libc::c_int = 8 << 20;
        // Failure only means a smaller buffer.
        let _ = super::sockopt::set(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &size);
        Ok(PacketSocket {
            fd,
            interface: interface.unwrap_or("any").to_owned(),
            port,
        })
    }

    /// The interface it listens on (`any` for every interface).
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The UDP destination port it receives.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Receive one frame into `buf` without blocking: its length, or `None` when no
    /// frame waits. Frames longer than `buf` come back truncated to `buf.len()`
    /// with their full length reported, so the caller can drop them. Frames this
    /// host sent (seen on the way out) are skipped.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: valid fd; `buf` is writable for its length; `from` is a live
            // sockaddr_ll of the advertised size.
            let rc = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut from_len,
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                return match err.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(err),
                };
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(rc as usize));
        }
    }

    /// Wait until a frame may be read or `timeout` passes (None = forever).
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_map_to_the_loopback_interface() {
        assert_eq!(interface_of(Ipv4Addr::UNSPECIFIED).unwrap(), None);
        assert_eq!(
            interface_of(Ipv4Addr::new(127, 0, 0, 1))
                .unwrap()
                .as_deref(),
            Some("lo")
        );
        assert!(interface_of(Ipv4Addr::new(192, 0, 2, 77)).is_err());
    }

    #[test]
    fn the_filter_ends_in_accept_and_drop() {
        let f = port_filter(4791);
        assert_eq!(f[8].k, 4791);
        assert_eq!((f[9].code, f[10].code, f[10].k), (0x06, 0x06, 0));
        // Every jump lands inside the program.
        for (i, ins) in f
            .iter()
            .enumerate()
            .filter(|(_, ins)| ins.code & 0x07 == 0x05)
        {
            assert!(i + 1 + usize::from(ins.jt) < f.len(), "{i}");
            assert!(i + 1 + usize::from(ins.jf) < f.len(), "{i}");
        }
    }
}
