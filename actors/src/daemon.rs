//! Daemon entry: validate the control dir, write the token, bind the socket, start the
//! actor tree, and run until SIGTERM/SIGINT or a core actor fails.

use crate::control_dir::{ControlDir, PID_FILE};
use crate::root_supervisor::{RootArgs, RootSupervisor};
use crate::session::SpawnContext;
use ractor::Actor;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};
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
}

/// Why the daemon could not start or stopped abnormally.
#[derive(Debug)]
pub enum DaemonError {
    /// Another daemon answers on this control dir's socket.
    AlreadyRunning(PathBuf),
    /// The control dir or socket could not be used.
    Io(io::Error),
    /// A core actor failed.
    Failed(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::AlreadyRunning(p) => {
                write!(f, "a maxx daemon is already running at {}", p.display())
            }
            DaemonError::Io(e) => write!(f, "{e}"),
            DaemonError::Failed(why) => write!(f, "daemon failed: {why}"),
        }
    }
}

impl std::error::Error for DaemonError {}

impl From<io::Error> for DaemonError {
    fn from(e: io::Error) -> Self {
        DaemonError::Io(e)
    }
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
    raise_fd_limit();
    let dir = ControlDir::prepare(&config.control_dir)?;
    let socket_path = dir.socket_path();
    match std::fs::symlink_metadata(&socket_path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(DaemonError::Io(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", socket_path.display()),
                )));
            }
            if UnixStream::connect(&socket_path).await.is_ok() {
                return Err(DaemonError::AlreadyRunning(socket_path));
            }
            // A socket nobody answers on: left behind by a daemon that died.
            std::fs::remove_file(&socket_path)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let token = dir.write_new_token()?;
    let listener = UnixListener::bind(&socket_path)?;
    std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o600))?;
    dir.write_private(PID_FILE, format!("{}\n", std::process::id()).as_bytes())?;
    let default_cwd = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from("/"));
    let spawn = Arc::new(SpawnContext {
        control_dir: dir.path().to_path_buf(),
        bin_dir: config.bin_dir.clone(),
        stats: Arc::new(crate::stats::Stats::default()),
    });
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
            profiles_path: crate::profiles::profiles_path(),
            policy_path: crate::policy::policy_path(),
        },
    )
    .await
    .map_err(|e| DaemonError::Failed(e.to_string()))?;
    tracing::info!(control_dir = %dir.path().display(), pid = std::process::id(), "maxx daemon ready");
    on_ready(&dir);

    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut root_handle = root_handle;
    let vanished = control_dir_vanished(dir.path());
    let result = tokio::select! {
        _ = term.recv() => { tracing::info!("SIGTERM: stopping"); Ok(()) }
        _ = int.recv() => { tracing::info!("SIGINT: stopping"); Ok(()) }
        why = vanished => {
            // Nobody can reach this daemon any more, and a new one may start in a fresh
            // dir: stop rather than leave unreachable sessions behind.
            tracing::error!(%why, "stopping");
            Err(DaemonError::Failed(why))
        }
        _ = &mut root_handle => Err(DaemonError::Failed("the actor tree stopped".into())),
    };
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
    root.stop(None);
    let _ = root_handle.await;
    // Only remove the socket if it is still the one we bound.
    if std::fs::symlink_metadata(&socket_path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(&socket_path);
    }
    let _ = std::fs::remove_file(dir.path().join(PID_FILE));
    result
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

/// 1,000 sessions need ~3,000 descriptors: lift the soft limit to the hard one.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
