//! What the CLI prints: a response's JSON on stdout, or one JSON error object on stderr
//! (`{ok:false, error:{code, message, remedy}}`, stdout empty), and stream lines as they come.
//! Each function returns the exit code `crate::exit` picks for what it printed.

use crate::client::ClientError;
use crate::{exit, views};
use maxx_protocol::error::ErrorBody;
use maxx_protocol::Response;
use serde_json::{json, Value};
use std::path::Path;

pub fn print_error(error: &ErrorBody) {
    // Every error carries a remedy: the site's own, else its code's.
    let mut error = error.clone();
    if error.remedy.is_none() {
        error.remedy = Some(error.code.default_remedy().to_string());
    }
    eprintln!(
        "{}",
        views::json_text(&json!({ "ok": false, "error": error }))
    );
}

/// Report a usage error (nothing was sent).
pub fn usage_error(message: impl Into<String>, remedy: impl Into<String>) -> i32 {
    print_error(&ErrorBody::invalid(message).with_remedy(remedy));
    exit::USAGE
}

/// Help and version go to stdout as clap prints them; a bad command line is a usage error:
/// one JSON error object on stderr, exit 2.
pub fn clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return e.exit_code();
    }
    // Bare `maxx` (or a noun without its verb) asks for help: it goes to stdout, exit 0.
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        print!("{}", e.render());
        return exit::OK;
    }
    let rendered = e.render().to_string();
    let lines: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    // What went wrong (with the missing arguments, if any), then what would be accepted.
    let usage_at = lines
        .iter()
        .position(|l| l.starts_with("Usage:"))
        .unwrap_or(lines.len());
    let message = lines[..usage_at]
        .join(" ")
        .trim_start_matches("error: ")
        .to_string();
    let remedy = match lines.get(usage_at) {
        Some(usage) => format!("{usage}; see --help"),
        None => "see --help".to_string(),
    };
    usage_error(message, remedy)
}

/// A request `method` that got no answer.
pub fn client_error(method: &str, e: ClientError) -> i32 {
    let code = exit::unanswered(method, &e);
    match e {
        ClientError::NoDaemon(error) | ClientError::Failed(error) => print_error(&error),
        ClientError::Usage(msg) => {
            usage_error(msg, "see --help");
        }
    }
    code
}

/// A noun-verb's answer: the raw response on stdout, or its error on stderr.
pub fn response(method: &str, response: Result<Response, ClientError>) -> i32 {
    let response = match response {
        Ok(r) => r,
        Err(e) => return client_error(method, e),
    };
    if !response.ok {
        let error = response
            .error
            .unwrap_or_else(|| ErrorBody::internal("ok:false without an error"));
        print_error(&error);
        return exit::refused(method, &error);
    }
    println!("{}", views::json_text(&response));
    let result = response.result.as_ref();
    if (method == "sessions.wait" || method == "stream.wait")
        && result.and_then(|r| r.get("output_only_filtered")) == Some(&Value::Bool(false))
    {
        eprintln!(
            "maxx: --output-only filtered nothing: this session has not marked input \
             with OSC 133 (no B mark seen)"
        );
    }
    exit::answered(method, result)
}

/// One line of a stream, printed as it arrives: on stdout, or on stderr if it is the
/// daemon's refusal. `Some(code)` if the stream must exit with it.
pub fn stream_line(line: &Value) -> Option<i32> {
    use std::io::Write;
    if line.get("ok") == Some(&Value::Bool(false)) {
        eprintln!("{}", views::json_text(line));
    } else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", views::json_text(line));
        let _ = out.flush();
    }
    exit::stream_line(line)
}

/// `maxx policy validate`: the summary on stdout (exit 0), or every reason on stderr (exit 1).
pub fn policy_validation<T: serde::Serialize>(
    config: &Path,
    outcome: Result<T, Vec<String>>,
) -> i32 {
    match outcome {
        Ok(summary) => {
            println!(
                "{}",
                views::json_text(&json!({"ok": true, "result": summary}))
            );
            exit::OK
        }
        Err(reasons) => {
            eprintln!(
                "{}",
                json!({"ok": false, "error": {
                    "code": "invalid_request",
                    "message": format!("{} is not a valid policy", config.display()),
                    "reasons": reasons,
                }})
            );
            exit::FAILED
        }
    }
}
