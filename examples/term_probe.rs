//! `term_probe`: asks its terminal questions and reports the answers.
//!
//! ```text
//! term_probe [--out FILE] [--timeout-ms N] [--burst] [--linger-ms N] QUERY...
//! ```
//!
//! Puts the controlling terminal in raw mode, writes each query (a name from
//! `shared::NAMED` — cpr, decxcpr, dsr5, da1, da2, da3, xtversion, osc10, xtwinops18, kitty,
//! ... — or a sequence written with escapes such as `'\e[6n'`), reads the answer (one whole
//! escape sequence) with a deadline of `--timeout-ms` (default 1000) and prints one JSON line
//! per query: `{"query", "sent", "answer", "latency_us"}` (`answer`/`latency_us` null when
//! nothing came). Bytes are escaped: `\e` ESC, `\a` BEL, `\\`, `\xNN`. Queries go one at a
//! time, each after the previous answer or deadline; with `--burst` they are written at once
//! and the answers are read in order (latency from that one write). After the last query,
//! `--linger-ms` more of reading collects anything else the terminal says (`extra`). The last
//! line is the marker `{"done": true, "answered", "queries", "extra"}`.
//!
//! Lines go to `--out` (appended, so a test can watch the file without reading the screen) or
//! to stdout. Nothing is drawn on the screen before the queries, so the cursor is where the
//! program found it. Exit 0 when every query was answered, 1 otherwise, 2 on bad usage.

#[path = "shared/mod.rs"]
mod shared;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::{json, Value};
use shared::{escape, query, RawTty, Splitter};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

struct Args {
    out: Option<String>,
    timeout: Duration,
    burst: bool,
    linger: Duration,
    queries: Vec<(String, Vec<u8>)>,
}

fn usage(msg: &str) -> ! {
    eprintln!("term_probe: {msg}\nusage: term_probe [--out FILE] [--timeout-ms N] [--burst] [--linger-ms N] QUERY...");
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        out: None,
        timeout: Duration::from_millis(1000),
        burst: false,
        linger: Duration::ZERO,
        queries: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    let ms = |v: Option<String>| -> Duration {
        Duration::from_millis(
            v.and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage("a number of milliseconds expected")),
        )
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--out" => a.out = Some(it.next().unwrap_or_else(|| usage("--out FILE"))),
            "--timeout-ms" => a.timeout = ms(it.next()),
            "--linger-ms" => a.linger = ms(it.next()),
            "--burst" => a.burst = true,
            _ => a.queries.push(query(&arg)),
        }
    }
    if a.queries.is_empty() {
        usage("no query given");
    }
    a
}

/// Reads whole sequences from the terminal with deadlines.
struct Reader<'a> {
    tty: &'a mut RawTty,
    split: Splitter,
    ready: std::collections::VecDeque<Vec<u8>>,
}

impl Reader<'_> {
    /// The next whole sequence (or stray byte), or None at the deadline.
    fn next(&mut self, deadline: Instant) -> Option<Vec<u8>> {
        loop {
            if let Some(s) = self.ready.pop_front() {
                return Some(s);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let ms = PollTimeout::try_from(left.as_millis().max(1) as i32).unwrap();
            let mut fds = [PollFd::new(self.tty.file.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, ms) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return None,
            }
            let mut buf = [0u8; 4096];
            match self.tty.file.read(&mut buf) {
                Ok(0) | Err(_) => return None,
                Ok(n) => {
                    for &c in &buf[..n] {
                        if let Some(unit) = self.split.push(c) {
                            self.ready.push_back(unit);
                        }
                    }
                }
            }
        }
    }
}

fn main() {
    let args = parse_args();
    let mut lines: Vec<Value> = Vec::new();
    let mut tty = match RawTty::open() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("term_probe: {e}");
            std::process::exit(1);
        }
    };
    let mut writer = tty.file.try_clone().expect("dup the tty");
    let mut r = Reader {
        tty: &mut tty,
        split: Splitter::default(),
        ready: Default::default(),
    };
    let mut answered = 0;
    let mut record = |name: &str, sent: &[u8], answer: Option<(Vec<u8>, Duration)>| {
        answered += answer.is_some() as usize;
        lines.push(json!({
            "query": name,
            "sent": escape(sent),
            "answer": answer.as_ref().map(|(a, _)| escape(a)),
            "latency_us": answer.as_ref().map(|(_, t)| t.as_micros() as u64),
        }));
    };
    if args.burst {
        let all: Vec<u8> = args.queries.iter().flat_map(|(_, q)| q.clone()).collect();
        let t0 = Instant::now();
        writer.write_all(&all).expect("write the queries");
        let deadline = t0 + args.timeout;
        for (name, q) in &args.queries {
            let answer = r.next(deadline).map(|a| (a, t0.elapsed()));
            record(name, q, answer);
        }
    } else {
        for (name, q) in &args.queries {
            let t0 = Instant::now();
            writer.write_all(q).expect("write the query");
            let answer = r.next(t0 + args.timeout).map(|a| (a, t0.elapsed()));
            record(name, q, answer);
        }
    }
    let mut extra = Vec::new();
    let linger_until = Instant::now() + args.linger;
    while let Some(unit) = r.next(linger_until) {
        extra.extend_from_slice(&unit);
    }
    extra.extend_from_slice(&r.split.cur_bytes());
    drop(r);
    drop(tty);
    let n = args.queries.len();
    lines.push(json!({"done": true, "answered": answered, "queries": n, "extra": escape(&extra)}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    match &args.out {
        Some(path) => {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap_or_else(|e| usage(&format!("cannot open {path}: {e}")));
            f.write_all(text.as_bytes()).expect("write the report");
            println!("term_probe done {answered}/{n}");
        }
        None => {
            print!("{text}");
            println!("term_probe done {answered}/{n}");
        }
    }
    std::process::exit(if answered == n { 0 } else { 1 });
}
