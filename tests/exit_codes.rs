//! One exit-code rule (issue 22): what the caller typed is wrong → exit 2 with a typed code;
//! the daemon refusing a well-formed request → exit 1; every error carries a remedy; the
//! user's situations get their own codes instead of `internal`; bare `maxx` is help.

use crate::common::{maxx_bin, Daemon};
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// Exit code and the one JSON error on stderr (stdout must be empty).
fn refused(d: &Daemon, args: &[&str]) -> (i32, Value) {
    let out = d.cli(args);
    assert!(
        out.stdout.is_empty(),
        "{args:?}: stdout is empty on failure"
    );
    let err: Value = serde_json::from_slice(&out.stderr)
        .unwrap_or_else(|_| panic!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        err["error"]["remedy"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{args:?}: every error carries a remedy: {err}"
    );
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn what_the_caller_typed_is_exit_2_and_a_refusal_of_a_good_request_is_exit_1() {
    let d = Daemon::start();
    let id = d.create(json!({"command": "sleep 60"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let long = "s".repeat(129);
    for (args, code) in [
        (vec!["sessions", "get", "not-an-id"], "invalid_request"),
        (
            vec![
                "sessions",
                "wait",
                &id,
                "--lifecycle",
                "exited",
                "--timeout",
                "2h",
            ],
            "invalid_request",
        ),
        (
            vec!["sessions", "set-state", &id, "--state", "done"],
            "invalid_request",
        ),
        (
            vec![
                "stream",
                "wait",
                "--group",
                "g",
                "--all",
                "declared:done",
                "--timeout",
                "1s",
            ],
            "invalid_request",
        ),
        (
            vec!["sessions", "update", &id, "--status", &long],
            "invalid_request",
        ),
    ] {
        let (exit, err) = refused(&d, &args);
        assert_eq!(exit, 2, "{args:?}: {err}");
        assert_eq!(err["error"]["code"], code, "{args:?}");
    }
    // Well-formed, refused by the daemon: exit 1.
    let (exit, err) = refused(&d, &["sessions", "get", "%nobody"]);
    assert_eq!(
        (exit, err["error"]["code"].as_str()),
        (1, Some("not_found"))
    );
    d.ok("sessions.cancel", json!({"session_id": id}));
    let (exit, err) = refused(&d, &["sessions", "paste", &id, "x"]);
    assert_eq!(
        (exit, err["error"]["code"].as_str()),
        (1, Some("already_ended"))
    );
    // Over the socket, an error with no remedy of its own gets its code's.
    let r = d.call("sessions.bogus", json!({}));
    assert!(r["error"]["remedy"].is_string(), "{r}");
}

#[test]
fn an_insecure_control_dir_is_its_own_error_and_starts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ctl");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(maxx_bin())
        .args(["sessions", "create", "--command", "true"])
        .env("MAXX_CONTROL_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "unsafe_control_dir", "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("700"));
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "no daemon was started there and nothing was written"
    );
    // The daemon refuses it the same way.
    let out = Command::new(maxx_bin())
        .args(["daemon"])
        .env("MAXX_CONTROL_DIR", &dir)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("\"unsafe_control_dir\""), "{text}");
    assert!(
        !text.contains('\x1b'),
        "no colour when stderr is not a terminal: {text}"
    );
}

#[test]
fn bare_maxx_prints_help_to_stdout_and_exits_0() {
    for args in [vec![], vec!["stream"], vec!["policy"]] {
        let out = Command::new(maxx_bin()).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Usage:"), "{args:?}: {help}");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
    // A real usage error is still one JSON error, exit 2.
    let out = Command::new(maxx_bin())
        .args(["sessions", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
