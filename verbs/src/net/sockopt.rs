//! Setting a socket option: the one `setsockopt` call the sockets of this module make.

use std::io;

/// Set option `name` at `level` on `fd` to `value` (a plain C value of the size the
/// option expects: a `c_int`, a `sock_fprog`, …).
pub(crate) fn set<T>(
    fd: libc::c_int,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points at a live `T` of the advertised size for the whole call;
    // the kernel copies what it needs and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
