//! `maxx hook <runtime>`: declare an agent runtime's final answer as the session's result,
//! from the structured transcript its hook payload names. Never from terminal output.
//!
//! - [`adapters`]: the adapter table (one entry per runtime).
//! - [`install`]: `maxx hook install <runtime> [--print]`.
//!
//! The hook runs inside a maxx session (it inherits `MAXX_SESSION_ID`); it reads the payload
//! where the runtime puts it, checks that the transcript lies under the adapter's roots (after
//! resolving symlinks and `..`), reads at most [`TAIL_MAX_BYTES`] from its end, takes the final
//! answer from the last qualifying record, truncates it to the result bound, and declares it
//! with `sessions.set-result` (source `hook:<runtime>`). Anything that stops it declares
//! nothing, says why on stderr and exits 0 (the runtime must not be disturbed); `--strict`
//! exits 1 instead (3 when no daemon answered).

pub mod adapters;
pub mod install;

use crate::client::{self, ClientError, Target};
use crate::exit;
use adapters::{Adapter, Located, PayloadFrom};
use maxx_protocol::limits::RESULT_MAX_BYTES;
use maxx_protocol::request::wire;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much of a transcript's end is read: the final answer is in the last records.
pub const TAIL_MAX_BYTES: u64 = 4 * 1024 * 1024;
/// Largest payload read from stdin.
pub const PAYLOAD_MAX_BYTES: u64 = 1024 * 1024;
/// How long a transcript that does not show the final answer the payload announces is
/// re-read: Claude Code and Codex call the hook before their last write is always on disk.
pub const FLUSH_WAIT: Duration = Duration::from_secs(3);
/// The variable that replaces every adapter's transcript roots (`:`-separated).
pub const ROOTS_ENV: &str = "MAXX_HOOK_ROOTS";

/// One transcript record, as an adapter reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// The final answer.
    Answer(String),
    /// This record ends the search without an answer (why).
    End(&'static str),
    /// Not a record that decides; look further back.
    Skip,
}

/// Why a hook declares nothing.
#[derive(Debug, Clone)]
pub struct Refusal(pub String);

impl Refusal {
    pub fn new(why: impl Into<String>) -> Refusal {
        Refusal(why.into())
    }
}

/// The transcript roots in force for `a`: `$MAXX_HOOK_ROOTS` when set, else the adapter's.
/// `~/` is `$HOME`; each root is canonicalized (one that does not exist is dropped).
pub fn roots(a: &Adapter) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let listed: Vec<String> = match std::env::var(ROOTS_ENV) {
        Ok(v) if !v.is_empty() => v.split(':').map(str::to_string).collect(),
        _ => a.roots.iter().map(|r| r.to_string()).collect(),
    };
    listed
        .iter()
        .filter(|r| !r.is_empty())
        .filter_map(|r| match (r.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => Some(home.join(rest)),
            (Some(_), None) => None,
            (None, _) => Some(PathBuf::from(r)),
        })
        .filter(|p| p.is_absolute())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// `path` resolved (symlinks, `..`) if it is a regular file under one of `roots`.
pub fn confine(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, Refusal> {
    if !path.is_absolute() {
        return Err(Refusal::new(format!(
            "transcript path {} is not absolute",
            path.display()
        )));
    }
    let real = std::fs::canonicalize(path).map_err(|e| {
        Refusal::new(format!(
            "transcript {} cannot be opened: {e}",
            path.display()
        ))
    })?;
    if !roots.iter().any(|r| real.starts_with(r)) {
        return Err(Refusal::new(format!(
            "transcript {} is outside the transcript roots ({}; {ROOTS_ENV} replaces them)",
            real.display(),
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if !real.is_file() {
        return Err(Refusal::new(format!(
            "transcript {} is not a regular file",
            real.display()
        )));
    }
    Ok(real)
}

/// The final answer in the last [`TAIL_MAX_BYTES`] of the transcript at `path`.
pub fn final_answer(a: &Adapter, path: &Path, at: &Located) -> Result<String, Refusal> {
    let mut file = std::fs::File::open(path).map_err(|e| {
        Refusal::new(format!(
            "transcript {} cannot be opened: {e}",
            path.display()
        ))
    })?;
    let len = file
        .metadata()
        .map_err(|e| Refusal::new(format!("transcript {}: {e}", path.display())))?
        .len();
    if len == 0 {
        return Err(Refusal::new(format!(
            "transcript {} is empty",
            path.display()
        )));
    }
    let start = len.saturating_sub(TAIL_MAX_BYTES);
    file.seek(SeekFrom::Start(start))
        .map_err(|e| Refusal::new(format!("transcript {}: {e}", path.display())))?;
    let mut tail = Vec::with_capacity((len - start) as usize);
    file.take(TAIL_MAX_BYTES)
        .read_to_end(&mut tail)
        .map_err(|e| Refusal::new(format!("transcript {}: {e}", path.display())))?;
    if tail.last() != Some(&b'\n') {
        return Err(Refusal::new(format!(
            "transcript {} ends in a truncated line (no final newline)",
            path.display()
        )));
    }
    // Reading from the middle: the first line may be cut; it is never looked at as a record.
    let body = if start > 0 {
        match memchr_newline(&tail) {
            Some(i) => &tail[i + 1..],
            None => &[][..],
        }
    } else {
        &tail[..]
    };
    for (n, line) in body
        .split(|b| *b == b'\n')
        .rev()
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .enumerate()
    {
        let record: Value = serde_json::from_slice(line).map_err(|e| {
            Refusal::new(format!(
                "transcript {} is malformed: line {} from the end is not JSON ({e})",
                path.display(),
                n + 1
            ))
        })?;
        match (a.record)(&record, at) {
            Record::Answer(text) => return Ok(text),
            Record::End(why) => return Err(Refusal::new(why)),
            Record::Skip => {}
        }
    }
    Err(Refusal::new(if start > 0 {
        format!(
            "no final answer in the last {TAIL_MAX_BYTES} bytes of {}",
            path.display()
        )
    } else {
        format!("no final answer in {}", path.display())
    }))
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|c| *c == b'\n')
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Read the payload where `a`'s runtime puts it.
fn payload(a: &Adapter, arg: Option<&str>) -> Result<Value, Refusal> {
    let text = match a.payload {
        PayloadFrom::LastArg => arg
            .ok_or_else(|| {
                Refusal::new("no payload argument (Codex passes it as the last argument)")
            })?
            .to_string(),
        PayloadFrom::Stdin => {
            let mut buf = String::new();
            std::io::stdin()
                .take(PAYLOAD_MAX_BYTES + 1)
                .read_to_string(&mut buf)
                .map_err(|e| Refusal::new(format!("cannot read the payload on stdin: {e}")))?;
            if buf.len() as u64 > PAYLOAD_MAX_BYTES {
                return Err(Refusal::new(format!(
                    "the payload on stdin is over {PAYLOAD_MAX_BYTES} bytes"
                )));
            }
            buf
        }
    };
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| Refusal::new(format!("the payload is not JSON: {e}")))?;
    if !v.is_object() {
        return Err(Refusal::new("the payload is not a JSON object"));
    }
    Ok(v)
}

/// What one hook run found: the session and the answer, or why nothing is declared.
fn capture(a: &Adapter, arg: Option<&str>) -> Result<(String, String), Refusal> {
    let session = std::env::var("MAXX_SESSION_ID")
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            Refusal::new("MAXX_SESSION_ID is not set: this hook runs only inside a maxx session")
        })?;
    let p = payload(a, arg)?;
    let roots = roots(a);
    if roots.is_empty() {
        return Err(Refusal::new(format!(
            "none of the transcript roots exists ({})",
            a.roots.join(", ")
        )));
    }
    let at = (a.locate)(&p, &roots)?;
    let path = confine(&at.path, &roots)?;
    if !at.answer_expected {
        return final_answer(a, &path, &at)
            .map(|answer| (session, truncate(answer, RESULT_MAX_BYTES)));
    }
    // The runtime may still be flushing the turn: read again whenever something in the
    // transcript's directory is written, created or renamed into it, for up to FLUSH_WAIT.
    use nix::sys::inotify::AddWatchFlags;
    let dir = path.parent().unwrap_or(&path);
    let mut last = None;
    let found = crate::client::wait_on_path(
        dir,
        AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO,
        FLUSH_WAIT,
        || match final_answer(a, &path, &at) {
            Ok(answer) => Ok(Some(answer)),
            Err(why) => {
                last = Some(why);
                Ok(None)
            }
        },
    );
    let answer = match found {
        Ok(Some(answer)) => answer,
        Ok(None) => return Err(last.expect("tried at least once")),
        Err(e) => {
            return Err(Refusal::new(format!(
                "cannot watch {} for the transcript's last write: {e}",
                dir.display()
            )))
        }
    };
    Ok((session, truncate(answer, RESULT_MAX_BYTES)))
}

/// `maxx hook <runtime> [--strict] [PAYLOAD]`.
pub fn run(
    target: &Target,
    caller: &Option<String>,
    a: &Adapter,
    arg: Option<&str>,
    strict: bool,
) -> i32 {
    let nothing = |why: &str| {
        eprintln!("maxx hook {}: declared nothing: {why}", a.name);
        if strict {
            exit::FAILED
        } else {
            exit::OK
        }
    };
    let (session, answer) = match capture(a, arg) {
        Ok(found) => found,
        Err(Refusal(why)) => return nothing(&why),
    };
    let params = wire::Declare {
        session_id: session.clone(),
        source: Some(format!("hook:{}", a.name)),
        result: Some(answer.clone()),
        ..Default::default()
    };
    let params = serde_json::to_value(params).expect("wire params serialize");
    let method = "sessions.set-result";
    match client::request(
        target,
        method,
        params,
        caller.as_deref(),
        false,
        crate::request::CLIENT_TIMEOUT,
    ) {
        Ok(r) if r.ok => {
            eprintln!(
                "maxx hook {}: declared the final answer ({} bytes) as session {session}'s result",
                a.name,
                answer.len()
            );
            exit::OK
        }
        Ok(r) => {
            let error = r.error.unwrap_or_else(|| {
                maxx_protocol::error::ErrorBody::internal("refused without an error")
            });
            eprintln!("maxx hook {}: the daemon refused the result:", a.name);
            crate::report::print_error(&error);
            if strict {
                exit::refused(method, &error)
            } else {
                exit::OK
            }
        }
        Err(e) => {
            eprintln!("maxx hook {}: the result was not declared:", a.name);
            let code = match &e {
                ClientError::NoDaemon(_) => exit::NO_DAEMON,
                _ => exit::FAILED,
            };
            crate::report::client_error(method, e);
            if strict {
                code
            } else {
                exit::OK
            }
        }
    }
}

/// `hook_adapters` for `maxx --capabilities`.
pub fn capabilities() -> Value {
    adapters::ADAPTERS
        .iter()
        .map(|a| {
            serde_json::json!({
                "runtime": a.name,
                "command": format!("maxx hook {}", a.name),
                "source": format!("hook:{}", a.name),
                "payload": a.payload.as_str(),
                "transcript_roots": a.roots,
                "final_answer": a.rule,
                "settings_file": a.install.file,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_stops_on_a_char_boundary() {
        let s = "é".repeat(10); // 20 bytes
        assert_eq!(truncate(s.clone(), 5), "éé");
        assert_eq!(truncate(s.clone(), 20), s);
        assert_eq!(truncate("abc".into(), 0), "");
    }

    #[test]
    fn every_adapter_has_a_subcommand_and_install_entry() {
        let cmd = crate::cli::command();
        let hook = cmd
            .get_subcommands()
            .find(|c| c.get_name() == "hook")
            .expect("maxx hook");
        for a in adapters::ADAPTERS {
            assert!(
                hook.get_subcommands().any(|c| c.get_name() == a.name),
                "maxx hook {} missing",
                a.name
            );
            assert!(a.install.file.starts_with("~/"));
        }
        let names: Vec<_> = hook
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|n| n != "install" && n != "help")
            .collect();
        assert_eq!(names.len(), adapters::ADAPTERS.len(), "{names:?}");
    }
}
