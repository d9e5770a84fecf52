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

use futures_util::task::AtomicWaker;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// The gates of one pump: the sources that woke it since they were last polled, and the task
/// to wake, in one allocation (one cache line a wake-up, whatever the number of sources).
pub(super) struct Gates {
    /// Bit `i`: source `i` woke (or has never been polled, or last answered `Ready`).
    woken: AtomicU8,
    /// The task to wake: registered on every poll through a gate, before `woken` is read.
    task: AtomicWaker,
}

/// One source's gate: its bit in [`Gates`], and its own waker, which sets the bit.
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
        // Marked before the task is woken: a poll that registered after this wake-up took
        // the task's waker still sees the mark (AtomicWaker orders the two).
        self.gates.woken.fetch_or(self.bit, Ordering::Release);
        self.gates.task.wake();
    }
}

impl Gates {
    pub(super) fn new() -> Arc<Gates> {
        Arc::new(Gates {
            woken: AtomicU8::new(u8::MAX),
            task: AtomicWaker::new(),
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
}

impl Gate {
    /// `poll` (the source's own poll) through this gate: with the gate's waker, and only if
    /// the source woke. The gate must be the only way the source is polled (its waker is the
    /// one the source holds).
    pub(super) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.gates.task.register(cx.waker());
        if self.gates.woken.fetch_and(!self.bit, Ordering::AcqRel) & self.bit == 0 {
            return Poll::Pending;
        }
        match poll(&mut Context::from_waker(&self.waker)) {
            Poll::Ready(v) => {
                // A ready source registered no waker: it is asked again next time.
                self.gates.woken.fetch_or(self.bit, Ordering::Release);
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
}
