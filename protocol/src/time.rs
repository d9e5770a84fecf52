//! Timestamps: RFC 3339 UTC with milliseconds, e.g. `2026-06-14T12:00:00.123Z`.

use std::time::SystemTime;

/// Format a time as RFC 3339 UTC with millisecond precision.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The current time, formatted by [`rfc3339`].
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}
