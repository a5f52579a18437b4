//! The benchmark's components in processes of their own: this program started again
//! as `zero-bench serve memnode|switch`, announcing where it serves on one line of
//! JSON and serving until its standard input closes.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

use serde::{Deserialize, Serialize};

/// What a component announces once it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announcement {
    /// Its admin URL.
    pub admin_url: String,
}

/// A component running in a child process; stopped when dropped.
#[derive(Debug)]
pub struct Component {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its announcement.
    pub announced: Announcement,
    /// What it is, for messages.
    pub role: String,
}

impl Component {
    /// Starts `program serve ROLE ARGS…` and waits for its announcement.
    pub fn start(program: &PathBuf, role: &str, args: &[String]) -> Result<Component, String> {
        let mut child = Command::new(program)
            .arg("serve")
            .arg(role)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the {role}: {e}"))?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err(format!("the {role} has no standard output"));
        };
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let announced = match read {
            Ok(n) if n > 0 => serde_json::from_str::<Announcement>(line.trim())
                .map_err(|e| format!("the {role} announced {line:?}: {e}")),
            Ok(_) => Err(format!("the {role} exited before it served")),
            Err(e) => Err(format!("reading the {role}'s announcement: {e}")),
        };
        match announced {
            Ok(announced) => Ok(Component {
                child,
                stdin,
                announced,
                role: role.to_owned(),
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        // Closing standard input asks it to stop; a kill makes sure.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the child: announce `admin_url`, then block until standard input closes.
pub fn announce_and_serve(admin_url: String) -> Result<(), String> {
    let line = serde_json::to_string(&Announcement { admin_url }).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);
    let mut sink = String::new();
    let stdin = std::io::stdin();
    loop {
        sink.clear();
        match stdin.lock().read_line(&mut sink) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(_) => {}
        }
    }
}
