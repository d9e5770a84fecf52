//! Wake-ups per source for the pump: a branch of its `select!` is polled only when its own
//! source woke the task (or on its first poll), not on every wake-up of the master.
//!
//! The pump waits on the master, the child's exit and its input channel at once. Almost every
//! wake-up is the master's (an agent's redraw), yet `select!` polls every branch each time,
//! and again before the task sleeps: the input channel's queue (`Rx::pop`) and the exit
//! future's readiness (a mutex in tokio's registration) are each a cache miss with 1,000
//! sessions, ~7% of the daemon's CPU in the fleet of 1,000 (docs/performance.md). A [`Gate`]
//! gives a source a waker of its own, which marks the gate and then wakes the task; polling
//! through the gate skips the source unless it was marked.

use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, RawWakerVTable, Wake, Waker};

/// The gates of one pump: the sources that woke it since they were last polled, and the task
/// to wake, in one allocation (one cache line a wake-up, whatever the number of sources).
pub(super) struct Gates {
    /// Bit `i`: source `i` woke (or has never been polled, or last answered `Ready`).
    woken: AtomicU8,
    /// The task to wake, kept (a wake-up does not take it). Set by a poll whose waker would
    /// not wake the one kept: a task's waker is the same on every poll, so in practice once.
    task: Mutex<Option<Waker>>,
    /// The kept waker's data and vtable pointers, written only by polls (under `task`'s
    /// lock), so a poll can tell without the lock that its waker is the one kept. Wakers are
    /// compared the way [`Waker::will_wake`] does.
    task_data: AtomicPtr<()>,
    task_vtable: AtomicPtr<RawWakerVTable>,
}

/// One source's gate: its bit in [`Gates`], and its own waker, which sets the bit. The gates
/// and the bit are the waker's too; the gate holds its own copy so a poll does not go
/// through the waker's allocation (one more cache line on every wake-up of the pump).
pub(super) struct Gate {
    gates: Arc<Gates>,
    bit: u8,
    waker: Waker,
}

struct SourceWaker {
    gates: Arc<Gates>,
    bit: u8,
}

impl Wake for SourceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Marked before the task is woken. A poll reads the marks after it made sure its
        // waker is the one kept, so it either sees this mark or is woken by it; a poll that
        // replaced the kept waker did so under the lock this takes after marking, so it sees
        // the mark if this wakes the waker it replaced.
        self.gates.woken.fetch_or(self.bit, Ordering::SeqCst);
        let task = self.gates.task.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

impl Gates {
    pub(super) fn new() -> Arc<Gates> {
        Arc::new(Gates {
            woken: AtomicU8::new(u8::MAX),
            task: Mutex::new(None),
            task_data: AtomicPtr::new(std::ptr::null_mut()),
            task_vtable: AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    /// The gate of source `index` (< 8).
    pub(super) fn gate(self: &Arc<Self>, index: u8) -> Gate {
        let bit = 1 << index;
        Gate {
            gates: self.clone(),
            bit,
            waker: Waker::from(Arc::new(SourceWaker {
                gates: self.clone(),
                bit,
            })),
        }
    }

    /// Keep `waker` as the task's, unless it is the one kept already (two plain loads: this
    /// runs on every poll of the pump, and a lock or a read-modify-write there was ~2% of
    /// the daemon's CPU with 1,000 agents redrawing).
    fn keep(&self, waker: &Waker) {
        let data = waker.data() as *mut ();
        let vtable = waker.vtable() as *const RawWakerVTable as *mut RawWakerVTable;
        if self.task_data.load(Ordering::Relaxed) == data
            && self.task_vtable.load(Ordering::Relaxed) == vtable
        {
            return;
        }
        let mut task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        *task = Some(waker.clone());
        self.task_data.store(data, Ordering::Relaxed);
        self.task_vtable.store(vtable, Ordering::Relaxed);
    }
}

impl Gate {
    /// `poll` (the source's own poll) through this gate: with the gate's waker, and only if
    /// the source woke. The gate must be the only way the source is polled (its waker is the
    /// one the source holds), and its polls must not run concurrently (they are the pump's).
    pub(super) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.gates.keep(cx.waker());
        // Unmarked (the usual case): one load, no write to the shared line.
        if self.gates.woken.load(Ordering::SeqCst) & self.bit == 0 {
            return Poll::Pending;
        }
        self.gates.woken.fetch_and(!self.bit, Ordering::SeqCst);
        match poll(&mut Context::from_waker(&self.waker)) {
            Poll::Ready(v) => {
                // A ready source registered no waker: it is asked again next time.
                self.gates.woken.fetch_or(self.bit, Ordering::SeqCst);
                Poll::Ready(v)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    /// A source that counts its polls and answers `Ready` once it is set.
    struct Source {
        polls: Arc<AtomicUsize>,
        ready: Arc<AtomicBool>,
        waker: Arc<std::sync::Mutex<Option<Waker>>>,
    }

    impl Future for Source {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.ready.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_source_is_polled_first_then_only_when_it_woke() {
        let polls = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let held = Arc::new(std::sync::Mutex::new(None));
        let mut source = Source {
            polls: polls.clone(),
            ready: ready.clone(),
            waker: held.clone(),
        };
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let task_waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&task_waker);
        let gates = Gates::new();
        let gate = gates.gate(0);
        let other = gates.gate(1);
        // First poll: the source is asked and registers the gate's waker.
        assert!(gate
            .poll(&mut cx, |cx| Pin::new(&mut source).poll(cx))
            .is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        // Wake-ups of the task by others: the source is not asked.
        for _ in 0..5 {
            assert!(gate
                .poll(&mut cx, |cx| Pin::new(&mut source).poll(cx))
                .is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        // Another source's wake-up wakes the task, and leaves this one unasked.
        assert!(other.poll(&mut cx, |_| Poll::<()>::Pending).is_pending());
        other.waker.wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert!(gate
            .poll(&mut cx, |cx| Pin::new(&mut source).poll(cx))
            .is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        // The source wakes: the task is woken, and the next poll asks the source.
        ready.store(true, Ordering::SeqCst);
        held.lock().unwrap().take().unwrap().wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 2);
        assert!(gate
            .poll(&mut cx, |cx| Pin::new(&mut source).poll(cx))
            .is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
        // Ready registered nothing: the source is asked again next time.
        assert!(gate
            .poll(&mut cx, |cx| Pin::new(&mut source).poll(cx))
            .is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_wake_up_wakes_the_waker_of_the_latest_poll_and_keeps_it() {
        let gates = Gates::new();
        let gate = gates.gate(0);
        let first = Arc::new(Count(AtomicUsize::new(0)));
        let second = Arc::new(Count(AtomicUsize::new(0)));
        let (first_waker, second_waker) = (Waker::from(first.clone()), Waker::from(second.clone()));
        assert!(gate
            .poll(&mut Context::from_waker(&first_waker), |_| {
                Poll::<()>::Pending
            })
            .is_pending());
        gate.waker.wake_by_ref();
        assert_eq!(first.0.load(Ordering::SeqCst), 1);
        // Polled with another waker: that one is woken from now on.
        assert!(gate
            .poll(&mut Context::from_waker(&second_waker), |_| {
                Poll::<()>::Pending
            })
            .is_pending());
        gate.waker.wake_by_ref();
        gate.waker.wake_by_ref();
        assert_eq!(first.0.load(Ordering::SeqCst), 1);
        assert_eq!(second.0.load(Ordering::SeqCst), 2);
    }
}
