//! `maxx proxy`: this machine's daemon on stdin/stdout, for `ssh HOST maxx proxy`
//! (`docs/remote.md`).
//!
//! Each stdin line is one request (the socket's envelope); its answer, and a stream's lines,
//! come back on stdout, whole lines only, several requests in flight at once. A request
//! with an `id` gets that `id` on every line it causes (stream lines too, which on the
//! socket carry none), so a caller with several in flight tells them apart; one without an
//! `id` gets the daemon's bytes unchanged. The proxy reads the token from this machine's
//! control dir itself, like the CLI: a `token` in the request is replaced, so none need
//! cross the network. `--as SOURCE` replaces every request's `caller`, pinning what the far
//! side may do to what the policy gives SOURCE (`command="maxx proxy --as ci-hub"` in
//! `authorized_keys`).
//!
//! Bounded like the socket: a line over [`REQUEST_LINE_MAX_BYTES`] is answered `too_large`
//! (and skipped, unread), more than [`PROXY_IN_FLIGHT_MAX`] requests at once `busy`. Each
//! request has its own socket connection, served on its own thread (a blocking read per
//! open request, as the CLI does; the count is bounded). EOF on stdin closes the open
//! streams (which ends them at the daemon) and lets the other requests answer; the proxy
//! exits when the last has. A reader that hangs up stdout ends the proxy at once.

use crate::client::{self, ClientError, Target};
use maxx_protocol::envelope::NoDuplicateKeys;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{REQUEST_LINE_MAX_BYTES, RESPONSE_LINE_MAX_BYTES};
use maxx_protocol::{RequestEnvelope, Response};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};

/// Requests one proxy serves at once; one more is answered `busy`.
pub const PROXY_IN_FLIGHT_MAX: usize = 64;

/// The methods whose answer is several lines, ended by the daemon (or by closing).
fn is_stream(method: &str) -> bool {
    matches!(method, "sessions.watch" | "stream.watch")
}

/// What the request threads share with the stdin loop.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a request finishes (the stdin loop waits on it at EOF).
    done: Condvar,
}

#[derive(Default)]
struct State {
    /// Requests being served.
    in_flight: usize,
    /// The open streams' connections, to close at stdin's EOF (keyed by a proxy-local
    /// number: ids are the caller's and need not be unique).
    streams: HashMap<u64, UnixStream>,
    /// stdin has ended: a stream that opens from now on is closed at once.
    closing: bool,
}

/// Run the proxy until stdin ends and every answer is out. `pin`: `--as SOURCE`.
pub fn run(target: &Target, pin: Option<String>) -> i32 {
    exit_when_stdout_hangs_up();
    let shared = Arc::new(Shared::default());
    let mut stdin = io::stdin().lock();
    let mut key = 0u64;
    loop {
        let mut line = Vec::new();
        let read = (&mut stdin)
            .take(REQUEST_LINE_MAX_BYTES as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let complete = line.last() == Some(&b'\n');
        if complete {
            line.pop();
        }
        if line.len() > REQUEST_LINE_MAX_BYTES {
            emit_error(
                None,
                ErrorBody::new(
                    ErrorCode::TooLarge,
                    format!("request line over {REQUEST_LINE_MAX_BYTES} bytes; skipped"),
                ),
            );
            if !complete && !skip_line(&mut stdin) {
                break;
            }
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        key += 1;
        accept(target, &pin, &shared, key, &line);
    }
    // EOF: close the streams (nobody will read them), let the requests answer.
    let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    state.closing = true;
    for stream in state.streams.values() {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    while state.in_flight > 0 {
        state = shared.done.wait(state).unwrap_or_else(|p| p.into_inner());
    }
    crate::exit::OK
}

/// Discard the rest of an over-long line; false at EOF.
fn skip_line(stdin: &mut impl BufRead) -> bool {
    loop {
        let (found, used) = match stdin.fill_buf() {
            Ok([]) | Err(_) => return false,
            Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, buf.len()),
            },
        };
        stdin.consume(used);
        if found {
            return true;
        }
    }
}

/// Decode one request line and start serving it (or answer why not).
fn accept(target: &Target, pin: &Option<String>, shared: &Arc<Shared>, key: u64, line: &[u8]) {
    let malformed = |e: serde_json::Error| {
        ErrorBody::invalid(format!(
            "malformed request: {}",
            maxx_protocol::request::redact_serde_values(&e.to_string())
        ))
        .with_remedy("send one JSON object {method, params, id?} per line (no token needed)")
    };
    if let Err(e) = serde_json::from_slice::<NoDuplicateKeys>(line) {
        return emit_error(None, malformed(e));
    }
    let mut envelope: RequestEnvelope = match serde_json::from_slice(line) {
        Ok(e) => e,
        Err(e) => return emit_error(None, malformed(e)),
    };
    let id = envelope.id.clone();
    // The far side's token is never needed nor used: this machine's replaces it.
    envelope.token = None;
    if let Some(source) = pin {
        envelope.caller = Some(source.clone());
    }
    let method = envelope.method.clone().unwrap_or_default();
    if method == "sessions.attach" {
        return emit_error(
            id,
            ErrorBody::new(
                ErrorCode::Unsupported,
                "sessions.attach does not run through maxx proxy: its connection carries raw \
                 terminal bytes",
            )
            .with_remedy("attach on the host itself (`ssh -t HOST maxx attach ID`)"),
        );
    }
    {
        let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.in_flight >= PROXY_IN_FLIGHT_MAX {
            drop(state);
            return emit_error(
                id,
                ErrorBody::new(
                    ErrorCode::Busy,
                    format!("{PROXY_IN_FLIGHT_MAX} requests are in flight on this proxy"),
                )
                .with_remedy("wait for an answer (or end a stream) before sending more"),
            );
        }
        state.in_flight += 1;
    }
    let (target, shared) = (target.clone(), shared.clone());
    let stream = is_stream(&method);
    std::thread::spawn(move || {
        serve(&target, &shared, key, envelope, id, stream);
        let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.streams.remove(&key);
        state.in_flight -= 1;
        shared.done.notify_all();
    });
}

/// Serve one request on its own connection, copying its lines to stdout.
fn serve(
    target: &Target,
    shared: &Shared,
    key: u64,
    envelope: RequestEnvelope,
    id: Option<Value>,
    stream: bool,
) {
    let (conn, served_by) = match client::send_envelope(target, envelope, !stream) {
        Ok(c) => c,
        Err(e) => return emit_error(id, client_error_body(e)),
    };
    if stream {
        let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.closing {
            return;
        }
        if let Ok(clone) = conn.try_clone() {
            state.streams.insert(key, clone);
        }
    }
    let mut reader = BufReader::new(conn);
    let mut answered = false;
    loop {
        let mut line = Vec::new();
        let n = (&mut reader)
            .take(RESPONSE_LINE_MAX_BYTES as u64)
            .read_until(b'\n', &mut line)
            .unwrap_or(0);
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        let done = !stream || ends_stream(&line);
        emit(&id, line);
        if done {
            answered = true;
            break;
        }
    }
    let cancelled = stream
        && shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closing;
    if !answered && !cancelled {
        // The daemon went away mid-answer: say so (daemon_restarted when its keeper is
        // bringing up another), never leave the caller waiting on a silent line.
        let gone = ClientError::NoDaemon(
            ErrorBody::new(
                ErrorCode::NoDaemon,
                "the daemon closed the connection before it answered (it stopped or died)",
            )
            .with_remedy("start it again with `maxx daemon --detach`, then retry"),
        );
        emit_error(id, client_error_body(client::lost(target, served_by, gone)));
    }
}

/// Whether a stream line is its last: an `end`, or a refusal.
fn ends_stream(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        kind: Option<String>,
        ok: Option<bool>,
    }
    serde_json::from_slice::<Head>(line)
        .map(|h| h.kind.as_deref() == Some("end") || h.ok == Some(false))
        .unwrap_or(false)
}

fn client_error_body(e: ClientError) -> ErrorBody {
    match e {
        ClientError::NoDaemon(b) | ClientError::Failed(b) => b,
        ClientError::Usage(m) => ErrorBody::invalid(m),
    }
}

fn emit_error(id: Option<Value>, error: ErrorBody) {
    emit(&None, Response::err(error).with_id(id).to_line());
}

/// Write one whole line to stdout (under its lock: lines of concurrent requests never
/// interleave), with `id` set when the request had one. A stdout nobody reads any more
/// ends the proxy: no answer can be delivered.
fn emit(id: &Option<Value>, line: Vec<u8>) {
    let line = match id {
        None => line,
        Some(id) => match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(mut map)) => {
                map.insert("id".into(), id.clone());
                let mut out = serde_json::to_vec(&map).expect("a JSON object encodes");
                out.push(b'\n');
                out
            }
            _ => line,
        },
    };
    let mut out = io::stdout().lock();
    if out.write_all(&line).and_then(|()| out.flush()).is_err() {
        std::process::exit(crate::exit::OK);
    }
}

/// End the process when stdout's reader goes away (ssh closed the channel), even while
/// every request is blocked on the daemon (a long wait): poll reports the hangup with no
/// event asked for, so this thread sleeps until then.
fn exit_when_stdout_hangs_up() {
    std::thread::spawn(|| {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let stdout = io::stdout();
        let fd = std::os::fd::AsFd::as_fd(&stdout);
        loop {
            let mut fds = [PollFd::new(fd, PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    let revents = fds[0].revents().unwrap_or(PollFlags::empty());
                    if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
                        std::process::exit(crate::exit::OK);
                    }
                    if revents.contains(PollFlags::POLLNVAL) {
                        return;
                    }
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    });
}
