//! The `accel-p4` binary: help, `gen-spec`, `stf`, and `serve` answering on its admin
//! port and stopping on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_accel-p4"))
}

#[test]
fn gen_spec_prints_the_committed_include() {
    let out = bin().arg("gen-spec").output().expect("run");
    assert!(out.status.success());
    let committed =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/p4/include/spec.p4")).expect("spec.p4");
    assert_eq!(out.stdout, committed);
}

#[test]
fn stf_runs_a_vector_file_and_reports_failures() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/atomics_cas_answered.stf"
    );
    let out = bin().args(["stf", file]).output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.stf");
    std::fs::write(&bad, "register mode 0 0\npacket 0 00\nexpect 0 00\n").expect("write");
    let out = bin().arg("stf").arg(&bad).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 3"));
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    let help = bin().args(["serve", "--help"]).output().expect("run");
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--client-side",
        "--memnode-side",
        "--admin",
        "--mode",
        "--state-file",
    ] {
        assert!(text.contains(flag), "{flag} missing:\n{text}");
    }
    // Without the memory node admin token (which also guards the admin API) the
    // switch refuses to start, naming the way out.
    let refused = bin()
        .args(["serve", "--admin", "127.0.0.1:0"])
        .env_remove("DMKV_MEMNODE_ADMIN_TOKEN")
        .env_remove("DMKV_SWITCH_INSECURE_NO_AUTH")
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("--memnode-token-file") && err.contains("--insecure-no-auth"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("memnode.token");
    let token = "binary-test-memnode-admin-token";
    std::fs::write(&token_file, format!("{token}\n")).expect("token file");
    let mut child = bin()
        .args([
            "serve",
            "--client-side",
            "127.0.0.1:0",
            "--memnode-side",
            "127.0.0.1:0",
        ])
        .args(["--admin", "127.0.0.1:0", "--mode", "switch_atomics"])
        .arg("--memnode-token-file")
        .arg(&token_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("banner");
    let admin = line
        .split("admin ")
        .nth(1)
        .expect("admin URL in the banner")
        .trim()
        .to_owned();
    let call = |credential: Option<&str>, method: &'static str, path: &str| {
        dmkv_api::HttpClient::new(&admin)
            .expect("client")
            .with_token(credential.map(str::to_owned))
            .request(method, path, None)
            .expect("request")
    };
    // Health and metrics are open; everything else needs the token.
    assert_eq!(call(None, "GET", "/healthz").status, 200);
    assert_eq!(call(None, "GET", "/metrics").status, 200);
    for (method, path) in [
        ("GET", "/v1/mode"),
        ("GET", "/v1/tables"),
        ("POST", "/v1/qps"),
        ("PUT", "/v1/faults"),
        ("DELETE", "/v1/routes/1"),
    ] {
        let r = call(None, method, path);
        assert_eq!(r.status, 401, "{method} {path} without a credential");
        let r = call(Some("wrong-token"), method, path);
        assert_eq!(r.status, 401, "{method} {path} with a wrong credential");
    }
    let r = call(Some(token), "GET", "/v1/mode");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("switch_atomics"));
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc_kill(child.id() as i32, 15) };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(Instant::now() < deadline, "did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bad = bin()
        .args(["serve", "--mode", "bogus"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
