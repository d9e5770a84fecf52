//! The exit codes (BRIEF "Exit codes and errors", README) and which outcome gets which.
//! Scripts branch on these and on `error.code`; printing is `crate::report`'s.

use crate::client::ClientError;
use maxx_protocol::error::ErrorBody;
use maxx_protocol::ErrorCode;
use serde_json::Value;

/// Success, or a wait's condition matched.
pub const OK: i32 = 0;
/// The daemon refused a well-formed request (`ok:false`: not found, unauthorized, already
/// ended...), or a wait ended unmatched.
pub const FAILED: i32 = 1;
/// The caller's input is wrong (`invalid_request`, `unknown_method`, `ambiguous`, or the CLI's
/// own usage errors); nothing was done.
pub const USAGE: i32 = 2;
/// No daemon could be reached (locally, or on a `--host`), or with `--hosts` the answer is
/// partial (a host is listed in `unreachable`): retrying may help, unlike 1.
pub const NO_DAEMON: i32 = 3;
/// A wait timed out.
pub const TIMEOUT: i32 = 124;
/// `run` gave up (its budget was spent).
pub const RUN_GAVE_UP: i32 = 125;

/// A request `method` the daemon refused, or that failed on the way, with `error`.
pub fn refused(method: &str, error: &ErrorBody) -> i32 {
    if method == "sessions.run" && error.code == ErrorCode::Timeout {
        return RUN_GAVE_UP;
    }
    // An answer that says no daemon could be reached (from the far side of `--host`).
    if matches!(
        error.code,
        ErrorCode::NoDaemon | ErrorCode::DaemonRestarted | ErrorCode::Unreachable
    ) {
        return NO_DAEMON;
    }
    // One rule: what the caller typed is wrong (a bad value or id, a selector naming
    // several sessions, no such method) → 2; the daemon refusing a well-formed request → 1.
    if matches!(
        error.code,
        ErrorCode::InvalidRequest | ErrorCode::UnknownMethod | ErrorCode::Ambiguous
    ) {
        return USAGE;
    }
    FAILED
}

/// A request `method` that got no answer.
pub fn unanswered(method: &str, e: &ClientError) -> i32 {
    match e {
        ClientError::NoDaemon(_) => NO_DAEMON,
        ClientError::Failed(error) => refused(method, error),
        ClientError::Usage(_) => USAGE,
    }
}

/// An `ok` answer to `method`: `run` mirrors the child's exit code, a wait its outcome.
pub fn answered(method: &str, result: Option<&Value>) -> i32 {
    if method == "sessions.run" {
        return result
            .and_then(|r| r.get("exit_code"))
            .and_then(Value::as_i64)
            .map_or(FAILED, |c| (c & 0xff) as i32);
    }
    if method == "sessions.wait" || method == "stream.wait" {
        let outcome = result
            .and_then(|r| r.get("outcome"))
            .and_then(Value::as_str);
        return match outcome {
            Some("matched") => OK,
            Some("timeout") => TIMEOUT,
            _ => FAILED,
        };
    }
    OK
}

/// A line of a stream (`watch`) that makes the whole stream exit 1: the daemon refused it,
/// or dropped a watcher that fell behind (an `end` with reason `dropped`, or a `reset`).
/// A stream that ended or hit its timeout otherwise exits 0.
pub fn stream_line(line: &Value) -> Option<i32> {
    let failed = line.get("ok") == Some(&Value::Bool(false))
        || (line["type"] == "end" && line["reason"] == "dropped")
        || line["type"] == "reset";
    failed.then_some(FAILED)
}
