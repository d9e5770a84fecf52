//! The agent declaration verbs of `maxx sessions`: `declare-state`, `emit-event`, the
//! metadata, state, summary, result, result-schema and agent-type verbs.

use clap::Args;

#[derive(Args, Debug)]
pub struct SourcedIdArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Who declares it (default: the --as source).
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Args, Debug)]
pub struct DeclareStateArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
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
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Opaque token ([A-Za-z0-9_.:-], ≤ 64 chars).
    #[arg(long)]
    pub agent_type: String,
    /// Who declares it.
    #[arg(long)]
    pub source: Option<String>,
}
