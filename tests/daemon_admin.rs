//! Managing the daemon from the CLI (issue 22): `daemon stop` (a clean stop, waited for),
//! `daemon reload` and SIGHUP (the policy file read again, a refused file keeps the policy in
//! force), `daemon status`.

use crate::common::{wait_for, Daemon};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn daemon_with_policy(policy: &Value) -> (Daemon, PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("policy.json");
    std::fs::write(&file, policy.to_string()).unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", file.display().to_string())]);
    (d, file, tmp)
}

fn agent(id: &str) -> Value {
    json!({"id": id, "kind": "token", "allow": ["tabs:list"], "confirm": [], "confirm_scope": "always"})
}

fn cli_json(d: &Daemon, args: &[&str]) -> (i32, Value) {
    let out = d.cli(args);
    let text = if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    };
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(text).unwrap_or(Value::Null),
    )
}

#[test]
fn stop_ends_the_daemon_and_its_sessions_cleanly_and_waits_for_it() {
    let mut d = Daemon::start();
    let v = d.create(json!({"command": "sleep 300"}));
    let pid = v["pid"].as_u64().unwrap();
    // A source without tabs:close may not stop it.
    let (code, err) = cli_json(&d, &["--as", "readonly-external", "daemon", "stop"]);
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (1, Some("unauthorized")),
        "{err}"
    );
    assert!(d.alive());
    let (code, out) = cli_json(&d, &["daemon", "stop"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["result"]["stopping"], true);
    // By the time the CLI returns, the daemon is gone: no polling on the test's side.
    assert!(
        !d.alive(),
        "the daemon still runs after daemon stop returned"
    );
    assert!(!d.socket().exists(), "its socket is removed");
    assert!(!d.path("daemon.pid").exists());
    wait_for(
        "the session's program to end",
        Duration::from_secs(10),
        || (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(()),
    );
    // Nothing to stop now: no daemon (exit 3).
    let (code, err) = cli_json(&d, &["daemon", "stop"]);
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (3, Some("no_daemon"))
    );
}

#[test]
fn reload_applies_the_file_reports_what_changed_and_keeps_the_policy_when_refused() {
    let (d, file, _tmp) = daemon_with_policy(&json!({"version": 1, "sources": [agent("a")]}));
    let list_as = |who: &str| d.call_as(who, "sessions.list", json!({}))["ok"] == true;
    assert!(list_as("a"));
    assert!(!list_as("b"), "b is not a source yet");

    std::fs::write(
        &file,
        json!({"version": 1, "sources": [agent("b")]}).to_string(),
    )
    .unwrap();
    let (code, out) = cli_json(&d, &["daemon", "reload"]);
    assert_eq!(code, 0, "{out}");
    let r = &out["result"]["policy"];
    assert_eq!(r["applied"], true, "{out}");
    assert_eq!(r["added"], json!(["b"]));
    assert_eq!(r["removed"], json!(["a"]));
    assert_eq!(r["config"]["status"], "loaded");
    assert!(list_as("b") && !list_as("a"));

    // A broken file is refused with its reasons, and the policy in force stays.
    std::fs::write(
        &file,
        r#"{"version": 1, "sources": [{"id": "c", "alow": []}]}"#,
    )
    .unwrap();
    let (code, out) = cli_json(&d, &["daemon", "reload"]);
    assert_eq!(code, 0, "{out}");
    let r = &out["result"]["policy"];
    assert_eq!(r["applied"], false, "{out}");
    assert_eq!(r["config"]["status"], "rejected");
    assert!(!r["config"]["reasons"].as_array().unwrap().is_empty());
    assert!(list_as("b"), "the previous policy is still in force");
    let sources = d.ok("policy.sources", json!({}));
    assert_eq!(sources["config"]["status"], "loaded", "{sources}");

    // SIGHUP does the same.
    std::fs::write(
        &file,
        json!({"version": 1, "sources": [agent("c")]}).to_string(),
    )
    .unwrap();
    // SAFETY: signalling the test's own daemon.
    unsafe { libc::kill(d.pid() as i32, libc::SIGHUP) };
    wait_for(
        "SIGHUP to reload the policy",
        Duration::from_secs(10),
        || list_as("c").then_some(()),
    );
    assert!(!list_as("b"));

    // `daemon status` is `status`.
    let out = d.cli(&["daemon", "status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("maxx "), "{text}");
}

/// Under systemd (`Type=notify`, `contrib/maxx.service`) the daemon says it is ready once it
/// serves, on `$NOTIFY_SOCKET`.
#[test]
fn a_notify_unit_hears_ready_once_the_socket_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("notify");
    let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let d = Daemon::start_with_env(&[("NOTIFY_SOCKET", path.display().to_string())]);
    let mut buf = [0u8; 256];
    let n = listener.recv(&mut buf).expect("READY=1 within 10 s");
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(text.starts_with("READY=1\n"), "{text}");
    assert!(text.contains(&format!("MAINPID={}", d.pid())), "{text}");
    // It was sent once the daemon serves: a request is answered.
    assert_eq!(d.call("daemon.status", json!({}))["ok"], true);
}
