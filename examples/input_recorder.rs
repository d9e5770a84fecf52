//! `input_recorder`: records every byte its terminal sends it, and asks its terminal questions
//! when told to.
//!
//! ```text
//! input_recorder --log FILE [--trigger CHAR] [QUERY...]
//! ```
//!
//! Puts the controlling terminal in raw mode (no echo, no signals, no line editing: every
//! byte arrives as typed) and appends everything it reads to `FILE` as it arrives, unchanged.
//! With queries (names or escaped sequences, as for `term_probe`), it writes them once at start
//! (round 0) and again whenever it reads the trigger byte (default `q`), and after each round
//! sets the title (OSC 2) to `recorder-N`; rounds after the first also print `round-N` on the
//! screen after the queries, so whoever watches the output knows the round's queries went
//! before it. Round 0 draws nothing, so its queries see the cursor where the program found it.
//! Without queries it only records (and sets the title `recorder-0` once in raw mode).
//! Stops at end of input.

#[path = "shared/mod.rs"]
mod shared;

use shared::{query, RawTty};
use std::io::{Read, Write};

fn main() {
    let mut log = None;
    let mut trigger = b'q';
    let mut queries = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--log" => log = it.next(),
            "--trigger" => {
                trigger = it
                    .next()
                    .and_then(|t| t.bytes().next())
                    .expect("--trigger CHAR")
            }
            _ => queries.push(query(&arg).1),
        }
    }
    let Some(log) = log else {
        eprintln!("usage: input_recorder --log FILE [--trigger CHAR] [QUERY...]");
        std::process::exit(2);
    };
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap_or_else(|e| panic!("cannot open {log}: {e}"));
    let mut tty = match RawTty::open() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("input_recorder: {e}");
            std::process::exit(1);
        }
    };
    let mut out = tty.file.try_clone().expect("dup the tty");
    let mut round = 0u32;
    let mut ask = |round: u32| {
        let mut bytes: Vec<u8> = queries.concat();
        if round > 0 {
            bytes.extend_from_slice(format!("round-{round}\r\n").as_bytes());
        }
        bytes.extend_from_slice(format!("\x1b]2;recorder-{round}\x07").as_bytes());
        out.write_all(&bytes).expect("write to the tty");
    };
    ask(0);
    let mut buf = [0u8; 4096];
    loop {
        let n = match tty.file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        log.write_all(&buf[..n]).expect("write the log");
        for _ in buf[..n].iter().filter(|&&c| c == trigger) {
            if !queries.is_empty() {
                round += 1;
                ask(round);
            }
        }
    }
}
