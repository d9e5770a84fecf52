//! Error codes: stable snake_case strings scripts branch on (never on `message`).

use serde::{Deserialize, Serialize};

/// A typed error code, serialised snake_case (`not_found`, `invalid_request`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// `unauthenticated`: the token (or a registration proof) is missing or wrong.
    Unauthenticated,
    /// `unauthorized`: the capability policy denied the request.
    Unauthorized,
    /// `confirmation_required`: the policy wants the request re-sent with `confirm: true`.
    ConfirmationRequired,
    /// `not_found`: no session with that id (or similar named resource).
    NotFound,
    /// `invalid_request`: malformed JSON, a wrong param type, or a seed limit exceeded.
    InvalidRequest,
    /// `already_ended`: the session's surface is gone (closed, archived or restored).
    AlreadyEnded,
    /// `unsupported`: the request is well-formed but cannot be honoured here.
    Unsupported,
    /// `unknown_method`: no method by that name.
    UnknownMethod,
    /// `too_large`: the request line exceeded [`crate::limits::REQUEST_LINE_MAX_BYTES`].
    TooLarge,
    /// `internal`: the daemon failed; the message says where.
    Internal,
    /// `no_daemon`: client-side only; no daemon answered at the socket.
    NoDaemon,
    /// `daemon_restarted`: client-side only; the daemon serving a request or stream died
    /// before it answered (or ended the stream), and its keeper is starting a new one. A
    /// change may or may not have been applied: read before retrying it (CLI exit 3).
    DaemonRestarted,
    /// `timeout`: `sessions.run` spent its budget (CLI exit 125), or the daemon did not
    /// answer the CLI in time.
    Timeout,
    /// `persistence_failed`: the durable registry could not be written (disk full, I/O
    /// error), so the change was not acknowledged. Refused up front while the journal is
    /// failing (nothing changed); a request already in flight when a write failed may have
    /// been applied in memory (see `docs/persistence.md`).
    PersistenceFailed,
    /// `foreground_busy`: `sessions.run` was refused because another program than the
    /// session's own (a shell at its prompt) holds the terminal's foreground; nothing was
    /// typed (CLI exit 1).
    ForegroundBusy,
    /// `already_running`: `maxx daemon` found another daemon holding the control dir's
    /// lock; nothing was changed (CLI exit 1).
    AlreadyRunning,
    /// `unsafe_file`: a file the daemon reads or writes is a symlink, FIFO, device or
    /// directory where a regular file belongs; nothing was read from or written through it.
    UnsafeFile,
    /// `registry_unreadable`: the durable registry (`registry.json` or `registry.journal`)
    /// could not be read at start, so the daemon preserves it and refuses every mutation it
    /// could not save; reads keep working (CLI exit 1). The remedy names the file.
    RegistryUnreadable,
    /// `busy`: every slot for long-lived requests (`sessions.watch`, `stream.watch`,
    /// `sessions.attach`, `sessions.wait`, `stream.wait`, `sessions.run`) is taken; the
    /// request was refused before it started anything (CLI exit 1). Slots kept for short
    /// requests are never used by long-lived ones.
    Busy,
    /// `ambiguous`: a selector (an id prefix or `%title`) names more than one session; the
    /// message lists the candidates (id, title, lifecycle). Nothing was done (CLI exit 2).
    Ambiguous,
    /// `unsafe_control_dir`: the control dir is a symlink, not a directory, owned by another
    /// user or open to others (mode not 700). maxx never repairs it; nothing was started or
    /// sent (CLI exit 1). The message says what is wrong and what to do.
    UnsafeControlDir,
    /// `fd_limit`: a new session would take the daemon past the descriptors its open-files
    /// limit leaves for sessions (`daemon.stats` `session_capacity`); nothing was started
    /// (CLI exit 1).
    FdLimit,
    /// `pty_exhausted`: the kernel had no pseudo-terminal left to give (its pty limit,
    /// `kernel.pty.max` or a devpts mount's `max=`, is reached); nothing was started, and
    /// the message says how many are in use (CLI exit 1).
    PtyExhausted,
    /// `unreachable`: client-side only; a remote host (`--host`, `--hosts`) could not be
    /// reached over ssh (refused login, unknown host, no `maxx` there) or dropped mid-answer.
    /// The message names the host and what failed (CLI exit 3).
    Unreachable,
}

impl ErrorCode {
    /// The wire string, e.g. `"invalid_request"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::ConfirmationRequired => "confirmation_required",
            ErrorCode::NotFound => "not_found",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::AlreadyEnded => "already_ended",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Internal => "internal",
            ErrorCode::NoDaemon => "no_daemon",
            ErrorCode::DaemonRestarted => "daemon_restarted",
            ErrorCode::Timeout => "timeout",
            ErrorCode::PersistenceFailed => "persistence_failed",
            ErrorCode::ForegroundBusy => "foreground_busy",
            ErrorCode::AlreadyRunning => "already_running",
            ErrorCode::UnsafeFile => "unsafe_file",
            ErrorCode::RegistryUnreadable => "registry_unreadable",
            ErrorCode::Busy => "busy",
            ErrorCode::Ambiguous => "ambiguous",
            ErrorCode::UnsafeControlDir => "unsafe_control_dir",
            ErrorCode::FdLimit => "fd_limit",
            ErrorCode::PtyExhausted => "pty_exhausted",
            ErrorCode::Unreachable => "unreachable",
        }
    }
}

impl ErrorCode {
    /// What a caller can do about an error of this code, when its site gave no more
    /// specific remedy: every error a client sees carries one.
    pub fn default_remedy(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => {
                "send the token from <control dir>/token (the CLI reads it); a registration \
                 proof comes from the session's own environment"
            }
            ErrorCode::Unauthorized => {
                "see what a source may do with `maxx policy sources`, act as one that may \
                 (--as), or grant it in the policy file"
            }
            ErrorCode::ConfirmationRequired => {
                "once a person approves, send the same request with confirm: true (--confirm)"
            }
            ErrorCode::NotFound => "`maxx ls` lists the sessions, with id prefixes and titles",
            ErrorCode::InvalidRequest => {
                "fix the value the message names; docs/protocol.md gives each method's params \
                 and limits (`maxx <noun> <verb> --help` for the CLI)"
            }
            ErrorCode::AlreadyEnded => {
                "the session's program is gone: read its record, or start it again with \
                 `maxx sessions restart ID --last-command`"
            }
            ErrorCode::Unsupported => "docs/protocol.md says when this request applies",
            ErrorCode::UnknownMethod => "docs/protocol.md lists every method",
            ErrorCode::TooLarge => "send less: one request line is at most 1 MiB",
            ErrorCode::Internal => {
                "see the daemon's log (stderr, or daemon.log in the control dir when detached)"
            }
            ErrorCode::NoDaemon => "start one with `maxx daemon --detach`",
            ErrorCode::Timeout => "give it longer (--timeout), or read the session to see why",
            ErrorCode::PersistenceFailed => {
                "free disk space or fix the control dir; `maxx status` shows when writes work \
                 again"
            }
            ErrorCode::ForegroundBusy => {
                "wait for the program in front to finish, or drive it with send-keys"
            }
            ErrorCode::AlreadyRunning => "use the running daemon (`maxx status`)",
            ErrorCode::UnsafeFile => "remove the file the message names; maxx creates a fresh one",
            ErrorCode::RegistryUnreadable => {
                "move the file the message names aside (or repair it), then restart the daemon"
            }
            ErrorCode::Busy => "retry shortly, or end a watch, attach or wait you no longer need",
            ErrorCode::Ambiguous => "give more of the id (or the whole id) to name one session",
            ErrorCode::UnsafeControlDir => {
                "fix it as the message says (maxx never repairs a control dir), or point \
                 MAXX_CONTROL_DIR at a fresh path"
            }
            ErrorCode::FdLimit => {
                "close sessions you no longer need, or raise the daemon's open-files hard limit \
                 (`ulimit -Hn`, LimitNOFILE= in the service unit) and restart it"
            }
            ErrorCode::PtyExhausted => {
                "close sessions (and other terminals) you no longer need: each holds one \
                 pseudo-terminal; or raise the system's limit (`sysctl kernel.pty.max`)"
            }
            ErrorCode::Unreachable => {
                "check that `ssh HOST maxx status` works without a prompt (keys or an agent, a \
                 known host key, maxx on the remote PATH), then retry"
            }
            ErrorCode::DaemonRestarted => {
                "a new daemon took over: read the record to see whether the change was applied, \
                 then retry (a wait or watch: open it again, with --since for a stream)"
            }
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` object of a failed response: `{code, message, remedy?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable code to branch on.
    pub code: ErrorCode,
    /// Human-readable detail; may change between versions.
    pub message: String,
    /// What the caller can do about it, when there is something to suggest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

impl ErrorBody {
    /// An error with no remedy.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            remedy: None,
        }
    }

    /// Attach a remedy line.
    pub fn with_remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = Some(remedy.into());
        self
    }

    /// Shorthand for `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        ErrorBody::new(ErrorCode::InvalidRequest, message)
    }

    /// Shorthand for `not_found` on a session id.
    pub fn no_session(id: &str) -> Self {
        ErrorBody::new(ErrorCode::NotFound, format!("no session with id {id}"))
            .with_remedy("list sessions with `maxx sessions list`")
    }

    /// Shorthand for `already_ended` on a session id.
    pub fn ended(id: &str, what: &str) -> Self {
        ErrorBody::new(
            ErrorCode::AlreadyEnded,
            format!("session {id} has no live surface: {what}"),
        )
        .with_remedy("restart it with `maxx sessions restart` or create a new session")
    }

    /// Shorthand for `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        ErrorBody::new(ErrorCode::Internal, message)
    }
}

impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorBody {}
