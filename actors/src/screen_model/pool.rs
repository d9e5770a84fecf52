//! The grid workers: a few threads, shared by every session, that parse backlogs and match
//! pending screen waits off the PTY drain path.

use super::{lock, ScreenModel, MATCH_INTERVAL, MATCH_QUIET};
use std::sync::{mpsc, Arc, OnceLock};

/// What a worker's job left to do.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Looked {
    Done,
    /// Output kept coming and the patterns were matched less than [`MATCH_INTERVAL`] ago:
    /// look again then (or in a job before it).
    Deferred,
}

/// A job for the grid workers.
pub(super) enum Job {
    /// Parse (and match) now.
    Now(Arc<ScreenModel>),
    /// Parse and match after [`MATCH_QUIET`], with whatever more output came by then.
    Soon(Arc<ScreenModel>),
}

/// The grid workers: threads that parse the sessions' backlogs and match pending screen
/// waits. Each has its own queue and a session always goes to the same one, so a session's
/// delayed jobs are kept (and made) by one worker.
pub struct Pool {
    jobs: Vec<mpsc::Sender<Job>>,
}

impl Pool {
    pub(super) fn submit(&self, job: Job) {
        if self.jobs.is_empty() {
            return;
        }
        let (Job::Now(model) | Job::Soon(model)) = &job;
        let worker = (Arc::as_ptr(model) as usize / 64) % self.jobs.len();
        let _ = self.jobs[worker].send(job);
    }
}

/// One grid worker: its jobs, and the ones it holds until their time.
fn worker(jobs: mpsc::Receiver<Job>) {
    let mut later: Vec<(std::time::Instant, Arc<ScreenModel>)> = Vec::new();
    let hold = |later: &mut Vec<(std::time::Instant, Arc<ScreenModel>)>,
                at: std::time::Instant,
                model: Arc<ScreenModel>| {
        match later.iter_mut().find(|(_, m)| Arc::ptr_eq(m, &model)) {
            Some((when, _)) => *when = (*when).min(at),
            None => later.push((at, model)),
        }
    };
    loop {
        let next = later.iter().map(|(at, _)| *at).min();
        let job = match next {
            None => jobs
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => jobs.recv_timeout(at.saturating_duration_since(std::time::Instant::now())),
        };
        match job {
            Ok(Job::Now(model)) => {
                if model.work() == Looked::Deferred {
                    let at = *lock(&model.last_match) + MATCH_INTERVAL;
                    hold(&mut later, at, model);
                }
            }
            Ok(Job::Soon(model)) => {
                hold(&mut later, std::time::Instant::now() + MATCH_QUIET, model);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        let now = std::time::Instant::now();
        let mut i = 0;
        while i < later.len() {
            if later[i].0 <= now {
                let (_, model) = later.swap_remove(i);
                if model.work() == Looked::Deferred {
                    let at = *lock(&model.last_match) + MATCH_INTERVAL;
                    hold(&mut later, at, model);
                }
            } else {
                i += 1;
            }
        }
    }
}

/// The process's grid workers, started on first use.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4);
        let mut jobs = Vec::new();
        for i in 0..workers {
            let (tx, rx) = mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name(format!("maxx-grid-{i}"))
                .spawn(move || worker(rx));
            match spawned {
                Ok(_) => jobs.push(tx),
                Err(e) => tracing::error!(error = %e, "could not start a grid worker"),
            }
        }
        Pool { jobs }
    })
}
