//! `maxx sessions`: the verb list, and the flags of the lifecycle, control and wait verbs.

use super::{
    duration, key_value, wire_enum, AnswerArgs, AskArgs, DeclareStateArgs, DumpArgs, EmitEventArgs,
    PasteArgs, RemoveMetadataArgs, ResizeArgs, RunArgs, SendKeysArgs, SetAgentTypeArgs,
    SetMetadataArgs, SetResultArgs, SetResultSchemaArgs, SetStateArgs, SetSummaryArgs,
    SnapshotArgs, SourcedIdArgs,
};
use clap::{Args, Subcommand};
use maxx_protocol::request::ActionKind;
use maxx_protocol::session::{Lifecycle, Location, RestartMode, SplitDirection};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SessionsCmd {
    #[command(subcommand)]
    pub verb: Option<SessionsVerb>,
}

#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum SessionsVerb {
    /// Start a session in a new PTY (starts a daemon if none answers).
    #[command(
        after_help = "Example:\n  maxx sessions create --title build --command 'make' --metadata repo=org/app"
    )]
    Create(CreateArgs),
    /// Print one session.
    Get(SelfIdArg),
    /// Print every session (optionally only those whose metadata matches).
    #[command(
        after_help = "Example:\n  maxx sessions list --filter repo=org/repo --filter linear.issue"
    )]
    List(ListArgs),
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
    /// Block until a declared state, a new event, a lifecycle, or text on the screen
    /// (exit 0 matched, 1 ended, 124 timeout).
    #[command(
        after_help = "Examples:\n  maxx sessions wait ID --lifecycle exited --timeout 10m\n  \
maxx sessions wait ID --state tests:passed --timeout 5m\n  \
maxx sessions wait ID --event pr.merged --since 12\n  \
maxx sessions wait ID --until 'BUILD OK' --output-only --timeout 10m"
    )]
    Wait(WaitArgs),
    /// From inside a maxx session: print that session (proves it with MAXX_SURFACE_ID and
    /// MAXX_REGISTRATION_TOKEN).
    RegisterCurrent,
    /// Follow a session: a snapshot line, then one line per audit entry and lifecycle
    /// change, then an end line (NDJSON).
    Watch(WatchArgs),
    /// Print a session's audit log (entries after --since).
    Events(EventsArgs),
    /// Declare the free-form state (the status `wait --state` matches).
    #[command(
        after_help = "Example:\n  maxx sessions declare-state ID --state tests:passed --message 'all green' --source ci-agent"
    )]
    DeclareState(DeclareStateArgs),
    /// Emit a named event with an optional JSON payload.
    #[command(
        after_help = "Example:\n  maxx sessions emit-event ID --event pr.opened --payload-json '{\"pr\":123}'"
    )]
    EmitEvent(EmitEventArgs),
    /// Set one metadata key (--value for a string, --value-json for any JSON).
    SetMetadata(SetMetadataArgs),
    /// Remove metadata keys (absent keys are ignored).
    RemoveMetadata(RemoveMetadataArgs),
    /// Remove every metadata key.
    ClearMetadata(SourcedIdArgs),
    /// Declare the displayed workflow state: running, needsInput, blocked, complete, failed.
    SetState(SetStateArgs),
    /// Declare the one-line summary (≤ 1024 chars).
    SetSummary(SetSummaryArgs),
    /// Declare the result text (≤ 16384 bytes; must satisfy the result schema if one is set).
    SetResult(SetResultArgs),
    /// Clear the declared result.
    ClearResult(SourcedIdArgs),
    /// Declare the JSON-Schema subset (type, required, properties, items) results must satisfy.
    SetResultSchema(SetResultSchemaArgs),
    /// Remove the result schema.
    ClearResultSchema(SourcedIdArgs),
    /// Declare the agent type, an opaque token.
    SetAgentType(SetAgentTypeArgs),
    /// Ask a person for attention (advisory: moves no focus); shown by ls, status and top.
    #[command(
        after_help = "Example:\n  maxx sessions ask \"$MAXX_SESSION_ID\" --question 'Ship it?' --suggest yes --suggest no"
    )]
    Ask(AskArgs),
    /// Record the session's output to an asciicast v2 file until its run ends, --max-bytes,
    /// or Ctrl-C. Read-only: it never resizes and types nothing (needs surface:attach and
    /// output:read).
    #[command(
        after_help = "Examples:\n  maxx --as me sessions rec 1a2b3c4d --out build.cast\n  asciinema play build.cast\n  maxx play build.cast"
    )]
    Rec(RecArgs),
    /// Answer a session's open ask (with --text, or --choice N for its N-th suggestion).
    #[command(after_help = "Example:\n  maxx sessions answer 1a2b3c4d --choice 1")]
    Answer(AnswerArgs),
    /// Join a group (no --group leaves the current one).
    SetGroup(SetGroupArgs),
    /// Set the parent edge (--parent "" detaches).
    SetParent(SetParentArgs),
    /// Close the surface and keep the record and its audit log (idempotent).
    Archive(ArchiveArgs),
    /// Print the screen as a ScreenState document (needs output:read).
    #[command(
        after_help = "Examples:\n  maxx sessions snapshot ID\n  maxx sessions snapshot ID --scrollback 50 --unwrap\n  \
maxx sessions snapshot ID --scrollback   # all retained history"
    )]
    Snapshot(SnapshotArgs),
    /// Print the screen as plain text (needs output:read).
    Dump(DumpArgs),
    /// Print grid size, history, terminal modes and the foreground process (needs output:read).
    Inspect(SelfIdArg),
    /// Run a shell command at the session's prompt (a POSIX shell must be in the foreground,
    /// else `foreground_busy`); print {command, exit_code, output} and exit with its code
    /// (125 if maxx gives up).
    #[command(after_help = "Example:\n  maxx sessions run ID --timeout 2m 'cargo test'")]
    Run(RunArgs),
    /// Press keys: names (Enter, Escape, Tab, BTab, BSpace, Up, Home, PageUp, F1..F12), chords
    /// (C-c, M-x, S-Tab, C-S-Up, ctrl+f5), or literal text; encoded for the terminal's current
    /// mode (xterm, or the kitty keyboard protocol once the program enabled it). A word shaped
    /// like a chord that is not one is refused before anything is sent.
    #[command(
        after_help = "Examples:\n  maxx sessions send-keys ID 'ls -la' Enter\n  maxx sessions send-keys ID C-c\n  \
maxx sessions send-keys ID S-Tab C-Up\n  maxx sessions send-keys --literal ID 'S-Up is typed as text'"
    )]
    SendKeys(SendKeysArgs),
    /// Paste text as one block (bracketed when the program enabled it). `-` reads stdin.
    Paste(PasteArgs),
    /// Resize the PTY and the screen model.
    Resize(ResizeArgs),
    /// Set (or with --restart never, remove) a session's automatic restart policy.
    #[command(
        after_help = "Example:\n  maxx sessions set-restart-policy ID --restart on-failure --max-restarts 3 --backoff 1s..30s"
    )]
    SetRestartPolicy(SetRestartPolicyArgs),
    /// Start a fresh surface under the same session id (--last-command or --command).
    #[command(
        after_help = "Examples:\n  maxx sessions restart ID --last-command\n  maxx sessions restart ID --command 'make test'"
    )]
    Restart(RestartArgs),
}

#[derive(Args, Debug)]
pub struct SetRestartPolicyArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    #[command(flatten)]
    pub restart: RestartArgsGroup,
}

#[derive(Args, Debug)]
pub struct ArchiveArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// Why (recorded in the audit log).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["last_command", "command"]))]
pub struct RestartArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// Replay the recorded command.
    #[arg(long)]
    pub last_command: bool,
    /// Run this command instead (it becomes the recorded one).
    #[arg(long)]
    pub command: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetGroupArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// Group label; omit to leave.
    #[arg(long)]
    pub group: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetParentArgs {
    /// The child: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// Parent session id, or "" to detach.
    #[arg(long)]
    pub parent: String,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Stop after this long (at most 1h).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// Accepted for the seed's scripts; output is always NDJSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct EventsArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Only entries with seq greater than this.
    #[arg(long, default_value_t = 0)]
    pub since: u64,
    /// One page of at most N entries (1..=1000), printed as the daemon answers it (pass its
    /// `next_since` as --since for the next). Without it every page is fetched and printed
    /// as one answer.
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new()
              .range(1..=maxx_protocol::limits::EVENTS_PAGE_MAX_ENTRIES as u64))]
    pub limit: Option<u64>,
}

#[derive(Args, Debug, Default)]
pub struct ListArgs {
    /// KEY (present) or KEY=VALUE (equal, compared as a string); repeatable, all must hold.
    #[arg(long = "filter", value_name = "KEY[=VALUE]")]
    pub filters: Vec<String>,
    /// Only members of this group.
    #[arg(long)]
    pub group: Option<String>,
    /// Only children of this session.
    #[arg(long, value_name = "SESSION_ID")]
    pub parent: Option<String>,
}

/// A session a read names; inside a session it defaults to that session.
#[derive(Args, Debug)]
pub struct SelfIdArg {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
}

/// A session a verb acts on; always named (`cancel`, `inspect`'s siblings that end or
/// change a session never default to the caller's own).
#[derive(Args, Debug)]
pub struct IdArg {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
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
    #[arg(long, value_parser = wire_enum::<Location>())]
    pub location: Option<Location>,
    /// With --location split: the session whose surface is split.
    #[arg(long, value_name = "SESSION_ID")]
    pub split_target: Option<String>,
    /// With --location split: which edge (default right).
    #[arg(long, value_parser = wire_enum::<SplitDirection>())]
    pub split_direction: Option<SplitDirection>,
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
    /// Declare the agent type at create (recorded like set-agent-type).
    #[arg(long)]
    pub agent_type: Option<String>,
    /// Declare the result schema at create (JSON).
    #[arg(long)]
    pub result_schema: Option<String>,
    /// Join this group.
    #[arg(long)]
    pub group: Option<String>,
    /// Parent session id.
    #[arg(long, value_name = "SESSION_ID")]
    pub parent: Option<String>,
    /// Start from this agent profile; explicit flags override its fields.
    #[arg(long)]
    pub profile: Option<String>,
    /// History lines of the screen model (default 10000).
    #[arg(long, value_name = "LINES")]
    pub scrollback_lines: Option<usize>,
    #[command(flatten)]
    pub restart: RestartArgsGroup,
}

/// Restart-policy flags shared by `create` and `set-restart-policy`.
#[derive(Args, Debug, Default)]
pub struct RestartArgsGroup {
    /// Restart automatically on the child's exit: never (default), on-failure, always.
    #[arg(long, value_name = "WHEN", value_parser = wire_enum::<RestartMode>(), hide_possible_values = true)]
    pub restart: Option<RestartMode>,
    /// Exit codes that count as success for on-failure (default 0), e.g. 0,2.
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub restart_exit_codes: Option<Vec<i32>>,
    /// Give up after this many automatic restarts within --restart-window (default 5).
    #[arg(long, value_name = "N")]
    pub max_restarts: Option<u32>,
    /// The window for --max-restarts (default 10m).
    #[arg(long, value_name = "DURATION")]
    pub restart_window: Option<String>,
    /// Exponential backoff range MIN..MAX (default 1s..1m).
    #[arg(long, value_name = "MIN..MAX")]
    pub backoff: Option<String>,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
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
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// What to do.
    #[arg(long, value_parser = wire_enum::<ActionKind>())]
    pub action: ActionKind,
    /// Text for input/submit (pasted; submit then presses Enter).
    #[arg(long)]
    pub input: Option<String>,
    /// For interrupt: SIGINT, SIGTERM, SIGKILL, SIGHUP or SIGQUIT to the foreground
    /// process group (default: Ctrl-C through the tty).
    #[arg(long)]
    pub signal: Option<String>,
}

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("condition").required(true).args(["state", "event", "lifecycle", "until", "regex"]))]
pub struct WaitArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Wait until the declared state (status) equals this (level-triggered).
    #[arg(long)]
    pub state: Option<String>,
    /// Wait for a new event with this name (edge-triggered).
    #[arg(long)]
    pub event: Option<String>,
    /// With --event: count events after this audit seq as new.
    #[arg(long, requires = "event")]
    pub since: Option<u64>,
    /// Lifecycle to wait for.
    #[arg(long, value_parser = wire_enum::<Lifecycle>())]
    pub lifecycle: Option<Lifecycle>,
    /// Wait until this text is on a screen line (needs output:read).
    #[arg(long)]
    pub until: Option<String>,
    /// Wait until a screen line matches this regex (needs output:read).
    #[arg(long)]
    pub regex: Option<String>,
    /// With --until/--regex: ignore lines holding typed input (cells the program marked with
    /// OSC 133 B..C). With no such marks it filters nothing, and says so on stderr.
    #[arg(long)]
    pub output_only: bool,
    /// Give up after this long (default 30s, at most 1h): 500ms, 30s, 5m, 1h.
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
}

#[derive(Args, Debug)]
pub struct RecArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// The file to write (asciicast v2; must not exist yet).
    #[arg(long, value_name = "FILE")]
    pub out: std::path::PathBuf,
    /// Stop after this many bytes of output.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_bytes: Option<u64>,
    /// Record a longer pause as this long (e.g. 2s).
    #[arg(long, value_parser = duration, value_name = "DUR")]
    pub idle_limit: Option<std::time::Duration>,
}
