//! `maxx stream` (the process-wide event stream) and `maxx event`.
// clap prints these doc comments as --help text, where <uid> and <state> are placeholders,
// not HTML.
#![allow(rustdoc::invalid_html_tags)]

use super::duration;
use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct StreamCmd {
    #[command(subcommand)]
    pub verb: StreamVerb,
}

#[derive(Args, Debug, Clone, Default)]
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
    Watch(StreamWatchArgs),
    /// Block until an event, or until every group member meets a condition
    /// (exit 0 matched, 1 ended, 124 timeout).
    #[command(
        after_help = "Examples:\n  maxx stream wait --group release --all exited --timeout 1h\n  \
maxx stream wait --group release --all declared:complete\n  \
maxx stream wait --group release --all exited --require-members\n  \
maxx stream wait --session ID --event tests.green"
    )]
    Wait(StreamWaitArgs),
}

#[derive(Args, Debug, Default)]
pub struct StreamWatchArgs {
    #[command(flatten)]
    pub filter: StreamFilterArgs,
    /// Replay retained events after this cursor first. With --hosts, a cursor per host
    /// (`a=12,b=40`, `local=N` for this machine; the merged hello's `cursors`).
    #[arg(long, value_parser = since, value_name = "CURSOR|HOST=CURSOR,...")]
    pub since: Option<Since>,
    /// Stop after this long (at most 1h).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
}

/// `--since`: one cursor, or one per host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// `--since 42`.
    Cursor(u64),
    /// `--since a=12,local=40`.
    PerHost(Vec<(String, u64)>),
}

fn since(text: &str) -> Result<Since, String> {
    if let Ok(n) = text.parse() {
        return Ok(Since::Cursor(n));
    }
    text.split(',')
        .map(|pair| {
            let (host, n) = pair
                .split_once('=')
                .ok_or_else(|| format!("expected a cursor or HOST=CURSOR,..., got {pair:?}"))?;
            let n = n
                .parse()
                .map_err(|_| format!("{host}: {n:?} is not a cursor (a whole number)"))?;
            Ok((host.to_string(), n))
        })
        .collect::<Result<_, _>>()
        .map(Since::PerHost)
}

#[derive(Args, Debug)]
pub struct StreamWaitArgs {
    #[command(flatten)]
    pub filter: StreamFilterArgs,
    /// Wait for a new event with this name.
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    pub event: Option<String>,
    /// With --group: exited, idle or declared:<state>. An empty group matches at once
    /// (the answer says `member_count: 0` and why) unless --require-members.
    #[arg(long)]
    pub all: Option<String>,
    /// With --all: a group with no members is an error (`not_found`, exit 1) instead of an
    /// immediate match, and the wait does not match while the group is empty.
    #[arg(long, requires = "all")]
    pub require_members: bool,
    /// Give up after this long (default 30s, at most 1h).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
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
    Emit(EmitArgs),
}

#[derive(Args, Debug)]
pub struct EmitArgs {
    /// Session id.
    #[arg(long, value_name = "SESSION_ID")]
    pub session: String,
    /// Event name.
    #[arg(long = "type", value_name = "NAME")]
    pub event_type: String,
    /// JSON payload.
    #[arg(long = "json", value_name = "JSON")]
    pub payload: Option<String>,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}
