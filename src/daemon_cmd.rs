//! `maxx daemon`: run the control plane in the foreground, or `--detach` it. Detaching
//! re-executes this binary in a new session and waits on a pipe until the child says it
//! is ready (or why it failed), so a caller never has to poll for the socket.

use crate::cli::{DaemonAction, DaemonArgs};
use crate::client::Target;
use crate::{exit, report};
use maxx_actors::control_dir::ControlDir;
use maxx_actors::{DaemonConfig, DaemonError};
use maxx_protocol::error::ErrorBody;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Env var naming the fd a detached daemon reports readiness on.
const READY_FD_ENV: &str = "MAXX_READY_FD";
/// The fd number the readiness pipe is placed at in the child.
const READY_FD: i32 = 3;
/// How long a starting daemon may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the daemon logs.
pub enum LogTarget {
    /// Foreground: stderr.
    Stderr,
    /// Detached: `daemon.log` in the control dir, opened by [`open_log`].
    File(std::fs::File),
}

/// Open `daemon.log` for appending: without following links, never blocking, refusing
/// anything but a regular file, 0600 when created.
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    maxx_actors::control_dir::open_regular(
        path,
        OpenOptions::new().create(true).append(true).mode(0o600),
        false,
    )
}

fn init_logging(level: &str, target: LogTarget) {
    use tracing_subscriber::EnvFilter;
    // ractor opens two INFO spans for every actor it starts (one per connection, per
    // session): their ids formatted, entered and exited under the filter on every message.
    // They say nothing our own lines do not (session ids are fields), so they stay off
    // unless asked for with RUST_LOG; ractor's own warnings and errors still show.
    let ractor = if level == "error" { "error" } else { "warn" };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{level},ractor={ractor}")));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match target {
        LogTarget::Stderr => {
            // Colour only for a person: stderr a terminal and NO_COLOR unset.
            use std::io::IsTerminal;
            let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let _ = builder
                .with_ansi(ansi)
                .with_writer(std::io::stderr)
                .try_init();
        }
        LogTarget::File(file) => {
            let _ = builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
    }
    // Panics caught by the actor runtime still reach the hook: log them, cheaply.
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "panic");
    }));
}

/// The daemon's tunables, as `maxx daemon` takes them.
pub struct Tuning {
    /// Events the bus retains.
    pub bus_capacity: usize,
    /// fdatasync every journal write.
    pub fsync: bool,
    /// Closed/archived records kept.
    pub retain_records: usize,
    /// Long-lived connections served at once.
    pub max_long_lived: usize,
    /// The in-memory audit logs' bounds.
    pub audit: maxx_actors::audit_log::AuditLimits,
    /// Bytes the answers of screen reads in flight may hold together.
    pub screen_read_bytes: usize,
}

/// `maxx daemon stop|reload|status`: requests to the running daemon.
pub fn manage(
    target: &Target,
    caller: &Option<String>,
    confirm: bool,
    action: DaemonAction,
) -> i32 {
    let send = |method: &'static str, timeout: Duration| {
        crate::client::request(
            target,
            method,
            serde_json::json!({}),
            caller.as_deref(),
            confirm,
            timeout,
        )
    };
    match action {
        DaemonAction::Status(a) => crate::human::status(target, caller, a),
        DaemonAction::Upgrade => match upgrade(&target.control_dir) {
            Ok(result) => {
                println!("{}", serde_json::json!({"ok": true, "result": result}));
                exit::OK
            }
            Err((code, body)) => {
                report::print_error(&body);
                code
            }
        },
        DaemonAction::Reload => report::response(
            "daemon.reload",
            send("daemon.reload", crate::request::CLIENT_TIMEOUT),
        ),
        DaemonAction::Stop(a) => {
            let answer = send("daemon.stop", crate::request::CLIENT_TIMEOUT);
            let result = match &answer {
                Ok(r) if r.ok => r.result.clone().unwrap_or_default(),
                _ => return report::response("daemon.stop", answer),
            };
            let pid_of = |v: &serde_json::Value| v.as_u64().and_then(|p| u32::try_from(p).ok());
            // The daemon, then its keeper (which ends once the daemon told it it is stopping).
            let pids = [pid_of(&result["pid"]), pid_of(&result["keeper"]["pid"])];
            let deadline = std::time::Instant::now() + a.timeout;
            let waited = pids.into_iter().flatten().try_for_each(|pid| {
                wait_until_gone(
                    pid,
                    deadline.saturating_duration_since(std::time::Instant::now()),
                )
            });
            match waited {
                Ok(()) => report::response("daemon.stop", answer),
                Err(e) => {
                    report::print_error(&e);
                    exit::FAILED
                }
            }
        }
    }
}

/// Wait, without polling, until process `pid` (the daemon that accepted the stop) has
/// exited: its pidfd becomes readable then. By that time its socket, pid file and lock are
/// gone too (it removes them on its way out).
fn wait_until_gone(pid: u32, timeout: Duration) -> Result<(), ErrorBody> {
    // SAFETY: plain syscall; returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            // Already gone.
            Some(libc::ESRCH) => Ok(()),
            _ => Err(ErrorBody::internal(format!(
                "cannot watch the daemon (pid {pid}): {}",
                std::io::Error::last_os_error()
            ))),
        };
    }
    // SAFETY: the kernel just gave us this descriptor.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut poll, 1, ms) } {
        1 => Ok(()),
        0 => Err(ErrorBody::new(
            maxx_protocol::ErrorCode::Timeout,
            format!(
                "the daemon (pid {pid}) accepted the stop but is still running after {}s (it \
                 ends every session's processes first)",
                timeout.as_secs()
            ),
        )
        .with_remedy("wait longer (--timeout), or see daemon.log in the control dir")),
        _ => Err(ErrorBody::internal(format!(
            "cannot wait for the daemon (pid {pid}): {}",
            std::io::Error::last_os_error()
        ))),
    }
}

/// `maxx daemon [--detach]`: the flags to a foreground daemon, or to a detached one's
/// command line.
pub fn command(target: &Target, d: DaemonArgs) -> i32 {
    if d.detach {
        let mut extra = vec![
            "--bus-capacity".to_string(),
            d.bus_capacity.to_string(),
            "--retain-records".to_string(),
            d.retain_records.to_string(),
            "--max-long-lived".to_string(),
            d.max_long_lived.to_string(),
            "--audit-session-bytes".to_string(),
            d.audit_session_bytes.to_string(),
            "--audit-total-bytes".to_string(),
            d.audit_total_bytes.to_string(),
            "--screen-read-bytes".to_string(),
            d.screen_read_bytes.to_string(),
        ];
        if d.fsync {
            extra.push("--fsync".into());
        }
        return match spawn_detached(&target.control_dir, &d.log_level, &extra) {
            Ok(()) => exit::OK,
            Err(e) => {
                report::print_error(&e);
                exit::FAILED
            }
        };
    }
    // `maxx daemon` is the keeper; the keeper starts the daemon proper with `--keeper-fd`.
    let Some(keeper_fd) = d.keeper_fd else {
        return crate::keeper::run(&target.control_dir, d.detached_child, &d.log_level);
    };
    run_foreground(
        target.control_dir.clone(),
        &d.log_level,
        d.detached_child,
        Tuning {
            bus_capacity: d.bus_capacity,
            fsync: d.fsync,
            retain_records: d.retain_records,
            max_long_lived: d.max_long_lived,
            audit: maxx_actors::audit_log::AuditLimits {
                session_max: d.audit_session_bytes,
                total_max: d.audit_total_bytes,
            },
            screen_read_bytes: d.screen_read_bytes,
        },
        Some(keeper_fd),
    )
}

/// How long `maxx daemon upgrade` waits for the new daemon to serve.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(30);

/// A pid from a file in the control dir (bounded, no link followed).
fn read_pid(dir: &Path, name: &str) -> Option<u32> {
    let file = maxx_actors::control_dir::open_regular(
        &dir.join(name),
        OpenOptions::new().read(true),
        false,
    )
    .ok()?;
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// `maxx daemon upgrade`: SIGUSR2 to the keeper, which has the daemon hand its sessions over
/// and starts the binary on disk; returns once a different daemon answers `daemon.status`
/// (woken by inotify on the control dir, at most [`UPGRADE_TIMEOUT`]).
fn upgrade(control_dir: &Path) -> Result<serde_json::Value, (i32, ErrorBody)> {
    use maxx_actors::control_dir::{KEEPER_PID_FILE, PID_FILE};
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let no_keeper = || {
        (
            exit::NO_DAEMON,
            ErrorBody::new(
                maxx_protocol::ErrorCode::NoDaemon,
                format!("no keeper runs for {}", control_dir.display()),
            )
            .with_remedy("start the daemon with `maxx daemon` (or `--detach`); only a daemon run by its keeper can be upgraded"),
        )
    };
    ControlDir::open(control_dir).map_err(|_| no_keeper())?;
    let keeper = read_pid(control_dir, KEEPER_PID_FILE).ok_or_else(no_keeper)?;
    let old = read_pid(control_dir, PID_FILE).ok_or_else(no_keeper)?;
    let internal = |e: String| {
        (
            exit::FAILED,
            ErrorBody::internal(e).with_remedy("see daemon.log (or the keeper's stderr)"),
        )
    };
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
        .map_err(|e| internal(format!("inotify: {e}")))?;
    inotify
        .add_watch(
            control_dir,
            AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CLOSE_WRITE,
        )
        .map_err(|e| internal(format!("inotify: {e}")))?;
    // SAFETY: kill with a pid read from the keeper's own file; ESRCH is reported below.
    if unsafe { libc::kill(keeper as i32, libc::SIGUSR2) } != 0 {
        return Err(no_keeper());
    }
    let target = Target {
        control_dir: control_dir.to_path_buf(),
        socket: None,
        host: None,
    };
    let deadline = std::time::Instant::now() + UPGRADE_TIMEOUT;
    loop {
        if let Some(new) = read_pid(control_dir, PID_FILE).filter(|p| *p != old) {
            if let Ok(r) = crate::client::request(
                &target,
                "daemon.status",
                serde_json::json!({}),
                None,
                false,
                Duration::from_secs(10),
            ) {
                if r.ok && r.result.as_ref().is_some_and(|s| s["pid"] == new) {
                    return Ok(serde_json::json!({
                        "previous_pid": old, "pid": new, "keeper_pid": keeper,
                        "keeper": r.result.as_ref().map(|s| s["keeper"].clone()),
                    }));
                }
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(internal(format!(
                "no new daemon answered within {}s of the upgrade request",
                UPGRADE_TIMEOUT.as_secs()
            )));
        }
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(&inotify),
            PollFlags::POLLIN,
        )];
        let ms = PollTimeout::try_from(left.as_millis().max(1) as i32).unwrap_or(PollTimeout::MAX);
        let _ = poll(&mut fds, ms);
        let _ = inotify.read_events();
    }
}

/// Run the daemon in this process. With `detached`, log to the control dir and report
/// readiness on `MAXX_READY_FD`.
pub fn run_foreground(
    control_dir: PathBuf,
    log_level: &str,
    detached: bool,
    tuning: Tuning,
    keeper_fd: Option<i32>,
) -> i32 {
    let ready_fd: Option<OwnedFd> = if detached {
        std::env::var(READY_FD_ENV)
            .ok()
            .and_then(|v| v.parse::<i32>().ok())
            // SAFETY: the parent placed the pipe's write end at this fd for us.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
    } else {
        None
    };
    // SAFETY: removing our own env var before any thread starts.
    unsafe { std::env::remove_var(READY_FD_ENV) };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("maxx-worker")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return report_failure(
                ready_fd,
                ErrorBody::internal(format!("cannot start the runtime: {e}")),
            )
        }
    };
    let bin_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let config = DaemonConfig {
        control_dir: control_dir.clone(),
        bin_dir,
        bus_capacity: tuning.bus_capacity,
        fsync: tuning.fsync,
        retain_records: tuning.retain_records,
        max_long_lived: tuning.max_long_lived,
        audit: tuning.audit,
        screen_read_bytes: tuning.screen_read_bytes,
        keeper_fd,
    };
    let mut ready_fd = ready_fd;
    let result = runtime.block_on(async {
        // A detached daemon logs into the control dir, so only once it is known to be ours,
        // and never through a symlink or into a FIFO.
        if !detached {
            init_logging(log_level, LogTarget::Stderr);
        } else if ControlDir::prepare(&control_dir).is_ok() {
            let log = control_dir.join(maxx_actors::control_dir::LOG_FILE);
            match open_log(&log) {
                Ok(file) => init_logging(log_level, LogTarget::File(file)),
                Err(e) => return Err(DaemonError::from(e)),
            }
        }
        maxx_actors::run(config, |_dir| {
            if let Some(fd) = ready_fd.take() {
                let mut f = std::fs::File::from(fd);
                let _ = f.write_all(b"ok\n");
            }
            notify_service_manager("READY=1");
        })
        .await
    });
    runtime.shutdown_timeout(Duration::from_secs(3));
    match result {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = %e, "daemon stopped");
            report_failure(ready_fd, e.body())
        }
    }
}

/// Report why the daemon did not start (or stopped): on the readiness pipe as
/// `err <error JSON>` when detached, else as the error object on stderr.
fn report_failure(ready_fd: Option<OwnedFd>, body: ErrorBody) -> i32 {
    let body = match body.remedy {
        Some(_) => body,
        None => body.with_remedy("see the daemon's log"),
    };
    match ready_fd {
        Some(fd) => {
            let mut f = std::fs::File::from(fd);
            let _ = writeln!(
                f,
                "err {}",
                serde_json::to_string(&body).unwrap_or_default()
            );
        }
        None => {
            eprintln!("{}", serde_json::json!({"ok": false, "error": body}));
        }
    }
    1
}

/// Start a detached daemon on `control_dir` and wait until it is ready. A refusal comes
/// back typed (`already_running`, `unsafe_file`), anything else as `internal`.
pub fn spawn_detached(
    control_dir: &Path,
    log_level: &str,
    extra: &[String],
) -> Result<(), ErrorBody> {
    spawn_detached_inner(control_dir, log_level, extra).map_err(|e| match e {
        Refused::Typed(body) => body,
        Refused::Other(message) => ErrorBody::internal(message).with_remedy(
            "see daemon.log in the control dir, or run `maxx daemon` in the foreground",
        ),
    })
}

enum Refused {
    Typed(ErrorBody),
    Other(String),
}

impl From<String> for Refused {
    fn from(message: String) -> Self {
        Refused::Other(message)
    }
}

fn spawn_detached_inner(
    control_dir: &Path,
    log_level: &str,
    extra: &[String],
) -> Result<(), Refused> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the maxx binary: {e}"))?;
    let (read_end, write_end) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let write_raw = write_end.as_raw_fd();
    let mut cmd = Command::new(exe);
    cmd.arg("daemon")
        .arg("--log-level")
        .arg(log_level)
        .arg("--detached-child")
        .args(extra)
        .env("MAXX_CONTROL_DIR", control_dir)
        .env(READY_FD_ENV, READY_FD.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // dup2 clears CLOEXEC on the new fd, so the child inherits it.
            if libc::dup2(write_raw, READY_FD) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"))?;
    drop(write_end);
    let answer = read_ready(read_end, START_TIMEOUT);
    // Reap it if it already died; a running daemon is re-parented to init when we exit.
    let _ = child.try_wait();
    match answer {
        Ok(line) if line.trim() == "ok" => Ok(()),
        Ok(line) if line.starts_with("err ") => {
            let text = line[4..].trim();
            Err(match serde_json::from_str::<ErrorBody>(text) {
                Ok(body) => Refused::Typed(body),
                Err(_) => Refused::Other(text.to_string()),
            })
        }
        Ok(_) => Err(Refused::Other(
            "the daemon exited before it was ready (see daemon.log)".into(),
        )),
        Err(e) => Err(Refused::Other(e)),
    }
}

fn read_ready(read_end: OwnedFd, timeout: Duration) -> Result<String, String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(
        std::os::fd::AsFd::as_fd(&read_end),
        PollFlags::POLLIN,
    )];
    let ms = PollTimeout::try_from(timeout.as_millis() as i32).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, ms) {
        Ok(0) => {
            return Err(format!(
                "the daemon did not become ready within {}s",
                timeout.as_secs()
            ))
        }
        Ok(_) => {}
        Err(e) => return Err(format!("poll: {e}")),
    }
    let mut f = std::fs::File::from(read_end);
    let mut buf = String::new();
    let _ = (&mut f).take(4096).read_to_string(&mut buf);
    Ok(buf)
}

/// Tell systemd (a `Type=notify` unit, `contrib/maxx.service`) how the daemon is doing: the
/// notify protocol is one datagram of `KEY=VALUE` lines to `$NOTIFY_SOCKET` (a path, or an
/// abstract name written with a leading `@`). Nothing happens outside such a unit.
fn notify_service_manager(state: &str) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())
        }
        None => SocketAddr::from_pathname(&path),
    };
    let sent = addr.and_then(|addr| {
        let socket = UnixDatagram::unbound()?;
        let message = format!("{state}\nMAINPID={}\n", std::process::id());
        socket.send_to_addr(message.as_bytes(), &addr)
    });
    if let Err(e) = sent {
        tracing::warn!(error = %e, "could not notify the service manager ({state})");
    }
}
