//! Capability policy (issue 4) with real policy files on a real daemon.

use crate::common::*;
use crate::maxx_snapshot;
use serde_json::{json, Value};

fn daemon_with(policy: Value) -> Daemon {
    let tmp = tempfile::Builder::new()
        .prefix("maxx-pol")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("policy.json");
    std::fs::write(&file, policy.to_string()).unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", file.display().to_string())]);
    // Keep the file's dir alive as long as the daemon.
    std::mem::forget(tmp);
    d
}

fn daemon_with_raw(text: &str) -> Daemon {
    let tmp = tempfile::Builder::new()
        .prefix("maxx-pol")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("policy.json");
    std::fs::write(&file, text).unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", file.display().to_string())]);
    std::mem::forget(tmp);
    d
}

fn code(r: &Value) -> &str {
    r["error"]["code"].as_str().unwrap_or("ok")
}

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

#[test]
fn an_allowlisted_webhook_spawns_but_cannot_touch_what_it_was_not_given() {
    let d = daemon_with(json!({"version": 1, "sources": [{
        "id": "linear-webhook", "kind": "webhook",
        "allow": ["tabs:spawn", "groups:create", "state:set"], "confirm": [],
        "confirm_scope": "always"
    }]}));
    let created = d.call_as(
        "linear-webhook",
        "sessions.create",
        json!({
            "command": "sleep 60", "group": "release", "metadata": {"connector.id": "L-1"}
        }),
    );
    assert_eq!(created["ok"], true, "{created}");
    let id = sid(&created["result"]["session"]);
    // Create-time metadata rode on tabs:spawn; metadata:set afterwards is not granted.
    let r = d.call_as(
        "linear-webhook",
        "sessions.set-metadata",
        json!({"session_id": id, "key": "x", "value": "y"}),
    );
    assert_eq!(code(&r), "unauthorized");
    assert!(r["error"]["remedy"].is_string());
    let r = d.call_as(
        "linear-webhook",
        "sessions.cancel",
        json!({"session_id": id}),
    );
    assert_eq!(code(&r), "unauthorized");
    let r = d.call_as("linear-webhook", "sessions.get", json!({"session_id": id}));
    assert_eq!(code(&r), "unauthorized", "reads are not granted either");
    // Nothing changed.
    let v = d.get(&id);
    assert_eq!(v["metadata"], json!({"connector.id": "L-1"}));
    assert_eq!(v["lifecycle"], "running");
    // What it was given works.
    let r = d.call_as(
        "linear-webhook",
        "sessions.set-state",
        json!({"session_id": id, "state": "running"}),
    );
    assert_eq!(r["ok"], true);
}

#[test]
fn safe_defaults_for_built_in_and_unknown_sources() {
    let d = Daemon::start();
    let before = d.count();
    for (caller, method, params) in [
        ("nobody", "sessions.list", json!({})),
        (
            "readonly-external",
            "sessions.create",
            json!({"command": "true"}),
        ),
        (
            "readonly-external",
            "sessions.snapshot",
            json!({"session_id": "2B0E0000-0000-4000-8000-000000000000"}),
        ),
        ("LOCAL-CLI", "sessions.create", json!({"command": "true"})),
    ] {
        let r = d.call_as(caller, method, params);
        assert_eq!(code(&r), "unauthorized", "{caller} {method}: {r}");
    }
    assert_eq!(d.count(), before);
    let r = d.call_as("readonly-external", "sessions.list", json!({}));
    assert_eq!(r["ok"], true);
    let out = d.cli(&["--as", "nobody", "sessions", "create", "--command", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "unauthorized");
    assert_eq!(d.count(), before);
}

#[test]
fn an_unlisted_local_mutation_needs_confirmation() {
    let d = daemon_with(json!({"version": 1, "sources": [{
        "id": "local-bot", "kind": "local", "allow": ["tabs:list", "tabs:spawn"]
    }]}));
    let id = sid(&d.ok_as(
        "local-bot",
        "sessions.create",
        json!({"command": "sleep 60"}),
    )["session"]);
    let r = d.call_as("local-bot", "sessions.cancel", json!({"session_id": id}));
    assert_eq!(code(&r), "confirmation_required");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("local-bot") && msg.contains(&id),
        "the prompt names source and target: {msg}"
    );
    assert_eq!(d.get(&id)["lifecycle"], "running", "nothing happened");
    let out = d.cli(&["--as", "local-bot", "--confirm", "sessions", "cancel", &id]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(d.get(&id)["lifecycle"], "closed");
}

#[test]
fn once_per_source_asks_once() {
    let d = daemon_with(json!({"version": 1, "sources": [{
        "id": "runner", "kind": "token", "allow": ["tabs:list"], "confirm": ["tabs:spawn"],
        "confirm_scope": "once_per_source"
    }]}));
    let r = d.call_as("runner", "sessions.create", json!({"command": "true"}));
    assert_eq!(code(&r), "confirmation_required");
    assert_eq!(d.count(), 0);
    let req = json!({"token": d.token(), "method": "sessions.create", "params": {"command": "true"}, "caller": "runner", "confirm": true});
    assert_eq!(d.raw(format!("{req}\n").as_bytes())["ok"], true);
    let r = d.call_as("runner", "sessions.create", json!({"command": "true"}));
    assert_eq!(r["ok"], true, "asked only once: {r}");
    assert_eq!(d.count(), 2);
    let sources = d.ok("policy.sources", json!({}));
    assert_eq!(
        sources["approved_once"],
        json!([{"source": "runner", "capability": "tabs:spawn"}])
    );
}

#[test]
fn update_is_gated_by_metadata_set_or_state_set() {
    let d = daemon_with(json!({"version": 1, "sources": [
        {"id": "meta-only", "kind": "external", "allow": ["metadata:set"]},
        {"id": "state-only", "kind": "external", "allow": ["state:set"]}
    ]}));
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let up = |caller: &str, params: Value| {
        let mut p = params;
        p["session_id"] = json!(id);
        d.call_as(caller, "sessions.update", p)
    };
    assert_eq!(up("meta-only", json!({"metadata": {"a": 1}}))["ok"], true);
    assert_eq!(
        code(&up("meta-only", json!({"status": "x"}))),
        "unauthorized"
    );
    assert_eq!(
        code(&up(
            "meta-only",
            json!({"status": "x", "metadata": {"b": 1}})
        )),
        "unauthorized"
    );
    assert_eq!(
        code(&up("state-only", json!({"metadata": {"c": 1}}))),
        "unauthorized"
    );
    assert_eq!(
        up("state-only", json!({"status": "y", "metadata": {"d": 1}}))["ok"],
        true,
        "status is the stronger gate"
    );
    let v = d.get(&id);
    assert_eq!(v["status"], "y");
    assert_eq!(v["metadata"], json!({"a": 1, "d": 1}));
}

#[test]
fn parent_is_no_existence_oracle() {
    let d = daemon_with(json!({"version": 1, "sources": [
        {"id": "spawner", "kind": "external", "allow": ["tabs:spawn"]}
    ]}));
    let real = sid(&d.create(json!({"command": "sleep 60"})));
    for parent in [real.as_str(), "2B0E0000-0000-4000-8000-000000000000"] {
        let r = d.call_as(
            "spawner",
            "sessions.create",
            json!({"command": "true", "parent": parent}),
        );
        assert_eq!(
            code(&r),
            "unauthorized",
            "same answer whether {parent} exists or not"
        );
        let r = d.call_as(
            "spawner",
            "sessions.set-parent",
            json!({"session_id": real, "parent": parent}),
        );
        assert_eq!(code(&r), "unauthorized");
    }
    assert_eq!(d.count(), 1);
}

#[test]
fn malformed_configs_fall_back_to_the_built_ins() {
    let source = |id: &str, extra: Value| {
        let mut s = json!({"id": id, "kind": "webhook", "allow": ["tabs:spawn"]});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    let cases = [
        ("{not json".to_string(), "invalid JSON"),
        (json!({"version": 2, "sources": []}).to_string(), "version"),
        (
            json!({"version": 1, "sources": [source("local-cli", json!({}))]}).to_string(),
            "reserved",
        ),
        (
            json!({"version": 1, "sources": [source("dup", json!({})), source("dup", json!({}))]})
                .to_string(),
            "duplicate",
        ),
        (
            json!({"version": 1, "sources": [source("w", json!({"allow": ["tabs:teleport"]}))]})
                .to_string(),
            "tabs:teleport",
        ),
        (
            json!({"version": 1, "sources": [source("w", json!({"confirm": ["tabs:spawn"]}))]})
                .to_string(),
            "both allow and confirm",
        ),
    ];
    for (text, why) in cases {
        let d = daemon_with_raw(&text);
        let sources = d.ok("policy.sources", json!({}));
        assert_eq!(sources["config"]["status"], "rejected", "{text}");
        let reasons = sources["config"]["reasons"].to_string();
        assert!(
            reasons.to_lowercase().contains(&why.to_lowercase()),
            "{text}: {reasons}"
        );
        // Only the built-ins are active; the configured ids are unknown, so denied.
        assert!(sources["sources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["builtin"] == true));
        let r = d.call_as("w", "sessions.create", json!({"command": "true"}));
        assert_eq!(code(&r), "unauthorized");
        d.create(json!({"command": "true"}));
    }
}

#[test]
fn diagnostics_check_sources_and_validate() {
    let tmp = tempfile::Builder::new()
        .prefix("maxx-pol")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("p.json");
    std::fs::write(&file, json!({"version": 1, "sources": [{
        "id": "linear-webhook", "kind": "webhook", "allow": ["tabs:spawn", "groups:create", "state:set"],
        "confirm": [], "confirm_scope": "always"
    }]}).to_string()).unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", file.display().to_string())]);
    let check = |args: &[&str]| -> Value {
        let out = d.cli(args);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let c = check(&[
        "policy",
        "check",
        "--as",
        "readonly-external",
        "--capability",
        "tabs:close",
    ]);
    assert_eq!(c["result"]["decision"], "deny");
    maxx_snapshot!("policy_check_deny", c);
    let c = check(&["+control", "policy", "check", "--capability", "tabs:spawn"]);
    assert_eq!(c["result"]["decision"], "allow");
    maxx_snapshot!("policy_check_allow", c);
    let c = check(&[
        "policy",
        "check",
        "--as",
        "linear-webhook",
        "--capability",
        "groups:create",
    ]);
    assert_eq!(c["result"]["decision"], "allow");
    let c = check(&["policy", "check", "--capability", "output:read"]);
    assert_eq!(c["result"]["decision"], "deny");
    let mut sources = check(&["policy", "sources"]);
    sources["result"]["config"]["path"] = json!("[path]");
    maxx_snapshot!("policy_sources", sources);
    // Nothing was created or changed by diagnostics.
    assert_eq!(d.count(), 0);
    let out = d.cli(&["policy", "check", "--capability", "tabs:teleport"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown capability is a usage error"
    );
    // validate works offline, with no daemon.
    let run = |f: &std::path::Path| {
        std::process::Command::new(maxx_bin())
            .args(["policy", "validate", "--config"])
            .arg(f)
            .env("MAXX_CONTROL_DIR", tmp.path().join("no-daemon-here"))
            .output()
            .unwrap()
    };
    assert_eq!(run(&file).status.code(), Some(0));
    let bad = tmp.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"version":1,"sources":[{"id":"local-cli","kind":"local"}]}"#,
    )
    .unwrap();
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert!(err["error"]["reasons"].to_string().contains("reserved"));
}
