//! `maxx mcp` (issue 21): driven by a real MCP client no one here wrote, the official Python
//! SDK (`mcp` on PyPI), which `.ci/run` installs into a virtualenv; and its catalog checked
//! against `docs/agents.md`.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The policy source the MCP server acts as: allowed the loop (screen reads included), and
/// nothing that closes a session, which a `local` source must then have confirmed.
const AGENT: &str = "mcp-agent";

/// The virtualenv's python: `$MAXX_TEST_MCP_PYTHON`, else `target/ci-venv/bin/python`
/// (where `.ci/run` installs the SDK). `None` if it is missing or has no `mcp` package.
fn python() -> Option<PathBuf> {
    let path = std::env::var_os("MAXX_TEST_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/target/ci-venv/bin/python"
            ))
        });
    let imports = Command::new(&path)
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    imports.is_ok_and(|s| s.success()).then_some(path)
}

fn catalog() -> Value {
    let out = Command::new(maxx_bin())
        .args(["mcp", "--schema"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("--schema prints JSON")
}

/// create -> send_keys -> wait --until -> snapshot -> set_result -> get through the SDK; a
/// confirmation and a denial come back as tool errors with the maxx code; a cancelled long
/// wait ends on the daemon (its waiter and long-lived slot go back to 0).
#[test]
fn the_python_sdk_drives_maxx_mcp() {
    let Some(python) = python() else {
        skip_or_fail(
            "no virtualenv with the `mcp` package at target/ci-venv (`.ci/run` installs it; \
             or set MAXX_TEST_MCP_PYTHON)",
        );
        return;
    };
    let policy_dir = tempfile::Builder::new()
        .prefix("maxx-mcp")
        .tempdir()
        .unwrap();
    let policy = policy_dir.path().join("policy.json");
    std::fs::write(
        &policy,
        json!({"version": 1, "sources": [{
            "id": AGENT, "kind": "local",
            "allow": ["tabs:spawn", "tabs:list", "input:send", "keys:press", "output:read",
                      "state:set", "metadata:set"],
            "confirm": [], "confirm_scope": "always"
        }]})
        .to_string(),
    )
    .unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", policy.display().to_string())]);

    let mut child = Command::new(&python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py"))
        .env("MAXX_BIN", maxx_bin())
        .env("MAXX_CONTROL_DIR", &d.control)
        .env("MAXX_MCP_AS", AGENT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the Python client");
    let mut to_client = child.stdin.take().unwrap();
    let (tx, lines) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("client.py: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut until = |want: &str| loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line == want => return,
            Ok(line) => seen.push(line),
            Err(e) => panic!("client.py never said {want} ({e}); it said {seen:?}"),
        }
    };

    until("WAITING");
    // The wait reached the daemon: one waiter, one long-lived slot.
    d.wait_stat("waiters", 1);
    d.wait_stat("long_lived", 1);
    writeln!(to_client, "cancel").unwrap();
    until("CANCELLED");
    // Cancelled by the client: the server closed the socket and the daemon let go.
    d.wait_stat("waiters", 0);
    d.wait_stat("long_lived", 0);
    writeln!(to_client, "done").unwrap();
    until("PASS");
    let status = child.wait().unwrap();
    assert!(status.success(), "client.py: {status}");
}

/// `docs/agents.md`'s tool table is the catalog's: every tool one row, with its method and
/// capabilities as `maxx mcp --schema` prints them, and no row for a tool that is gone.
#[test]
fn the_agents_doc_tool_table_is_the_catalog() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agents.md"))
        .expect("docs/agents.md");
    let start = doc
        .find("| tool | method | capability |")
        .expect("the tool table is in docs/agents.md");
    let rows: Vec<Vec<String>> = doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            row.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let catalog = catalog();
    let tools = catalog["tools"].as_array().unwrap();
    let expected: Vec<Vec<String>> = tools
        .iter()
        .map(|t| {
            let caps: Vec<String> = t["capabilities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| format!("`{}`", c.as_str().unwrap()))
                .collect();
            let mut cell = if caps.is_empty() {
                "none".to_string()
            } else {
                caps.join(", ")
            };
            if let Some(more) = t["more_capabilities"].as_str() {
                cell = format!("{cell} ({more})");
            }
            vec![
                format!("`{}`", t["name"].as_str().unwrap()),
                format!("`{}`", t["method"].as_str().unwrap()),
                cell,
            ]
        })
        .collect();
    assert_eq!(
        rows, expected,
        "docs/agents.md's tool table (left) must match `maxx mcp --schema` (right)"
    );
}

/// The catalog, the guide and the one flag `maxx mcp` refuses.
#[test]
fn schema_skill_and_no_confirm() {
    let catalog = catalog();
    assert_eq!(catalog["protocol_version"], "2025-11-25");
    for t in catalog["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()));
    }
    let wait = catalog["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "wait")
        .unwrap();
    for mode in ["lifecycle", "state", "event", "until", "regex", "timeout"] {
        assert!(
            wait["inputSchema"]["properties"].get(mode).is_some(),
            "wait takes {mode}"
        );
    }

    let skill = Command::new(maxx_bin())
        .args(["mcp", "--skill"])
        .output()
        .unwrap();
    assert!(skill.status.success());
    let text = String::from_utf8(skill.stdout).unwrap();
    for part in [
        "read -> act -> wait -> read",
        "`run` or `send_keys` + `wait`",
        "never infers",
    ] {
        assert!(text.contains(part), "--skill covers {part}");
    }

    let confirm = Command::new(maxx_bin())
        .args(["--confirm", "mcp"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(confirm.status.code(), Some(2), "{confirm:?}");
    assert!(confirm.stdout.is_empty());
    let err: Value = serde_json::from_slice(&confirm.stderr).unwrap();
    assert_eq!(err["error"]["code"], "invalid_request");
}
