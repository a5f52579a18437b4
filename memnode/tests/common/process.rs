//! The real `memnode` binary in a child process: started on loopback with ephemeral ports,
//! ready once `/healthz` answers, and never outliving the test (SIGTERM on drop, then
//! SIGKILL if it does not stop).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddrV4;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the child may take to report its addresses and answer `/healthz`.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the child may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A running `memnode` child process.
pub struct MemnodeProcess {
    child: Option<Child>,
    /// The admin base URL, `http://127.0.0.1:port`.
    pub admin: String,
    /// The soft-RoCE UDP address.
    pub data: SocketAddrV4,
    log: Option<JoinHandle<String>>,
}

/// The value of `key=` in a log line (up to the next whitespace).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    Some(rest.split_whitespace().next().unwrap_or(rest))
}

impl MemnodeProcess {
    /// Starts `memnode --listen 127.0.0.1:0 --admin 127.0.0.1:0 --capacity <capacity>`
    /// plus `extra` arguments, and waits until it serves.
    pub fn start(capacity: &str, extra: &[&str]) -> MemnodeProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memnode"));
        for (k, _) in std::env::vars() {
            if k.starts_with("DMKV_MEMNODE_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("DMKV_MEMNODE_INSECURE_NO_AUTH", "true");
        cmd.env("RUST_LOG", "info")
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--capacity",
                capacity,
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the memnode binary");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        // Keeps draining the log so the child never blocks on a full pipe.
        let log = std::thread::spawn(move || {
            let mut all = String::new();
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("memnode serving soft RoCE")
                    && let (Some(data), Some(admin)) =
                        (field(&line, "data="), field(&line, "admin="))
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send((data.to_owned(), admin.to_owned()));
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut node = MemnodeProcess {
            child: Some(child),
            admin: String::new(),
            data: SocketAddrV4::new([0, 0, 0, 0].into(), 0),
            log: Some(log),
        };
        let Ok((data, admin)) = rx.recv_timeout(START_TIMEOUT) else {
            let (status, log) = node.kill();
            panic!("memnode did not report its addresses ({status:?}); log:\n{log}");
        };
        node.data = data
            .parse()
            .unwrap_or_else(|e| panic!("memnode reported data address {data:?}: {e}"));
        node.admin = admin;
        node.wait_healthy();
        node
    }

    /// Starts a node whose memory lives in the shared-memory file `path`.
    pub fn start_shm(capacity: &str, path: &Path) -> MemnodeProcess {
        let path = path.to_str().expect("UTF-8 temporary path");
        MemnodeProcess::start(capacity, &["--shm", path])
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match memnode::client::request(&self.admin, "GET", "/healthz", None) {
                Ok(r) if r.status == 200 => return,
                other if Instant::now() > deadline => {
                    let (status, log) = self.kill();
                    panic!(
                        "memnode at {} never answered /healthz with 200 (last: {other:?}, \
                         exit {status:?}); log:\n{log}",
                        self.admin
                    );
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends SIGTERM and waits for the child to exit; returns its status and log.
    /// Kills it if it does not stop within the timeout (and then panics).
    pub fn stop(mut self) -> (ExitStatus, String) {
        let Some(mut child) = self.child.take() else {
            panic!("memnode already stopped");
        };
        let status = terminate(&mut child);
        let log = self.take_log();
        match status {
            Some(s) => (s, log),
            None => {
                panic!("memnode ignored SIGTERM for {STOP_TIMEOUT:?} and was killed; log:\n{log}")
            }
        }
    }

    fn kill(&mut self) -> (Option<ExitStatus>, String) {
        let status = self.child.take().and_then(|mut c| {
            let _ = c.kill();
            c.wait().ok()
        });
        (status, self.take_log())
    }

    fn take_log(&mut self) -> String {
        self.log
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

/// SIGTERM, then wait; SIGKILL after [`STOP_TIMEOUT`]. `None` if it had to be killed.
fn terminate(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

impl Drop for MemnodeProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child);
        }
        // The reader thread ends with the child's stderr.
        let _ = self.take_log();
    }
}
