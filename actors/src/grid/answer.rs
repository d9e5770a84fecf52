//! A screen read's answer (`sessions.snapshot`, `sessions.dump`), encoded straight from the
//! grid to the bytes of its JSON `result`, within a byte cap (issue 18, item 4).
//!
//! Before, a snapshot was built as structs (a `StyledCell` per cell), turned into a
//! `serde_json::Value` (a map per cell and per style) and then into the response line:
//! three full copies, ~3 GB at the peak for a 1000x1000 screen of coloured text whose answer
//! was a 190 MiB line. Now two passes over the window's rows: the first measures what each
//! row costs in JSON and decides which rows fit under the cap, the second writes exactly
//! those into one buffer allocated once at its final size. Nothing else holds the answer.
//!
//! The window is the requested history rows (oldest first) then the viewport's rows; an
//! answer holds its rows from `start_row` on, whole (text, cells and soft-wrap entry of a
//! row together; with `unwrap` a logical line is never split), as far as the cap goes. A cut
//! answer says so: `truncated: true`, `truncated_reason: "size_limit"`, `next_row`. An answer
//! that is not cut is byte for byte what serde wrote for the old document.

use super::{Grid, Row};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::screen::{Cursor, SCREEN_SCHEMA};
use std::io::Write;

/// What a snapshot shows besides the grid's rows.
pub struct SnapshotHead<'a> {
    /// The session.
    pub session_id: &'a str,
    /// Title from OSC 0/2.
    pub title: Option<&'a str>,
    /// History rows in the window (the newest ones), before `start_row` is applied.
    pub history: usize,
    /// Styled cells wanted.
    pub cells: bool,
    /// Soft-wrapped rows joined into logical lines.
    pub unwrap: bool,
    /// Window rows to skip.
    pub start_row: usize,
    /// The window reaches past what the scrollback limit kept (`history_limit`).
    pub history_truncated: bool,
}

/// Which window rows an answer holds: `first..end`, and where a cut answer stops.
struct Plan {
    first: usize,
    end: usize,
    /// Some when cut for size: `end`.
    next_row: Option<usize>,
    /// Per included row: whether it is soft-wrapped (read in the first pass).
    wrapped: Vec<bool>,
    /// An upper bound of the answer's size (exact but for a few separators).
    bytes: usize,
}

/// The bytes of `value` as JSON.
fn json_len<T: serde::Serialize + ?Sized>(value: &T, scratch: &mut Vec<u8>) -> usize {
    scratch.clear();
    let _ = serde_json::to_writer(&mut *scratch, value);
    scratch.len()
}

/// Decimal digits of `n`.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The grid line of window row `i`, with `history` history rows first.
fn line_of(i: usize, history: usize) -> i32 {
    i as i32 - history as i32
}

/// Refused: one unit of the window (a row, or a logical line with `unwrap`) is larger than
/// the whole cap by itself (only combining marks, which the emulator keeps without bound,
/// can make it so). Never answered cut to nothing, which a caller following `next_row`
/// would ask for again for ever.
fn row_too_large(row: usize, cap: usize) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::TooLarge,
        format!(
            "window row {row} alone takes more than the {} MiB a screen answer may hold",
            cap >> 20
        ),
    )
    .with_remedy(format!(
        "read past it with start_row {} (or fewer rows: without cells, a smaller scrollback)",
        row + 1
    ))
}

/// Decide which rows fit: the first pass.
fn plan(grid: &Grid, head: &SnapshotHead<'_>, fixed: usize, cap: usize) -> Result<Plan, ErrorBody> {
    let total = head.history + grid.rows() as usize;
    let first = head.start_row.min(total);
    let mut scratch = Vec::new();
    let mut bytes = fixed;
    let mut wrapped = Vec::new();
    let mut i = first;
    while i < total {
        // One unit: a row, or with `unwrap` the rows of one logical line (never across the
        // boundary between history and viewport, which are joined separately).
        let section_end = if i < head.history {
            head.history
        } else {
            total
        };
        let mut cost = 1; // the separator
        let mut j = i;
        let mut text = 2; // quotes
        loop {
            let Row {
                text: t,
                wrapped: w,
                ..
            } = grid.row(line_of(j, head.history));
            text += json_len(t.as_str(), &mut scratch) - 2;
            if head.cells {
                // `row` as the answer will number it: from the page's first row of its array.
                let rel = if j < head.history {
                    j - first
                } else {
                    j - first.max(head.history)
                };
                scratch.clear();
                grid.styled_cells_json(line_of(j, head.history), rel as u32, &mut scratch);
                cost += scratch.len();
            }
            if w && !head.unwrap {
                cost += digits(j) + 1;
            }
            wrapped.push(w);
            j += 1;
            if !head.unwrap || !w || j == section_end {
                break;
            }
        }
        cost += text;
        if bytes + cost > cap {
            wrapped.truncate(i - first);
            if i == first {
                return Err(row_too_large(i, cap));
            }
            return Ok(Plan {
                first,
                end: i,
                next_row: Some(i),
                wrapped,
                bytes,
            });
        }
        bytes += cost;
        i = j;
    }
    Ok(Plan {
        first,
        end: total,
        next_row: None,
        wrapped,
        bytes,
    })
}

/// Write a JSON array of the texts of window rows `rows` (joined into logical lines with
/// `unwrap`, as `grid::logical` joins them).
fn write_texts(
    out: &mut Vec<u8>,
    grid: &Grid,
    history: usize,
    rows: std::ops::Range<usize>,
    plan: &Plan,
    unwrap: bool,
) {
    out.push(b'[');
    let mut first = true;
    let mut line = String::new();
    let mut open = false;
    let mut emit = |out: &mut Vec<u8>, text: &str| {
        if !first {
            out.push(b',');
        }
        first = false;
        let _ = serde_json::to_writer(&mut *out, text);
    };
    for i in rows {
        let text = grid.row(line_of(i, history)).text;
        let wrapped = plan.wrapped[i - plan.first];
        if !unwrap || (!open && !wrapped) {
            emit(out, &text);
            continue;
        }
        line.push_str(&text);
        open = wrapped;
        if !wrapped {
            emit(out, &line);
            line.clear();
        }
    }
    if open {
        emit(out, &line);
    }
    out.push(b']');
}

/// Write the styled cells of window rows `rows`, `row` counted from `rows.start`.
fn write_cells(out: &mut Vec<u8>, grid: &Grid, history: usize, rows: std::ops::Range<usize>) {
    out.push(b'[');
    let open = out.len();
    let start = rows.start;
    for i in rows {
        grid.styled_cells_json(line_of(i, history), (i - start) as u32, out);
    }
    // Each cell was written with a comma after it: the last one goes.
    if out.len() > open {
        out.pop();
    }
    out.push(b']');
}

/// Indices (counted from `rows.start`) of the soft-wrapped rows among `rows`.
fn write_wraps(out: &mut Vec<u8>, rows: std::ops::Range<usize>, plan: &Plan) {
    out.push(b'[');
    let mut first = true;
    let start = rows.start;
    for i in rows {
        if plan.wrapped[i - plan.first] {
            if !first {
                out.push(b',');
            }
            first = false;
            let _ = write!(out, "{}", i - start);
        }
    }
    out.push(b']');
}

impl Grid {
    /// `sessions.snapshot`'s ScreenState as JSON bytes, at most `cap` of them. `charge` is
    /// asked for the answer's size before it is written (and may refuse it); what it returns
    /// travels with the bytes.
    pub fn snapshot_json<C>(
        &self,
        head: &SnapshotHead<'_>,
        cap: usize,
        charge: impl FnOnce(usize) -> Result<C, ErrorBody>,
    ) -> Result<(Vec<u8>, C), ErrorBody> {
        let (x, y, visible) = self.cursor();
        let cursor = Cursor { x, y, visible };
        // Everything but the rows, with room for the largest `next_row` and reason.
        let mut scratch = Vec::new();
        let fixed = 256
            + json_len(head.session_id, &mut scratch)
            + json_len(&head.title, &mut scratch)
            + json_len(&cursor, &mut scratch);
        let plan = plan(self, head, fixed, cap)?;
        let charged = charge(plan.bytes)?;
        let mut out = Vec::with_capacity(plan.bytes);
        let history = head.history;
        let hist = plan.first.min(history)..plan.end.min(history);
        let view = plan.first.max(history)..plan.end.max(history);
        let _ = write!(out, "{{\"schema_version\":{SCREEN_SCHEMA},\"session_id\":");
        let _ = serde_json::to_writer(&mut out, head.session_id);
        let _ = write!(
            out,
            ",\"cols\":{},\"rows\":{},\"cursor\":",
            self.cols(),
            self.rows()
        );
        let _ = serde_json::to_writer(&mut out, &cursor);
        out.extend_from_slice(b",\"lines\":");
        write_texts(&mut out, self, history, view.clone(), &plan, head.unwrap);
        out.extend_from_slice(b",\"scrollback\":");
        write_texts(&mut out, self, history, hist.clone(), &plan, head.unwrap);
        out.extend_from_slice(b",\"cells\":");
        if head.cells {
            write_cells(&mut out, self, history, view.clone());
            out.extend_from_slice(b",\"scrollback_cells\":");
            write_cells(&mut out, self, history, hist.clone());
        } else {
            out.extend_from_slice(b"null");
        }
        if !head.unwrap {
            out.extend_from_slice(b",\"soft_wrap\":{\"lines\":");
            write_wraps(&mut out, view, &plan);
            out.extend_from_slice(b",\"scrollback\":");
            write_wraps(&mut out, hist, &plan);
            out.push(b'}');
        }
        let reason = if plan.next_row.is_some() {
            Some("size_limit")
        } else if head.history_truncated {
            Some("history_limit")
        } else {
            None
        };
        let _ = write!(
            out,
            ",\"truncated\":{},\"truncated_reason\":",
            reason.is_some()
        );
        let _ = serde_json::to_writer(&mut out, &reason);
        out.extend_from_slice(b",\"title\":");
        let _ = serde_json::to_writer(&mut out, &head.title);
        if let Some(next) = plan.next_row {
            let _ = write!(out, ",\"next_row\":{next}");
        }
        out.push(b'}');
        Ok((out, charged))
    }

    /// `sessions.dump`'s `{text}` as JSON bytes, at most `cap` of them: the window's rows
    /// (`history` history rows, then the viewport's) from `start_row` on, joined by
    /// newlines, trailing blank rows dropped. A cut answer adds `truncated: true` and
    /// `next_row`.
    pub fn dump_json<C>(
        &self,
        history: usize,
        start_row: usize,
        cap: usize,
        charge: impl FnOnce(usize) -> Result<C, ErrorBody>,
    ) -> Result<(Vec<u8>, C), ErrorBody> {
        let mut end = history + self.rows() as usize;
        while end > 0 && self.row(line_of(end - 1, history)).text.is_empty() {
            end -= 1;
        }
        let first = start_row.min(end);
        let mut scratch = Vec::new();
        let fixed = 64;
        let mut bytes = fixed;
        let mut cut = None;
        for i in first..end {
            let text = self.row(line_of(i, history)).text;
            let cost = json_len(text.as_str(), &mut scratch); // its quotes pay for "\n"
            if bytes + cost > cap {
                if i == first {
                    return Err(row_too_large(i, cap));
                }
                cut = Some(i);
                break;
            }
            bytes += cost;
        }
        let charged = charge(bytes)?;
        let stop = cut.unwrap_or(end);
        let mut out = Vec::with_capacity(bytes);
        out.extend_from_slice(b"{\"text\":\"");
        for i in first..stop {
            if i > first {
                out.extend_from_slice(b"\\n");
            }
            let text = self.row(line_of(i, history)).text;
            scratch.clear();
            let _ = serde_json::to_writer(&mut scratch, text.as_str());
            out.extend_from_slice(&scratch[1..scratch.len() - 1]);
        }
        out.push(b'"');
        if let Some(next) = cut {
            let _ = write!(out, ",\"truncated\":true,\"next_row\":{next}");
        }
        out.push(b'}');
        Ok((out, charged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::logical;
    use maxx_protocol::screen::{ScreenState, SoftWrap};

    /// The snapshot as the daemon built it before: structs, then serde.
    fn old_snapshot(grid: &Grid, head: &SnapshotHead<'_>) -> Vec<u8> {
        let want = head.history as i32;
        let history_rows: Vec<Row> = (-want..0).map(|l| grid.row(l)).collect();
        let view_rows: Vec<Row> = (0..grid.rows() as i32).map(|l| grid.row(l)).collect();
        let cells = head.cells.then(|| {
            let mut out = Vec::new();
            for line in 0..grid.rows() as i32 {
                grid.styled_cells(line, line as u32, &mut out);
            }
            out
        });
        let scrollback_cells = head.cells.then(|| {
            let mut out = Vec::new();
            for (i, line) in (-want..0).enumerate() {
                grid.styled_cells(line, i as u32, &mut out);
            }
            out
        });
        let wraps = |rows: &[Row]| -> Vec<u32> {
            rows.iter()
                .enumerate()
                .filter(|(_, r)| r.wrapped)
                .map(|(i, _)| i as u32)
                .collect()
        };
        let (lines, scrollback, soft_wrap) = if head.unwrap {
            (logical(&view_rows), logical(&history_rows), None)
        } else {
            let sw = SoftWrap {
                lines: wraps(&view_rows),
                scrollback: wraps(&history_rows),
            };
            (
                view_rows.into_iter().map(|r| r.text).collect(),
                history_rows.into_iter().map(|r| r.text).collect(),
                Some(sw),
            )
        };
        let (x, y, visible) = grid.cursor();
        let state = ScreenState {
            schema_version: SCREEN_SCHEMA,
            session_id: head.session_id.to_string(),
            cols: grid.cols(),
            rows: grid.rows(),
            cursor: Cursor { x, y, visible },
            lines,
            scrollback,
            cells,
            scrollback_cells,
            soft_wrap,
            truncated: head.history_truncated,
            truncated_reason: head.history_truncated.then(|| "history_limit".into()),
            title: head.title.map(str::to_string),
            next_row: None,
        };
        serde_json::to_vec(&serde_json::json!(state)).unwrap()
    }

    fn head(history: usize, cells: bool, unwrap: bool, start_row: usize) -> SnapshotHead<'static> {
        SnapshotHead {
            session_id: "S",
            title: Some("t\"itle"),
            history,
            cells,
            unwrap,
            start_row,
            history_truncated: history == 3,
        }
    }

    fn free(_: usize) -> Result<(), ErrorBody> {
        Ok(())
    }

    /// A screen with colours (palette, RGB, attributes), OSC 133 regions, a wide glyph,
    /// escapes that need JSON escaping, soft-wrapped rows and history.
    fn busy_grid() -> Grid {
        let mut bytes = Vec::new();
        for i in 0..12 {
            bytes.extend_from_slice(
                format!(
                    "\x1b[3{}mline {i} \x1b[1;38;2;1;2;3m\"q\\\u{65e5}\x1b[0m plain {}\r\n",
                    i % 8,
                    "w".repeat(i * 3)
                )
                .as_bytes(),
            );
        }
        bytes.extend_from_slice(b"\x1b]133;A\x07$ \x1b]133;B\x07ls\x1b]133;C\x07\r\nout");
        Grid::materialise(16, 5, 100, &bytes)
    }

    #[test]
    fn an_answer_that_fits_is_byte_for_byte_the_old_document() {
        let grid = busy_grid();
        assert!(grid.history() > 10);
        for history in [0, 3, grid.history()] {
            for (cells, unwrap) in [(false, false), (true, false), (false, true)] {
                let head = head(history, cells, unwrap, 0);
                let (new, ()) = grid.snapshot_json(&head, 1 << 20, free).unwrap();
                let old = old_snapshot(&grid, &head);
                assert_eq!(
                    String::from_utf8(new).unwrap(),
                    String::from_utf8(old).unwrap(),
                    "history {history}, cells {cells}, unwrap {unwrap}"
                );
            }
        }
    }

    #[test]
    fn styled_cells_json_is_what_serde_writes() {
        let grid = busy_grid();
        for line in -(grid.history() as i32)..grid.rows() as i32 {
            let mut cells = Vec::new();
            grid.styled_cells(line, 7, &mut cells);
            let mut out = Vec::new();
            assert_eq!(grid.styled_cells_json(line, 7, &mut out), cells.len());
            let want: String = cells
                .iter()
                .map(|c| serde_json::to_string(c).unwrap() + ",")
                .collect();
            assert_eq!(String::from_utf8(out).unwrap(), want, "line {line}");
        }
    }

    /// Pages under a small cap: each within it and parseable, cut at whole rows (whole
    /// logical lines with `unwrap`), and together every row of the window exactly once.
    #[test]
    fn cut_answers_page_through_the_window() {
        let grid = busy_grid();
        let history = grid.history();
        let total = history + grid.rows() as usize;
        for (cells, unwrap) in [(true, false), (false, false), (false, true)] {
            let whole: serde_json::Value = serde_json::from_slice(
                &grid
                    .snapshot_json(&head(history, cells, unwrap, 0), 1 << 20, free)
                    .unwrap()
                    .0,
            )
            .unwrap();
            let cap = if cells { 4500 } else { 450 };
            let (mut start, mut pages) = (0, 0);
            let (mut lines, mut scrollback, mut n_cells) = (Vec::new(), Vec::new(), 0);
            loop {
                let (bytes, ()) = grid
                    .snapshot_json(&head(history, cells, unwrap, start), cap, free)
                    .unwrap();
                assert!(bytes.len() <= cap, "{} > {cap}", bytes.len());
                let page: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                pages += 1;
                lines.extend(page["lines"].as_array().unwrap().iter().cloned());
                scrollback.extend(page["scrollback"].as_array().unwrap().iter().cloned());
                if cells {
                    n_cells += page["cells"].as_array().unwrap().len()
                        + page["scrollback_cells"].as_array().unwrap().len();
                }
                match page["next_row"].as_u64() {
                    Some(next) => {
                        assert_eq!(page["truncated_reason"], "size_limit");
                        assert!(next as usize > start);
                        start = next as usize;
                    }
                    None => break,
                }
            }
            assert!(pages > 2, "the cap cut nothing ({cells}, {unwrap})");
            assert_eq!(&lines, whole["lines"].as_array().unwrap());
            assert_eq!(&scrollback, whole["scrollback"].as_array().unwrap());
            if cells {
                let all = whole["cells"].as_array().unwrap().len()
                    + whole["scrollback_cells"].as_array().unwrap().len();
                assert_eq!(n_cells, all);
            }
            assert!(start < total);
        }
    }

    #[test]
    fn the_charge_is_asked_for_the_whole_answer_and_may_refuse_it() {
        let grid = busy_grid();
        let mut asked = 0;
        let (bytes, ()) = grid
            .snapshot_json(&head(0, true, false, 0), 1 << 20, |n| {
                asked = n;
                Ok(())
            })
            .unwrap();
        assert!(
            bytes.len() <= asked && asked <= bytes.len() + 512,
            "{asked}"
        );
        let refused = grid.snapshot_json(&head(0, true, false, 0), 1 << 20, |_| {
            Err::<(), _>(ErrorBody::new(ErrorCode::Busy, "no"))
        });
        assert_eq!(refused.unwrap_err().code, ErrorCode::Busy);
    }

    #[test]
    fn a_row_larger_than_the_cap_is_refused_not_cut_to_nothing() {
        let grid = busy_grid();
        let e = grid
            .snapshot_json(&head(0, true, false, 0), 300, free)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::TooLarge);
        assert!(e.remedy.unwrap().contains("start_row 1"));
    }

    #[test]
    fn dump_pages_and_matches_the_old_text() {
        let grid = busy_grid();
        let history = grid.history();
        let mut rows: Vec<String> = (-(history as i32)..grid.rows() as i32)
            .map(|l| grid.row(l).text)
            .collect();
        while rows.last().is_some_and(|r| r.is_empty()) {
            rows.pop();
        }
        let old = serde_json::to_vec(&serde_json::json!({ "text": rows.join("\n") })).unwrap();
        let (whole, ()) = grid.dump_json(history, 0, 1 << 20, free).unwrap();
        assert_eq!(whole, old);
        let (mut start, mut text) = (0, Vec::new());
        loop {
            let (bytes, ()) = grid.dump_json(history, start, 200, free).unwrap();
            assert!(bytes.len() <= 200);
            let page: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            text.push(page["text"].as_str().unwrap().to_string());
            match page["next_row"].as_u64() {
                Some(next) => {
                    assert_eq!(page["truncated"], true);
                    start = next as usize;
                }
                None => break,
            }
        }
        assert!(text.len() > 2);
        assert_eq!(text.join("\n"), rows.join("\n"));
    }
}
