//! Issue 20 (first stage): sessions outlive the daemon. `maxx daemon` is a keeper with the
//! daemon proper as its child; kill -9 of the daemon makes the keeper start a new one, which
//! re-adopts every live program by proof and reads on where the dead one stopped.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Every `n K` line the session's screen (and scrollback) holds, in order.
fn numbered(d: &Daemon, id: &str, prefix: &str) -> Vec<u64> {
    let dump = d.ok_as(
        READER,
        "sessions.dump",
        json!({"session_id": id, "scrollback": true}),
    );
    dump["text"]
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.trim_end()
                .strip_prefix(prefix)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// The last number the writer appended to its own file.
fn last_written(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .unwrap_or(0)
}

fn assert_consecutive(seen: &[u64], what: &str) {
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "{what}: a gap or a duplicate between {} and {}",
            pair[0],
            pair[1]
        );
    }
}

/// Kill -9 the daemon (only the daemon: the keeper lives) and wait until a new daemon
/// answers `sessions.list`. Returns how long that took.
fn kill_daemon_and_wait_for_the_next(d: &Daemon) -> Duration {
    let old = d.pid();
    let started = Instant::now();
    // SAFETY: signalling the daemon our keeper started.
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    wait_for("a new daemon to answer", T, || {
        let pid = d.daemon_pid().filter(|p| *p != old && process_alive(*p))?;
        let r = d.call("sessions.list", json!({}));
        (r["ok"] == true).then_some(pid)
    });
    started.elapsed()
}

#[test]
fn kill_9_of_the_daemon_keeps_every_program_running_and_readopted() {
    let d = Daemon::start();
    let keeper = d.keeper_pid();
    let numbers = d.path("numbers");
    let trigger = d.path("go");
    let shell = sid(&d.create(json!({"command": "PS1='ready> ' exec sh -i", "title": "shell"})));
    let writer = sid(&d.create(json!({
        "command": format!(
            "i=0; while :; do i=$((i+1)); echo \"n $i\"; echo $i >> {}; sleep 0.005; done",
            numbers.display()
        ),
        "title": "writer"
    })));
    let exiter = sid(&d.create(json!({
        "command": format!("while [ ! -e {} ]; do sleep 0.01; done; exit 7", trigger.display()),
        "title": "exits 7"
    })));
    // Exits 3 once the new daemon serves: the keeper (its parent now) reaps it and tells the
    // daemon.
    let later = d.path("later");
    let late = sid(&d.create(json!({
        "command": format!("while [ ! -e {} ]; do sleep 0.01; done; exit 3", later.display()),
        "title": "exits 3 later"
    })));
    // Prints ~270 KB once the daemon is dead: more than the kernel's PTY buffer, so it blocks
    // on write until the new daemon reads.
    let flood = sid(&d.create(json!({
        "command": format!(
            "while [ ! -e {} ]; do sleep 0.01; done; seq -f 'f %g ........................................' 1 5000; exec sleep 600",
            trigger.display()
        ),
        "title": "flood"
    })));
    d.ok(
        "sessions.set-state",
        json!({"session_id": shell, "state": "blocked"}),
    );
    d.ok(
        "sessions.set-metadata",
        json!({"session_id": shell, "key": "ticket", "value": "ISSUE-20"}),
    );
    d.ok(
        "sessions.emit-event",
        json!({"session_id": writer, "event": "before.crash", "payload": {"k": 1}}),
    );
    wait_for("the shell's prompt", T, || {
        let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": shell}));
        dump["text"]
            .as_str()
            .unwrap()
            .contains("ready>")
            .then_some(())
    });
    wait_for("the writer's first lines", T, || {
        (numbered(&d, &writer, "n ").len() >= 20).then_some(())
    });
    let before: Vec<Value> = [&shell, &writer, &exiter, &flood]
        .iter()
        .map(|id| d.get(id))
        .collect();
    for s in &before {
        assert_eq!(s["lifecycle"], "running", "{s}");
    }
    let events_before = d.ok("sessions.events", json!({"session_id": shell}))["events"]
        .as_array()
        .unwrap()
        .len();
    let seen_before = *numbered(&d, &writer, "n ").last().unwrap();
    let old_daemon = d.pid();

    // kill -9 of the daemon; the exiter and the flood start while it is dead.
    // SAFETY: signalling the daemon our keeper started.
    unsafe { libc::kill(old_daemon as i32, libc::SIGKILL) };
    let started = Instant::now();
    std::fs::write(&trigger, b"").unwrap();
    wait_for("the old daemon to die", T, || {
        (!process_alive(old_daemon)).then_some(())
    });
    // Everything after this number was written when no daemon was reading.
    let written_at_death = last_written(&numbers);
    wait_for("a new daemon to answer", T, || {
        d.daemon_pid()
            .filter(|p| *p != old_daemon && process_alive(*p))?;
        let r = d.call("sessions.list", json!({}));
        (r["ok"] == true).then_some(())
    });
    let listable = started.elapsed();
    assert!(process_alive(keeper), "the keeper stayed");
    assert_ne!(d.pid(), old_daemon);

    // Same ids, surfaces, pids, declarations, audit log; running again.
    for (id, was) in [&shell, &writer, &flood]
        .into_iter()
        .zip([&before[0], &before[1], &before[3]])
    {
        let now = d.get(id);
        assert_eq!(now["lifecycle"], "running", "{now}");
        assert_eq!(now["surface_id"], was["surface_id"], "{now}");
        assert_eq!(now["pid"], was["pid"], "{now}");
        assert_eq!(now["restart_count"], was["restart_count"], "{now}");
        assert!(process_alive(now["pid"].as_u64().unwrap() as u32));
    }
    let shell_now = d.get(&shell);
    assert_eq!(shell_now["workflow_state"], "blocked", "{shell_now}");
    assert_eq!(shell_now["metadata"]["ticket"], "ISSUE-20", "{shell_now}");
    let events = d.ok("sessions.events", json!({"session_id": shell}))["events"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(events.len(), events_before + 1, "{events:?}");
    assert_eq!(events.last().unwrap()["name"], "readopted");

    // The one that exited while the daemon was down (or during the handoff) reads `exited`
    // with its real status.
    let exited = wait_for("the exiter to read exited", T, || {
        let s = d.get(&exiter);
        (s["lifecycle"] == "exited").then_some(s)
    });
    assert_eq!(exited["exit_code"], 7, "{exited}");
    assert!(exited["pid"].is_null(), "{exited}");
    assert_eq!(d.get(&late)["lifecycle"], "running");
    std::fs::write(&later, b"").unwrap();
    let exited = wait_for("the late one to read exited", T, || {
        let s = d.get(&late);
        (s["lifecycle"] == "exited").then_some(s)
    });
    assert_eq!(exited["exit_code"], 3, "{exited}");

    // Input typed afterwards reaches the shell (the registration secret came back too:
    // register-current works from inside it).
    let out = d.path("typed");
    d.ok(
        "sessions.action",
        json!({"session_id": shell, "action": "submit",
               "input": format!("maxx sessions register-current > {}", out.display())}),
    );
    let registered = wait_for("the shell to run what was typed", T, || {
        let text = read(&out)?;
        serde_json::from_str::<Value>(&text).ok()
    });
    assert_eq!(registered["result"]["session"]["session_id"], json!(shell));

    // The writer's output is read again, where the dead daemon stopped: nothing written
    // after its death is missing, nothing it had read comes twice, no gap after that.
    let target = written_at_death + 100;
    let seen = wait_for("the writer to go on", T, || {
        let seen = numbered(&d, &writer, "n ");
        (seen.last().is_some_and(|n| *n >= target)).then_some(seen)
    });
    // The screen survived too: what was shown before the crash is still there, and the
    // lines go on from it with no gap and no duplicate.
    assert_consecutive(&seen, "the writer across the recovery");
    assert_eq!(seen[0], 1, "the screen from before the crash is kept");
    assert!(seen.contains(&seen_before) && seen.contains(&(written_at_death + 1)));
    assert_consecutive(
        &std::fs::read_to_string(&numbers)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect::<Vec<u64>>(),
        "the writer's own file",
    );
    // The flood blocked while nobody read, then every line arrived.
    let flood_seen = wait_for("the whole flood", T, || {
        let seen = numbered(&d, &flood, "f ");
        (seen.last() == Some(&5000)).then_some(seen)
    });
    assert_eq!(flood_seen, (1..=5000).collect::<Vec<u64>>());

    // The bus says what happened, source maxx.
    let mut bus = d.open_stream("stream.watch", json!({"since": 0}));
    let mut readopted = Vec::new();
    let recovered = loop {
        let line = bus.next();
        let e = &line["event"];
        let e = if e.is_null() { &line } else { e };
        if e["name"] == "readopted" {
            assert_eq!(e["source"], "maxx");
            readopted.push(e["session_id"].as_str().unwrap().to_string());
        }
        if e["name"] == "daemon.recovered" {
            break e.clone();
        }
    };
    assert_eq!(recovered["source"], "maxx", "{recovered}");
    assert_eq!(recovered["payload"]["readopted"], 5, "{recovered}");
    // The exiter ended before the handoff (counted here) or just after (reported by the
    // keeper's `Exited`): either way it read `exited` 7 above.
    assert!(
        recovered["payload"]["exited_while_down"].as_u64().unwrap() <= 1,
        "{recovered}"
    );
    assert_eq!(recovered["payload"]["detached"], 0, "{recovered}");
    assert_eq!(recovered["payload"]["released"], 0, "{recovered}");
    readopted.sort();
    let mut all = vec![
        shell.clone(),
        writer.clone(),
        exiter.clone(),
        flood.clone(),
        late.clone(),
    ];
    all.sort();
    assert_eq!(readopted, all);

    eprintln!(
        "figures: kill -9 of the daemon -> sessions listable: {:.1} ms (5 sessions)",
        listable.as_secs_f64() * 1000.0
    );

    // A clean stop (SIGTERM to the daemon) ends the keeper, the daemon and the sessions.
    let pids: Vec<u32> = [&shell, &writer, &flood]
        .iter()
        .map(|id| d.get(id)["pid"].as_u64().unwrap() as u32)
        .collect();
    let daemon = d.pid();
    // SAFETY: signalling the daemon our keeper started.
    unsafe { libc::kill(daemon as i32, libc::SIGTERM) };
    wait_for("the keeper to exit", T, || {
        (!process_alive(keeper)).then_some(())
    });
    wait_for("the sessions to end", T, || {
        pids.iter().all(|p| !process_alive(*p)).then_some(())
    });
    assert!(!process_alive(daemon));
    assert!(!d.control.join("keeper.pid").exists());
    assert!(!d.control.join("daemon.pid").exists());
}

#[test]
fn keeper_pid_names_the_keeper_and_daemon_pid_the_daemon() {
    let d = Daemon::start();
    // Written once the daemon said it serves.
    let keeper: u32 = wait_for("keeper.pid", T, || {
        read(&d.control.join("keeper.pid"))?.trim().parse().ok()
    });
    assert_eq!(keeper, d.keeper_pid());
    assert_ne!(d.pid(), keeper);
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", d.pid())).unwrap();
    let ppid: u32 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(ppid, keeper, "the daemon is the keeper's child");
    let status = d.ok("daemon.status", json!({}));
    assert_eq!(status["pid"], d.pid());
    assert_eq!(
        status["keeper"],
        json!({"pid": keeper, "connected": true, "daemons_before": 0})
    );
    let human = d.cli(&["status"]);
    assert!(
        String::from_utf8_lossy(&human.stdout)
            .contains(&format!("keeper: pid {keeper} (0 recoveries)")),
        "{human:?}"
    );
    // The keeper holds nothing it was not given: stdio, its signalfd, its link, masters.
    let fds = std::fs::read_dir(format!("/proc/{keeper}/fd"))
        .unwrap()
        .count();
    assert_eq!(fds, 5, "stdio + signalfd + the link to the daemon");
}

#[test]
fn a_session_closed_after_recovery_is_ended_by_the_keeper() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "trap '' HUP; exec sleep 600"})));
    let pid = d.get(&id)["pid"].as_u64().unwrap() as u32;
    kill_daemon_and_wait_for_the_next(&d);
    assert_eq!(d.get(&id)["lifecycle"], "running");
    // The program is the keeper's child now: closing it goes through the keeper, which
    // ends its group (SIGHUP is ignored; SIGTERM ends `sleep`).
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "close"}),
    );
    wait_for("the program to end", T, || {
        (!process_alive(pid)).then_some(())
    });
    assert_eq!(d.get(&id)["lifecycle"], "closed");
}

#[test]
fn repeated_crashes_are_recovered_each_time() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exec sleep 600"})));
    let pid = d.get(&id)["pid"].clone();
    for round in 0..3 {
        kill_daemon_and_wait_for_the_next(&d);
        let s = d.get(&id);
        assert_eq!(s["lifecycle"], "running", "round {round}: {s}");
        assert_eq!(s["pid"], pid, "round {round}");
        let status = d.ok("daemon.status", json!({}));
        assert_eq!(status["keeper"]["daemons_before"], round + 1);
    }
    // A new session after recovery is handed to the keeper like any other.
    let fresh = sid(&d.create(json!({"command": "exec sleep 600"})));
    kill_daemon_and_wait_for_the_next(&d);
    assert_eq!(d.get(&fresh)["lifecycle"], "running");
}

/// An acknowledged create survives a kill -9 sent the instant its answer arrives: the
/// answer waits until the keeper has the new master, not only the journal the record.
#[test]
fn a_create_acknowledged_is_kept_by_a_kill_9_the_moment_after() {
    let d = Daemon::start();
    for round in 0..3 {
        let daemon = d.pid();
        let view = d.create(json!({"command": "exec sleep 600"}));
        // SAFETY: signalling the daemon our keeper started.
        unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
        wait_for("a new daemon to answer", T, || {
            let pid = d
                .daemon_pid()
                .filter(|p| *p != daemon && process_alive(*p))?;
            (d.call("sessions.list", json!({}))["ok"] == true).then_some(pid)
        });
        let s = d.get(&sid(&view));
        assert_eq!(s["lifecycle"], "running", "round {round}: {s}");
        assert_eq!(s["pid"], view["pid"], "round {round}: {s}");
    }
}

#[test]
fn a_crash_of_keeper_and_daemon_restores_records_detached_as_before() {
    let mut d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exec sleep 600"})));
    let pid = d.get(&id)["pid"].as_u64().unwrap() as u32;
    d.crash();
    // Every master is closed: the terminal hangs up and the program ends.
    wait_for("the program to end", T, || {
        (!process_alive(pid)).then_some(())
    });
    d.restart();
    let s = d.get(&id);
    assert_eq!(s["lifecycle"], "closed", "{s}");
    assert!(s["pid"].is_null(), "{s}");
    assert_eq!(s["restored"], true, "{s}");
}

#[test]
fn a_killed_keeper_leaves_the_daemon_and_its_sessions_running() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exec sleep 600"})));
    let pid = d.get(&id)["pid"].as_u64().unwrap() as u32;
    let daemon = d.pid();
    // SAFETY: signalling the keeper this harness started (reaped by its Drop).
    unsafe { libc::kill(d.keeper_pid() as i32, libc::SIGKILL) };
    wait_for("the keeper to die", T, || {
        (!process_alive(d.keeper_pid())).then_some(())
    });
    // The daemon serves on, its session too, and says the keeper is gone.
    wait_for("the daemon to notice", T, || {
        (d.ok("daemon.status", json!({}))["keeper"]["connected"] == false).then_some(())
    });
    let s = d.get(&id);
    assert_eq!(s["lifecycle"], "running", "{s}");
    assert!(process_alive(pid));
    assert_eq!(d.pid(), daemon);
    let fresh = sid(&d.create(json!({"command": "exec sleep 600"})));
    assert_eq!(d.get(&fresh)["lifecycle"], "running");
    // A clean stop still ends everything.
    // SAFETY: the daemon our keeper started.
    unsafe { libc::kill(daemon as i32, libc::SIGTERM) };
    wait_for("the daemon and its sessions to end", T, || {
        (!process_alive(daemon) && !process_alive(pid)).then_some(())
    });
}

/// The CLI's own process, for what the tests below must see it doing.
fn cli_spawn(d: &Daemon, args: &[&str]) -> std::process::Child {
    std::process::Command::new(maxx_bin())
        .args(args)
        .env("MAXX_CONTROL_DIR", &d.control)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_request_that_finds_no_daemon_during_a_recovery_waits_for_the_new_one() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exec sleep 600"})));
    let token = d.token();
    let keeper = d.keeper_pid();
    let old = d.pid();
    // The CLI learns a keeper runs from keeper.pid, written once the daemon said Ready.
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    // A stopped keeper cannot replace the daemon: there is none until it continues.
    // SAFETY: signalling the keeper this harness started, then its daemon.
    unsafe { libc::kill(keeper as i32, libc::SIGSTOP) };
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    // Its lock released and its socket refusing: nothing serves.
    d.wait_lock_free();
    wait_for("the dead daemon's socket to refuse", T, || {
        std::os::unix::net::UnixStream::connect(d.socket())
            .is_err()
            .then_some(())
    });
    let mut cli = cli_spawn(&d, &["sessions", "get", &id]);
    // It found nothing listening and waits on the control dir (an inotify descriptor).
    wait_for("the CLI to wait for the keeper's new daemon", T, || {
        if let Ok(Some(status)) = cli.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(cli.stderr.as_mut().unwrap(), &mut err).unwrap();
            // SAFETY: as above (so the harness can stop it).
            unsafe { libc::kill(keeper as i32, libc::SIGCONT) };
            panic!("the CLI did not wait: {status:?} {err}");
        }
        std::fs::read_dir(format!("/proc/{}/fd", cli.id()))
            .ok()?
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|l| l.to_string_lossy().contains("inotify"))
            .then_some(())
    });
    // SAFETY: as above.
    unsafe { libc::kill(keeper as i32, libc::SIGCONT) };
    let out = cli.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["result"]["session"]["lifecycle"], "running", "{got}");
    assert_ne!(d.pid(), old);
    // The new daemon kept the token: a caller that read it before still gets in.
    assert_eq!(d.token(), token);
}

#[test]
fn a_stream_cut_by_the_daemons_death_ends_with_daemon_restarted() {
    use std::io::BufRead;
    let d = Daemon::start();
    let mut cli = cli_spawn(&d, &["stream", "watch"]);
    let mut stdout = std::io::BufReader::new(cli.stdout.take().unwrap());
    let mut hello = String::new();
    stdout.read_line(&mut hello).unwrap();
    assert!(hello.contains("hello"), "{hello}");
    kill_daemon_and_wait_for_the_next(&d);
    let out = cli.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "daemon_restarted", "{err}");
    assert!(err["error"]["remedy"].is_string());
    // A stream that ends on its own still exits 0.
    let out = d.cli(&["stream", "watch", "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// The `hello` of a `stream.watch` from `since`.
fn hello_since(d: &Daemon, since: u64) -> Value {
    let mut s = d.open_stream("stream.watch", json!({"since": since, "timeout": 1}));
    s.next()
}

#[test]
fn the_bus_cursor_never_goes_back_and_an_old_since_is_told_the_gap() {
    let mut d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exec sleep 600"})));
    d.ok(
        "sessions.emit-event",
        json!({"session_id": id, "event": "before"}),
    );
    let before = d.ok("daemon.status", json!({}))["bus_cursor"]
        .as_u64()
        .unwrap();
    assert!(before >= 2);
    assert_eq!(hello_since(&d, before)["reset"], Value::Null);
    // A recovery: cursors go on above every one issued before.
    kill_daemon_and_wait_for_the_next(&d);
    d.ok(
        "sessions.emit-event",
        json!({"session_id": id, "event": "after"}),
    );
    let after = d.ok("daemon.status", json!({}))["bus_cursor"]
        .as_u64()
        .unwrap();
    assert!(after > before, "{after} <= {before}");
    // A supervisor resuming from before the crash is told what it cannot have.
    let hello = hello_since(&d, before);
    assert_eq!(hello["reset"], true, "{hello}");
    let gap = hello["dropped_through"].as_u64().unwrap();
    assert!(gap >= before, "{hello}");
    // And one resuming from after it is not.
    assert_eq!(hello_since(&d, after)["reset"], Value::Null);
    // The same across a crash of both processes and a fresh start.
    d.crash();
    d.restart();
    d.ok("sessions.list", json!({}));
    let mut s = d.open_stream("stream.watch", json!({}));
    let fresh = s.next()["cursor"].as_u64().unwrap();
    assert!(fresh > after, "{fresh} <= {after}");
    let hello = hello_since(&d, after);
    assert_eq!(hello["reset"], true, "{hello}");
}

/// Put `script` at the keeper's binary path on disk (the running keeper keeps its own).
fn replace_binary_on_disk(d: &Daemon, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let next = d.path("bin/next");
    std::fs::write(&next, script).unwrap();
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&next, d.path("bin/maxx")).unwrap();
}

#[test]
fn upgrade_hands_every_session_to_the_binary_on_disk() {
    let d = Daemon::start_linked();
    let keeper = d.keeper_pid();
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    let shell = sid(&d.create(json!({"command": "PS1='ready> ' exec sh -i"})));
    let pid = d.get(&shell)["pid"].clone();
    d.ok(
        "sessions.set-state",
        json!({"session_id": shell, "state": "blocked"}),
    );
    let old = d.pid();
    // The "new build": a wrapper that says it ran, then runs the real binary.
    let marker = d.path("upgraded");
    replace_binary_on_disk(
        &d,
        &format!(
            "#!/bin/sh\necho ran > {}\nexec {} \"$@\"\n",
            marker.display(),
            maxx_bin()
        ),
    );
    let out = d.cli_ok(&["daemon", "upgrade"]);
    assert_eq!(out["result"]["previous_pid"], old, "{out}");
    assert_ne!(out["result"]["pid"], old, "{out}");
    assert_eq!(out["result"]["pid"], d.pid(), "{out}");
    assert_eq!(out["result"]["keeper_pid"], keeper, "{out}");
    assert!(
        marker.exists(),
        "the daemon was started from the binary on disk"
    );
    assert!(process_alive(keeper));
    let s = d.get(&shell);
    assert_eq!(s["lifecycle"], "running", "{s}");
    assert_eq!(s["pid"], pid);
    assert_eq!(s["workflow_state"], "blocked");
    let typed = d.path("typed");
    d.ok(
        "sessions.action",
        json!({"session_id": shell, "action": "submit",
               "input": format!("echo after-upgrade > {}", typed.display())}),
    );
    wait_for("input after the upgrade", T, || read(&typed));
    // Without a keeper there is nothing to upgrade.
    let mut crashed = Daemon::start();
    crashed.crash();
    let out = crashed.cli(&["daemon", "upgrade"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn an_upgrade_to_a_binary_that_cannot_start_falls_back_to_the_keepers_own() {
    let d = Daemon::start_linked();
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    let id = sid(&d.create(json!({"command": "exec sleep 600"})));
    let pid = d.get(&id)["pid"].clone();
    let old = d.pid();
    replace_binary_on_disk(&d, "#!/bin/sh\nexit 1\n");
    let out = d.cli_ok(&["daemon", "upgrade"]);
    assert_ne!(out["result"]["pid"], old, "{out}");
    let s = d.get(&id);
    assert_eq!(s["lifecycle"], "running", "{s}");
    assert_eq!(s["pid"], pid);
}

/// The retention cap (`--retain-records`) never drops a live record, on disk or at load: with
/// more live sessions than the cap, a daemon's death re-adopts every one of them (the closed
/// records past the cap are what goes).
#[test]
fn more_live_sessions_than_the_retention_cap_are_all_readopted() {
    let d = Daemon::start_with(&["--retain-records", "2"]);
    let live: Vec<String> = (0..4)
        .map(|_| sid(&d.create(json!({"command": "exec sleep 600"}))))
        .collect();
    let closed = sid(&d.create(json!({"command": "exec sleep 600"})));
    d.ok("sessions.cancel", json!({"session_id": closed}));
    kill_daemon_and_wait_for_the_next(&d);
    for id in &live {
        let v = d.get(id);
        assert_eq!(v["lifecycle"], "running", "{v}");
        assert_ne!(v["restored"], true, "{v}");
    }
    d.err("sessions.get", json!({"session_id": closed}), "not_found");
}
