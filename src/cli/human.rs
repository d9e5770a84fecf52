//! The human views: `maxx ls`, `maxx status`, `maxx attach` (`maxx top` takes no flags).

use clap::Args;

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
    /// The session: an id, an id prefix (4+ hex digits) or %title (default: the focused
    /// session).
    pub session_id: Option<String>,
    /// Refused: attach joins a terminal (for JSON, read with `sessions snapshot` or `watch`).
    #[arg(long)]
    pub json: bool,
    /// The prefix key (a single-byte chord). Prefix then `d` detaches; the prefix twice
    /// sends one prefix byte to the session; the prefix then any other key sends both.
    #[arg(long, default_value = "C-\\", value_name = "KEY")]
    pub detach_key: String,
    /// Do not show the status (session id, title, how to detach) in the terminal's title.
    #[arg(long)]
    pub no_status: bool,
}

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Print the sessions the dashboard would show as JSON, once, instead (as `ls --json`).
    #[arg(long)]
    pub json: bool,
}
