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

// Parsed once per process: the size of the biggest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the control plane (foreground unless --detach).
    Daemon(DaemonArgs),
    /// Create, inspect, drive and wait on sessions. Bare `maxx sessions` lists them.
    Sessions(SessionsCmd),
    /// Follow or wait on the process-wide event stream (sessions, groups).
    Stream(StreamCmd),
    /// Declare structured events (`event emit` = `sessions emit-event`).
    Event(EventCmd),
    /// Agent profiles (named create-time inputs). Bare `maxx profiles` lists them.
    Profiles(ProfilesCmd),
    /// Inspect the capability policy: check a decision, list sources, validate a file.
    Policy(PolicyCmd),
    /// A table of sessions for people: lifecycle, declared state, summary, group, age.
    Ls(LsArgs),
    /// The daemon's version, pid, control dir and session counts.
    Status(StatusArgs),
    /// A live dashboard of the fleet, updated from the event stream. q quits.
    Top,
    /// Join this terminal to a session's PTY (default: the focused one). Detach: Ctrl-\ d.
    #[command(
        after_help = "Example:\n  maxx attach ID\n  maxx attach --detach-key C-a   # then C-a d to detach"
    )]
    Attach(AttachArgs),
}

#[derive(Args, Debug)]
pub struct PolicyCmd {
    #[command(subcommand)]
    pub verb: PolicyVerb,
}

#[derive(Subcommand, Debug)]
pub enum PolicyVerb {
    /// The decision for (--as source, --capability, --target), with the reason. No side effect.
    #[command(
        after_help = "Examples:\n  maxx policy check --as readonly-external --capability tabs:close\n  \
maxx policy check --capability output:read"
    )]
    Check {
        /// e.g. tabs:spawn, output:read.
        #[arg(long)]
        capability: String,
        /// The session (or group) it would act on.
        #[arg(long)]
        target: Option<String>,
    },
    /// Every active source and whether the policy file loaded (or why it was rejected).
    Sources,
    /// Check a policy file offline (no daemon needed): exit 0 valid, 1 invalid with reasons.
    Validate {
        /// The file.
        #[arg(long)]
        config: PathBuf,
    },
}

#[derive(Args, Debug)]
pub struct LsArgs {
    /// Add metadata chips.
    #[arg(long)]
    pub wide: bool,
    /// Print the sessions as JSON instead.
    #[arg(long)]
    pub json: bool,
    /// Only this group.
    #[arg(long)]
    pub group: Option<String>,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print JSON instead.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct AttachArgs {
    /// Session id (default: the focused session).
    pub session_id: Option<String>,
    /// The key that, followed by `d`, detaches (a single-byte chord).
    #[arg(long, default_value = "C-\\", value_name = "KEY")]
    pub detach_key: String,
}

#[derive(Args, Debug)]
pub struct ProfilesCmd {
    #[command(subcommand)]
    pub verb: Option<ProfilesVerb>,
}

#[derive(Subcommand, Debug)]
pub enum ProfilesVerb {
    /// List profile names and the env key names they set (never values).
    List,
}

#[derive(Args, Debug)]
pub struct StreamCmd {
    #[command(subcommand)]
    pub verb: StreamVerb,
}

#[derive(Args, Debug, Clone)]
pub struct StreamFilterArgs {
    /// Only this group's events.
    #[arg(long)]
    pub group: Option<String>,
    /// Only this session's events.
    #[arg(long, value_name = "SESSION_ID")]
    pub session: Option<String>,
    /// Only this surface's events.
    #[arg(long, value_name = "SURFACE_ID")]
    pub tab: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum StreamVerb {
    /// Print events as NDJSON: a hello line, then one line per event (resumable with --since).
    #[command(after_help = "Examples:\n  maxx stream watch --group release\n  \
maxx stream watch --since 42 --timeout 10m")]
    Watch {
        #[command(flatten)]
        filter: StreamFilterArgs,
        /// Replay retained events after this cursor first.
        #[arg(long)]
        since: Option<u64>,
        /// Stop after this long (at most 1h).
        #[arg(long, value_parser = duration)]
        timeout: Option<Duration>,
    },
    /// Block until an event, or until every group member meets a condition
    /// (exit 0 matched, 1 ended, 124 timeout).
    #[command(
        after_help = "Examples:\n  maxx stream wait --group release --all exited --timeout 1h\n  \
maxx stream wait --group release --all declared:complete\n  \
maxx stream wait --session ID --event tests.green"
    )]
    Wait {
        #[command(flatten)]
        filter: StreamFilterArgs,
        /// Wait for a new event with this name.
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        event: Option<String>,
        /// With --group: exited, idle or declared:<state>. An empty group matches at once.
        #[arg(long)]
        all: Option<String>,
        /// Give up after this long (default 30s, at most 1h).
        #[arg(long, value_parser = duration)]
        timeout: Option<Duration>,
    },
}

#[derive(Args, Debug)]
pub struct EventCmd {
    #[command(subcommand)]
    pub verb: EventVerb,
}

#[derive(Subcommand, Debug)]
pub enum EventVerb {
    /// Emit a structured event on a session.
    #[command(
        after_help = "Example:\n  maxx event emit --session ID --type declared.status --json '{\"step\":3,\"of\":7}'"
    )]
    Emit {
        /// Session id.
        #[arg(long, value_name = "SESSION_ID")]
        session: String,
        /// Event name.
        #[arg(long = "type", value_name = "NAME")]
        event_type: String,
        /// JSON payload.
        #[arg(long = "json", value_name = "JSON")]
        payload: Option<String>,
        /// Who declares it.
        #[arg(long)]
        source: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Start in the background and return once it accepts requests.
    #[arg(long)]
    pub detach: bool,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    pub log_level: String,
    /// Events the bus keeps for `stream watch --since` replay (oldest evicted first).
    #[arg(long, default_value_t = maxx_protocol::limits::BUS_RETAINED_EVENTS, value_name = "N")]
    pub bus_capacity: usize,
    /// fdatasync the journal on every acknowledged change (survives power loss, slower).
    /// Without it an acknowledged change survives a daemon crash (kill -9).
    #[arg(long)]
    pub fsync: bool,
    /// Closed/archived records kept, newest first (older ones are dropped from memory and
    /// registry.json; live sessions are always kept). Records idle 14 days are dropped too.
    #[arg(long, default_value_t = maxx_protocol::limits::RETAINED_RECORDS, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub retain_records: usize,
    /// Long-lived requests (watch, stream watch, attach, wait, stream wait, run) served at
    /// once; more are answered `busy`. The remaining connection slots (4,096 in all) are
    /// kept for short requests.
    #[arg(long, default_value_t = maxx_protocol::limits::MAX_LONG_LIVED_CONNECTIONS, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=maxx_protocol::limits::MAX_LONG_LIVED_CONNECTIONS as u64))]
    pub max_long_lived: usize,
    /// Bytes one session's in-memory audit log keeps (oldest entries evicted; `sessions
    /// events` reports the dropped range).
    #[arg(long, default_value_t = maxx_protocol::limits::AUDIT_SESSION_MAX_BYTES, value_name = "BYTES",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub audit_session_bytes: usize,
    /// Bytes all sessions' in-memory audit logs keep together (past it a recording session
    /// evicts its own oldest entries).
    #[arg(long, default_value_t = maxx_protocol::limits::AUDIT_TOTAL_MAX_BYTES, value_name = "BYTES",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub audit_total_bytes: usize,
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
    Backoff,
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
    Get(IdArg),
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
    Inspect(IdArg),
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
pub struct SnapshotArgs {
    /// Session id.
    pub session_id: String,
    /// Include history: no value (or 0) = all retained rows, N = the newest N.
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "N")]
    pub scrollback: Option<u64>,
    /// Include styled cells.
    #[arg(long, conflicts_with = "unwrap")]
    pub cells: bool,
    /// Join soft-wrapped rows into logical lines.
    #[arg(long)]
    pub unwrap: bool,
    /// At least the viewport, plus history rows to make N.
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,
    /// Accepted for scripts; output is always JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Session id.
    pub session_id: String,
    /// Prepend all retained history.
    #[arg(long)]
    pub scrollback: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Whole budget (default 10m, at most 1h; 0 means no limit).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// Session id.
    pub session_id: String,
    /// The command (one line, POSIX shell; run in a subshell).
    pub command: String,
}

#[derive(Args, Debug)]
pub struct SendKeysArgs {
    /// Send every word as text: no key names, no chords.
    #[arg(long, short = 'l')]
    pub literal: bool,
    /// Session id.
    pub session_id: String,
    /// Keys and text, in order.
    #[arg(required = true, allow_hyphen_values = true)]
    pub keys: Vec<String>,
}

#[derive(Args, Debug)]
pub struct PasteArgs {
    /// Session id.
    pub session_id: String,
    /// The text, or - for stdin.
    pub text: String,
}

#[derive(Args, Debug)]
pub struct ResizeArgs {
    /// Session id.
    pub session_id: String,
    /// Columns.
    #[arg(long)]
    pub cols: u16,
    /// Rows.
    #[arg(long)]
    pub rows: u16,
}

#[derive(Args, Debug)]
pub struct SetRestartPolicyArgs {
    /// Session id.
    pub session_id: String,
    #[command(flatten)]
    pub restart: RestartArgsGroup,
}

#[derive(Args, Debug)]
pub struct ArchiveArgs {
    /// Session id.
    pub session_id: String,
    /// Why (recorded in the audit log).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["last_command", "command"]))]
pub struct RestartArgs {
    /// Session id.
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
    /// Session id.
    pub session_id: String,
    /// Group label; omit to leave.
    #[arg(long)]
    pub group: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetParentArgs {
    /// Session id (the child).
    pub session_id: String,
    /// Parent session id, or "" to detach.
    #[arg(long)]
    pub parent: String,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Session id.
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
    /// Session id.
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

#[derive(Args, Debug)]
pub struct SourcedIdArgs {
    /// Session id.
    pub session_id: String,
    /// Who declares it (default: the --as source).
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct DeclareStateArgs {
    /// Session id.
    pub session_id: String,
    /// The state (free-form, ≤ 128 chars).
    #[arg(long)]
    pub state: String,
    /// A note.
    #[arg(long)]
    pub message: Option<String>,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct EmitEventArgs {
    /// Session id.
    pub session_id: String,
    /// Event name ([A-Za-z0-9_.:-], ≤ 128 chars).
    #[arg(long)]
    pub event: String,
    /// JSON payload.
    #[arg(long)]
    pub payload_json: Option<String>,
    /// A note.
    #[arg(long)]
    pub message: Option<String>,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetMetadataArgs {
    /// Session id.
    pub session_id: String,
    /// Key ([A-Za-z0-9_.-], ≤ 64 chars).
    #[arg(long)]
    pub key: String,
    /// String value.
    #[arg(
        long,
        conflicts_with = "value_json",
        required_unless_present = "value_json"
    )]
    pub value: Option<String>,
    /// Any JSON value.
    #[arg(long)]
    pub value_json: Option<String>,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct RemoveMetadataArgs {
    /// Session id.
    pub session_id: String,
    /// Key to remove (repeatable; at least one).
    #[arg(long = "key", required = true)]
    pub keys: Vec<String>,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetStateArgs {
    /// Session id.
    pub session_id: String,
    /// running, needsInput, blocked, complete or failed.
    #[arg(long)]
    pub state: String,
    /// A note.
    #[arg(long)]
    pub message: Option<String>,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetSummaryArgs {
    /// Session id.
    pub session_id: String,
    /// The summary line.
    #[arg(long)]
    pub summary: String,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetResultArgs {
    /// Session id.
    pub session_id: String,
    /// The result text.
    #[arg(long)]
    pub result: String,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetResultSchemaArgs {
    /// Session id.
    pub session_id: String,
    /// The schema, as JSON.
    #[arg(long)]
    pub result_schema: String,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct SetAgentTypeArgs {
    /// Session id.
    pub session_id: String,
    /// Opaque token ([A-Za-z0-9_.:-], ≤ 64 chars).
    #[arg(long)]
    pub agent_type: String,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
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
    #[arg(long, value_name = "WHEN")]
    pub restart: Option<String>,
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
#[command(group = clap::ArgGroup::new("condition").required(true).args(["state", "event", "lifecycle", "until", "regex"]))]
pub struct WaitArgs {
    /// Session id.
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
    #[arg(long, value_enum)]
    pub lifecycle: Option<LifecycleArg>,
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
