//! The control directory: `$MAXX_CONTROL_DIR`, else `/tmp/maxx-control-<uid>`.
//!
//! It lives in world-writable `/tmp`, so before anything is read from or written into it,
//! it must be ours: a real directory (not a symlink), owned by our uid, mode 0700 with no
//! group/other bits. A directory that fails the check is refused, never repaired.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Socket file name inside the control dir.
pub const SOCKET_FILE: &str = "control.sock";
/// Token file name inside the control dir.
pub const TOKEN_FILE: &str = "token";
/// Pid of the running daemon.
pub const PID_FILE: &str = "daemon.pid";
/// Pid of the keeper that runs the daemon (`daemon.pid` names the daemon itself).
pub const KEEPER_PID_FILE: &str = "keeper.pid";
/// Log file of a detached daemon.
pub const LOG_FILE: &str = "daemon.log";
/// Lock file: held (`flock`) by the running daemon for its whole life.
pub const LOCK_FILE: &str = "daemon.lock";

/// Why a file the daemon reads or writes was refused: it is a symlink, a FIFO, a device, a
/// directory or a socket where a regular file belongs. Carried inside an [`io::Error`]
/// (kind `InvalidInput`); find it with [`unsafe_file`].
#[derive(Debug)]
pub struct UnsafeFile {
    /// The path refused.
    pub path: PathBuf,
    /// What it is instead of a regular file.
    pub what: &'static str,
}

impl std::fmt::Display for UnsafeFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {}, not a regular file; refusing to read or write through it",
            self.path.display(),
            self.what
        )
    }
}

impl std::error::Error for UnsafeFile {}

/// Why the control dir was refused: a symlink, not a directory, another owner, or open to
/// others. Carried inside an [`io::Error`] (kind `PermissionDenied`); find it with
/// [`unsafe_control_dir`]. The dir is never repaired: the remedy is the person's.
#[derive(Debug)]
pub struct UnsafeControlDir {
    /// The directory refused.
    pub path: PathBuf,
    /// What is wrong with it, with what to do.
    pub why: String,
}

impl std::fmt::Display for UnsafeControlDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing control dir {}: {}",
            self.path.display(),
            self.why
        )
    }
}

impl std::error::Error for UnsafeControlDir {}

/// The [`UnsafeControlDir`] an error carries, if it is one.
pub fn unsafe_control_dir(e: &io::Error) -> Option<&UnsafeControlDir> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<UnsafeControlDir>())
}

/// The [`UnsafeFile`] an error carries, if it is one.
pub fn unsafe_file(e: &io::Error) -> Option<&UnsafeFile> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<UnsafeFile>())
}

fn refuse_file(path: &Path, what: &'static str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        UnsafeFile {
            path: path.to_path_buf(),
            what,
        },
    )
}

fn file_kind(ft: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_symlink() {
        "a symlink"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Open `path` with `opts`, refusing anything but a regular file, without ever blocking:
/// `O_NONBLOCK` (a FIFO neither blocks the open nor a read; it is refused after `fstat`),
/// `O_CLOEXEC`, and with `follow_links` false `O_NOFOLLOW` (a symlink is refused, never
/// opened through). Once `fstat` shows a regular file, `O_NONBLOCK` is cleared again, so
/// reads and writes behave as usual.
pub fn open_regular(
    path: &Path,
    opts: &mut fs::OpenOptions,
    follow_links: bool,
) -> io::Result<fs::File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if !follow_links {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match opts.custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) => {
            let kind = match e.raw_os_error() {
                // O_NOFOLLOW on a symlink.
                Some(libc::ELOOP) if !follow_links => Some("a symlink"),
                // Opening a directory for writing.
                Some(libc::EISDIR) => Some("a directory"),
                // A FIFO opened for writing with nobody reading, or a socket.
                Some(libc::ENXIO) | Some(libc::EOPNOTSUPP) => Some(
                    fs::symlink_metadata(path)
                        .map(|m| file_kind(m.file_type()))
                        .unwrap_or("not a regular file"),
                ),
                _ => None,
            };
            return Err(match kind {
                Some(what) => refuse_file(path, what),
                None => e,
            });
        }
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(refuse_file(path, file_kind(meta.file_type())));
    }
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on an fd we own.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Why [`read_regular_bounded`] read nothing.
#[derive(Debug)]
pub enum ReadBoundedError {
    /// Not a regular file (a symlink when links are not followed, a FIFO, a directory, a
    /// socket, a device): the [`UnsafeFile`] error, whose `what` says which.
    NotRegular(io::Error),
    /// `fstat` showed this many bytes, over the bound; nothing was read.
    TooLarge(u64),
    /// The file grew past the bound while it was read.
    Grew,
    /// Opening, `fstat` or reading failed.
    Io(io::Error),
}

impl ReadBoundedError {
    /// What the file is instead of a regular file, for [`ReadBoundedError::NotRegular`].
    pub fn what(&self) -> Option<&'static str> {
        match self {
            ReadBoundedError::NotRegular(e) => unsafe_file(e).map(|u| u.what),
            _ => None,
        }
    }
}

/// Read a whole regular file of at most `max` bytes: opened through [`open_regular`] (never
/// blocking on a FIFO, a symlink refused unless `follow_links`), its size checked with
/// `fstat` before anything is read and again while reading. `Ok(None)` when there is no
/// file. The one bounded reader for the registry, the policy file and the profiles file;
/// each caller words the errors its own way.
pub fn read_regular_bounded(
    path: &Path,
    max: u64,
    follow_links: bool,
) -> Result<Option<Vec<u8>>, ReadBoundedError> {
    use std::io::Read;
    let file = match open_regular(path, fs::OpenOptions::new().read(true), follow_links) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if unsafe_file(&e).is_some() => return Err(ReadBoundedError::NotRegular(e)),
        Err(e) => return Err(ReadBoundedError::Io(e)),
    };
    let len = file.metadata().map_err(ReadBoundedError::Io)?.len();
    if len > max {
        return Err(ReadBoundedError::TooLarge(len));
    }
    let mut buf = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(ReadBoundedError::Io)?;
    if buf.len() as u64 > max {
        return Err(ReadBoundedError::Grew);
    }
    Ok(Some(buf))
}

/// The running daemon's hold on a control dir: an exclusive `flock` on `daemon.lock`,
/// released when this is dropped (or the process dies, however it dies).
#[derive(Debug)]
pub struct InstanceLock {
    _file: fs::File,
}

/// Why [`ControlDir::lock`] did not get the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it: a daemon serves this dir.
    Held,
    /// The lock file could not be opened or locked.
    Io(io::Error),
}

/// A validated control directory.
#[derive(Debug, Clone)]
pub struct ControlDir {
    path: PathBuf,
}

/// The control dir the environment names: `$MAXX_CONTROL_DIR`, else `/tmp/maxx-control-<uid>`.
pub fn default_control_dir() -> PathBuf {
    match std::env::var_os("MAXX_CONTROL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(format!("/tmp/maxx-control-{}", nix::unistd::geteuid())),
    }
}

impl ControlDir {
    /// Create the directory (0700) if it is missing, then validate it.
    pub fn prepare(path: &Path) -> io::Result<ControlDir> {
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .mode(0o700)
                    .create(path)
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("cannot create control dir {}: {e}", path.display()),
                        )
                    })?;
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        Self::open(path)
    }

    /// Validate an existing directory without creating anything.
    pub fn open(path: &Path) -> io::Result<ControlDir> {
        let refuse = |why: String| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                UnsafeControlDir {
                    path: path.to_path_buf(),
                    why,
                },
            )
        };
        let meta = fs::symlink_metadata(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        if meta.file_type().is_symlink() {
            return Err(refuse("it is a symlink".into()));
        }
        if !meta.is_dir() {
            return Err(refuse("it is not a directory".into()));
        }
        let uid = nix::unistd::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(refuse(format!(
                "it is owned by uid {}, not by us ({uid})",
                meta.uid()
            )));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(refuse(format!(
                "its mode is {mode:o}; it must be 700 (chmod 700 it or remove it)"
            )));
        }
        Ok(ControlDir {
            path: path.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `control.sock`.
    pub fn socket_path(&self) -> PathBuf {
        self.path.join(SOCKET_FILE)
    }

    /// `token`.
    pub fn token_path(&self) -> PathBuf {
        self.path.join(TOKEN_FILE)
    }

    /// `daemon.log`.
    pub fn log_path(&self) -> PathBuf {
        self.path.join(LOG_FILE)
    }

    /// `daemon.lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.path.join(LOCK_FILE)
    }

    /// Take the single-instance lock: `daemon.lock` opened without following links (0600,
    /// a regular file) and `flock`ed exclusively without waiting. Ownership never depends
    /// on connecting to the socket, so a full listen queue cannot make a live daemon look
    /// dead.
    pub fn lock(&self) -> Result<InstanceLock, LockError> {
        let path = self.lock_path();
        let file = open_regular(
            &path,
            fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600),
            false,
        )
        .map_err(LockError::Io)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => LockError::Held,
                _ => LockError::Io(io::Error::new(
                    e.kind(),
                    format!("cannot lock {}: {e}", path.display()),
                )),
            });
        }
        Ok(InstanceLock { _file: file })
    }

    /// Write a fresh token (256 bits from the OS RNG, hex) atomically with mode 0600.
    pub fn write_new_token(&self) -> io::Result<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("getrandom: {e}")))?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.write_private(TOKEN_FILE, token.as_bytes())?;
        Ok(token)
    }

    /// Read the token (bounded; a token file is 64 bytes).
    pub fn read_token(&self) -> io::Result<String> {
        use std::io::Read;
        let path = self.token_path();
        let file = open_regular(&path, fs::OpenOptions::new().read(true), false)?;
        let mut token = String::new();
        file.take(4097).read_to_string(&mut token)?;
        if token.len() > 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a token file", path.display()),
            ));
        }
        Ok(token.trim().to_string())
    }

    /// Write `name` atomically (temp file + rename) with mode 0600. The temp file is
    /// created with `O_EXCL` through [`open_regular`] (no link followed, never blocking): a
    /// symlink or FIFO planted at its name that survives the unlink below fails the write,
    /// and nothing is written through it. `rename` replaces a link at `name` itself, never
    /// its target.
    pub fn write_private(&self, name: &str, contents: &[u8]) -> io::Result<()> {
        let tmp = self
            .path
            .join(format!(".{name}.tmp.{}", std::process::id()));
        // A temp file left by a crashed daemon that had our pid would make create_new fail
        // forever.
        let _ = fs::remove_file(&tmp);
        let result = (|| {
            let mut f = open_regular(
                &tmp,
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600),
                false,
            )?;
            f.write_all(contents)?;
            f.sync_all()?;
            fs::rename(&tmp, self.path.join(name))?;
            // The rename itself is durable only once the directory is (power loss between
            // a fold's rename and its journal truncation would otherwise lose both).
            fs::File::open(&self.path)?.sync_all()
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

/// Compare two secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_loose_and_symlinked_dirs() {
        let tmp = tempdir();
        let dir = tmp.join("ctl");
        let cd = ControlDir::prepare(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let token = cd.write_new_token().unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(cd.read_token().unwrap(), token);
        assert_eq!(
            fs::metadata(cd.token_path()).unwrap().permissions().mode() & 0o777,
            0o600
        );

        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(ControlDir::prepare(&dir).is_err());
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();

        let link = tmp.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(ControlDir::prepare(&link).is_err());
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn constant_time() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    fn tempdir() -> PathBuf {
        let p = std::env::temp_dir().join(format!("maxx-cd-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        p
    }

    /// The one bounded reader: what each kind of file gives, with and without following
    /// links (the registry never follows; the user's policy and profiles files do).
    #[test]
    fn the_bounded_reader_reads_only_regular_files_within_the_bound() {
        let dir = std::env::temp_dir().join(format!("maxx-bounded-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        fs::write(&file, b"12345").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let what = |p: &Path, follow: bool| read_regular_bounded(p, 5, follow).unwrap_err().what();
        assert_eq!(
            read_regular_bounded(&file, 5, false).unwrap().unwrap(),
            b"12345"
        );
        assert!(read_regular_bounded(&dir.join("none"), 5, false)
            .unwrap()
            .is_none());
        assert!(matches!(
            read_regular_bounded(&file, 4, false),
            Err(ReadBoundedError::TooLarge(5))
        ));
        assert_eq!(what(&link, false), Some("a symlink"));
        assert_eq!(
            read_regular_bounded(&link, 5, true).unwrap().unwrap(),
            b"12345"
        );
        assert_eq!(what(&fifo, false), Some("a FIFO"));
        assert_eq!(what(&fifo, true), Some("a FIFO"));
        assert_eq!(what(&dir, true), Some("a directory"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
