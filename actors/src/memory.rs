//! Handing freed memory back to the system after a burst.
//!
//! The daemon runs on jemalloc (installed by the binary, `src/main.rs`). glibc's malloc was
//! measured first (docs/reliability.md, "Memory after load"): after the full mixed load and
//! every session closed, it kept 79 MiB resident with 16 MiB in use, even after
//! `malloc_trim`, because the long-lived objects (records, bus events) sit scattered among
//! the freed ones and glibc can only return whole free pages. jemalloc keeps objects of one
//! size together, so far more pages end up wholly free.
//!
//! jemalloc returns free pages on its own only as the allocator is used (decay); an idle
//! daemon would keep them. So a purge runs when the daemon goes idle after a burst, driven
//! by messages, not a timer: finished requests, released surfaces, retired session actors
//! and dropped records add *churn*; when the daemon is idle (no connection: its last one
//! ended, or an actor retired while none was open) with at least [`TRIM_CHURN`] since the
//! last purge, one purge of every arena runs on a blocking thread. A busy daemon therefore
//! purges at most once per [`TRIM_CHURN`] units, and a daemon that just went quiet purges
//! once.

use crate::stats::Stats;
use std::sync::atomic::Ordering;

/// Churn since the last purge that makes going idle trigger one.
pub const TRIM_CHURN: i64 = 1024;
/// Churn of one finished request (its buffers and decoded JSON).
pub const REQUEST_CHURN: i64 = 1;
/// Churn of a released surface (its PTY read buffers, output ring and screen model).
pub const SURFACE_CHURN: i64 = 32;
/// Churn of a retired session actor (its mailboxes and task), or of a dropped record.
pub const RETIRE_CHURN: i64 = 32;

/// Record churn.
pub fn churn(stats: &Stats, units: i64) {
    stats.churn.fetch_add(units, Ordering::Relaxed);
}

/// The daemon has no connection left: purge if enough churn accumulated.
pub fn idle(stats: &std::sync::Arc<Stats>) {
    if stats.connections.load(Ordering::Relaxed) > 0
        || stats.churn.load(Ordering::Relaxed) < TRIM_CHURN
        || stats.trimming.swap(true, Ordering::AcqRel)
    {
        return;
    }
    stats.churn.store(0, Ordering::Relaxed);
    let stats = stats.clone();
    tokio::task::spawn_blocking(move || {
        purge();
        Stats::add(&stats.memory_trims, 1);
        stats.trimming.store(false, Ordering::Release);
    });
}

/// Give every arena's unused pages back to the system now.
pub fn purge() {
    // `MALLCTL_ARENAS_ALL`: the pseudo-index meaning every arena.
    // SAFETY: a documented mallctl that takes and returns nothing.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// The allocator's own account of the heap, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Heap {
    /// Bytes in live allocations.
    pub allocated: u64,
    /// Bytes resident in memory the allocator holds (live, free-but-unpurged and metadata).
    pub resident: u64,
}

/// Read [`Heap`] now (`None` when the allocator keeps no statistics, e.g. in a test binary
/// that runs on the system allocator and never initialised jemalloc's counters).
pub fn heap() -> Option<Heap> {
    // Counters are cached until the epoch advances.
    let mut epoch: u64 = 1;
    let mut len = std::mem::size_of::<u64>();
    // SAFETY: `epoch` is a u64 in and out, as the mallctl documents.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"epoch".as_ptr(),
            (&mut epoch as *mut u64).cast(),
            &mut len,
            (&mut epoch as *mut u64).cast(),
            len,
        )
    };
    if rc != 0 {
        return None;
    }
    // `stats.*` byte counters are size_t.
    Some(Heap {
        allocated: read::<usize>(c"stats.allocated")? as u64,
        resident: read::<usize>(c"stats.resident")? as u64,
    })
}

/// A numeric jemalloc option (e.g. `opt.muzzy_decay_ms`, an ssize_t), or `None` if jemalloc
/// has no such option. For tests and diagnostics.
pub fn allocator_option(name: &str) -> Option<isize> {
    read::<isize>(&std::ffi::CString::new(name).ok()?)
}

/// Read a mallctl value whose C type is `T` (a plain integer: `size_t`, `ssize_t`, ...).
fn read<T: Copy + Default>(name: &std::ffi::CStr) -> Option<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `value` and `len` describe a buffer of the value's own type, as the caller
    // promises for `name`; jemalloc refuses (EINVAL) a length that does not match.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            (&mut value as *mut T).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0).then_some(value)
}
