//! Discovery for programs (issue 21): `maxx whoami` (who the daemon takes the caller for,
//! never the token) and `maxx --capabilities --json` (what this build offers, no daemon).

use crate::common::{maxx_bin, Daemon};
use serde_json::Value;
use std::process::Command;

#[test]
fn whoami_names_the_resolved_source_and_the_peer_and_never_the_token() {
    let d = Daemon::start();
    let token = d.token();
    for (args, source, known) in [
        (vec!["whoami"], "local-cli", true),
        (
            vec!["--as", "readonly-external", "whoami"],
            "readonly-external",
            true,
        ),
        (vec!["--as", "nobody-here", "whoami"], "nobody-here", false),
    ] {
        let out = d.cli(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains(token.trim()), "the token never appears");
        let v: Value = serde_json::from_str(&text).unwrap();
        let r = &v["result"];
        assert_eq!(r["source"], source, "{v}");
        assert_eq!(r["source_known"], known, "{v}");
        // SAFETY: plain getter.
        assert_eq!(r["peer"]["uid"], unsafe { libc::geteuid() });
        assert_eq!(r["daemon"]["pid"], d.pid());
        let control_dir = d.socket().parent().unwrap().display().to_string();
        assert_eq!(r["control_dir"], control_dir.as_str());
    }
}

#[test]
fn capabilities_list_this_builds_methods_commands_and_tools_without_a_daemon() {
    let out = Command::new(maxx_bin())
        .args(["--capabilities", "--json"])
        .env("MAXX_CONTROL_DIR", "/nonexistent/maxx-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let methods: Vec<&str> = v["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    for m in [
        "sessions.create",
        "sessions.ask",
        "daemon.whoami",
        "daemon.stop",
    ] {
        assert!(methods.contains(&m), "{m}");
    }
    let create = &v["methods"][0];
    assert_eq!(create["capabilities"][0], "tabs:spawn", "{create}");
    let commands: Vec<&str> = v["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for c in ["sessions create", "daemon stop", "whoami", "mcp", "proxy"] {
        assert!(commands.contains(&c), "{c}: {commands:?}");
    }
    // Issue 24: the remote flags and the fleet views, for a program to probe.
    assert_eq!(v["remote"]["transport"], "ssh HOST maxx proxy", "{v}");
    assert!(v["remote"]["fleet_commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "stream watch"));
    assert!(v["mcp_tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["tool"] == "create" && t["method"] == "sessions.create"));
}
