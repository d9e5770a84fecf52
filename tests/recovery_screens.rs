//! Issue 20, "screens survive too": after kill -9 of the daemon, the daemon the keeper starts
//! rebuilds every live session's screen from the screen memory the keeper held (a memfd per
//! surface), so a snapshot after the recovery equals the snapshot before — a shell at its
//! prompt, a full-screen program, a numbered writer — also when the daemon dies mid-flood.

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Everything a snapshot shows: text, cells, cursor, title, soft wraps, the whole
/// scrollback.
fn snapshot(d: &Daemon, id: &str) -> Value {
    d.ok_as(
        READER,
        "sessions.snapshot",
        json!({"session_id": id, "cells": true, "scrollback": true}),
    )
}

fn inspect(d: &Daemon, id: &str) -> Value {
    d.ok_as(READER, "sessions.inspect", json!({"session_id": id}))
}

fn text(d: &Daemon, id: &str) -> String {
    let dump = d.ok_as(
        READER,
        "sessions.dump",
        json!({"session_id": id, "scrollback": true}),
    );
    dump["text"].as_str().unwrap().to_string()
}

fn wait_text(d: &Daemon, id: &str, what: &str) {
    wait_for(what, T, || text(d, id).contains(what).then_some(()));
}

/// Kill -9 the daemon and wait until a new one answers.
fn kill_daemon_and_wait_for_the_next(d: &Daemon) {
    let old = d.pid();
    // SAFETY: signalling the daemon our keeper started.
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    wait_for("a new daemon to answer", T, || {
        d.daemon_pid().filter(|p| *p != old && process_alive(*p))?;
        (d.call("sessions.list", json!({}))["ok"] == true).then_some(())
    });
}

/// The `line N` numbers of a dump, in order.
fn numbers(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("line ")?.split(' ').next()?.parse().ok())
        .collect()
}

#[test]
fn every_screen_equals_its_snapshot_from_before_the_crash() {
    let d = Daemon::start();
    let file = d.path("file.txt");
    let lines: String = (1..=300).map(|i| format!("file line {i}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    let shell = sid(&d.create(json!({"command": "PS1='ready> ' exec sh -i", "title": "shell"})));
    let less = sid(&d.create(json!({
        "command": format!("exec less {}", file.display()),
        "cols": 100, "rows": 30, "title": "less"
    })));
    let vim = sid(&d.create(json!({
        "command": format!("exec vim -u NONE -N {}", file.display()),
        "title": "vim"
    })));
    // 3,000 numbered lines (~40 KB: below the 512 KiB that makes a grid unread), and ~900 KB
    // that does.
    let numbered = sid(&d.create(json!({
        "command": "seq -f 'line %g' 1 3000; echo NUMBERS-DONE; exec sleep 600",
        "title": "numbered"
    })));
    // ~13 MB: far past the first checkpoints (512 KiB of log, then eight times the last
    // one), so this screen comes back from a checkpoint and the log after it.
    let big = sid(&d.create(json!({
        "command": "seq -f 'line %g ............................................................' 1 190000; printf '\\033[1;31mBIG-DONE\\033[0m\\n'; exec sleep 600",
        "title": "big"
    })));
    wait_text(&d, &shell, "ready>");
    d.ok(
        "sessions.action",
        json!({"session_id": shell, "action": "submit", "input": "printf '\\033]2;my title\\007'; echo typed-before"}),
    );
    wait_for("the shell's output", T, || {
        (text(&d, &shell).matches("typed-before").count() == 2).then_some(())
    });
    wait_text(&d, &less, "file line 29");
    wait_text(&d, &vim, "file line 20");
    // A command into vim: the screen changes (cursor, status line) after it drew.
    d.ok(
        "sessions.send-keys",
        json!({"session_id": vim, "keys": ["5", "G", "d", "d"]}),
    );
    wait_for("vim to delete line 5", T, || {
        let t = text(&d, &vim);
        (!t.contains("file line 5\n")).then_some(())
    });
    wait_text(&d, &numbered, "NUMBERS-DONE");
    wait_text(&d, &big, "BIG-DONE");
    let ids = [&shell, &less, &vim, &numbered, &big];
    let before: Vec<(Value, Value)> = ids
        .iter()
        .map(|id| (snapshot(&d, id), inspect(&d, id)))
        .collect();
    assert!(before[2].1["alt_screen"] == true, "vim is full-screen");

    kill_daemon_and_wait_for_the_next(&d);

    for (id, (snap, insp)) in ids.iter().zip(&before) {
        let now = d.get(id);
        assert_eq!(now["lifecycle"], "running", "{now}");
        assert_eq!(&snapshot(&d, id), snap, "the screen of {}", now["title"]);
        assert_eq!(&inspect(&d, id), insp, "inspect of {}", now["title"]);
    }
    // The audit entry says the screen was rebuilt.
    let events = d.ok("sessions.events", json!({"session_id": shell}))["events"]
        .as_array()
        .unwrap()
        .clone();
    let readopted = events.last().unwrap();
    assert_eq!(readopted["name"], "readopted");
    assert_eq!(readopted["payload"]["screen"], "restored", "{readopted}");
    let events = d.ok("sessions.events", json!({"session_id": big}))["events"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(events.last().unwrap()["payload"]["screen"], "restored");
    // The numbered lines are all there, once each.
    assert_eq!(
        numbers(&text(&d, &numbered)),
        (1..=3000).collect::<Vec<u64>>()
    );

    // Input after the recovery lands on the rebuilt screen, below what was there.
    d.ok(
        "sessions.action",
        json!({"session_id": shell, "action": "submit", "input": "echo typed-after"}),
    );
    wait_for("the shell's new output", T, || {
        (text(&d, &shell).matches("typed-after").count() == 2).then_some(())
    });
    let t = text(&d, &shell);
    assert!(t.find("typed-before").unwrap() < t.find("typed-after").unwrap());
    d.ok(
        "sessions.send-keys",
        json!({"session_id": vim, "keys": ["g", "g", "d", "d"]}),
    );
    wait_for("vim to delete line 1", T, || {
        let t = text(&d, &vim);
        (!t.contains("file line 1\n") && t.contains("file line 2\n")).then_some(())
    });

    // And a second crash keeps them again (the new daemon logs into the same memory).
    let before: Vec<Value> = ids.iter().map(|id| snapshot(&d, id)).collect();
    kill_daemon_and_wait_for_the_next(&d);
    for (id, snap) in ids.iter().zip(&before) {
        assert_eq!(&snapshot(&d, id), snap, "after a second crash");
    }
}

/// A full-screen program that printed more than a log holds (32 MiB) on the alternate screen
/// comes back with that screen, and with the primary screen it hid: its screen memory was
/// checkpointed on the alternate screen (until 12-07 a session that had entered it was never
/// checkpointed again, so this screen came back empty).
#[test]
fn a_full_screen_program_past_a_logs_bound_comes_back_with_both_screens() {
    let d = Daemon::start();
    let tui = sid(&d.create(json!({
        "command": "printf 'before the alternate screen\\n\\033[1;32mgreen\\033[0m\\n\\033[?1049h\\033[2;10r'; seq -f 'alt %g ..........................................................' 1 560000; printf '\\033[H\\033[1mALT-DONE\\033[0m'; read x; printf '\\033[?1049l'; echo LEFT; exec sleep 600",
        "title": "tui"
    })));
    wait_text(&d, &tui, "ALT-DONE");
    let (snap, insp) = (snapshot(&d, &tui), inspect(&d, &tui));
    assert_eq!(insp["alt_screen"], true, "{insp}");

    kill_daemon_and_wait_for_the_next(&d);

    assert_eq!(snapshot(&d, &tui), snap);
    assert_eq!(inspect(&d, &tui), insp);
    let events = d.ok("sessions.events", json!({"session_id": tui}))["events"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(events.last().unwrap()["payload"]["screen"], "restored");
    // Leaving the alternate screen shows the primary screen it hid, the new line below.
    d.ok(
        "sessions.send-keys",
        json!({"session_id": tui, "keys": ["Enter"]}),
    );
    wait_text(&d, &tui, "LEFT");
    let t = text(&d, &tui);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        &lines[..3],
        ["before the alternate screen", "green", "LEFT"],
        "{t}"
    );
}

#[test]
fn a_daemon_killed_mid_flood_leaves_a_screen_fed_the_whole_stream() {
    let d = Daemon::start();
    let done = d.path("flood-done");
    // 95,000 lines (~5.8 MB, with a pause every 1,000 so the kill lands mid-flood) with room
    // for all of them in the scrollback: the screen after the recovery must hold every one,
    // those the dead daemon read included.
    let flood = sid(&d.create(json!({
        "command": format!(
            "for k in $(seq 0 94); do seq -f 'line %g {LINE_TAIL}' $((k*1000+1)) $((k*1000+1000)); sleep 0.02; done; touch {}; echo FLOOD-DONE; exec sleep 600",
            done.display()
        ),
        "scrollback_lines": 100000,
        "title": "flood"
    })));
    // Killed once ~2.5 MB went by: past the first checkpoints (512 KiB of log, then eight
    // times the last one's size).
    wait_for("the flood to pass 2.5 MB", T, || {
        numbers(&text(&d, &flood)).len().checked_sub(40_000)
    });
    // The writer had not written everything yet when the daemon died.
    let was_done = done.exists();
    kill_daemon_and_wait_for_the_next(&d);
    assert!(
        !was_done,
        "the flood ended before the kill; the test proves nothing"
    );
    wait_text(&d, &flood, "FLOOD-DONE");
    let seen = numbers(&text(&d, &flood));
    assert_eq!(
        seen.first(),
        Some(&1),
        "the lines the dead daemon read are kept"
    );
    // Every line once, in order: no hole (a kill inside the pump's `read` is covered by the
    // armed read, docs/recovery.md "Screens"), no duplicate.
    if seen != (1..=FLOOD_LINES).collect::<Vec<u64>>() {
        let at = seen.windows(2).position(|p| p[1] != p[0] + 1);
        panic!(
            "{} lines seen, first break after index {at:?}: {:?}",
            seen.len(),
            at.map(|i| &seen[i.saturating_sub(2)..(i + 3).min(seen.len())])
        );
    }
    // And each whole: no bytes lost or doubled inside a line either.
    let t = text(&d, &flood);
    let whole = t
        .lines()
        .filter(|l| l.starts_with("line "))
        .zip(1..)
        .all(|(l, n)| l.trim_end() == format!("line {n} {LINE_TAIL}"));
    assert!(whole, "a line with bytes lost or doubled");
}

const FLOOD_LINES: u64 = 95_000;
const LINE_TAIL: &str = "..................................................";

/// The daemon's screen memories (`memfd:maxx-screen`), counted from its descriptors.
fn screen_memories(d: &Daemon) -> usize {
    let fds = format!("/proc/{}/fd", d.pid());
    std::fs::read_dir(fds)
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("memfd:maxx-screen"))
        .count()
}

/// A screen memory is made at a surface's first output, and a program that exits having
/// printed nothing never makes one: its hang-up is not output (1,000 silent members exiting
/// at once each made, mapped and registered one before their exits could be reported).
#[test]
fn a_program_that_exits_having_printed_nothing_makes_no_screen_memory() {
    let d = Daemon::start();
    let silent: Vec<String> = (0..3)
        .map(|_| sid(&d.create(json!({"command": "exec sleep 0.2", "focus": false}))))
        .collect();
    let talking = sid(&d.create(json!({"command": "echo said-something; exec sleep 0.2"})));
    for id in silent.iter().chain([&talking]) {
        wait_for("the exit", T, || {
            (d.get(id)["lifecycle"] == "exited").then_some(())
        });
    }
    assert!(text(&d, &talking).contains("said-something"));
    // The one that printed has its memory (the count can see one); the silent ones none.
    assert_eq!(screen_memories(&d), 1);
}

/// A burst of exits where half the programs print their last words as they exit and half
/// print nothing: every final screen has its last words (a hang-up that comes with output is
/// read to the end), and the silent ones make no screen memory (a hang-up alone is not read).
#[test]
fn last_words_at_a_burst_of_exits_are_all_on_their_screens() {
    const N: usize = 120;
    let d = Daemon::start();
    let fifo = d.tmp.path().join("release");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Held open until the end, so lines written before a late member opens it wait for it.
    let gate = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let fifo = fifo.display();
    let ids: Vec<String> = (0..N)
        .map(|i| {
            let last = if i % 2 == 0 {
                format!("exec printf 'last-words-{i}.'")
            } else {
                "exit 0".to_string()
            };
            sid(&d.create(json!({
                // Opened read-write: the open never blocks, and each `read` takes one line.
                "command": format!("read x <> {fifo}; {last}"),
                "group": "burst", "focus": false,
            })))
        })
        .collect();
    // One line for each member: those waiting in `read` all go at once.
    use std::io::Write;
    (&gate).write_all(&[b'\n'; N]).unwrap();
    let answer = d.ok(
        "stream.wait",
        json!({"group": "burst", "all": "exited", "timeout": 60}),
    );
    assert_eq!(answer["outcome"], "matched");
    for (i, id) in ids.iter().enumerate().step_by(2) {
        let words = format!("last-words-{i}.");
        assert!(text(&d, id).contains(&words), "{id} lost {words:?}");
    }
    assert_eq!(screen_memories(&d), N / 2);
    drop(gate);
}
