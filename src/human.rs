//! The commands for people: `maxx ls` and `maxx status` print tables (or `--json`), and
//! `maxx attach` joins this terminal to a session. The rendering is in `crate::views`.

use crate::cli::{AttachArgs, ListArgs, LsArgs, StatusArgs};
use crate::client::{self, Target};
use crate::request::{self, Request};
use crate::{attach, exit, report, views};
use maxx_protocol::error::ErrorBody;
use serde_json::Value;

/// One request whose `ok` result a human view renders; `Err` is the exit code of the error
/// already printed.
fn fetch(target: &Target, caller: &Option<String>, req: Request) -> Result<Value, i32> {
    match client::request(
        target,
        req.method,
        req.params,
        caller.as_deref(),
        false,
        req.timeout,
    ) {
        Ok(r) if r.ok => Ok(r.result.unwrap_or(Value::Null)),
        Ok(r) => {
            report::print_error(&r.error.unwrap_or_else(|| ErrorBody::internal("ok:false")));
            Err(exit::FAILED)
        }
        Err(e) => Err(report::client_error(req.method, e)),
    }
}

pub fn ls(target: &Target, caller: &Option<String>, a: LsArgs) -> i32 {
    let list = request::sessions_list(ListArgs {
        group: a.group,
        ..ListArgs::default()
    });
    let result = match fetch(target, caller, list) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let sessions = result["sessions"].as_array().cloned().unwrap_or_default();
    if a.json {
        println!("{}", views::json_text(&Value::Array(sessions)));
    } else {
        print!(
            "{}",
            views::render_table(
                &sessions,
                views::width(),
                a.wide,
                views::use_color(),
                std::time::SystemTime::now()
            )
        );
    }
    exit::OK
}

pub fn status(target: &Target, caller: &Option<String>, a: StatusArgs) -> i32 {
    match fetch(target, caller, request::daemon_status()) {
        Ok(s) if a.json => {
            println!("{}", views::json_text(&s));
            exit::OK
        }
        Ok(s) => {
            print!("{}", views::render_status(&s));
            exit::OK
        }
        Err(code) => code,
    }
}

pub fn attach(target: &Target, caller: &Option<String>, confirm: bool, a: AttachArgs) -> i32 {
    let key = match attach::parse_detach_key(&a.detach_key) {
        Ok(k) => k,
        Err(e) => return report::usage_error(e, "e.g. --detach-key C-a; see --help"),
    };
    let opts = attach::Options {
        detach_key: key,
        detach_key_name: a.detach_key.clone(),
        status: !a.no_status,
        initial: Vec::new(),
    };
    match attach::run(target, a.session_id, caller.as_deref(), confirm, opts) {
        Ok(attach::Outcome::Detached(id)) => {
            eprintln!("[detached from {id}]");
            exit::OK
        }
        Ok(attach::Outcome::Ended(id)) => {
            eprintln!("[session {id} ended or the daemon went away]");
            exit::OK
        }
        Err(e) => report::client_error("sessions.attach", e),
    }
}
