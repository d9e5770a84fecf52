//! The CLI's side of the wire: find the control dir, read the token, send one request
//! line, read one response line. Blocking std I/O: the CLI makes one request per run.
//!
//! Across a recovery (`docs/recovery.md`): a request that finds no daemon while a keeper
//! runs waits (bounded, woken by inotify) for the keeper's new daemon; a request or stream
//! whose daemon dies before it answers ends with `daemon_restarted`.
//!
//! With `--host H` the same requests travel as `ssh H maxx proxy` (`crate::remote`): a
//! [`Conn`] is either transport, and [`request`] and [`stream_lines`] are written once.

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
    /// `--host H` (or `MAXX_HOST`): the daemon is on H, reached as `ssh H maxx proxy`;
    /// `None` is this machine. Checked by [`crate::remote::check_host`] before it is set.
    pub host: Option<String>,
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
                host: None,
            },
            None => Target {
                control_dir: default_control_dir(),
                socket: None,
                host: None,
            },
        }
    }

    /// The same daemon settings, on `host` (`None`: this machine).
    pub fn on(&self, host: Option<String>) -> Target {
        Target {
            host,
            ..self.clone()
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
pub fn lost(target: &Target, served_by: Option<u32>, otherwise: ClientError) -> ClientError {
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
/// the control dir (inotify: a new daemon's socket or pid file), never on a timer.
fn wait_on_dir<T>(
    target: &Target,
    limit: Duration,
    attempt: impl FnMut() -> io::Result<Option<T>>,
) -> io::Result<Option<T>> {
    use nix::sys::inotify::AddWatchFlags;
    wait_on_path(
        &target.control_dir,
        AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_ATTRIB,
        limit,
        attempt,
    )
}

/// Try `attempt` until it gives a value (`Ok(Some)`), gives up (`Err`), or `limit` passes
/// (`Ok(None)`); between tries, wait for an inotify event of `mask` on `path` (a directory
/// reports its entries' events too), never on a timer. Watched first, tried second, so a
/// change in between is not missed.
pub fn wait_on_path<T>(
    path: &Path,
    mask: nix::sys::inotify::AddWatchFlags,
    limit: Duration,
    mut attempt: impl FnMut() -> io::Result<Option<T>>,
) -> io::Result<Option<T>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::inotify::{InitFlags, Inotify};
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    inotify.add_watch(path, mask)?;
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

/// The request the CLI sends, without its token: the socket path adds this machine's, and
/// over ssh `maxx proxy` adds the far side's own, so none crosses the network.
fn envelope(method: &str, params: Value, caller: Option<&str>, confirm: bool) -> RequestEnvelope {
    RequestEnvelope {
        token: None,
        method: Some(method.to_string()),
        params: Some(params),
        caller: caller.map(str::to_string),
        confirm: confirm.then_some(true),
        id: None,
    }
}

/// One NDJSON line.
fn line_of(envelope: &RequestEnvelope) -> Vec<u8> {
    let mut line = serde_json::to_vec(envelope).expect("request encodes");
    line.push(b'\n');
    line
}

/// Connect to this machine's daemon and send `envelope` with the control dir's token (any
/// token it carried is replaced). With `half_close`, shut the write side after it. Also
/// returns the daemon that served it (`daemon.pid` then), for [`lost`].
pub fn send_envelope(
    target: &Target,
    mut envelope: RequestEnvelope,
    half_close: bool,
) -> Result<(UnixStream, Option<u32>), ClientError> {
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
    envelope.token = Some(
        dir.read_token()
            .map_err(|e| no_daemon(target, &format!("cannot read the token: {e}")))?,
    );
    let line = line_of(&envelope);
    let mut retried = false;
    let (stream, served_by) = loop {
        let mut stream = match connect(target) {
            Ok(s) => s,
            Err(e) => return Err(no_daemon(target, &e.to_string())),
        };
        let served_by = serving_daemon(target);
        match stream.write_all(&line) {
            Ok(()) => break (stream, served_by),
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
    Ok((stream, served_by))
}

/// Connect to this machine's daemon and send one request line (the socket itself, for the
/// verbs that speak more than NDJSON on it: attach, rec, mcp). Refused with `--host`: those
/// bytes do not travel through `maxx proxy`.
pub fn send_request(
    target: &Target,
    method: &str,
    params: Value,
    caller: Option<&str>,
    confirm: bool,
    half_close: bool,
) -> Result<UnixStream, ClientError> {
    if let Some(host) = &target.host {
        return Err(ClientError::Failed(crate::remote::local_only(host, method)));
    }
    send_envelope(
        target,
        envelope(method, params, caller, confirm),
        half_close,
    )
    .map(|(stream, _)| stream)
}

/// Where a connection's lines come from: a Unix socket or an ssh child's stdout, read with
/// an optional deadline (poll on the descriptor, so one code path serves both).
struct Source {
    fd: Box<dyn ReadFd>,
    deadline: Option<Instant>,
}

trait ReadFd: Read + std::os::fd::AsFd + Send {}
impl<T: Read + std::os::fd::AsFd + Send> ReadFd for T {}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let ms = PollTimeout::try_from(left.as_millis().clamp(1, i32::MAX as u128) as i32)
                    .unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, ms) {
                    Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                    Ok(_) => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.fd.read(buf)
    }
}

/// What carries one request: this machine's socket, or `ssh HOST maxx proxy`.
enum Via {
    /// The socket, and the daemon that served it (`daemon.pid` when it connected).
    Local(Option<u32>),
    /// The ssh child (its stdin is the request's write side).
    Remote(crate::remote::Channel),
}

/// One request in flight on either transport: the CLI's request and stream logic is
/// written once against this.
pub struct Conn {
    reader: BufReader<Source>,
    via: Via,
}

/// Send one request to `target`: over its socket, or over ssh with `--host`.
fn open(
    target: &Target,
    method: &str,
    params: Value,
    caller: Option<&str>,
    confirm: bool,
    half_close: bool,
) -> Result<Conn, ClientError> {
    let envelope = envelope(method, params, caller, confirm);
    if let Some(host) = &target.host {
        let (channel, stdout) =
            crate::remote::Channel::open(host, &line_of(&envelope), half_close)?;
        return Ok(Conn {
            reader: BufReader::new(Source {
                fd: Box::new(stdout),
                deadline: None,
            }),
            via: Via::Remote(channel),
        });
    }
    let (stream, served_by) = send_envelope(target, envelope, half_close)?;
    Ok(Conn {
        reader: BufReader::new(Source {
            fd: Box::new(stream),
            deadline: None,
        }),
        via: Via::Local(served_by),
    })
}

impl Conn {
    /// One line (at most [`RESPONSE_LINE_MAX_BYTES`]); 0 bytes at the end.
    fn read_line(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        (&mut self.reader)
            .take(RESPONSE_LINE_MAX_BYTES as u64)
            .read_until(b'\n', buf)
    }

    /// The connection ended (or failed) before its answer: what to report.
    fn lost(&mut self, target: &Target, otherwise: ClientError) -> ClientError {
        match &mut self.via {
            Via::Local(served_by) => lost(target, *served_by, otherwise),
            Via::Remote(channel) => channel.ended(otherwise),
        }
    }

    /// A stream ended without its end line, which a live daemon never does: locally the
    /// daemon restarted (or died); over ssh the host (or its daemon) went away.
    fn cut_short(&mut self, target: &Target) -> Result<(), ClientError> {
        match &mut self.via {
            Via::Local(served_by) => Err(restarted(target, *served_by).unwrap_or_else(|| {
                ClientError::Failed(ErrorBody::internal(
                    "the daemon closed the stream without its end line",
                ))
            })),
            Via::Remote(channel) => Err(channel.ended(ClientError::NoDaemon(ErrorBody::new(
                ErrorCode::Unreachable,
                "the stream ended without its end line",
            )))),
        }
    }

    /// An error line from the far side of ssh that means "could not reach a daemon there"
    /// becomes that (exit 3, naming the host); anything else is the daemon's own answer.
    fn unreached(&self, error: &ErrorBody) -> Option<ClientError> {
        match &self.via {
            Via::Remote(channel) => channel.unreached(error),
            Via::Local(_) => None,
        }
    }
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
    let mut conn = open(target, method, params, caller, confirm, false)?;
    // The daemon ends every stream with a line saying so (an `end`, or a refusal).
    let mut ended = false;
    loop {
        let mut buf = Vec::new();
        let n = match conn.read_line(&mut buf) {
            Ok(n) => n,
            Err(e) => return Err(conn.lost(target, failed("reading from", e))),
        };
        if n == 0 {
            if ended {
                return Ok(());
            }
            // Cut short: the daemon itself may be gone; a live one never does this.
            return conn.cut_short(target);
        }
        let value: Value = serde_json::from_slice(&buf).map_err(|e| {
            ClientError::Failed(ErrorBody::internal(format!(
                "unreadable line from the daemon: {e}"
            )))
        })?;
        if value["ok"] == false {
            if let Ok(error) = serde_json::from_value::<ErrorBody>(value["error"].clone()) {
                if let Some(e) = conn.unreached(&error) {
                    return Err(e);
                }
            }
        }
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
    let mut conn = open(target, method, params, caller, confirm, true)?;
    // A deadline past the end of time is none.
    conn.reader.get_mut().deadline = Instant::now().checked_add(timeout);
    let mut buf = Vec::new();
    match conn.read_line(&mut buf) {
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
        Err(e) => return Err(conn.lost(target, failed("reading from", e))),
    }
    if buf.is_empty() {
        return Err(conn.lost(
            target,
            ClientError::Failed(ErrorBody::internal(
                "the daemon closed the connection without answering",
            )),
        ));
    }
    let response = parse_response(&buf)?;
    if let Some(e) = response.error.as_ref().and_then(|e| conn.unreached(e)) {
        return Err(e);
    }
    Ok(response)
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
