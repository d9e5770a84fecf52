//! The command line: `maxx <noun> <verb> [flags]`, `maxx +control <noun> <verb>` being the
//! same command. Each noun-verb prints the daemon's raw JSON response on stdout.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Parse `key=value` (value may be empty or contain '=').
fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {text:?}"))
}

/// Parse a duration flag: `500ms`, `30s`, `5m`, `1h`; a bare number is seconds.
fn duration(text: &str) -> Result<Duration, String> {
    maxx_protocol::duration::parse_duration(text)
}

#[derive(Parser, Debug)]
#[command(
    name = "maxx",
    version,
    about = "Explicit, observable control over terminal sessions.",
    long_about = "maxx runs terminal sessions (agents, jobs, shells) in real PTYs under a daemon \
and lets scripts drive them over a token-authenticated Unix socket.\n\n\
Noun-verb commands print the daemon's JSON response on stdout; on failure stdout is empty and \
stderr carries one JSON error. `maxx +control <noun> <verb>` is the same command.",
    after_help = "Quick start:\n  \
id=$(maxx sessions create --command 'make test' | jq -r .result.session.session_id)\n  \
maxx sessions wait \"$id\" --lifecycle exited --timeout 10m\n  \
maxx sessions get \"$id\" | jq .result.session.exit_code\n\n\
Exit codes: 0 ok/matched · 1 daemon said ok:false, or a wait ended unmatched · 2 usage · \
3 no daemon · 124 wait timed out"
)]
pub struct Cli {
    /// The daemon's socket (its folder is the control dir). Default: $MAXX_CONTROL_DIR/control.sock,
    /// else /tmp/maxx-control-<uid>/control.sock.
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    /// Act as this policy source (wire field `caller`). Default: local-cli.
    #[arg(long = "as", global = true, value_name = "SOURCE")]
    pub caller: Option<String>,

    /// Approve an action the policy wants confirmed (wire field `confirm`).
    #[arg(long, global = true)]
    pub confirm: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the control plane (foreground unless --detach).
    Daemon(DaemonArgs),
    /// Create, inspect, drive and wait on sessions. Bare `maxx sessions` lists them.
    Sessions(SessionsCmd),
}

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Start in the background and return once it accepts requests.
    #[arg(long)]
    pub detach: bool,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    pub log_level: String,
    /// Internal: this process is the detached daemon.
    #[arg(long, hide = true)]
    pub detached_child: bool,
}

#[derive(Args, Debug)]
pub struct SessionsCmd {
    #[command(subcommand)]
    pub verb: Option<SessionsVerb>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LocationArg {
    Tab,
    Window,
    Split,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DirectionArg {
    Right,
    Down,
    Left,
    Up,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ActionArg {
    Focus,
    Input,
    Submit,
    Cancel,
    Close,
    Interrupt,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LifecycleArg {
    Running,
    Exited,
    Closed,
    Archived,
}

#[derive(Subcommand, Debug)]
pub enum SessionsVerb {
    /// Start a session in a new PTY (starts a daemon if none answers).
    #[command(
        after_help = "Example:\n  maxx sessions create --title build --command 'make' --metadata repo=org/app"
    )]
    Create(CreateArgs),
    /// Print one session.
    Get(IdArg),
    /// Print every session.
    List,
    /// Set status and/or merge metadata.
    #[command(
        after_help = "Example:\n  maxx sessions update ID --status waiting_for_review --metadata pr=42"
    )]
    Update(UpdateArgs),
    /// Focus, type into, submit to, interrupt or close a session.
    #[command(
        after_help = "Examples:\n  maxx sessions action ID --action submit --input 'echo hi'\n  \
maxx sessions action ID --action interrupt --signal SIGTERM"
    )]
    Action(ActionArgs),
    /// Close a session's surface (idempotent).
    Cancel(IdArg),
    /// Block until a session reaches a lifecycle (exit 0 matched, 1 ended, 124 timeout).
    #[command(after_help = "Example:\n  maxx sessions wait ID --lifecycle exited --timeout 10m")]
    Wait(WaitArgs),
    /// From inside a maxx session: print that session (proves it with MAXX_SURFACE_ID and
    /// MAXX_REGISTRATION_TOKEN).
    RegisterCurrent,
}

#[derive(Args, Debug)]
pub struct IdArg {
    /// Session id.
    pub session_id: String,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Title shown for the session (≤ 256 chars).
    #[arg(long)]
    pub title: Option<String>,
    /// Working directory (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Shell command to run with /bin/sh -c (default: a login shell). Use --command=+x for
    /// a value starting with '+'.
    #[arg(long)]
    pub command: Option<String>,
    /// Extra environment, KEY=VALUE (repeatable). Given to the child only, never stored.
    #[arg(long, value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Metadata key=value (repeatable; value stored as a string).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub metadata: Vec<(String, String)>,
    /// Caller-owned status.
    #[arg(long)]
    pub status: Option<String>,
    /// Where to place it.
    #[arg(long, value_enum)]
    pub location: Option<LocationArg>,
    /// With --location split: the session whose surface is split.
    #[arg(long, value_name = "SESSION_ID")]
    pub split_target: Option<String>,
    /// With --location split: which edge (default right).
    #[arg(long, value_enum)]
    pub split_direction: Option<DirectionArg>,
    /// Take focus (default for tab/window; splits keep focus on the target without it).
    #[arg(long, conflicts_with = "no_focus")]
    pub focus: bool,
    /// Do not take focus.
    #[arg(long)]
    pub no_focus: bool,
    /// PTY columns (default 80).
    #[arg(long)]
    pub cols: Option<u16>,
    /// PTY rows (default 24).
    #[arg(long)]
    pub rows: Option<u16>,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// Session id.
    pub session_id: String,
    /// New status.
    #[arg(long)]
    pub status: Option<String>,
    /// Metadata key=value to merge (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub metadata: Vec<(String, String)>,
}

#[derive(Args, Debug)]
pub struct ActionArgs {
    /// Session id.
    pub session_id: String,
    /// What to do.
    #[arg(long, value_enum)]
    pub action: ActionArg,
    /// Text for input/submit (pasted; submit then presses Enter).
    #[arg(long)]
    pub input: Option<String>,
    /// For interrupt: SIGINT, SIGTERM, SIGKILL, SIGHUP or SIGQUIT to the foreground
    /// process group (default: Ctrl-C through the tty).
    #[arg(long)]
    pub signal: Option<String>,
}

#[derive(Args, Debug)]
pub struct WaitArgs {
    /// Session id.
    pub session_id: String,
    /// Lifecycle to wait for.
    #[arg(long, value_enum)]
    pub lifecycle: LifecycleArg,
    /// Give up after this long (default 30s, at most 1h): 500ms, 30s, 5m, 1h.
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
}
