//! Human views: `maxx ls` (a table of sessions) and `maxx status` (the daemon line).
//! Colour only when stdout is a terminal and `NO_COLOR` is unset; `--json` prints the same
//! data as JSON.

use serde_json::Value;
use std::time::SystemTime;

/// Whether to colour output written to stdout.
pub fn use_color() -> bool {
    std::env::var_os("NO_COLOR").is_none()
        && nix::unistd::isatty(std::io::stdout()).unwrap_or(false)
}

/// The terminal's width (stdout), else `$COLUMNS`, else 100.
pub fn width() -> usize {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize struct we own.
    if unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0 {
        return ws.ws_col as usize;
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|c| *c >= 20)
        .unwrap_or(100)
}

/// `5s`, `3m`, `2h`, `4d`.
pub fn age(created_at: &str, now: SystemTime) -> String {
    let Ok(t) = humantime::parse_rfc3339(created_at) else {
        return "?".into();
    };
    let s = now.duration_since(t).map(|d| d.as_secs()).unwrap_or(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Make text from the daemon safe to print to a person's terminal: every control character
/// (C0, DEL, C1 including U+009B CSI) becomes a visible escape (`\x1b`, `\x7f`, `\u{9b}`),
/// so a title, command, summary or metadata value can never move the cursor, retitle,
/// clear or write the clipboard of the terminal showing it. A backslash is left as is.
/// Every human view passes data it did not produce through here; `--json` does not (JSON
/// escapes control characters itself).
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c as u32 {
            0x00..=0x1f | 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            0x80..=0x9f => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

/// JSON text for a terminal or a pipe: what `serde_json` writes, with DEL and the C1
/// controls (U+0080..U+009F, which include the one-character CSI U+009B) escaped as
/// `\u00XX` too. serde_json escapes C0 only; the rest are legal raw in JSON but a
/// terminal acts on them. Outside strings JSON text is ASCII, so every such character is
/// inside a string and its escape decodes to the same value: the data stays verbatim.
pub fn json_text(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    if !text.chars().any(|c| ('\u{7f}'..='\u{9f}').contains(&c)) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if ('\u{7f}'..='\u{9f}').contains(&c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn paint(text: &str, code: &str, color: bool) -> String {
    if color && !code.is_empty() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn truncate(text: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let n = text.chars().count();
    if n <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// A session's open ask as a person reads it (`? question`), or `None`: shown instead of
/// the summary by `ls` and `top`, since it is waiting on them.
pub fn ask_line(session: &Value) -> Option<String> {
    let question = session["ask"]["question"].as_str()?;
    Some(format!("? {}", escape_controls(question)))
}

fn short(id: &str) -> String {
    id.chars().take(8).collect::<String>().to_lowercase()
}

fn lifecycle_color(l: &str) -> &'static str {
    match l {
        "running" => "32",
        "backoff" => "33",
        "exited" => "2",
        "closed" | "archived" => "2",
        _ => "",
    }
}

fn state_color(s: &str) -> &'static str {
    match s {
        "running" => "36",
        "needsInput" => "33;1",
        "blocked" => "31;1",
        "complete" => "32",
        "failed" => "31",
        _ => "",
    }
}

/// The session table. `sessions` are views from `sessions.list`.
pub fn render_table(
    sessions: &[Value],
    width: usize,
    wide: bool,
    color: bool,
    now: SystemTime,
) -> String {
    if sessions.is_empty() {
        return "no sessions\n".into();
    }
    struct Row {
        cells: Vec<String>,
        colors: Vec<&'static str>,
    }
    let header = [
        "ID",
        "TITLE",
        "LIFECYCLE",
        "STATE",
        "GROUP",
        "PARENT",
        "RST",
        "AGE",
        "SUMMARY",
    ];
    let mut rows: Vec<Row> = Vec::new();
    for s in sessions {
        let str_of = |k: &str| escape_controls(s[k].as_str().unwrap_or(""));
        let lifecycle = str_of("lifecycle");
        let mut lc = lifecycle.clone();
        if lifecycle == "exited" {
            match (&s["exit_code"], &s["exit_signal"]) {
                (Value::Number(n), _) => lc = format!("exited({n})"),
                (_, Value::String(sig)) => lc = format!("exited({sig})"),
                _ => {}
            }
        }
        if s["restart_gave_up"] == true {
            lc.push('!');
        }
        let state = str_of("workflow_state");
        let title = escape_controls(
            s["title"]
                .as_str()
                .or_else(|| s["command"].as_str())
                .unwrap_or("(shell)"),
        );
        let mut summary = ask_line(s).unwrap_or_else(|| str_of("summary"));
        if wide {
            if let Some(m) = s["metadata"].as_object() {
                let chips: Vec<String> = m
                    .iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        format!("[{}={}]", escape_controls(k), escape_controls(&v))
                    })
                    .collect();
                if !chips.is_empty() {
                    summary = format!("{} {summary}", chips.join(" ")).trim().to_string();
                }
            }
        }
        let focus = if s["focused"] == true { "*" } else { " " };
        rows.push(Row {
            cells: vec![
                format!("{}{focus}", short(&str_of("session_id"))),
                title,
                lc,
                match (state.is_empty(), s["ask"].is_object()) {
                    (true, true) => "?".into(),
                    (true, false) => "-".into(),
                    (false, true) => format!("?{state}"),
                    (false, false) => state.clone(),
                },
                escape_controls(s["group"].as_str().unwrap_or("-")),
                s["parent_id"]
                    .as_str()
                    .map(short)
                    .unwrap_or_else(|| "-".into()),
                s["restart_count"].to_string(),
                age(&str_of("created_at"), now),
                summary,
            ],
            colors: vec![
                "",
                "1",
                lifecycle_color(&lifecycle),
                state_color(&state),
                "35",
                "",
                "",
                "2",
                "",
            ],
        });
    }
    // Column widths: fixed columns sized to content; TITLE capped; SUMMARY takes the rest.
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.cells.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    widths[1] = widths[1].min(28);
    widths[4] = widths[4].min(20);
    let fixed: usize = widths[..n - 1].iter().sum::<usize>() + 2 * (n - 1);
    widths[n - 1] = width.saturating_sub(fixed).max(8);
    let mut out = String::new();
    let line = |cells: &[String], colors: Option<&[&'static str]>| -> String {
        let mut l = String::new();
        for i in 0..n {
            let text = truncate(&cells[i], widths[i]);
            let pad = if i + 1 == n {
                String::new()
            } else {
                " ".repeat(widths[i] - text.chars().count() + 2)
            };
            let code = colors.map_or("", |c| c[i]);
            l.push_str(&paint(&text, code, color));
            l.push_str(&pad);
        }
        l.trim_end().to_string()
    };
    let header_cells: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    out.push_str(&paint(&line(&header_cells, None), "1", color));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(&r.cells, Some(&r.colors)));
        out.push('\n');
    }
    out
}

/// The `maxx status` text from `daemon.status`.
pub fn render_status(status: &Value) -> String {
    let by = status["by_lifecycle"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{v} {}", escape_controls(k)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let mut out = format!(
        "maxx {} (pid {}) — control dir {}\n",
        escape_controls(status["version"].as_str().unwrap_or("?")),
        status["pid"],
        escape_controls(status["control_dir"].as_str().unwrap_or("?")),
    );
    out.push_str(&format!(
        "sessions: {}{}\n",
        status["sessions"],
        if by.is_empty() {
            String::new()
        } else {
            format!(" ({by})")
        }
    ));
    if let Some(f) = status["focused"].as_str() {
        out.push_str(&format!("focused: {}\n", escape_controls(&short(f))));
    }
    if let Some(asking) = status["asking"].as_array().filter(|a| !a.is_empty()) {
        let ids: Vec<String> = asking
            .iter()
            .filter_map(Value::as_str)
            .map(|id| escape_controls(&short(id)))
            .collect();
        out.push_str(&format!(
            "asking: {} ({}) — `maxx sessions answer ID --text …`\n",
            ids.len(),
            ids.join(", ")
        ));
    }
    out.push_str(&format!("bus cursor: {}\n", status["bus_cursor"]));
    let keeper = &status["keeper"];
    if keeper["connected"] == true {
        out.push_str(&format!(
            "keeper: pid {} ({} recoveries)\n",
            keeper["pid"], keeper["daemons_before"]
        ));
    } else if keeper.is_object() {
        out.push_str("keeper: GONE (sessions will not survive this daemon's death)\n");
    }
    // A rejected policy file leaves only the built-in sources in force: say so here, not
    // only in `maxx policy sources`.
    if status["policy"]["status"] == "rejected" {
        let reasons: Vec<String> = status["policy"]["reasons"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(escape_controls)
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "policy: REJECTED {} — only the built-in sources are in force: {}\n",
            escape_controls(status["policy"]["path"].as_str().unwrap_or("?")),
            reasons.join("; ")
        ));
        out.push_str("  fix the file, then `maxx daemon reload` (`maxx policy validate --config FILE` checks it)\n");
    }
    if let Some(u) = status["registry_unreadable"].as_object() {
        let text = |k: &str| u.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
        out.push_str(&format!(
            "registry: UNREADABLE {} ({}); every change is refused (registry_unreadable) until \
             it is moved aside or repaired and the daemon restarted; reads work\n",
            escape_controls(&text("file")),
            escape_controls(&text("reason"))
        ));
    }
    out
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn escape_controls_makes_every_control_visible() {
        assert_eq!(escape_controls("plain – ü"), "plain – ü");
        assert_eq!(
            escape_controls("\x1b]0;PWNED\x07\x1b[2J"),
            r"\x1b]0;PWNED\x07\x1b[2J"
        );
        assert_eq!(escape_controls("a\tb\nc\rd\0"), r"a\x09b\x0ac\x0dd\x00");
        assert_eq!(
            escape_controls("x\u{9b}31m\x7f\u{85}"),
            r"x\u{9b}31m\x7f\u{85}"
        );
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            assert!(!escape_controls(&c.to_string())
                .chars()
                .any(char::is_control));
        }
    }

    #[test]
    fn json_text_escapes_del_and_c1_and_round_trips() {
        let v = serde_json::json!({"t": "\x1b[2J\u{9b}31m\x7f é", "n": 1});
        let text = json_text(&v);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(
            text.contains(r"\u009b") && text.contains(r"\u007f"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }
}
