//! Every bound the seed and the brief fix, as named constants.
//!
//! Character limits count Unicode scalar values (`str::chars`); byte limits count UTF-8
//! bytes of compact JSON.

use std::time::Duration;

/// Largest request line the daemon reads before answering `too_large`.
pub const REQUEST_LINE_MAX_BYTES: usize = 1024 * 1024;
/// What one connection may hold of its request line before the budget below is charged:
/// covers nearly every real request, so small requests never compete for the budget.
pub const UNAUTH_FREE_BYTES: usize = 8 * 1024;
/// What all connections together may hold of request lines not yet authenticated (the
/// token is checked once the whole line is in), beyond [`UNAUTH_FREE_BYTES`] each. A line
/// that would take more is answered `too_large` and its connection closed. With
/// [`MAX_CONNECTIONS`] slots and an 8 KiB read buffer each, unauthenticated connections hold
/// at most 4096 x 16 KiB + 64 MiB = 128 MiB.
pub const UNAUTH_BUDGET_BYTES: usize = 64 * 1024 * 1024;
/// How long a connection may take to deliver its request line.
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response line the CLI reads.
pub const RESPONSE_LINE_MAX_BYTES: usize = 64 * 1024 * 1024;
/// How many connections the daemon serves at once; more wait in the accept queue.
pub const MAX_CONNECTIONS: usize = 4096;
/// How many of those may be long-lived at once (watches, attaches, waits, runs): the
/// other quarter is always left to short requests, so streams and waits cannot starve
/// them. Over the cap a long-lived request is answered `busy` (`maxx daemon
/// --max-long-lived`).
pub const MAX_LONG_LIVED_CONNECTIONS: usize = MAX_CONNECTIONS * 3 / 4;
/// How long the daemon waits for a client to take one answer (or one stream line or
/// attach chunk) before it closes the connection: a client that stops reading cannot hold
/// a slot. A whole 64 MiB answer moves through a Unix socket in well under a second.
pub const RESPONSE_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// `title` ≤ 256 chars.
pub const TITLE_MAX_CHARS: usize = 256;
/// `status` ≤ 128 chars.
pub const STATUS_MAX_CHARS: usize = 128;
/// `command` ≤ 4096 chars.
pub const COMMAND_MAX_CHARS: usize = 4096;
/// `cwd` ≤ 4096 bytes (PATH_MAX).
pub const CWD_MAX_BYTES: usize = 4096;

/// `metadata` ≤ 32 keys.
pub const METADATA_MAX_KEYS: usize = 32;
/// A metadata key ≤ 64 chars of `[A-Za-z0-9_.-]`.
pub const METADATA_KEY_MAX_CHARS: usize = 64;
/// One metadata value ≤ 2048 bytes of compact JSON.
pub const METADATA_VALUE_MAX_BYTES: usize = 2048;
/// The whole metadata map ≤ 16384 bytes of compact JSON.
pub const METADATA_MAP_MAX_BYTES: usize = 16384;

/// `env` ≤ 256 `KEY=VALUE` entries.
pub const ENV_MAX_ENTRIES: usize = 256;
/// One env entry ≤ 32 KiB (a bound of ours; the seed bounds the count only).
pub const ENV_ENTRY_MAX_BYTES: usize = 32 * 1024;

/// `summary` ≤ 1024 chars.
pub const SUMMARY_MAX_CHARS: usize = 1024;
/// `result` ≤ 16384 UTF-8 bytes.
pub const RESULT_MAX_BYTES: usize = 16384;

/// Text sent by `sessions.action` `input`/`submit` ≤ 256 KiB (a bound of ours).
pub const INPUT_MAX_BYTES: usize = 256 * 1024;

/// `wait` default timeout.
pub const WAIT_DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// `wait` timeout cap.
pub const WAIT_MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// PTY size of a new session when the caller gives none.
pub const DEFAULT_COLS: u16 = 80;
/// PTY size of a new session when the caller gives none.
pub const DEFAULT_ROWS: u16 = 24;
/// Largest PTY dimension accepted.
pub const MAX_DIMENSION: u16 = 1000;
/// Fewest columns a session may have: a double-width character needs two (a terminal
/// emulator cannot place one in a single column).
pub const MIN_COLS: u16 = 2;

/// A declaration's `source` ≤ 128 chars, no control characters.
pub const SOURCE_MAX_CHARS: usize = 128;
/// An event name ≤ 128 chars of `[A-Za-z0-9_.:-]`.
pub const EVENT_NAME_MAX_CHARS: usize = 128;
/// A declaration's `message` ≤ 4096 chars.
pub const MESSAGE_MAX_CHARS: usize = 4096;
/// An event `payload` ≤ 16384 bytes of compact JSON.
pub const PAYLOAD_MAX_BYTES: usize = 16384;
/// An `agent_type` ≤ 64 chars of `[A-Za-z0-9_.:-]`.
pub const AGENT_TYPE_MAX_CHARS: usize = 64;
/// A `result_schema` ≤ 16384 bytes of compact JSON.
pub const RESULT_SCHEMA_MAX_BYTES: usize = 16384;
/// At most 32 `metadata_filter` constraints in one `list`.
pub const METADATA_FILTER_MAX: usize = 32;
/// How many matching lines a `watch` may have queued before it is ended as too slow.
pub const WATCH_BUFFER: usize = 1024;
/// What one stream client (`stream.watch`, `stream.wait --event`, `sessions.watch`,
/// `sessions.attach`) may have queued in the daemon, in bytes: events or lines waiting to be
/// written, the one being written, and a `since` replay batch. Over it the client is dropped
/// at once as a slow consumer (its queue freed without waiting for it to read). 4 MiB is
/// ~100 of the largest bus events (a 16 KiB payload and a 4 KiB message, ~40 KiB as JSON),
/// ~20x a Unix socket's send buffer, and ~0.2 s of a PTY's full-speed output.
pub const STREAM_CLIENT_MAX_BYTES: usize = 4 * 1024 * 1024;
/// What all stream clients together may have queued. When a new item would pass it, the
/// client with the most queued is dropped (a stalled one, not the one that happened to be
/// served next), until it fits: 16 full clients, or thousands of healthy ones (a reader
/// that keeps up holds a few KiB).
pub const STREAM_TOTAL_MAX_BYTES: usize = 64 * 1024 * 1024;
/// A `stream.watch --since` replay is read from the bus's ring in batches of about this
/// many bytes of JSON, the next one only once the previous is written.
pub const STREAM_REPLAY_BATCH_BYTES: usize = 256 * 1024;
/// A group label ≤ 128 chars of `[A-Za-z0-9_.:/@-]`.
pub const GROUP_MAX_CHARS: usize = 128;
/// Events the bus retains for `since` replay (oldest evicted first).
pub const BUS_RETAINED_EVENTS: usize = 10_000;
/// Closed/archived records kept (newest first) by default: in memory beyond every live
/// session, and in `registry.json` as the count cap (`maxx daemon --retain-records`, at
/// most [`RETAINED_RECORDS_MAX`]).
pub const RETAINED_RECORDS: usize = 500;
/// The most `--retain-records` may be: with every retained record at [`RECORD_MAX_BYTES`],
/// the snapshot still fits its cap with room for audit history (docs/persistence.md,
/// "Sizing"). The seed's 500 is both the default and the most.
pub const RETAINED_RECORDS_MAX: usize = 500;
/// A terminal title (OSC 0/2) is kept to this many chars.
pub const TERMINAL_TITLE_MAX_CHARS: usize = 1024;
/// A `sessions.ask` question ≤ 1024 chars.
pub const ASK_QUESTION_MAX_CHARS: usize = SUMMARY_MAX_CHARS;
/// At most 8 suggested answers to an ask.
pub const ASK_SUGGESTIONS_MAX: usize = 8;
/// Each suggested answer ≤ 128 chars.
pub const ASK_SUGGESTION_MAX_CHARS: usize = 128;
/// A `sessions.answer` ≤ 1024 chars (kept in the audit log, not the record).
pub const ANSWER_MAX_CHARS: usize = SUMMARY_MAX_CHARS;
/// An archive `reason` ≤ 1024 chars.
pub const ARCHIVE_REASON_MAX_CHARS: usize = SUMMARY_MAX_CHARS;
/// At most 256 `restart_exit_codes`, each 0..=255.
pub const RESTART_EXIT_CODES_MAX: usize = 256;
/// The most bytes one char (or one byte of a byte-bounded string) takes in JSON: a control
/// character is written `\u001f`. Everything else takes at most 4 (a non-BMP char).
pub const JSON_ESCAPED_CHAR_MAX_BYTES: usize = 6;
/// What a record's fixed-size parts take in JSON: every key, the ids, ten timestamps, the
/// numbers at their maxima, the enums, an exit signal name, the restart policy without its
/// exit codes (measured ~2 KiB; a unit test checks the whole bound).
pub const RECORD_FIXED_MAX_BYTES: usize = 4096;
/// The most bytes one session record (its `SessionView`, compact JSON, as the journal and the
/// snapshot hold it) can take when every field is at its limit and every char is escaped
/// (~205 KiB). Metadata and `result_schema` are bounded as compact JSON already; every
/// other string is bounded in chars (or bytes), and a char escapes to at most
/// [`JSON_ESCAPED_CHAR_MAX_BYTES`]. Checked against a worst-case record by
/// `the_largest_possible_record_fits_record_max_bytes` (actors/src/persistence/mod.rs).
pub const RECORD_MAX_BYTES: usize = JSON_ESCAPED_CHAR_MAX_BYTES
    * (TITLE_MAX_CHARS
        + COMMAND_MAX_CHARS
        + CWD_MAX_BYTES
        + STATUS_MAX_CHARS
        + TERMINAL_TITLE_MAX_CHARS
        + ARCHIVE_REASON_MAX_CHARS
        + SUMMARY_MAX_CHARS
        + RESULT_MAX_BYTES
        + 4 * SOURCE_MAX_CHARS
        + ASK_QUESTION_MAX_CHARS
        + ASK_SUGGESTIONS_MAX * ASK_SUGGESTION_MAX_CHARS
        + SOURCE_MAX_CHARS
        + GROUP_MAX_CHARS
        + AGENT_TYPE_MAX_CHARS)
    + METADATA_MAP_MAX_BYTES
    + RESULT_SCHEMA_MAX_BYTES
    + 4 * RESTART_EXIT_CODES_MAX
    + RECORD_FIXED_MAX_BYTES;
/// Bytes a session's in-memory audit log may hold (each entry charged its JSON plus
/// [`AUDIT_ENTRY_OVERHEAD`]); the oldest entries are evicted beyond it and a `sessions.events`
/// reader whose `since` predates what is kept is told the dropped range
/// (`maxx daemon --audit-session-bytes`).
pub const AUDIT_SESSION_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Bytes all sessions' in-memory audit logs may hold together; past it a session that
/// records evicts its own oldest entries (never its newest) (`maxx daemon --audit-total-bytes`).
pub const AUDIT_TOTAL_MAX_BYTES: usize = 256 * 1024 * 1024;
/// What one audit entry is charged beyond its JSON: its slot, the shared allocation's header.
pub const AUDIT_ENTRY_OVERHEAD: usize = 64;
/// Entries one `sessions.events` answer holds at most: the default and the largest `limit`.
pub const EVENTS_PAGE_MAX_ENTRIES: usize = 1000;
/// Bytes of entries one `sessions.events` answer holds at most (always at least one entry).
pub const EVENTS_PAGE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Raw output each session keeps for materialising its screen on the first read.
pub const RAW_RING_BYTES: usize = 1024 * 1024;
/// Default scrollback of a session's screen model, in lines.
pub const DEFAULT_SCROLLBACK_LINES: usize = 10_000;
/// Largest scrollback a session may ask for.
pub const MAX_SCROLLBACK_LINES: usize = 100_000;
/// Most cells a session's screen may have, viewport and scrollback together:
/// `cols x (rows + scrollback_lines)`, checked at create and resize (`invalid_request`).
/// The terminal emulator keeps ~24 bytes a cell, so one grid stays under ~400 MiB (the
/// bounds on each dimension alone allowed 1000 x 101,000 cells, ~2.4 GB). It admits every
/// size up to 1000x1000 at the default scrollback (11M cells) and the largest scrollback up
/// to 160 columns.
pub const GRID_MAX_CELLS: u64 = 16 * 1024 * 1024;
/// Bytes one screen read's answer (`sessions.snapshot`, `sessions.dump`,
/// `sessions.inspect`) may take, as the JSON line's `result`. Past it the answer holds the
/// window's first rows that fit, whole, with `truncated_reason: "size_limit"` and `next_row`
/// (pass it as `start_row` for the rest). A quarter of the CLI's [`RESPONSE_LINE_MAX_BYTES`];
/// holds any screen's text (1000x1000 chars of up to 4 bytes) and ~84,000 styled cells
/// (~200 bytes of JSON each).
pub const SCREEN_ANSWER_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Bytes the answers of all screen reads in flight may hold together, from their encoding
/// until their write ends; a read whose answer would pass it is refused `busy`. Four
/// answers at the cap (`maxx daemon --screen-read-bytes` sets another).
pub const SCREEN_READ_TOTAL_MAX_BYTES: usize = 4 * SCREEN_ANSWER_MAX_BYTES;
/// Largest `wait --until`/`--regex` pattern.
pub const PATTERN_MAX_BYTES: usize = 4096;
/// Default budget of `sessions.run`.
pub const RUN_DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest output `sessions.run` returns.
pub const RUN_OUTPUT_MAX_BYTES: usize = 1024 * 1024;

/// Deepest nesting of a JSON value a caller gives that the daemon stores (an event
/// `payload`, a metadata value, a `result_schema`): `[]` and `{}` nest 1 level, a scalar 0.
/// The durable registry wraps a stored value at most [`PERSIST_WRAP_DEPTH`] levels deeper,
/// and every reader of it (the load, the CLI) must stay inside serde_json's recursion limit
/// of 127 nested containers; 64 leaves that margin twice over (see docs/persistence.md).
pub const JSON_MAX_DEPTH: usize = 64;
/// Containers the persistence format puts around a stored value: a metadata value in
/// `registry.json` sits in `{"sessions":[{"session":{"metadata":{"k": V}}}]}` (5), an event
/// payload in `{"sessions":[{"audit":[{"payload": V}]}]}` (5); a journal line wraps less.
pub const PERSIST_WRAP_DEPTH: usize = 5;
/// serde_json's default recursion limit, as the number of nested containers it reads.
pub const SERDE_JSON_MAX_NESTING: usize = 127;
/// A whole request's `params` may nest this deep: the params object and a map around the
/// deepest stored value. Catches any stored value a per-field check might miss.
pub const PARAMS_MAX_DEPTH: usize = JSON_MAX_DEPTH + 2;

const _: () = assert!(PARAMS_MAX_DEPTH + PERSIST_WRAP_DEPTH <= SERDE_JSON_MAX_NESTING);
// A screen answer, with the response envelope around it, is always readable by the CLI.
const _: () = assert!(SCREEN_ANSWER_MAX_BYTES + 4096 <= RESPONSE_LINE_MAX_BYTES);
// The largest viewport at the default scrollback is a valid grid.
const _: () = assert!(
    MAX_DIMENSION as u64 * (MAX_DIMENSION as u64 + DEFAULT_SCROLLBACK_LINES as u64)
        <= GRID_MAX_CELLS
);
