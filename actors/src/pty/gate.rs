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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// One source's gate: whether it woke since it was last polled, and its own waker.
pub(super) struct Gate {
    state: Arc<GateState>,
    waker: Waker,
}

struct GateState {
    /// The source woke (or has never been polled, or last answered `Ready`): poll it.
    woken: AtomicBool,
    /// The task to wake: registered on every poll through the gate, before `woken` is read.
    task: AtomicWaker,
}

impl Wake for GateState {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Marked before the task is woken: a poll that registered after this wake-up took
        // the task's waker still sees the mark (AtomicWaker orders the two).
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl Gate {
    pub(super) fn new() -> Gate {
        let state = Arc::new(GateState {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Gate {
            waker: Waker::from(state.clone()),
            state,
        }
    }

    /// `poll` (the source's own poll) through this gate: with the gate's waker, and only if
    /// the source woke. The gate must be the only way the source is polled (its waker is the
    /// one the source holds).
    pub(super) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.state.task.register(cx.waker());
        if !self.state.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        match poll(&mut Context::from_waker(&self.waker)) {
            Poll::Ready(v) => {
                // A ready source registered no waker: it is asked again next time.
                self.state.woken.store(true, Ordering::Release);
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
    use std::sync::atomic::AtomicUsize;

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
        let gate = Gate::new();
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
        // The source wakes: the task is woken, and the next poll asks the source.
        ready.store(true, Ordering::SeqCst);
        held.lock().unwrap().take().unwrap().wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
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
