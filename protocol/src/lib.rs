//! Wire types of the maxx control API, shared by the CLI and the daemon.
//!
//! This crate has no runtime: it is the JSON edge. The daemon decodes a request line into
//! a typed [`request::Call`] here, and every actor behind the socket works with typed
//! values only.
//!
//! # Layout
//! - [`envelope`]: the request line `{token, method, params, caller?, confirm?, id?}` and the
//!   response `{ok, result}` / `{ok:false, error}`.
//! - [`error`]: [`ErrorCode`] (snake_case on the wire) and [`ErrorBody`].
//! - [`request`]: one typed params struct per method, with the seed's validation beside it.
//! - [`session`]: the session view returned by `sessions.get` / `sessions.list`.
//! - [`audit`]: audit entries, the per-session record of declarations.
//! - [`schema`]: the JSON-Schema subset a declared result must satisfy.
//! - [`stream`]: the event-bus envelope and stream filters.
//! - [`screen`]: screen readback documents (snapshot, run, resize).
//! - [`keys`]: `send-keys` names and their encoding.
//! - [`selector`]: how a caller names a session (id, id prefix, `%title`).
//! - [`keeper`]: the packets between the keeper process and the daemon it runs.
//! - [`limits`]: every bound the seed and the brief fix, as named constants.
//! - [`duration`]: `30s`, `5m`, `1h`, a bare number = seconds.
//! - [`time`]: RFC 3339 timestamps.

pub mod audit;
pub mod capability;
pub mod duration;
pub mod envelope;
pub mod error;
pub mod keeper;
pub mod keys;
pub mod limits;
pub mod request;
pub mod schema;
pub mod screen;
pub mod selector;
pub mod session;
pub mod stream;
pub mod time;

pub use envelope::{RequestEnvelope, Response};
pub use error::{ErrorBody, ErrorCode};

/// Frames a client sends on a `sessions.attach` connection after its request line:
/// one type byte, a big-endian u32 length, then the payload.
pub mod attach {
    /// Payload: raw input bytes for the PTY.
    pub const FRAME_INPUT: u8 = 0;
    /// Payload: cols (u16 BE), rows (u16 BE).
    pub const FRAME_RESIZE: u8 = 1;
    /// No payload: the person detached.
    pub const FRAME_DETACH: u8 = 2;
    /// Largest frame payload accepted.
    pub const FRAME_MAX: usize = 64 * 1024;
}

/// Version of the wire protocol. Bump only on an incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;
