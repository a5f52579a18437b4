//! Waiting on several sockets at once: one `ppoll` over every socket a thread serves,
//! so a middlebox with two ports sleeps in one place and wakes for either.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::BatchSocket;

/// Wait until at least one of `sockets` is readable or `timeout` passes (`None`:
/// forever); first busy-poll for up to `spin` (yielding the processor between looks,
/// so a spinning thread gives way to whatever else is runnable). Returns which
/// sockets are readable; all `false` when the time ran out.
pub fn wait_readable_any<const N: usize>(
    sockets: [&BatchSocket; N],
    timeout: Option<Duration>,
    spin: Duration,
) -> io::Result<[bool; N]> {
    let pending = sockets.map(BatchSocket::has_pending);
    if pending.iter().any(|p| *p) {
        return Ok(pending);
    }
    let mut fds = sockets.map(|s| libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    if !spin.is_zero() {
        let start = Instant::now();
        let limit = timeout.map_or(spin, |t| t.min(spin));
        while start.elapsed() < limit {
            if poll(&mut fds, Some(Duration::ZERO))? {
                return Ok(fds.map(|f| f.revents != 0));
            }
            std::thread::yield_now();
        }
    }
    if poll(&mut fds, timeout)? {
        Ok(fds.map(|f| f.revents != 0))
    } else {
        Ok([false; N])
    }
}

/// One `ppoll` over `fds`; `true` when any has events (`revents` filled in).
fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<bool> {
    for f in fds.iter_mut() {
        f.revents = 0;
    }
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live slice of pollfds of the advertised length; `ts_ptr` is
    // null or points at `ts`, alive for the call.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(err);
    }
    Ok(rc > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn bound() -> BatchSocket {
        BatchSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap()
    }

    #[test]
    fn says_which_socket_has_datagrams() {
        let (a, b, tx) = (bound(), bound(), bound());
        let idle = wait_readable_any([&a, &b], Some(Duration::from_millis(5)), Duration::ZERO);
        assert_eq!(idle.unwrap(), [false, false]);
        tx.send_batch(&[(b"x", b.local_addr())]).unwrap();
        let ready = wait_readable_any([&a, &b], Some(Duration::from_secs(5)), Duration::ZERO);
        assert_eq!(ready.unwrap(), [false, true]);
        tx.send_batch(&[(b"y", a.local_addr())]).unwrap();
        let spun = wait_readable_any(
            [&a, &b],
            Some(Duration::from_secs(5)),
            Duration::from_millis(50),
        );
        assert_eq!(spun.unwrap(), [true, true]);
    }
}
