//! The CLI's side of the wire: find the control dir, read the token, send one request
//! line, read one response line. Blocking std I/O: the CLI makes one request per run.
//!
//! Across a recovery (`docs/recovery.md`): a request that finds no daemon while a keeper
//! runs waits (bounded, woken by inotify) for the keeper's new daemon; a request or stream
//! whose daemon dies before it answers ends with `daemon_restarted`.

use maxx_actors::control_dir::{
    default_control_dir, ControlDir, KEEPER_PID_FILE, PID_FILE, SOCKET_FILE,
};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::RESPONSE_LINE_MAX_BYTES;
use maxx_protocol::{RequestEnvelope, Response};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a request that found no daemon waits for the one a running keeper is starting
/// (a recovery takes tens of milliseconds; see `docs/recovery.md`).
const RECOVERY_WAIT: Duration = Duration::from_secs(5);
/// How long a client whose daemon died waits for a sign that a keeper is replacing it
/// (`keeper.pid`, or a new daemon in `daemon.pid`) before it reports `no_daemon`.
const RECOVERY_SIGN: Duration = Duration::from_secs(2);

/// Where the CLI talks to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The control dir holding `control.sock` and `token`.
    pub control_dir: PathBuf,
    /// `--socket PATH` as given (its folder must be a valid control dir holding the token).
    pub socket: Option<PathBuf>,
}

impl Target {
    /// `--socket PATH` (the control dir is its folder), else `$MAXX_CONTROL_DIR`, else
    /// `/tmp/maxx-control-<uid>`.
    pub fn resolve(socket: Option<&PathBuf>) -> Target {
        match socket {
            Some(sock) => Target {
                control_dir: sock
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(".")),
                socket: Some(sock.clone()),
            },
            None => Target {
                control_dir: default_control_dir(),
                socket: None,
            },
        }
    }

    /// The socket path.
    pub fn socket_path(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| self.control_dir.join(SOCKET_FILE))
    }
}

/// Why a request got no answer from a daemon.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens (or the control dir is missing or refused): exit 3.
    NoDaemon(ErrorBody),
    /// Something else went wrong talking to it: exit 1.
    Failed(ErrorBody),
    /// The command cannot run as asked (e.g. attach without a terminal): exit 2.
    Usage(String),
}

fn no_daemon(target: &Target, why: &str) -> ClientError {
    ClientError::NoDaemon(
        ErrorBody::new(
            ErrorCode::NoDaemon,
            format!(
                "no maxx daemon answered; tried {} ({why})",
                target.socket_path().display()
            ),
        )
        .with_remedy(
            "start one with `maxx daemon --detach`, or point MAXX_CONTROL_DIR/--socket at a running one",
        ),
    )
}

/// A pid from a file in the control dir (bounded read, no link followed).
fn read_pid(dir: &Path, name: &str) -> Option<u32> {
    let file = maxx_actors::control_dir::open_regular(
        &dir.join(name),
        std::fs::OpenOptions::new().read(true),
        false,
    )
    .ok()?;
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Whether `pid` is a running process (not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether `pid` has exited, or does within `limit` (woken by its pidfd).
fn gone_within(pid: u32, limit: Duration) -> bool {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain syscall; returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // SAFETY: the kernel just gave us this descriptor.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if !running(pid) {
        return true;
    }
    let mut fds = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(&pidfd),
        nix::poll::PollFlags::POLLIN,
    )];
    let ms = nix::poll::PollTimeout::try_from(limit.as_millis() as i32)
        .unwrap_or(nix::poll::PollTimeout::MAX);
    matches!(nix::poll::poll(&mut fds, ms), Ok(n) if n > 0)
}

/// Whether a keeper runs for this control dir (so a missing daemon is being replaced).
fn keeper_running(target: &Target) -> bool {
    read_pid(&target.control_dir, KEEPER_PID_FILE).is_some_and(running)
}

/// The daemon `daemon.pid` names right now.
fn serving_daemon(target: &Target) -> Option<u32> {
    read_pid(&target.control_dir, PID_FILE)
}

/// What to report when the connection ended without an answer (or a stream without its
/// end): `daemon_restarted` if the daemon that served it is gone and a keeper runs.
fn lost(target: &Target, served_by: Option<u32>, otherwise: ClientError) -> ClientError {
    restarted(target, served_by).unwrap_or(otherwise)
}

/// `daemon_restarted`, if the daemon that served the connection is gone and a recovery is
/// under way; `no_daemon` if it is gone and nothing replaces it. Only asked when a
/// connection ended without its answer or end line, which a live daemon never does: gone
/// means `daemon.pid` names another daemon already, or the pid it named exits within 5 s
/// (watched on a pidfd: the daemon's descriptors close a moment before it is reported
/// gone, longer on a loaded machine). A recovery is under way when a keeper runs or a new
/// daemon is named; the keeper writes `keeper.pid` only once its first daemon served, which
/// may be just after that daemon died, so its absence is waited out for [`RECOVERY_SIGN`].
fn restarted(target: &Target, served_by: Option<u32>) -> Option<ClientError> {
    let pid = served_by?;
    let replaced = || serving_daemon(target).is_some_and(|now| now != pid);
    if !(replaced() || gone_within(pid, Duration::from_secs(5))) {
        return None;
    }
    let recovering = wait_on_dir(target, RECOVERY_SIGN, || {
        Ok((keeper_running(target) || replaced()).then_some(()))
    });
    if !matches!(recovering, Ok(Some(()))) {
        return Some(ClientError::NoDaemon(
            ErrorBody::new(
                ErrorCode::NoDaemon,
                "the daemon ended before it answered, and no keeper is starting another",
            )
            .with_remedy(
                "read the session before retrying a change once a daemon runs (it may have \
                 been applied); start one with `maxx daemon --detach`",
            ),
        ));
    }
    Some(ClientError::NoDaemon(
        ErrorBody::new(
            ErrorCode::DaemonRestarted,
            "the daemon died before it answered; its keeper is starting a new one",
        )
        .with_remedy(
            "read the session before retrying a change (it may have been applied); a wait or watch can simply be opened again",
        ),
    ))
}

/// Connect to the socket; if nothing answers while a keeper runs, wait (at most
/// [`RECOVERY_WAIT`]) for the daemon it is starting. The wait wakes on inotify events in the
/// control dir (the new daemon creates its socket there), never on a timer.
fn connect(target: &Target) -> io::Result<UnixStream> {
    let path = target.socket_path();
    match UnixStream::connect(&path) {
        Ok(s) => return Ok(s),
        Err(e) if !keeper_running(target) => return Err(e),
        Err(_) => {}
    }
    let mut refused = None;
    let connected = wait_on_dir(target, RECOVERY_WAIT, || match UnixStream::connect(&path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if keeper_running(target) => {
            refused = Some(e);
            Ok(None)
        }
        Err(e) => Err(e),
    })?;
    connected.ok_or_else(|| refused.unwrap_or_else(|| io::Error::other("no daemon")))
}

/// Try `attempt` until it gives a value (`Ok(Some)`), gives up (`Err`), or `limit` passes
/// (`Ok(None)`); between tries, wait for something to be created, renamed into or changed in
/// the control dir (inotify: a new daemon's socket or pid file), never on a timer. Watched
/// first, tried second, so a change in between is not missed.
fn wait_on_dir<T>(
    target: &Target,
    limit: Duration,
    mut attempt: impl FnMut() -> io::Result<Option<T>>,
) -> io::Result<Option<T>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    inotify.add_watch(
        &target.control_dir,
        AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_ATTRIB,
    )?;
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = attempt()? {
            return Ok(Some(value));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let ms = PollTimeout::try_from(left.as_millis().max(1) as i32).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(&inotify),
            PollFlags::POLLIN,
        )];
        match poll(&mut fds, ms) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let _ = inotify.read_events();
    }
}

fn failed(what: &str, e: io::Error) -> ClientError {
    ClientError::Failed(ErrorBody::new(
        ErrorCode::Internal,
        format!("{what} the daemon failed: {e}"),
    ))
}

/// Connect and send one request line. With `half_close`, shut the write side after it.
pub fn send_request(
    target: &Target,
    method: &str,
    params: Value,
    caller: Option<&str>,
    confirm: bool,
    half_close: bool,
) -> Result<UnixStream, ClientError> {
    let dir = match ControlDir::open(&target.control_dir) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(no_daemon(target, "the control dir does not exist"))
        }
        // Not "no daemon": a caller that starts one on no_daemon must not try this dir.
        Err(e) if maxx_actors::control_dir::unsafe_control_dir(&e).is_some() => {
            return Err(ClientError::Failed(
                ErrorBody::new(ErrorCode::UnsafeControlDir, e.to_string()).with_remedy(
                    "fix it as the message says (maxx never repairs a control dir), or point \
                     MAXX_CONTROL_DIR at a fresh path",
                ),
            ))
        }
        Err(e) => return Err(no_daemon(target, &e.to_string())),
    };
    let token = dir
        .read_token()
        .map_err(|e| no_daemon(target, &format!("cannot read the token: {e}")))?;
    let envelope = RequestEnvelope {
        token: Some(token),
        method: Some(method.to_string()),
        params: Some(params),
        caller: caller.map(str::to_string),
        confirm: confirm.then_some(true),
        id: None,
    };
    let mut line = serde_json::to_vec(&envelope).expect("request encodes");
    line.push(b'\n');
    let mut retried = false;
    let stream = loop {
        let mut stream = match connect(target) {
            Ok(s) => s,
            Err(e) => return Err(no_daemon(target, &e.to_string())),
        };
        match stream.write_all(&line) {
            Ok(()) => break stream,
            // The daemon closed before it had the whole line (it died, or an upgrade closed
            // its socket with this connection still in the accept queue), so it cannot have
            // acted on it: with a keeper starting the next daemon, send it there, once.
            Err(e)
                if !retried
                    && matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                    )
                    && keeper_running(target) =>
            {
                retried = true;
            }
            Err(e) => return Err(failed("writing to", e)),
        }
    };
    if half_close {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    Ok(stream)
}

/// Send a streaming request and hand each response line to `on_line` until the daemon
/// ends the stream. The write side stays open: closing the connection ends the stream.
pub fn stream_lines(
    target: &Target,
    method: &str,
    params: Value,
    caller: Option<&str>,
    confirm: bool,
    mut on_line: impl FnMut(Value),
) -> Result<(), ClientError> {
    let stream = send_request(target, method, params, caller, confirm, false)?;
    let served_by = serving_daemon(target);
    let mut reader = BufReader::new(stream);
    // The daemon ends every stream with a line saying so (an `end`, or a refusal).
    let mut ended = false;
    loop {
        let mut buf = Vec::new();
        let n = (&mut reader)
            .take(RESPONSE_LINE_MAX_BYTES as u64)
            .read_until(b'\n', &mut buf)
            .map_err(|e| lost(target, served_by, failed("reading from", e)))?;
        if n == 0 {
            if ended {
                return Ok(());
            }
            // Cut short: the daemon itself may be gone; a live one never does this.
            return Err(restarted(target, served_by).unwrap_or_else(|| {
                ClientError::Failed(ErrorBody::internal(
                    "the daemon closed the stream without its end line",
                ))
            }));
        }
        let value: Value = serde_json::from_slice(&buf).map_err(|e| {
            ClientError::Failed(ErrorBody::internal(format!(
                "unreadable line from the daemon: {e}"
            )))
        })?;
        ended = value["type"] == "end" || value["ok"] == false;
        on_line(value);
    }
}

/// Send one request and read the one response.
pub fn request(
    target: &Target,
    method: &str,
    params: Value,
    caller: Option<&str>,
    confirm: bool,
    timeout: Duration,
) -> Result<Response, ClientError> {
    let stream = send_request(target, method, params, caller, confirm, true)?;
    let served_by = serving_daemon(target);
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| failed("configuring", e))?;
    let mut reader = BufReader::new(stream.take(RESPONSE_LINE_MAX_BYTES as u64));
    let mut buf = Vec::new();
    match reader.read_until(b'\n', &mut buf) {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            return Err(ClientError::Failed(ErrorBody::new(
                ErrorCode::Timeout,
                format!("the daemon did not answer within {}s", timeout.as_secs()),
            )))
        }
        Err(e) => return Err(lost(target, served_by, failed("reading from", e))),
    }
    if buf.is_empty() {
        return Err(lost(
            target,
            served_by,
            ClientError::Failed(ErrorBody::internal(
                "the daemon closed the connection without answering",
            )),
        ));
    }
    parse_response(&buf)
}

/// The one response line of a request (empty: the daemon closed without answering).
pub fn parse_response(buf: &[u8]) -> Result<Response, ClientError> {
    if buf.is_empty() {
        return Err(ClientError::Failed(ErrorBody::internal(
            "the daemon closed the connection without answering",
        )));
    }
    serde_json::from_slice(buf).map_err(|e| {
        ClientError::Failed(ErrorBody::internal(format!(
            "unreadable response from the daemon: {e}"
        )))
    })
}
