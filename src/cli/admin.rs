//! `maxx daemon`, `maxx policy`, `maxx profiles` and `maxx mcp`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

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
    Check(CheckArgs),
    /// Every active source and whether the policy file loaded (or why it was rejected).
    Sources,
    /// Check a policy file offline (no daemon needed): exit 0 valid, 1 invalid with reasons.
    Validate(ValidateArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// e.g. tabs:spawn, output:read.
    #[arg(long)]
    pub capability: String,
    /// The session (or group) it would act on.
    #[arg(long)]
    pub target: Option<String>,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The file.
    #[arg(long)]
    pub config: PathBuf,
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
#[command(args_conflicts_with_subcommands = true)]
pub struct DaemonArgs {
    /// Manage the running daemon instead of starting one.
    #[command(subcommand)]
    pub action: Option<DaemonAction>,
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
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=maxx_protocol::limits::RETAINED_RECORDS_MAX as u64))]
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
    /// Bytes the answers of all screen reads in flight (snapshot, dump, inspect, attach
    /// repaints) may hold together until written; a read past it is answered `busy`.
    #[arg(long, default_value_t = maxx_protocol::limits::SCREEN_READ_TOTAL_MAX_BYTES, value_name = "BYTES",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub screen_read_bytes: usize,
    /// Internal: this process is the detached daemon.
    #[arg(long, hide = true)]
    pub detached_child: bool,
    /// Internal: this process is the daemon proper, started by the keeper, with its link to
    /// the keeper at this descriptor.
    #[arg(long, hide = true, value_name = "FD")]
    pub keeper_fd: Option<i32>,
}

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Print the tool catalog (names, methods, capabilities, input schemas) as JSON and exit.
    #[arg(long, conflicts_with = "skill")]
    pub schema: bool,
    /// Print the operating guide for an agent and exit.
    #[arg(long)]
    pub skill: bool,
}

#[derive(Subcommand, Debug)]
pub enum DaemonAction {
    /// Stop the daemon cleanly (its sessions end) and wait until it is gone.
    Stop(StopArgs),
    /// Read the policy file again (as SIGHUP): print what changed, or why the file was
    /// refused (the policy in force is then kept).
    #[command(
        after_help = "Example:\n  $EDITOR ~/.config/maxx/control-policy.json && maxx daemon reload"
    )]
    Reload,
    /// The daemon's version, pid, control dir and session counts (as `maxx status`).
    Status(super::StatusArgs),
    /// Replace the running daemon with the `maxx` binary now on disk, every session kept
    /// running (SIGUSR2 to its keeper); print the old and new daemon pids.
    Upgrade,
}

#[derive(Args, Debug)]
pub struct StopArgs {
    /// How long to wait for it to be gone (default 30s).
    #[arg(long, value_parser = super::duration, default_value = "30s")]
    pub timeout: std::time::Duration,
}

#[derive(Args, Debug)]
pub struct HookCmd {
    #[command(subcommand)]
    pub verb: HookVerb,
}

/// One subcommand per entry of the adapter table (`src/hook/adapters.rs`; a unit test keeps
/// them in step), and `install`.
#[derive(Subcommand, Debug)]
pub enum HookVerb {
    /// Claude Code's Stop hook: the payload on stdin names the transcript; its final answer
    /// becomes this session's result (source hook:claude-code).
    #[command(name = "claude-code")]
    ClaudeCode(HookRunArgs),
    /// Codex's notify program: the payload is the last argument; the thread's rollout holds
    /// the final answer, which becomes this session's result (source hook:codex).
    Codex(HookRunArgs),
    /// Show (--print) or merge into the runtime's settings file (after a timestamped backup)
    /// the setting that runs `maxx hook RUNTIME`.
    Install(HookInstallArgs),
}

#[derive(Args, Debug)]
pub struct HookRunArgs {
    /// Exit 1 when nothing is declared (default: say why on stderr and exit 0, so the
    /// runtime is not disturbed).
    #[arg(long)]
    pub strict: bool,
    /// The payload, for runtimes that pass it as an argument (Codex).
    pub payload: Option<String>,
}

#[derive(Args, Debug)]
pub struct HookInstallArgs {
    /// The runtime.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(
        crate::hook::adapters::ADAPTERS.iter().map(|a| a.name)))]
    pub runtime: String,
    /// Print the setting instead of merging it.
    #[arg(long)]
    pub print: bool,
}
