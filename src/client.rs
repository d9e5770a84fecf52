//! The CLI's side of the wire: find the control dir, read the token, send one request
//! line, read one response line. Blocking std I/O: the CLI makes one request per run.

use maxx_actors::control_dir::{default_control_dir, ControlDir, SOCKET_FILE};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::RESPONSE_LINE_MAX_BYTES;
use maxx_protocol::{RequestEnvelope, Response};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

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
    let mut stream = match UnixStream::connect(target.socket_path()) {
        Ok(s) => s,
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
    stream
        .write_all(&line)
        .map_err(|e| failed("writing to", e))?;
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
    let mut reader = BufReader::new(stream);
    loop {
        let mut buf = Vec::new();
        let n = (&mut reader)
            .take(RESPONSE_LINE_MAX_BYTES as u64)
            .read_until(b'\n', &mut buf)
            .map_err(|e| failed("reading from", e))?;
        if n == 0 {
            return Ok(());
        }
        let value: Value = serde_json::from_slice(&buf).map_err(|e| {
            ClientError::Failed(ErrorBody::internal(format!(
                "unreadable line from the daemon: {e}"
            )))
        })?;
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
        Err(e) => return Err(failed("reading from", e)),
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
