//! The command line: `maxx <noun> <verb> [flags]`, `maxx +control <noun> <verb>` being the
//! same command. Each noun-verb prints the daemon's raw JSON response on stdout.
//!
//! One file per command family; every type is re-exported here, so `cli::X` names any of them.
//! The wire params each verb sends are built in `crate::request`, not here.
//!
//! - [`sessions`]: `maxx sessions` lifecycle, control and wait verbs (and the verb list).
//! - [`declare`]: the agent declaration verbs (`declare-state`, `set-metadata`, ...).
//! - [`screen`]: the screen-readback and input verbs (`snapshot`, `run`, `send-keys`, ...).
//! - [`stream`]: `maxx stream` and `maxx event`.
//! - [`admin`]: `maxx daemon`, `maxx policy`, `maxx profiles`, `maxx mcp`.
//! - [`human`]: the human views `maxx ls`, `maxx status`, `maxx attach`.
// clap prints these doc comments as --help text, where <uid> and <state> are placeholders,
// not HTML.
#![allow(rustdoc::invalid_html_tags)]

mod admin;
mod declare;
mod human;
mod narrow;
mod screen;
mod sessions;
mod stream;

pub use admin::*;
pub use declare::*;
pub use human::*;
pub use screen::*;
pub use sessions::*;
pub use stream::*;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
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

/// A protocol enum as a flag's value: its wire spellings, listed in `--help` as
/// `[possible values: a, b]` like any value enum, without the variants' doc comments (they
/// describe the wire, and would turn the list into one paragraph per value).
fn wire_enum<E: ValueEnum + Clone + Send + Sync + 'static>() -> impl TypedValueParser<Value = E> {
    let values = E::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value)
        .map(|v| v.help(None::<&'static str>));
    PossibleValuesParser::new(values)
        .map(|name| E::from_str(&name, false).expect("one of its own possible values"))
}

#[derive(Parser, Debug)]
#[command(
    name = "maxx",
    version,
    about = "Explicit, observable control over terminal sessions.",
    long_about = "maxx runs terminal sessions (agents, jobs, shells) in real PTYs under a daemon \
and lets scripts drive them over a token-authenticated Unix socket.\n\n\
Noun-verb commands print the daemon's JSON response on stdout; on failure stdout is empty and \
stderr carries one JSON error. `maxx +control <noun> <verb>` is the same command. Bare `maxx` \
prints this help on stdout and exits 0.",
    after_help = "Quick start:\n  \
id=$(maxx sessions create --command 'make test' | jq -r .result.session.session_id)\n  \
maxx sessions wait \"$id\" --lifecycle exited --timeout 10m\n  \
maxx sessions get \"$id\" | jq .result.session.exit_code\n\n\
Sessions are named by id, id prefix (4+ hex) or %title.\n\
Exit codes: 0 ok/matched · 1 the daemon refused, or a wait ended unmatched · 2 what you typed is wrong · \
3 no daemon, host unreachable or partial fleet answer · 124 wait timed out"
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,

    #[command(subcommand)]
    pub command: Option<Command>,
}

// The root command's flags (not a doc comment: a flattened struct's would be the root's
// about). All but --capabilities and --json are accepted after any noun and verb too.
#[derive(clap::Args, Debug)]
pub struct Globals {
    /// The daemon's socket (its folder is the control dir). Default: $MAXX_CONTROL_DIR/control.sock,
    /// else /tmp/maxx-control-<uid>/control.sock.
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    /// Act as this policy source (wire field `caller`). Default: local-cli.
    #[arg(long = "as", global = true, value_name = "SOURCE")]
    pub caller: Option<String>,

    /// Run the command against the daemon on HOST, over the system ssh (`ssh HOST maxx
    /// proxy`; ~/.ssh/config, the agent, ControlMaster apply; $MAXX_SSH replaces `ssh`).
    /// Same JSON, same exit codes; a host that cannot be reached is exit 3 `unreachable`.
    /// `local` is this machine. Never starts a daemon there.
    #[arg(
        long,
        global = true,
        env = "MAXX_HOST",
        hide_env_values = true,
        value_name = "HOST"
    )]
    pub host: Option<String>,

    /// A fleet view over these hosts (comma-separated; `local` or `-` is this machine), for
    /// ls, status, top --json, sessions list, stream watch, stream wait --all. Results carry
    /// `host`; hosts that did not answer are listed in `unreachable` (exit 3).
    #[arg(long, global = true, value_delimiter = ',', value_name = "HOST,...")]
    pub hosts: Vec<String>,

    /// Like --hosts, read from FILE: one host per line, `#` comments.
    #[arg(long, global = true, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,

    /// Approve an action the policy wants confirmed (wire field `confirm`).
    #[arg(long, global = true)]
    pub confirm: bool,

    /// Print what this build offers (methods, commands, MCP tools, selectors) as JSON and
    /// exit: for a program probing instead of parsing --help. No daemon needed.
    #[arg(long)]
    pub capabilities: bool,

    /// With --capabilities: accepted (its output is JSON).
    #[arg(long)]
    pub json: bool,
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
    /// Serve the verbs as MCP tools on stdio, for agent hosts (each call acts as --as).
    #[command(
        after_help = "Examples:\n  maxx mcp --as my-agent      # in the host's MCP server config\n  \
maxx mcp --schema | jq '.tools[].name'\n  maxx mcp --skill"
    )]
    Mcp(McpArgs),
    /// A table of sessions for people: lifecycle, declared state, summary, group, age.
    Ls(LsArgs),
    /// The daemon's version, pid, control dir and session counts.
    Status(StatusArgs),
    /// A live dashboard of the fleet, updated from the event stream. q quits.
    Top(TopArgs),
    /// Join this terminal to a session's PTY (default: the focused one). Detach: Ctrl-\ d.
    #[command(
        after_help = "The prefix (Ctrl-\\ unless --detach-key): prefix d detaches; prefix prefix sends \
one prefix byte and stays attached; prefix then any other key sends both bytes.\n\
The terminal's title shows the session's id prefix and title and how to detach while \
attached (--no-status: leave the title alone).\n\n\
Example:\n  maxx attach ID\n  maxx attach --detach-key C-a   # then C-a d to detach"
    )]
    Attach(AttachArgs),
    /// Print shell completions to stdout (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  maxx completions bash > ~/.local/share/bash-completion/completions/maxx\n  \
maxx completions zsh > ~/.zfunc/_maxx\n  maxx completions fish > ~/.config/fish/completions/maxx.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout.
    #[command(after_help = "Example:\n  maxx man > ~/.local/share/man/man1/maxx.1")]
    Man,
    /// Play an asciicast recording into a new session (its size; the program exits at the
    /// end, the session stays readable).
    #[command(after_help = "Example:\n  maxx play build.cast --speed 2 --idle-limit 1s")]
    Play(PlayArgs),
    /// Agent runtime hooks: declare a Claude Code or Codex turn's final answer (read from its
    /// transcript, never from the screen) as this session's result.
    #[command(after_help = "Examples:\n  maxx hook install claude-code --print\n  \
maxx hook install codex\n  echo \"$payload\" | maxx hook claude-code --strict")]
    Hook(HookCmd),
    /// Who the daemon takes you for: the policy source it resolved (--as), your uid as the
    /// kernel reports it, and which daemon answered (never the token).
    Whoami,
    /// Bridge stdin/stdout to this machine's daemon, for `ssh HOST maxx proxy` (--host and
    /// --hosts run it): NDJSON requests in, answers and stream lines out, several in flight
    /// told apart by `id`. It adds the token itself; --as pins every request's source.
    #[command(after_help = "Examples:\n  ssh build-1 maxx proxy\n  \
# in ~/.ssh/authorized_keys on the host, pinning what that key may do:\n  \
command=\"maxx proxy --as ci-hub\",no-pty ssh-ed25519 AAAA... hub\n\n\
See docs/remote.md.")]
    Proxy,
}

#[derive(clap::Args, Debug)]
pub struct PlayArgs {
    /// The recording (asciicast v2).
    pub file: PathBuf,
    /// Play this many times faster.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Shorten every pause to at most this long (e.g. 1s).
    #[arg(long, value_parser = duration, value_name = "DUR")]
    pub idle_limit: Option<Duration>,
    /// The new session's title (default: play FILE).
    #[arg(long)]
    pub title: Option<String>,
    /// Internal: write the output to this terminal (the played session's program).
    #[arg(long, hide = true)]
    pub raw: bool,
}

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// The whole grammar, with `--json` accepted by every command: a no-op where the output is
/// JSON already (all but `ls` and `status`, which declare their own). `event emit` keeps its
/// seed's `--json PAYLOAD`. Completions and the man page are generated from this too.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    // Every command but the root (`maxx --json` alone is not a command); a noun too, for
    // its bare form (`maxx sessions --json` lists).
    Cli::command().mut_subcommands(with_json)
}

/// A command and those under it, each with `--json` (a no-op) unless it has its own.
fn with_json(cmd: clap::Command) -> clap::Command {
    let cmd = cmd.mut_subcommands(with_json);
    if cmd.get_arguments().any(|a| a.get_long() == Some("json")) {
        return cmd;
    }
    cmd.arg(
        clap::Arg::new("json_output")
            .long("json")
            .action(clap::ArgAction::SetTrue)
            .help("Accepted for scripts: the output is JSON already"),
    )
}

/// Parse a command line: the common ones on a grammar of just the verb they name
/// ([`narrow`]), everything else — and anything that grammar refuses, so help, versions and
/// errors — with the whole [`command`].
pub fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    if let Some(cli) = narrow::parse(&args) {
        return Ok(cli);
    }
    let matches = command().try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

#[cfg(test)]
mod tests {
    /// Every command accepts `--json` (the macterm seed's promise), walking the whole tree.
    #[test]
    fn every_command_takes_json() {
        fn walk(cmd: &clap::Command, path: &str, leaves: &mut usize) {
            let path = format!("{path} {}", cmd.get_name());
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                walk(sub, &path, leaves);
            }
            if path == " maxx" {
                return;
            }
            *leaves += 1;
            assert!(
                cmd.get_arguments().any(|a| a.get_long() == Some("json")),
                "{path} does not take --json"
            );
        }
        let mut leaves = 0;
        let mut cmd = super::command();
        cmd.build();
        walk(&cmd, "", &mut leaves);
        assert!(leaves > 40, "walked {leaves} commands");
        // And it parses where the output is JSON already.
        for line in [
            "maxx sessions list --json",
            "maxx sessions get abcd --json",
            "maxx stream watch --json",
            "maxx policy sources --json",
            "maxx daemon --json",
            "maxx sessions --json",
            "maxx profiles --json",
        ] {
            let args: Vec<std::ffi::OsString> = line.split(' ').map(Into::into).collect();
            super::parse(args).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }
}
