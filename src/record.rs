//! `maxx sessions rec` and `maxx play`: a session's output as an asciicast v2 file, and a
//! recording played into a new session.
//!
//! `rec` is a read-only `sessions.attach` (no size, so no resize; no input frames, so nothing
//! is typed): the daemon's repaint of the screen at t = 0, then every output chunk, until the
//! session's run ends, `--max-bytes` is reached or the recorder gets SIGINT/SIGTERM. The file
//! is asciicast v2 (one JSON header line, then `[time, "o", text]` lines, and `[time, "r",
//! "COLSxROWS"]` for a resize, followed on the session's event stream), what `asciinema play`
//! and `asciinema cat` read.
//!
//! `play` creates a session (the recording's size) whose program is `maxx play --raw FILE`:
//! it writes the output events to the terminal at their times (scaled by `--speed`, gaps
//! capped by `--idle-limit`), then exits.

use crate::cli::{PlayArgs, RecArgs};
use crate::client::{send_request, ClientError, Target};
use crate::{exit, report, request};
use maxx_protocol::error::ErrorBody;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The recording file and its clock, shared by the output loop and the resize watcher so
/// that times never go back in the file.
struct Cast {
    out: std::fs::File,
    start: Instant,
    idle_limit: Option<Duration>,
    /// The recording's time of the last event, and the wall time it was taken at.
    clock: Duration,
    last: Duration,
}

impl Cast {
    /// Write one event `[time, code, data]` at the recording time of now.
    fn event(&mut self, code: &str, data: &str) -> std::io::Result<()> {
        let now = self.start.elapsed();
        let gap = now.saturating_sub(self.last);
        self.clock += match self.idle_limit {
            Some(limit) => gap.min(limit),
            None => gap,
        };
        self.last = now;
        writeln!(
            self.out,
            "{}",
            json!([self.clock.as_secs_f64(), code, data])
        )
    }
}

/// Set by SIGINT/SIGTERM while recording: finish the file and stop.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// `maxx sessions rec ID --out FILE`.
pub fn rec(target: &Target, caller: &Option<String>, confirm: bool, a: RecArgs) -> i32 {
    match record(target, caller, confirm, &a) {
        Ok(summary) => {
            println!(
                "{}",
                crate::views::json_text(&json!({"ok": true, "result": summary}))
            );
            exit::OK
        }
        Err(e) => report::client_error("sessions.attach", e),
    }
}

fn record(
    target: &Target,
    caller: &Option<String>,
    confirm: bool,
    a: &RecArgs,
) -> Result<Value, ClientError> {
    let failed = |what: &str, e: std::io::Error| {
        ClientError::Failed(ErrorBody::internal(format!("{what}: {e}")))
    };
    let req = request::sessions_attach(Some(a.session_id.clone()), None);
    let stream = send_request(
        target,
        req.method,
        req.params,
        caller.as_deref(),
        confirm,
        false,
    )?;
    let mut reader = BufReader::new(stream);
    let mut first = Vec::new();
    (&mut reader)
        .take(1 << 20)
        .read_until(b'\n', &mut first)
        .map_err(|e| failed("reading the attach answer", e))?;
    let answer: maxx_protocol::Response = serde_json::from_slice(&first)
        .map_err(|e| ClientError::Failed(ErrorBody::internal(format!("bad answer: {e}"))))?;
    if !answer.ok {
        return Err(ClientError::Failed(
            answer
                .error
                .unwrap_or_else(|| ErrorBody::internal("attach refused")),
        ));
    }
    let session = answer
        .result
        .as_ref()
        .map(|r| r["session"].clone())
        .unwrap_or(Value::Null);
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&a.out)
        .map_err(|e| ClientError::Usage(format!("cannot create {}: {e}", a.out.display())))?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut header = json!({
        "version": 2,
        "width": session["cols"],
        "height": session["rows"],
        "timestamp": started,
        "env": {"TERM": "xterm-256color"},
    });
    if let Some(title) = session["title"].as_str() {
        header["title"] = json!(title);
    }

    // SIGINT/SIGTERM end the recording cleanly: the read is interrupted (no SA_RESTART).
    {
        use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
        let action = SigAction::new(
            SigHandler::Handler(on_stop),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for sig in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: the handler only stores to an atomic.
            let _ = unsafe { sigaction(sig, &action) };
        }
    }
    let cast = std::sync::Arc::new(std::sync::Mutex::new(Cast {
        out,
        start: Instant::now(),
        idle_limit: a.idle_limit,
        clock: Duration::ZERO,
        last: Duration::ZERO,
    }));
    // Resizes come from the session's events (the attach stream carries output only): a
    // second, read-only connection follows them as `r` events.
    let (subscribed, following) = std::sync::mpsc::channel();
    {
        let cast = cast.clone();
        let (target, caller) = (target.clone(), caller.clone());
        let id = session["session_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        std::thread::spawn(move || {
            let _ = crate::client::stream_lines(
                &target,
                "stream.watch",
                json!({ "session_id": id }),
                caller.as_deref(),
                false,
                |line| {
                    if line["type"] == "hello" {
                        let _ = subscribed.send(());
                    }
                    let e = &line["event"];
                    if e["name"] == "resized" {
                        let size = format!("{}x{}", e["payload"]["cols"], e["payload"]["rows"]);
                        if let Ok(mut cast) = cast.lock() {
                            let _ = cast.event("r", &size);
                        }
                    }
                },
            );
        });
    }
    // The header goes out once resizes are followed, so none made after it is missed (the
    // watch is read-only; if it cannot start, output is still recorded).
    let _ = following.recv_timeout(Duration::from_secs(10));
    lock(&cast)
        .out
        .write_all(format!("{header}\n").as_bytes())
        .map_err(|e| failed("writing the recording", e))?;
    let mut pending: Vec<u8> = Vec::new();
    let (mut bytes, mut events) = (0u64, 0u64);
    let mut buf = vec![0u8; 64 * 1024];
    let ended = loop {
        if STOP.load(Ordering::Relaxed) {
            break "stopped";
        }
        if a.max_bytes.is_some_and(|max| bytes >= max) {
            break "max_bytes";
        }
        let n = match reader.read(&mut buf) {
            Ok(0) => break "session_ended",
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed("reading the session's output", e)),
        };
        let chunk = match a.max_bytes {
            Some(max) => &buf[..n.min((max - bytes) as usize)],
            None => &buf[..n],
        };
        bytes += chunk.len() as u64;
        pending.extend_from_slice(chunk);
        // Only whole UTF-8 characters go into an event: a character split across reads
        // waits for its rest.
        let whole = utf8_prefix(&pending);
        if whole == 0 {
            continue;
        }
        let text = String::from_utf8_lossy(&pending[..whole]).into_owned();
        pending.drain(..whole);
        lock(&cast)
            .event("o", &text)
            .map_err(|e| failed("writing the recording", e))?;
        events += 1;
    };
    let mut cast = lock(&cast);
    if !pending.is_empty() {
        let text = String::from_utf8_lossy(&pending).into_owned();
        cast.event("o", &text)
            .map_err(|e| failed("writing the recording", e))?;
        events += 1;
    }
    cast.out
        .sync_all()
        .map_err(|e| failed("writing the recording", e))?;
    Ok(json!({
        "file": a.out.display().to_string(),
        "session_id": session["session_id"],
        "width": session["cols"],
        "height": session["rows"],
        "events": events,
        "bytes": bytes,
        "ended": ended,
    }))
}

fn lock(cast: &std::sync::Mutex<Cast>) -> std::sync::MutexGuard<'_, Cast> {
    cast.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many leading bytes of `bytes` are whole UTF-8 characters (an invalid byte counts as
/// whole: it is shown as U+FFFD, never held back).
fn utf8_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

/// `maxx play FILE`: a new session that plays the recording; `--raw` is that session's
/// program.
pub fn play(target: &Target, caller: &Option<String>, confirm: bool, a: PlayArgs) -> i32 {
    let header = match read_header(&a.file) {
        Ok(h) => h,
        Err(e) => {
            return report::usage_error(
                e,
                "give an asciicast v2 file (maxx sessions rec writes one)",
            )
        }
    };
    if a.raw {
        return match replay(&a) {
            Ok(()) => exit::OK,
            Err(e) => {
                eprintln!("maxx play: {e}");
                exit::FAILED
            }
        };
    }
    let bin = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "maxx".into());
    let file = std::fs::canonicalize(&a.file).unwrap_or(a.file.clone());
    let mut command = format!(
        "{} play --raw {} --speed {}",
        shell_quote(&bin),
        shell_quote(&file.display().to_string()),
        a.speed
    );
    if let Some(limit) = a.idle_limit {
        command.push_str(&format!(" --idle-limit {}ms", limit.as_millis()));
    }
    let title = a
        .title
        .clone()
        .unwrap_or_else(|| format!("play {}", a.file.display()));
    let params = json!({
        "command": command,
        "title": title,
        "cols": header["width"],
        "rows": header["height"],
    });
    let response = crate::client::request(
        target,
        "sessions.create",
        params,
        caller.as_deref(),
        confirm,
        request::CLIENT_TIMEOUT,
    );
    report::response("sessions.create", response)
}

fn read_header(path: &std::path::Path) -> Result<Value, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut line = String::new();
    BufReader::new(file)
        .take(64 * 1024)
        .read_line(&mut line)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let header: Value = serde_json::from_str(&line)
        .map_err(|e| format!("{} is not an asciicast file: {e}", path.display()))?;
    let size_ok = |k: &str| header[k].as_u64().is_some_and(|n| (1..=1000).contains(&n));
    if header["version"] != 2 || !size_ok("width") || !size_ok("height") {
        return Err(format!(
            "{} is not an asciicast v2 recording (version 2, width and height 1..=1000)",
            path.display()
        ));
    }
    Ok(header)
}

/// Write the recording's output events to stdout at their times.
fn replay(a: &PlayArgs) -> Result<(), String> {
    let file = std::fs::File::open(&a.file).map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(file).lines();
    lines.next();
    let speed = if a.speed > 0.0 { a.speed } else { 1.0 };
    let start = Instant::now();
    let (mut at, mut previous) = (Duration::ZERO, 0.0f64);
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        let line = line.map_err(|e| e.to_string())?;
        let Ok(Value::Array(event)) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(t), Some(kind), Some(data)) = (
            event.first().and_then(Value::as_f64),
            event.get(1).and_then(Value::as_str),
            event.get(2).and_then(Value::as_str),
        ) else {
            continue;
        };
        let mut gap = Duration::from_secs_f64((t - previous).max(0.0) / speed);
        if let Some(limit) = a.idle_limit {
            gap = gap.min(limit);
        }
        previous = t;
        at += gap;
        if kind != "o" {
            continue;
        }
        // The recording's own timing: a deliberate delay, not a wait for a condition.
        if let Some(left) = at.checked_sub(start.elapsed()) {
            std::thread::sleep(left);
        }
        stdout
            .write_all(data.as_bytes())
            .map_err(|e| e.to_string())?;
        stdout.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
