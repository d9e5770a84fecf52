//! `maxx hook claude-code|codex`: the final answer of an agent turn, read from the runtime's
//! own transcript (fixtures in its real format, `tests/fixtures/hooks/`), declared as the
//! session's result with source `hook:<runtime>`. The hook runs as the runtime runs it
//! (payload on stdin / as the last argument) inside a maxx session, so it inherits
//! `MAXX_SESSION_ID`; refusals declare nothing and say why.

use crate::common::{maxx_bin, wait_for, Daemon};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CODEX_THREAD: &str = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5";
const CLAUDE_FINAL: &str =
    "Fixed `a` (off by one in src/a.rs); all tests pass.\n\nSummary: 1 file changed.";

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(rel)
}

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Copy a Claude Code fixture into the daemon's `$HOME/.claude/projects/` (the default
/// root: every session inherits the test daemon's HOME); returns its path there.
fn claude_transcript(d: &Daemon, name: &str) -> PathBuf {
    let dir = d.tmp.path().join(".claude/projects/-home-dev-proj");
    std::fs::create_dir_all(&dir).unwrap();
    let to = dir.join(name);
    std::fs::copy(fixture(&format!("claude-code/{name}")), &to).unwrap();
    to
}

fn stop_payload(transcript: &Path) -> String {
    json!({
        "session_id": "9f1c2e7a-4b3d-4e8f-9a6b-2c1d0e5f7a81",
        "transcript_path": transcript,
        "cwd": "/home/dev/proj",
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false
    })
    .to_string()
}

fn codex_rollouts(d: &Daemon) {
    let dir = d.tmp.path().join(".codex/sessions/2026/12/05");
    std::fs::create_dir_all(&dir).unwrap();
    let name = format!("rollout-2026-12-05T09-00-00-{CODEX_THREAD}.jsonl");
    std::fs::copy(
        fixture(&format!("codex/sessions/2026/12/05/{name}")),
        dir.join(&name),
    )
    .unwrap();
}

fn codex_payload(turn: &str) -> String {
    json!({
        "type": "agent-turn-complete",
        "thread-id": CODEX_THREAD,
        "turn-id": turn,
        "cwd": "/home/dev/proj",
        "input-messages": ["Fix it."],
        "last-assistant-message": "Fixed `a`; the suite passes."
    })
    .to_string()
}

/// Run `script` (sh) as a session's program; wait for it to write its log; returns the
/// session id and the log (the hook's stderr and `rc=N`).
fn in_session(d: &Daemon, create: Value, script: &str) -> (String, String) {
    let log = d.tmp.path().join(format!("hook-{}.log", uuid_ish()));
    let cmd = format!(
        "{{ {script}; echo rc=$?; }} >{log}.tmp 2>&1; mv {log}.tmp {log}; exec sleep 60",
        log = log.display()
    );
    let mut params = create;
    params["command"] = json!(cmd);
    let id = sid(&d.create(params));
    let text = wait_for("the hook to run", Duration::from_secs(30), || {
        std::fs::read_to_string(&log).ok()
    });
    (id, text)
}

fn uuid_ish() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Run the hook outside any session program, as the runtime would, with the environment a
/// session gives (`MAXX_SESSION_ID`, `MAXX_CONTROL_DIR`, the daemon's HOME).
fn hook(d: &Daemon, session: Option<&str>, args: &[&str], stdin: &str) -> (i32, String) {
    let mut c = Command::new(maxx_bin());
    c.arg("hook")
        .args(args)
        .env("MAXX_CONTROL_DIR", &d.control)
        .env("HOME", d.tmp.path())
        .env_remove("MAXX_HOOK_ROOTS")
        .env_remove("MAXX_SESSION_ID")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(s) = session {
        c.env("MAXX_SESSION_ID", s);
    }
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.stdout.is_empty(), "a hook prints nothing on stdout");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn result_events(d: &Daemon, id: &str) -> Vec<Value> {
    d.ok("sessions.events", json!({"session_id": id, "since": 0}))["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "result")
        .cloned()
        .collect()
}

#[test]
fn claude_code_stop_hook_in_a_session_declares_the_last_answer_of_a_multi_turn_transcript() {
    let d = Daemon::start();
    let transcript = claude_transcript(&d, "multi-turn.jsonl");
    let payload = d.tmp.path().join("stop.json");
    std::fs::write(&payload, stop_payload(&transcript)).unwrap();
    // As Claude Code runs a Stop hook: the command, with the payload on stdin.
    let script = format!(
        "{} hook claude-code --strict <{}",
        maxx_bin(),
        payload.display()
    );
    let (id, log) = in_session(&d, json!({}), &script);
    assert!(log.contains("rc=0"), "{log}");
    let s = d.get(&id);
    // The last text of the last turn: not the earlier turn's, not the tool-use narration,
    // not the subagent's sidechain record.
    assert_eq!(s["result"], CLAUDE_FINAL, "{log}");
    assert_eq!(s["result_source"], "hook:claude-code");
    let audit = result_events(&d, &id);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["name"], "result.set");
    assert_eq!(audit[0]["source"], "hook:claude-code");
    assert_eq!(audit[0]["payload"], CLAUDE_FINAL);
}

#[test]
fn codex_notify_in_a_session_declares_the_turns_answer_from_its_rollout() {
    let d = Daemon::start();
    codex_rollouts(&d);
    let payload = d.tmp.path().join("notify.json");
    std::fs::write(&payload, codex_payload("turn-2")).unwrap();
    // As Codex runs its notify program: the JSON as the last argument.
    let script = format!(
        "{} hook codex --strict \"$(cat {})\"",
        maxx_bin(),
        payload.display()
    );
    let (id, log) = in_session(&d, json!({}), &script);
    assert!(log.contains("rc=0"), "{log}");
    let s = d.get(&id);
    assert_eq!(s["result"], "Fixed `a`; the suite passes.", "{log}");
    assert_eq!(s["result_source"], "hook:codex");
    let audit = result_events(&d, &id);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["source"], "hook:codex");

    // A turn the rollout has not completed: nothing (the previous turn's answer is not it).
    let other = sid(&d.create(json!({"command": "sleep 60"})));
    let mut p: Value = serde_json::from_str(&codex_payload("turn-3")).unwrap();
    p.as_object_mut().unwrap().remove("last-assistant-message");
    let (code, err) = hook(&d, Some(&other), &["codex", "--strict", &p.to_string()], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not this one"), "{err}");
    // An unknown thread: no rollout, nothing declared.
    let p = json!({"type": "agent-turn-complete", "thread-id": "0000-none", "turn-id": "t"});
    let (code, err) = hook(&d, Some(&other), &["codex", "--strict", &p.to_string()], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no rollout file"), "{err}");
    assert!(d.get(&other).get("result").is_none());
}

#[test]
fn transcripts_that_hold_no_final_answer_declare_nothing_and_say_why() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let cases = [
        ("truncated.jsonl", "truncated line"),
        ("ends-on-tool-use.jsonl", "tool_use"),
        ("unanswered-prompt.jsonl", "after the last user prompt"),
    ];
    for (name, why) in cases {
        let t = claude_transcript(&d, name);
        let (code, err) = hook(
            &d,
            Some(&id),
            &["claude-code", "--strict"],
            &stop_payload(&t),
        );
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains(why), "{name}: {err}");
        // Without --strict: the same, but exit 0 so the runtime is not disturbed.
        let (code, err) = hook(&d, Some(&id), &["claude-code"], &stop_payload(&t));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.contains("declared nothing"), "{name}: {err}");
    }
    // A missing transcript (inside the roots), a payload that is not JSON, an event that
    // is not Stop, and no MAXX_SESSION_ID at all.
    let dir = d.tmp.path().join(".claude/projects/-home-dev-proj");
    let missing = stop_payload(&dir.join("gone.jsonl"));
    let (code, err) = hook(&d, Some(&id), &["claude-code", "--strict"], &missing);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot be opened"), "{err}");
    let (code, err) = hook(&d, Some(&id), &["claude-code", "--strict"], "{not json");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not JSON"), "{err}");
    let t = claude_transcript(&d, "multi-turn.jsonl");
    let pre = stop_payload(&t).replace("\"Stop\"", "\"PreToolUse\"");
    let (code, err) = hook(&d, Some(&id), &["claude-code", "--strict"], &pre);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("PreToolUse"), "{err}");
    let (code, err) = hook(&d, None, &["claude-code", "--strict"], &stop_payload(&t));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("MAXX_SESSION_ID"), "{err}");
    let (code, _) = hook(&d, None, &["claude-code"], &stop_payload(&t));
    assert_eq!(code, 0);
    assert!(d.get(&id).get("result").is_none(), "nothing was declared");
    assert!(result_events(&d, &id).is_empty());
}

#[test]
fn a_transcript_outside_the_roots_is_never_read_whatever_the_path_says() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let root = d.tmp.path().join(".claude/projects");
    std::fs::create_dir_all(root.join("p")).unwrap();
    // The fixture where it lies: outside ~/.claude/projects.
    let outside = fixture("claude-code/multi-turn.jsonl");
    let (code, err) = hook(
        &d,
        Some(&id),
        &["claude-code", "--strict"],
        &stop_payload(&outside),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outside the transcript roots"), "{err}");
    // `..` out of the root, and a symlink inside the root pointing out of it.
    let secret = d.tmp.path().join("secret.jsonl");
    std::fs::copy(&outside, &secret).unwrap();
    let dotdot = root.join("p/../../../secret.jsonl");
    let (code, err) = hook(
        &d,
        Some(&id),
        &["claude-code", "--strict"],
        &stop_payload(&dotdot),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outside the transcript roots"), "{err}");
    let link = root.join("p/link.jsonl");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let (code, err) = hook(
        &d,
        Some(&id),
        &["claude-code", "--strict"],
        &stop_payload(&link),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("outside the transcript roots"), "{err}");
    assert!(d.get(&id).get("result").is_none());
    // MAXX_HOOK_ROOTS replaces the roots: the fixture folder is then readable.
    let out = Command::new(maxx_bin())
        .args(["hook", "claude-code", "--strict"])
        .env("MAXX_CONTROL_DIR", &d.control)
        .env("MAXX_SESSION_ID", &id)
        .env("MAXX_HOOK_ROOTS", fixture("claude-code"))
        .stdin(std::fs::File::open(write_tmp(&d, &stop_payload(&outside))).unwrap())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(d.get(&id)["result"], CLAUDE_FINAL);
}

fn write_tmp(d: &Daemon, text: &str) -> PathBuf {
    let p = d.tmp.path().join(format!("payload-{}.json", uuid_ish()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_declared_result_schema_rejects_a_non_conforming_answer_and_accepts_a_conforming_one() {
    let d = Daemon::start();
    let schema = json!({"type": "object", "required": ["verdict"],
                        "properties": {"verdict": {"type": "string"}}});
    let prose = claude_transcript(&d, "multi-turn.jsonl");
    let payload = write_tmp(&d, &stop_payload(&prose));
    let script = format!(
        "{} hook claude-code --strict <{}",
        maxx_bin(),
        payload.display()
    );
    let (id, log) = in_session(&d, json!({"result_schema": schema}), &script);
    // The daemon refuses it as it refuses `set-result`: invalid_request, exit 2 (strict).
    assert!(log.contains("rc=2"), "{log}");
    assert!(log.contains("invalid_request"), "{log}");
    assert!(d.get(&id).get("result").is_none());
    // Without --strict the runtime sees exit 0; the refusal is on stderr all the same.
    let (code, err) = hook(&d, Some(&id), &["claude-code"], &stop_payload(&prose));
    assert_eq!(code, 0);
    assert!(err.contains("invalid_request"), "{err}");
    // A JSON answer that satisfies the schema is declared.
    let json_answer = claude_transcript(&d, "json-answer.jsonl");
    let (code, err) = hook(
        &d,
        Some(&id),
        &["claude-code", "--strict"],
        &stop_payload(&json_answer),
    );
    assert_eq!(code, 0, "{err}");
    let s = d.get(&id);
    let declared: Value = serde_json::from_str(s["result"].as_str().unwrap()).unwrap();
    assert_eq!(declared["verdict"], "pass");
    assert_eq!(s["result_source"], "hook:claude-code");
}

#[test]
fn a_long_answer_is_cut_to_the_result_bound_on_a_character_boundary() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let long = "é".repeat(10_000) + "x"; // 20,001 bytes
    let record = json!({"type": "assistant", "isSidechain": false,
        "message": {"role": "assistant", "content": [{"type": "text", "text": long}]}});
    let dir = d.tmp.path().join(".claude/projects/-home-dev-proj");
    std::fs::create_dir_all(&dir).unwrap();
    let t = dir.join("long.jsonl");
    std::fs::write(&t, format!("{record}\n")).unwrap();
    let (code, err) = hook(
        &d,
        Some(&id),
        &["claude-code", "--strict"],
        &stop_payload(&t),
    );
    assert_eq!(code, 0, "{err}");
    let result = d.get(&id)["result"].as_str().unwrap().to_string();
    assert_eq!(result.len(), 16_384);
    assert!(result.chars().all(|c| c == 'é'));
}

#[test]
fn hook_install_merges_with_a_backup_or_prints_and_capabilities_list_the_adapters() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(maxx_bin())
            .args(args)
            .env("HOME", home.path())
            .output()
            .unwrap()
    };
    // --print changes nothing.
    let out = run(&["hook", "install", "claude-code", "--print"]);
    assert_eq!(out.status.code(), Some(0));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        shown["hooks"]["Stop"][0]["hooks"][0]["command"],
        "maxx hook claude-code"
    );
    assert!(!home.path().join(".claude").exists());
    // Merge into an existing file: a backup of it, its other settings kept, idempotent.
    let settings = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, r#"{"model": "opus"}"#).unwrap();
    let out = run(&["hook", "install", "claude-code"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(
        v["hooks"]["Stop"][0]["hooks"][0]["command"],
        "maxx hook claude-code"
    );
    let backups: Vec<_> = std::fs::read_dir(settings.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("settings.json.bak-")
        })
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(
        std::fs::read_to_string(backups[0].path()).unwrap(),
        r#"{"model": "opus"}"#
    );
    let out = run(&["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already"));
    // Codex: a new config gets the notify line; one with another notify is left alone.
    let out = run(&["hook", "install", "codex", "--print"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"notify = ["maxx", "hook", "codex"]"#
    );
    let out = run(&["hook", "install", "codex"]);
    assert_eq!(out.status.code(), Some(0));
    let config = home.path().join(".codex/config.toml");
    assert!(std::fs::read_to_string(&config)
        .unwrap()
        .contains(r#"notify = ["maxx", "hook", "codex"]"#));
    std::fs::write(&config, "notify = [\"notify-send\"]\n").unwrap();
    let out = run(&["hook", "install", "codex"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("notify-send"));
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "notify = [\"notify-send\"]\n"
    );
    // --capabilities names the adapters from the same table.
    let out = run(&["--capabilities"]);
    let caps: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = caps["hook_adapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["runtime"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["claude-code", "codex"]);
    assert_eq!(caps["hook_adapters"][0]["payload"], "stdin");
    assert_eq!(caps["hook_adapters"][1]["payload"], "argv");
}

#[test]
fn a_final_record_written_after_the_hook_started_is_waited_for_when_the_payload_announces_it() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    // The transcript as Claude Code may leave it when it runs the Stop hook: the turn's
    // prompt is on disk, its answer not yet (anthropics/claude-code#15813).
    let t = claude_transcript(&d, "unanswered-prompt.jsonl");
    let mut payload: Value = serde_json::from_str(&stop_payload(&t)).unwrap();
    payload["last_assistant_message"] = json!("The late answer.");
    let child = Command::new(maxx_bin())
        .args(["hook", "claude-code", "--strict"])
        .env("MAXX_CONTROL_DIR", &d.control)
        .env("HOME", d.tmp.path())
        .env("MAXX_SESSION_ID", &id)
        .env_remove("MAXX_HOOK_ROOTS")
        .stdin(std::fs::File::open(write_tmp(&d, &payload.to_string())).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The answer lands while the hook runs (before or after its first read: either way
    // the answer it declares is this one, never the previous turn's).
    let record = json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
        "content": [{"type": "text", "text": "The late answer."}]}});
    let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
    use std::io::Write;
    writeln!(f, "{record}").unwrap();
    drop(f);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(d.get(&id)["result"], "The late answer.");
}
