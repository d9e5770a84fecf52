//! Daemon entry: validate the control dir, write the token, bind the socket, start the
//! actor tree, and run until SIGTERM/SIGINT or a core actor fails.

use crate::control_dir::{ControlDir, LockError, PID_FILE};
use crate::root_supervisor::{RootArgs, RootSupervisor};
use crate::session::SpawnContext;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use ractor::Actor;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio::signal::unix::{signal, SignalKind};

/// How to run the daemon.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// The control dir (created 0700 if missing, refused if not ours).
    pub control_dir: PathBuf,
    /// Folder of the `maxx` binary, put first on every child's `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Events the bus retains for `since` replay.
    pub bus_capacity: usize,
    /// fdatasync every journal write (power-loss durability; slower).
    pub fsync: bool,
    /// Closed/archived records kept, newest first, in memory and in `registry.json`.
    pub retain_records: usize,
    /// Long-lived connections (watches, attaches, waits, runs) served at once.
    pub max_long_lived: usize,
    /// The in-memory audit logs' bounds (per session and in all).
    pub audit: crate::audit_log::AuditLimits,
    /// Bytes the answers of screen reads in flight may hold together.
    pub screen_read_bytes: usize,
    /// The descriptor of this daemon's link to its keeper (`maxx daemon --keeper-fd`), if it
    /// runs under one: the survivors are read from it before anything is served.
    pub keeper_fd: Option<std::os::fd::RawFd>,
}

/// Why the daemon could not start or stopped abnormally.
#[derive(Debug)]
pub enum DaemonError {
    /// Another daemon holds this control dir's lock (it serves there); its pid if known.
    AlreadyRunning(PathBuf, Option<u32>),
    /// A file the daemon must use there is a symlink, FIFO or other non-regular file.
    UnsafeFile(String),
    /// The control dir itself is unsafe (symlink, not a dir, another owner, open mode).
    UnsafeControlDir(String),
    /// The control dir or socket could not be used.
    Io(io::Error),
    /// A core actor failed.
    Failed(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::AlreadyRunning(p, pid) => {
                write!(f, "a maxx daemon is already running on {}", p.display())?;
                match pid {
                    Some(pid) => write!(f, " (pid {pid})"),
                    None => Ok(()),
                }
            }
            DaemonError::UnsafeFile(why) | DaemonError::UnsafeControlDir(why) => f.write_str(why),
            DaemonError::Io(e) => write!(f, "{e}"),
            DaemonError::Failed(why) => write!(f, "daemon failed: {why}"),
        }
    }
}

impl std::error::Error for DaemonError {}

impl From<io::Error> for DaemonError {
    fn from(e: io::Error) -> Self {
        if let Some(u) = crate::control_dir::unsafe_control_dir(&e) {
            return DaemonError::UnsafeControlDir(u.to_string());
        }
        match crate::control_dir::unsafe_file(&e) {
            Some(u) => DaemonError::UnsafeFile(u.to_string()),
            None => DaemonError::Io(e),
        }
    }
}

impl DaemonError {
    /// The typed error `maxx daemon` reports for this.
    pub fn body(&self) -> ErrorBody {
        match self {
            DaemonError::AlreadyRunning(dir, _) => ErrorBody::new(
                ErrorCode::AlreadyRunning,
                self.to_string(),
            )
            .with_remedy(format!(
                "use the running daemon (`maxx status`), or stop it first (kill the pid in {}); pick another control dir with MAXX_CONTROL_DIR to run a second one",
                dir.join(PID_FILE).display()
            )),
            DaemonError::UnsafeFile(_) => ErrorBody::new(ErrorCode::UnsafeFile, self.to_string())
                .with_remedy(
                    "remove it (the daemon creates a fresh regular file) or replace it with a regular file you own",
                ),
            DaemonError::UnsafeControlDir(_) => {
                ErrorBody::new(ErrorCode::UnsafeControlDir, self.to_string()).with_remedy(
                    "fix it as the message says (maxx never repairs a control dir), or point \
                     MAXX_CONTROL_DIR at a fresh path",
                )
            }
            DaemonError::Io(_) | DaemonError::Failed(_) => ErrorBody::internal(self.to_string())
                .with_remedy("see the daemon's log (stderr, or daemon.log in the control dir when detached)"),
        }
    }
}

/// SIGHUP: the policy actor reads its file again and logs what changed (or why the file was
/// refused and the policy in force kept).
async fn reload_policy() {
    let Some(cell) = ractor::registry::where_is("policy") else {
        return;
    };
    let policy: ractor::ActorRef<crate::policy::PolicyMsg> = cell.into();
    let _ = policy
        .call(
            crate::policy::PolicyMsg::Reload,
            Some(std::time::Duration::from_secs(10)),
        )
        .await;
}

/// The pid a running daemon recorded, read without following links and bounded.
fn recorded_pid(dir: &ControlDir) -> Option<u32> {
    use std::io::Read;
    let file = crate::control_dir::open_regular(
        &dir.path().join(PID_FILE),
        std::fs::OpenOptions::new().read(true),
        false,
    )
    .ok()?;
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Run the daemon until a termination signal. `on_ready` is called once the socket
/// accepts requests.
pub async fn run(
    config: DaemonConfig,
    on_ready: impl FnOnce(&ControlDir),
) -> Result<(), DaemonError> {
    // Everything the daemon creates is private to the user, with no window between
    // creating a file and restricting it.
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(0o077) };
    let fd_budget = raise_fd_limit();
    let dir = ControlDir::prepare(&config.control_dir)?;
    // Single instance: whoever holds the lock owns the dir, whether or not its socket
    // answers right now (a full listen queue answers EAGAIN, which is not "dead").
    let _lock = match dir.lock() {
        Ok(lock) => lock,
        Err(LockError::Held) => {
            return Err(DaemonError::AlreadyRunning(
                dir.path().to_path_buf(),
                recorded_pid(&dir),
            ))
        }
        Err(LockError::Io(e)) => return Err(e.into()),
    };
    // Handle SIGTERM/SIGINT from before the socket exists: a stop that arrives as soon as
    // a caller can see the daemon must still be a clean stop.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    // SIGHUP reads the policy file again (as `daemon.reload`); the daemon keeps running.
    let mut hup = signal(SignalKind::hangup())?;
    // Under a keeper, SIGUSR2 is `maxx daemon upgrade` (the keeper forwards it): hand the
    // sessions over to the next daemon instead of ending them.
    let mut usr2 = match config.keeper_fd {
        Some(_) => Some(signal(SignalKind::user_defined2())?),
        None => None,
    };
    let socket_path = dir.socket_path();
    match std::fs::symlink_metadata(&socket_path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(DaemonError::UnsafeFile(format!(
                    "{} exists and is not a socket",
                    socket_path.display()
                )));
            }
            // We hold the lock, so no daemon serves it: left behind by one that died.
            std::fs::remove_file(&socket_path)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    // The keeper's handoff comes before the tree: the restored records are matched against it.
    let (keeper, handoff) = match config.keeper_fd {
        Some(fd) => {
            let (keeper, handoff) = crate::keeper_link::Keeper::connect(fd).await?;
            (Some(keeper), Some(handoff))
        }
        None => (None, None),
    };
    // A new token at every start, except for a daemon replacing one that died under the
    // same keeper: its callers never saw a stop, and keep the token they read.
    let kept_token = handoff
        .as_ref()
        .filter(|h| h.daemons_before > 0)
        .and_then(|_| dir.read_token().ok())
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()));
    let token = match kept_token {
        Some(token) => token,
        None => dir.write_new_token()?,
    };
    let listener = UnixListener::bind(&socket_path)?;
    std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o600))?;
    // The socket this daemon created, so that it only ever removes that one.
    let bound = std::fs::symlink_metadata(&socket_path).map(|m| (m.dev(), m.ino()))?;
    dir.write_private(PID_FILE, format!("{}\n", std::process::id()).as_bytes())?;
    let default_cwd = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from("/"));
    let spawn = Arc::new(SpawnContext {
        control_dir: dir.path().to_path_buf(),
        bin_dir: config.bin_dir.clone(),
        stats: Arc::new(crate::stats::Stats {
            audit_limits: config.audit,
            screen_read_limit: crate::stats::ScreenReadLimit(config.screen_read_bytes),
            fd_budget,
            ..Default::default()
        }),
        keeper: keeper.clone(),
    });
    let spawn_stats = spawn.stats.clone();
    let (root, root_handle) = Actor::spawn(
        Some("root".into()),
        RootSupervisor,
        RootArgs {
            listener,
            token,
            spawn,
            default_cwd,
            bus_capacity: config.bus_capacity,
            dir: dir.clone(),
            fsync: config.fsync,
            retain_records: config.retain_records,
            max_long_lived: config.max_long_lived,
            profiles_path: crate::profiles::profiles_path(),
            policy_path: crate::policy::policy_path(),
            handoff,
        },
    )
    .await
    .map_err(|e| DaemonError::Failed(e.to_string()))?;
    tracing::info!(control_dir = %dir.path().display(), pid = std::process::id(), "maxx daemon ready");
    // (The keeper heard `Ready` from the root, just before the listener started.)
    on_ready(&dir);

    let mut root_handle = root_handle;
    let vanished = control_dir_vanished(dir.path());
    tokio::pin!(vanished);
    let handover = async {
        match usr2.as_mut() {
            Some(usr2) => {
                usr2.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(handover);
    let result = loop {
        break tokio::select! {
            _ = &mut handover => hand_over(&spawn_stats).await,
            _ = term.recv() => { tracing::info!("SIGTERM: stopping"); Ok(()) }
            _ = int.recv() => { tracing::info!("SIGINT: stopping"); Ok(()) }
            _ = hup.recv() => {
                reload_policy().await;
                continue;
            }
            why = &mut vanished => {
                // Nobody can reach this daemon any more, and a new one may start in a fresh
                // dir: stop rather than leave unreachable sessions behind.
                tracing::error!(%why, "stopping");
                Err(DaemonError::Failed(why))
            }
            _ = &mut root_handle => Err(DaemonError::Failed("the actor tree stopped".into())),
        };
    };
    // Whatever the reason, this path ends every session: the keeper must not restart us.
    if let Some(keeper) = &keeper {
        keeper.stopping().await;
    }
    // Fold the journal into registry.json before the tree goes away.
    if let Some(cell) = ractor::registry::where_is("persistence") {
        let persist: ractor::ActorRef<crate::persistence::PersistMsg> = cell.into();
        let _ = persist
            .call(
                crate::persistence::PersistMsg::Flush,
                Some(std::time::Duration::from_secs(30)),
            )
            .await;
    }
    // End every session (dropping its PTY starts ending its process group) while the
    // runtime still runs the reapers, then wait for them below.
    if let Some(sessions) = ractor::registry::where_is("sessions") {
        use crate::session_supervisor::{SessionSupervisorMsg, STOP_ALL_GRACE};
        let sessions: ractor::ActorRef<SessionSupervisorMsg> = sessions.into();
        let grace = STOP_ALL_GRACE + std::time::Duration::from_secs(5);
        match sessions
            .call(SessionSupervisorMsg::StopAll, Some(grace))
            .await
        {
            Ok(ractor::rpc::CallResult::Success(report)) if report.live_states == 0 => {
                tracing::info!(sessions = report.of, "every session actor stopped");
            }
            Ok(ractor::rpc::CallResult::Success(report)) => {
                tracing::warn!(
                    stopped = report.stopped,
                    of = report.of,
                    live_states = report.live_states,
                    "some session actors did not stop in time; their process groups are \
                     ended by the reapers"
                );
            }
            _ => tracing::warn!("the session supervisor did not answer the stop"),
        }
    }
    root.stop(None);
    let _ = root_handle.await;
    // Every session's process group ended (or the grace ran out) before we go.
    crate::pty::wait_for_reapers(crate::pty::KILL_GRACE + std::time::Duration::from_secs(5)).await;
    // Only remove the socket if it is still the one we bound (same device and inode), and
    // the pid file while we still hold the lock.
    if std::fs::symlink_metadata(&socket_path).is_ok_and(|m| (m.dev(), m.ino()) == bound) {
        let _ = std::fs::remove_file(&socket_path);
    }
    let _ = std::fs::remove_file(dir.path().join(PID_FILE));
    drop(_lock);
    result
}

/// How long an upgrade waits for the short requests in flight to be answered.
pub const UPGRADE_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// `maxx daemon upgrade`: stop accepting (a new client finds no daemon and, a keeper being
/// there, waits for the next one), let the short requests in flight be answered (at most
/// [`UPGRADE_DRAIN`]), fold the journal (every acknowledged change is already in it; the
/// fold only saves the next daemon a replay) and exit without ending any session: the
/// keeper, which holds every master and is about to be every child's parent, hands them to
/// the daemon it starts from the binary on disk. Streams, waits and attaches are cut (the
/// CLI reports `daemon_restarted`); `Stopping` is never sent.
async fn hand_over(stats: &crate::stats::Stats) -> ! {
    tracing::warn!("SIGUSR2: handing the sessions over to a new daemon (upgrade)");
    if let Some(cell) = ractor::registry::where_is("listener") {
        let listener: ractor::ActorRef<crate::listener::ListenerMsg> = cell.into();
        let _ = listener
            .call(crate::listener::ListenerMsg::Close, Some(UPGRADE_DRAIN))
            .await;
    }
    let in_flight = || {
        stats.connections.load(std::sync::atomic::Ordering::Relaxed)
            - stats.long_lived.load(std::sync::atomic::Ordering::Relaxed)
    };
    let deadline = tokio::time::Instant::now() + UPGRADE_DRAIN;
    loop {
        let changed = stats.connection_changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if in_flight() <= 0 {
            break;
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            tracing::warn!(
                requests = in_flight(),
                "requests still in flight after the upgrade's drain; they are cut"
            );
            break;
        }
    }
    if let Some(cell) = ractor::registry::where_is("persistence") {
        let persist: ractor::ActorRef<crate::persistence::PersistMsg> = cell.into();
        let _ = persist
            .call(
                crate::persistence::PersistMsg::Flush,
                Some(std::time::Duration::from_secs(30)),
            )
            .await;
    }
    std::process::exit(0)
}

/// Resolves when the control dir or its socket is deleted or moved away (inotify, no
/// polling). Never resolves if inotify is unavailable.
async fn control_dir_vanished(dir: &std::path::Path) -> String {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let Ok(inotify) = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) else {
        return std::future::pending().await;
    };
    let flags = AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM;
    if inotify.add_watch(dir, flags).is_err() {
        return std::future::pending().await;
    }
    struct Watch(Inotify);
    impl std::os::fd::AsRawFd for Watch {
        fn as_raw_fd(&self) -> std::os::fd::RawFd {
            std::os::fd::AsFd::as_fd(&self.0).as_raw_fd()
        }
    }
    // SAFETY: the Inotify owns its fd for as long as the AsyncFd lives.
    let Ok(afd) = (unsafe { tokio::io::unix::AsyncFd::register(Watch(inotify)) }) else {
        return std::future::pending().await;
    };
    loop {
        let Ok(mut guard) = afd.readable().await else {
            return std::future::pending().await;
        };
        let events = match guard.try_io(|i| i.get_ref().0.read_events().map_err(io::Error::from)) {
            Ok(Ok(events)) => events,
            Ok(Err(_)) | Err(_) => continue,
        };
        for e in events {
            if e.mask
                .intersects(AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF)
            {
                return format!("the control dir {} was removed", dir.display());
            }
            if e.name.as_deref() == Some(std::ffi::OsStr::new(crate::control_dir::SOCKET_FILE)) {
                return format!(
                    "{} was removed",
                    dir.join(crate::control_dir::SOCKET_FILE).display()
                );
            }
        }
    }
}

/// Descriptors a live session holds in the daemon: its PTY master twice (the pump's reader
/// and the writer), its child's pidfd and its screen log (a memfd the keeper also holds).
/// Measured with `/proc/<daemon>/fd` (docs/performance.md).
pub const FDS_PER_SESSION: u64 = 4;

/// The open-files limit the daemon runs with, and the live sessions it leaves room for.
#[derive(Debug, Default, Clone, Copy)]
pub struct FdBudget {
    /// `RLIMIT_NOFILE` (soft, after raising it to the hard limit); 0 = unknown.
    pub limit: u64,
    /// Live sessions that fit: the limit less a reserve for connections, the control dir's
    /// files and the runtime (a quarter of it, at least 64 and at most
    /// `MAX_CONNECTIONS` + 64), over [`FDS_PER_SESSION`].
    pub sessions: u64,
}

impl FdBudget {
    /// The budget under an open-files limit of `limit`.
    pub fn of(limit: u64) -> FdBudget {
        let most = maxx_protocol::limits::MAX_CONNECTIONS as u64 + 64;
        let reserve = (limit / 4).clamp(64, most);
        FdBudget {
            limit,
            sessions: limit.saturating_sub(reserve) / FDS_PER_SESSION,
        }
    }
}

/// 1,000 sessions need ~3,000 descriptors: lift the soft limit to the hard one (never the
/// hard limit itself: that is the administrator's), and say how many sessions the result
/// leaves room for (a create past that is refused `fd_limit` instead of failing inside a
/// spawn, or starving the listener of connections).
fn raise_fd_limit() -> FdBudget {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return FdBudget::default();
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let budget = FdBudget::of(limit);
    tracing::info!(
        fd_limit = limit,
        session_capacity = budget.sessions,
        "open-files limit"
    );
    if budget.sessions < 1000 {
        tracing::warn!(
            fd_limit = limit,
            session_capacity = budget.sessions,
            "the open-files hard limit leaves room for fewer than 1,000 sessions; raise it \
             (`ulimit -Hn`, LimitNOFILE= in the service unit) for more"
        );
    }
    budget
}
