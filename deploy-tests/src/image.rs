//! Building the repository's container image and running what it carries, for
//! `tests/image.rs`: which container engine answers here (docker, podman or buildah),
//! the binaries the Dockerfile copies in, and the engine commands, each with a time
//! limit.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The engines tried, in order.
pub const ENGINES: [&str; 3] = ["docker", "podman", "buildah"];

/// The Dockerfile's last stage, the image a deployment runs.
pub const RUNTIME_STAGE: &str = "runtime";

/// The numeric user the image runs as (the chart's `runAsUser`).
pub const IMAGE_UID: &str = "10001";

/// A container engine that answered `info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    /// Its command (`docker`, `podman`, `buildah`, or a path).
    pub program: String,
}

/// Whether `DMKV_REQUIRE_IMAGE=1`: no working engine then fails the image test instead
/// of skipping it.
pub fn image_required() -> bool {
    std::env::var("DMKV_REQUIRE_IMAGE").is_ok_and(|v| v == "1")
}

/// The first of `candidates` whose `info` succeeds within 60 s, or why none did (one
/// reason per candidate).
pub fn find_engine(candidates: &[&str]) -> Result<Engine, String> {
    let mut why = Vec::new();
    for program in candidates {
        let mut cmd = Command::new(program);
        cmd.arg("info");
        match run(cmd, Duration::from_secs(60)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                why.push(format!("no {program}"));
            }
            Err(e) => why.push(format!("`{program} info` could not run: {e}")),
            Ok(out) if out.status.success() => {
                return Ok(Engine {
                    program: (*program).to_owned(),
                });
            }
            Ok(out) => {
                // The error is on standard error; standard output may hold the
                // client's half of the answer.
                let last = |b: &[u8]| {
                    String::from_utf8_lossy(b)
                        .lines()
                        .rfind(|l| !l.trim().is_empty())
                        .map(|l| l.trim().to_owned())
                };
                let line = last(&out.stderr)
                    .or_else(|| last(&out.stdout))
                    .unwrap_or_else(|| out.status.to_string());
                why.push(format!("`{program} info` failed: {line}"));
            }
        }
    }
    Err(why.join("; "))
}

/// The binaries the Dockerfile's build stage copies out (`for bin in …; do cp`).
pub fn copied_binaries(dockerfile: &str) -> Result<Vec<String>, String> {
    let joined = dockerfile.replace("\\\n", " ");
    let at = joined
        .find("for bin in ")
        .ok_or("the Dockerfile copies no binaries (`for bin in …; do cp`)")?
        + "for bin in ".len();
    let end = joined[at..].find(';').ok_or("`for bin in …` has no `;`")? + at;
    let bins: Vec<String> = joined[at..end]
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    if bins.is_empty() {
        return Err("`for bin in` names no binary".to_owned());
    }
    Ok(bins)
}

/// Runs `cmd` with no input, capturing its output; kills it after `limit`.
pub fn run(mut cmd: Command, limit: Duration) -> std::io::Result<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Drain both pipes on their own threads so that a chatty child cannot block.
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{cmd:?} ran longer than {limit:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok(Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    })
}

impl Engine {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(args);
        cmd
    }

    fn is_buildah(&self) -> bool {
        Path::new(&self.program)
            .file_name()
            .is_some_and(|n| n == "buildah")
    }

    /// Builds the Dockerfile's `stage` from the context `root` as `tag`.
    pub fn build(&self, root: &Path, stage: &str, tag: &str) -> Result<(), String> {
        let context = root.display().to_string();
        let sub = if self.is_buildah() { "bud" } else { "build" };
        let cmd = self.command(&[sub, "--target", stage, "-t", tag, &context]);
        check(cmd, Duration::from_secs(3 * 3600)).map(|_| ())
    }

    /// Runs `argv` in a fresh container of `image` and returns its output (standard
    /// output, then standard error).
    pub fn run_in(&self, image: &str, argv: &[&str]) -> Result<String, String> {
        if !self.is_buildah() {
            let mut args = vec!["run", "--rm", image];
            args.extend_from_slice(argv);
            return check(self.command(&args), Duration::from_secs(300));
        }
        let container = check(self.command(&["from", image]), Duration::from_secs(300))?;
        let container = container.trim().to_owned();
        let mut args = vec!["run", container.as_str(), "--"];
        args.extend_from_slice(argv);
        let out = check(self.command(&args), Duration::from_secs(300));
        let _ = run(self.command(&["rm", &container]), Duration::from_secs(120));
        out
    }

    /// Removes `image` (best effort).
    pub fn remove_image(&self, image: &str) {
        let _ = run(
            self.command(&["rmi", "-f", image]),
            Duration::from_secs(300),
        );
    }
}

/// Runs `cmd`; its output when it succeeds, else why not (with the output's tail).
fn check(cmd: Command, limit: Duration) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out = run(cmd, limit).map_err(|e| format!("{shown}: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        let tail: String = text
            .chars()
            .rev()
            .take(4000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(format!("{shown} failed ({}):\n{tail}", out.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dockerfile_names_the_binaries_it_copies() {
        let text = "RUN cargo build \\\n && for bin in memnode metadata dmkv; do cp \"$bin\" /out/; done\n";
        assert_eq!(
            copied_binaries(text).unwrap(),
            ["memnode", "metadata", "dmkv"]
        );
        assert!(copied_binaries("FROM x\n").is_err());
        assert!(copied_binaries("for bin in ; do").is_err());
    }

    #[test]
    fn missing_engines_are_named_in_the_reason() {
        let e = find_engine(&["dmkv-no-such-engine-a", "dmkv-no-such-engine-b"]).unwrap_err();
        assert_eq!(e, "no dmkv-no-such-engine-a; no dmkv-no-such-engine-b");
    }

    #[test]
    fn an_engine_whose_info_fails_is_not_used() {
        // `false info` exits 1: a command that is there but does not work.
        let e = find_engine(&["false"]).unwrap_err();
        assert!(e.starts_with("`false info` failed"), "{e}");
        assert_eq!(
            find_engine(&["true"]).unwrap(),
            Engine {
                program: "true".into()
            }
        );
    }

    #[test]
    fn runs_are_cut_off_at_their_limit() {
        let mut cmd = Command::new("sleep");
        cmd.arg("5");
        let started = Instant::now();
        let e = run(cmd, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
