//! UDP sockets with datagram batching (`sendmmsg` / `recvmmsg`) where the OS offers them.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Datagrams moved per system call at most.
pub const BATCH: usize = 32;

/// A non-blocking IPv4 UDP socket that sends and receives in batches.
#[derive(Debug)]
pub struct BatchSocket {
    socket: UdpSocket,
    local: SocketAddrV4,
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

impl BatchSocket {
    /// Bind to `addr` (port 0 picks one). Sets DF (no fragmentation) like RoCE NICs.
    pub fn bind(addr: SocketAddrV4) -> io::Result<BatchSocket> {
        let socket = UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        let fd = socket.as_raw_fd();
        let val: libc::c_int = libc::IP_PMTUDISC_DO;
        // SAFETY: valid fd, pointer to a live c_int of the advertised size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                (&val as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            let size: libc::c_int = 4 << 20;
            // SAFETY: as above; failure only means a smaller buffer.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&size as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
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
        Ok(BatchSocket { socket, local })
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

    /// Send datagrams, as many per system call as possible. Returns how many calls it took.
    pub fn send_batch(&self, datagrams: &[(&[u8], SocketAddrV4)]) -> io::Result<usize> {
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
            let mut sent = 0usize;
            while sent < n {
                // SAFETY: valid fd; `msgs[sent..n]` are initialised headers whose pointers
                // refer to `addrs`, `iovs` and the caller's buffers, all alive for the call.
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
        loop {
            // SAFETY: valid fd, n initialised headers whose buffers are writable and alive.
            let rc = unsafe {
                libc::recvmmsg(
                    self.socket.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::WouldBlock => return Ok(0),
                    io::ErrorKind::Interrupted => continue,
                    // ICMP errors from earlier sends surface here on Linux: skip them.
                    io::ErrorKind::ConnectionRefused => continue,
                    _ => return Err(err),
                }
            }
            let got = rc as usize;
            for (m, a) in msgs.iter().zip(&addrs).take(got) {
                let truncated = m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
                // A truncated datagram is reported with length 0 so the caller drops it.
                let len = if truncated { 0 } else { m.msg_len as usize };
                out.push((len, from_sockaddr(a)));
            }
            return Ok(got);
        }
    }

    /// Wait until the socket is readable or `timeout` passes (None = forever).
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        self.poll_fd(libc::POLLIN, timeout)
    }

    /// Like [`BatchSocket::wait_readable`], but first busy-polls for up to `spin`.
    ///
    /// Sleeping in the kernel and being woken costs tens of microseconds on a loaded
    /// machine; an answer expected within a few microseconds is cheaper to spin for,
    /// as RDMA applications spin on their completion queues.
    pub fn wait_readable_spin(
        &self,
        timeout: Option<Duration>,
        spin: Duration,
    ) -> io::Result<bool> {
        if !spin.is_zero() {
            let start = std::time::Instant::now();
            let limit = timeout.map_or(spin, |t| t.min(spin));
            while start.elapsed() < limit {
                if self.poll_fd(libc::POLLIN, Some(Duration::ZERO))? {
                    return Ok(true);
                }
                std::thread::yield_now();
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
