//! Retention: which session records are kept, on disk and in memory.
//!
//! One policy, used by the registry (dormant records in memory) and by the persistence actor
//! (the load, every snapshot), without either importing the other:
//! - a record observed terminal (`closed`/`archived`) is dropped [`RETENTION_AGE`] after its
//!   last activity, `max(updated_at, last_seen_at)` ([`last_activity`]); a record last seen
//!   `running` or `exited` is never aged out;
//! - at most `count` records are kept ([`RETENTION_COUNT`] by default, `--retain-records`),
//!   newest activity first, but never by dropping a live one (`running`, `exited`,
//!   `backoff`): live records count towards the cap and only terminal ones past it go;
//! - at most [`AUDIT_ON_DISK`] audit entries per record on disk, the newest.
//!
//! See docs/persistence.md, "Retention".

use maxx_protocol::session::{Lifecycle, SessionView};
use std::time::{Duration, SystemTime};

/// Records observed terminal are dropped this long after their last change.
pub const RETENTION_AGE: Duration = Duration::from_secs(14 * 24 * 3600);
/// At most this many records are kept (newest first) unless `maxx daemon --retain-records`
/// says otherwise.
pub const RETENTION_COUNT: usize = maxx_protocol::limits::RETAINED_RECORDS;
/// At most this many audit entries per record on disk (newest kept).
pub const AUDIT_ON_DISK: usize = 1000;

fn parse_time(text: &str) -> SystemTime {
    humantime::parse_rfc3339(text).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The later of `updated_at` and `last_seen_at`: what retention orders records by.
pub fn last_activity(v: &SessionView) -> SystemTime {
    let updated = parse_time(&v.updated_at);
    match &v.last_seen_at {
        Some(seen) => updated.max(parse_time(seen)),
        None => updated,
    }
}

/// Whether a record last active at `activity` is past the age cutoff at `now` (whatever its
/// lifecycle: the registry asks this of dormant records only).
pub fn aged(activity: SystemTime, now: SystemTime) -> bool {
    now.duration_since(activity).unwrap_or_default() > RETENTION_AGE
}

/// Whether retention drops a record of this lifecycle by age: only a terminal one.
pub fn expired(lifecycle: Lifecycle, activity: SystemTime, now: SystemTime) -> bool {
    lifecycle.is_terminal() && aged(activity, now)
}

/// Apply the age cutoff and the count cap to `items`, each described by `key` as its
/// (lifecycle, last activity). Returns the kept items, newest activity first (ties keep
/// their order), and the dropped ones.
pub fn keep_newest<T>(
    items: Vec<T>,
    now: SystemTime,
    count: usize,
    key: impl Fn(&T) -> (Lifecycle, SystemTime),
) -> (Vec<T>, Vec<T>) {
    let (mut kept, mut dropped): (Vec<T>, Vec<T>) = items.into_iter().partition(|item| {
        let (lifecycle, activity) = key(item);
        !expired(lifecycle, activity, now)
    });
    kept.sort_by_key(|item| std::cmp::Reverse(key(item).1));
    // The count cap never drops a live record: live ones count towards it, and only
    // terminal ones past it go, oldest first.
    let live = kept
        .iter()
        .filter(|item| !key(item).0.is_terminal())
        .count();
    let mut room = count.saturating_sub(live);
    let (kept, over): (Vec<T>, Vec<T>) = kept.into_iter().partition(|item| {
        if !key(item).0.is_terminal() {
            return true;
        }
        let keep = room > 0;
        room = room.saturating_sub(1);
        keep
    });
    dropped.extend(over);
    (kept, dropped)
}

/// Bound an audit log (oldest first) to the newest [`AUDIT_ON_DISK`] entries; whether any
/// were dropped.
pub fn trim_audit<T>(audit: &mut Vec<T>) -> bool {
    if audit.len() > AUDIT_ON_DISK {
        audit.drain(..audit.len() - AUDIT_ON_DISK);
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn the_count_cap_keeps_the_newest_in_order_and_ties_keep_their_order() {
        let now = SystemTime::now();
        // (name, lifecycle, age in days)
        let items = vec![
            ("b", Lifecycle::Running, 2),
            ("a", Lifecycle::Closed, 1),
            ("d", Lifecycle::Exited, 4),
            ("c1", Lifecycle::Archived, 3),
            ("c2", Lifecycle::Closed, 3),
        ];
        let key = |i: &(&str, Lifecycle, u32)| (i.1, now - DAY * i.2);
        let (kept, dropped) = keep_newest(items.clone(), now, 4, key);
        fn names(v: &[(&'static str, Lifecycle, u32)]) -> Vec<&'static str> {
            v.iter().map(|i| i.0).collect()
        }
        assert_eq!(names(&kept), ["a", "b", "c1", "d"]);
        assert_eq!(
            names(&dropped),
            ["c2"],
            "the oldest terminal one goes, never a live one"
        );
        let (kept, dropped) = keep_newest(items.clone(), now, 10, key);
        assert_eq!(names(&kept), ["a", "b", "c1", "c2", "d"]);
        assert!(dropped.is_empty());
        // More live records than the cap: all of them stay, no terminal one does.
        let (kept, dropped) = keep_newest(items, now, 1, key);
        assert_eq!(names(&kept), ["b", "d"]);
        assert_eq!(names(&dropped), ["a", "c1", "c2"]);
    }

    #[test]
    fn only_terminal_records_age_out_and_last_seen_counts_as_activity() {
        let now = SystemTime::now();
        let old = now - RETENTION_AGE - Duration::from_secs(1);
        assert!(expired(Lifecycle::Closed, old, now));
        assert!(expired(Lifecycle::Archived, old, now));
        assert!(!expired(Lifecycle::Running, old, now));
        assert!(!expired(Lifecycle::Exited, old, now));
        assert!(!expired(Lifecycle::Closed, now - RETENTION_AGE + DAY, now));
        assert!(aged(old, now) && !aged(now, now));
        // An aged-out record is dropped even with room under the count cap.
        let (kept, dropped) = keep_newest(
            vec![(Lifecycle::Closed, old), (Lifecycle::Running, old)],
            now,
            10,
            |i| *i,
        );
        assert_eq!(kept, [(Lifecycle::Running, old)]);
        assert_eq!(dropped, [(Lifecycle::Closed, old)]);
        // last_activity is the later of updated_at and last_seen_at.
        let mut v: SessionView = serde_json::from_value(serde_json::json!({
            "session_id": "00000001-0000-4000-8000-000000000000", "surface_id": "S",
            "title": null, "command": "true", "cwd": "/", "status": null, "lifecycle": "closed",
            "metadata": {}, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "pid": null, "location": "tab",
            "focused": false, "restart_count": 0, "cols": 80, "rows": 24
        }))
        .unwrap();
        let updated = humantime::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(last_activity(&v), updated);
        v.last_seen_at = Some("2026-02-01T00:00:00Z".into());
        assert!(last_activity(&v) > updated);
        v.last_seen_at = Some("2025-02-01T00:00:00Z".into());
        assert_eq!(last_activity(&v), updated);
    }

    #[test]
    fn audit_is_trimmed_to_the_newest() {
        let mut audit: Vec<usize> = (0..AUDIT_ON_DISK + 5).collect();
        assert!(trim_audit(&mut audit));
        assert_eq!(audit.len(), AUDIT_ON_DISK);
        assert_eq!(audit[0], 5);
        assert!(!trim_audit(&mut audit));
    }
}
