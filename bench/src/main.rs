//! maxx-bench: maxx vs tmux (vs a bare PTY) on this machine, in one run.
//!
//! Usage: bench/run.sh [--quick] [--only spawn,throughput,scale,group,durable,fanout,queries,recovery,fleet,ten_thousand]
//!        maxx-bench --maxx PATH [--quick] [--only LIST] [--runs N] [--fleet-window S] [--fleet-sessions N] [--out FILE]
//!
//! Prints a table (each figure: min / median / max over runs; ratios computed within a
//! run) and the target verdicts, and writes the same figures as JSON.

mod bare;
mod diag;
mod durable;
mod exit_trace;
mod fanout;
mod fleet;
mod group;
mod maxx;
mod queries;
mod recovery;
mod remote;
mod scale;
mod spawn;
mod ten_thousand;
mod throughput;
mod tmux;
mod util;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;
use util::{fmt, Summary};

pub struct Cfg {
    pub quick: bool,
    pub maxx: PathBuf,
    /// This binary (members of the group bench run it).
    pub me: PathBuf,
    pub runs: Option<usize>,
    /// `--fleet-window S`: the fleet scenario runs 100 sessions for S seconds (long-run
    /// memory: a screen's history and logs keep growing for minutes), instead of its plan.
    pub fleet_window: Option<u64>,
    /// `--fleet-sessions N`: the fleet scenario runs N sessions only (its window: the plan's
    /// for 1,000, or `--fleet-window`), for comparing builds on one fleet size.
    pub fleet_sessions: Option<usize>,
}

/// One line of the results table.
pub struct Row {
    pub section: &'static str,
    pub metric: String,
    pub unit: &'static str,
    pub maxx: Option<Summary>,
    /// Shown (and written) instead of a maxx figure that does not exist, e.g. "no answer".
    pub maxx_missing: Option<&'static str>,
    pub tmux: Option<Summary>,
    pub bare: Option<Summary>,
    pub ratio: Option<(&'static str, Summary)>,
    pub target: Option<&'static str>,
    pub met: Option<bool>,
    pub note: String,
}

impl Row {
    pub fn new(section: &'static str, metric: &str, unit: &'static str) -> Row {
        Row {
            section,
            metric: metric.to_string(),
            unit,
            maxx: None,
            maxx_missing: None,
            tmux: None,
            bare: None,
            ratio: None,
            target: None,
            met: None,
            note: String::new(),
        }
    }
    pub fn maxx(mut self, s: Option<Summary>) -> Row {
        self.maxx = s;
        self
    }
    pub fn maxx_missing(mut self, why: &'static str) -> Row {
        self.maxx_missing = Some(why);
        self
    }
    pub fn tmux(mut self, s: Option<Summary>) -> Row {
        self.tmux = s;
        self
    }
    pub fn bare(mut self, s: Option<Summary>) -> Row {
        self.bare = s;
        self
    }
    pub fn ratio(mut self, label: &'static str, s: Option<Summary>) -> Row {
        self.ratio = s.map(|s| (label, s));
        self
    }
    pub fn target(mut self, t: &'static str, met: Option<bool>) -> Row {
        self.target = Some(t);
        self.met = met;
        self
    }
    pub fn note(mut self, n: String) -> Row {
        self.note = n;
        self
    }

    fn json(&self) -> Value {
        json!({
            "section": self.section,
            "metric": self.metric,
            "unit": self.unit,
            "maxx": self.maxx.map(|s| s.json()),
            "maxx_missing": self.maxx_missing,
            "tmux": self.tmux.map(|s| s.json()),
            "bare": self.bare.map(|s| s.json()),
            "ratio": self.ratio.map(|(l, s)| json!({"of": l, "value": s.json()})),
            "target": self.target,
            "met": self.met,
            "note": self.note,
        })
    }
}

fn mmm(s: &Option<Summary>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} / {} / {}", fmt(s.min), fmt(s.med), fmt(s.max)),
        Some(s) => fmt(s.med),
        None => "-".into(),
    }
}

fn verdict(r: &Row) -> &'static str {
    match (r.target, r.met) {
        (None, _) => "",
        (Some(_), Some(true)) => "MET",
        (Some(_), Some(false)) => "NOT MET",
        (Some(_), None) => "?",
    }
}

fn print_table(rows: &[Row]) {
    let headers = [
        "metric", "unit", "maxx", "tmux", "bare", "ratio", "target", "",
    ];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.metric.clone(),
                r.unit.to_string(),
                r.maxx_missing
                    .filter(|_| r.maxx.is_none())
                    .map(String::from)
                    .unwrap_or_else(|| mmm(&r.maxx)),
                mmm(&r.tmux),
                mmm(&r.bare),
                r.ratio
                    .map(|(l, s)| format!("{} ({l})", mmm(&Some(s))))
                    .unwrap_or_default(),
                r.target.unwrap_or("").to_string(),
                verdict(r).to_string(),
            ]
        })
        .collect();
    let mut w = headers.map(|h| h.chars().count());
    for c in &cells {
        for (i, x) in c.iter().enumerate() {
            w[i] = w[i].max(x.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::from("|");
        for (i, x) in c.iter().enumerate() {
            s.push(' ');
            s.push_str(x);
            s.push_str(&" ".repeat(w[i] - x.chars().count()));
            s.push_str(" |");
        }
        s
    };
    println!("{}", line(&headers.map(String::from)));
    println!(
        "|{}",
        w.iter()
            .map(|n| format!("{}|", "-".repeat(n + 2)))
            .collect::<String>()
    );
    for c in &cells {
        println!("{}", line(c));
    }
    println!();
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        println!("- {}: {}", r.metric, r.note);
    }
}

/// The brief's targets: one line per row that carries a target, maxx and tmux medians
/// side by side (same runs), and the verdict.
fn print_targets(rows: &[Row]) {
    let med = |s: &Option<Summary>| s.map(|s| fmt(s.med)).unwrap_or_else(|| "-".into());
    println!("Targets (medians over runs; maxx and tmux from the same runs):");
    println!();
    println!("| what | target | maxx | tmux | bare | verdict |");
    println!("|---|---|---|---|---|---|");
    for r in rows.iter().filter(|r| r.target.is_some()) {
        let ratio = r
            .ratio
            .map(|(l, s)| format!(" ({} {l})", fmt(s.med)))
            .unwrap_or_default();
        let maxx = match r.maxx_missing.filter(|_| r.maxx.is_none()) {
            Some(why) => why.to_string(),
            None => format!("{}{} {}", med(&r.maxx), ratio, r.unit),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.metric,
            r.target.unwrap_or(""),
            maxx,
            med(&r.tmux),
            med(&r.bare),
            verdict(r)
        );
    }
}

const ALL: [&str; 11] = [
    "spawn",
    "throughput",
    "scale",
    "group",
    "durable",
    "fanout",
    "queries",
    "recovery",
    "remote",
    "fleet",
    "ten_thousand",
];

/// Scenarios `--quick` leaves out unless named with `--only`.
const NOT_QUICK: [&str; 1] = ["ten_thousand"];

fn usage() -> ! {
    eprintln!(
        "usage: maxx-bench --maxx PATH [--quick] [--only {}] [--runs N] [--fleet-window S] [--fleet-sessions N] [--out FILE]",
        ALL.join(",")
    );
    std::process::exit(2)
}

/// A whole number above 0 given to an option, or the usage.
fn positive(arg: Option<&String>) -> u64 {
    arg.and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| usage())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child-fifo") && args.len() == 5 {
        group::child_fifo(&args[2], &args[3], &args[4]);
    }
    if args.get(1).map(String::as_str) == Some("child-query") && args.len() == 4 {
        queries::child_query(&args[2], &args[3]);
    }
    if args.get(1).map(String::as_str) == Some("child-agent") && args.len() == 5 {
        fleet::child_agent(&args[2], &args[3], &args[4]);
    }
    if args.get(1).map(String::as_str) == Some("gen-output") && args.len() == 4 {
        // The throughput scenario's output file, for profiling the parse outside a PTY.
        let size = args[3].parse().expect("gen-output FILE BYTES");
        if let Err(e) = throughput::generate(std::path::Path::new(&args[2]), size) {
            eprintln!("gen-output failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("diag-spawn") {
        let iters = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(100);
        match diag::run(iters) {
            Ok(v) => println!("{}", serde_json::to_string_pretty(&v).unwrap()),
            Err(e) => {
                eprintln!("diag-spawn failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let mut quick = false;
    let mut only: Vec<String> = ALL.iter().map(|s| s.to_string()).collect();
    let mut only_given = false;
    let mut maxx_bin: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut runs = None;
    let mut fleet_window = None;
    let mut fleet_sessions = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => {
                only_given = true;
                only = it
                    .next()
                    .unwrap_or_else(|| usage())
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect();
                if let Some(bad) = only.iter().find(|s| !ALL.contains(&s.as_str())) {
                    eprintln!("unknown scenario {bad:?}");
                    usage();
                }
            }
            "--maxx" => maxx_bin = Some(it.next().unwrap_or_else(|| usage()).into()),
            "--out" => out = Some(it.next().unwrap_or_else(|| usage()).into()),
            "--runs" => runs = Some(positive(it.next()) as usize),
            "--fleet-window" => fleet_window = Some(positive(it.next())),
            "--fleet-sessions" => fleet_sessions = Some(positive(it.next()) as usize),
            "-h" | "--help" => usage(),
            _ => usage(),
        }
    }
    if quick && !only_given {
        only.retain(|s| !NOT_QUICK.contains(&s.as_str()));
    }
    let maxx_bin = maxx_bin.unwrap_or_else(|| usage());
    let maxx_bin = std::fs::canonicalize(&maxx_bin).unwrap_or_else(|e| {
        eprintln!("maxx binary {}: {e}", maxx_bin.display());
        std::process::exit(2)
    });
    let cfg = Cfg {
        quick,
        maxx: maxx_bin,
        me: std::env::current_exe().expect("current exe"),
        runs,
        fleet_window,
        fleet_sessions,
    };
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("tmux is not installed; the harness compares against it");
        std::process::exit(2);
    }
    // The harness never inherits a session's identity.
    for k in [
        "TMUX",
        "MAXX_SESSION_ID",
        "MAXX_SURFACE_ID",
        "MAXX_REGISTRATION_TOKEN",
    ] {
        std::env::remove_var(k);
    }

    if let Some(nice) = util::autogroup_nice().filter(|n| *n != 0) {
        eprintln!(
            "warning: this shell's scheduling autogroup runs at nice {nice} \
             (/proc/self/autogroup); the figures are not comparable to a run at 0"
        );
    }
    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    let mut scenarios = serde_json::Map::new();
    let mut failures = serde_json::Map::new();
    for name in ALL.iter().filter(|n| only.iter().any(|o| o == *n)) {
        eprintln!("== {name}");
        let busy = util::wait_quiet(std::time::Duration::from_secs(if quick { 10 } else { 60 }));
        let t = Instant::now();
        let res = match *name {
            "spawn" => spawn::run(&cfg),
            "throughput" => throughput::run(&cfg),
            "scale" => scale::run(&cfg),
            "group" => group::run(&cfg),
            "durable" => durable::run(&cfg),
            "fanout" => fanout::run(&cfg),
            "queries" => queries::run(&cfg),
            "recovery" => recovery::run(&cfg),
            "remote" => remote::run(&cfg),
            "fleet" => fleet::run(&cfg),
            "ten_thousand" => ten_thousand::run(&cfg),
            _ => unreachable!(),
        };
        match res {
            Ok((r, mut detail)) => {
                detail["seconds"] = json!(util::round(t.elapsed().as_secs_f64()));
                detail["cpu_busy_before"] = json!(util::round(busy));
                rows.extend(r);
                scenarios.insert(name.to_string(), detail);
            }
            Err(e) => {
                eprintln!("!! {name} failed: {e}");
                failures.insert(name.to_string(), json!(e.to_string()));
            }
        }
        eprintln!("   ({:.1} s)", t.elapsed().as_secs_f64());
    }

    println!();
    println!(
        "maxx-bench ({}) — figures are min / median / max over runs; ratios computed within each run",
        if quick { "quick" } else { "full" }
    );
    println!();
    print_table(&rows);
    println!();
    print_targets(&rows);
    if !failures.is_empty() {
        println!();
        for (k, v) in &failures {
            println!("FAILED {k}: {v}");
        }
    }
    println!();
    println!("total {:.0} s", started.elapsed().as_secs_f64());

    let maxx_version = util::capture(cfg.maxx.to_str().unwrap_or("maxx"), &["--version"]);
    // The repository this harness lives in (bench/..): the maxx it measures is built there.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.to_path_buf());
    let git = repo
        .as_ref()
        .map(|r| {
            let rev = util::capture(
                "git",
                &[
                    "-C",
                    r.to_str().unwrap_or("."),
                    "rev-parse",
                    "--short",
                    "HEAD",
                ],
            );
            let dirty = !util::capture(
                "git",
                &[
                    "-C",
                    r.to_str().unwrap_or("."),
                    "status",
                    "--porcelain",
                    "--untracked-files=no",
                ],
            )
            .is_empty();
            if dirty {
                format!("{rev}+dirty")
            } else {
                rev
            }
        })
        .unwrap_or_default();
    let doc = json!({
        "schema": 1,
        "mode": if quick { "quick" } else { "full" },
        "scenarios_run": only,
        "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        "total_seconds": util::round(started.elapsed().as_secs_f64()),
        "machine": util::machine(),
        "versions": {
            "maxx": maxx_version,
            "maxx_binary": cfg.maxx.display().to_string(),
            "git": git,
            "tmux": util::capture("tmux", &["-V"]),
        },
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        "targets": rows.iter().filter(|r| r.target.is_some()).map(|r| json!({
            "what": r.metric, "target": r.target, "met": r.met,
            "maxx_median": r.maxx.map(|s| util::round(s.med)),
            "tmux_median": r.tmux.map(|s| util::round(s.med)),
            "unit": r.unit,
        })).collect::<Vec<_>>(),
        "scenarios": scenarios,
        "failures": failures,
    });
    let out = out.unwrap_or_else(|| PathBuf::from("bench/results/latest.json"));
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&out, serde_json::to_string_pretty(&doc).unwrap() + "\n") {
        Ok(()) => println!("wrote {}", out.display()),
        Err(e) => eprintln!("cannot write {}: {e}", out.display()),
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
}
