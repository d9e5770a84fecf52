//! The restart policy's decision about an exit, as pure functions of the policy, the exit
//! status and the times of recent automatic restarts (docs/supervision.md). "Policy" alone
//! means the capability policy elsewhere; here it is always the *restart* policy.

use maxx_protocol::session::{RestartMode, RestartPolicy};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What a restart policy decides about an exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RestartDecision {
    /// No restart: the policy does not fire for this exit.
    None,
    /// Restart after this backoff.
    Restart(Duration),
    /// The budget (restarts, window seconds) is spent.
    GaveUp(u32, u64),
}

/// Decide about an exit with `exit_code`, or by a signal (`signalled`). `restart_times` (when earlier
/// automatic restarts happened, oldest first) is pruned to the policy's window as of `now`,
/// so it holds only the restarts the budget counts.
pub(super) fn decide(
    policy: &RestartPolicy,
    exit_code: Option<i32>,
    signalled: bool,
    restart_times: &mut VecDeque<Instant>,
    now: Instant,
) -> RestartDecision {
    let failed = signalled || exit_code.is_some_and(|c| !policy.exit_codes.contains(&c));
    let fire = match policy.mode {
        RestartMode::Never => false,
        RestartMode::OnFailure => failed,
        RestartMode::Always => true,
    };
    if !fire {
        return RestartDecision::None;
    }
    let window = Duration::from_secs(policy.window_secs);
    while restart_times
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) > window)
    {
        restart_times.pop_front();
    }
    let recent = restart_times.len() as u32;
    if recent >= policy.max_restarts {
        return RestartDecision::GaveUp(recent, policy.window_secs);
    }
    RestartDecision::Restart(backoff(policy, recent))
}

/// The delay before the next automatic restart after `recent` restarts in the window:
/// `backoff_min_ms` doubled per restart, capped at `backoff_max_ms`, never overflowing.
pub(super) fn backoff(policy: &RestartPolicy, recent: u32) -> Duration {
    let factor = 1u64.checked_shl(recent).unwrap_or(u64::MAX);
    let delay_ms = policy
        .backoff_min_ms
        .saturating_mul(factor)
        .min(policy.backoff_max_ms);
    Duration::from_millis(delay_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: RestartMode) -> RestartPolicy {
        RestartPolicy {
            mode,
            exit_codes: vec![0],
            max_restarts: 3,
            window_secs: 60,
            backoff_min_ms: 100,
            backoff_max_ms: 1_000,
        }
    }

    #[test]
    fn backoff_doubles_per_recent_restart_up_to_the_cap() {
        let p = policy(RestartMode::Always);
        let ms: Vec<u128> = (0..6).map(|n| backoff(&p, n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1_000, 1_000]);
    }

    #[test]
    fn backoff_never_overflows() {
        let mut p = policy(RestartMode::Always);
        p.backoff_min_ms = u64::MAX / 2;
        p.backoff_max_ms = u64::MAX;
        assert_eq!(backoff(&p, 1), Duration::from_millis(u64::MAX - 1));
        assert_eq!(backoff(&p, 63), Duration::from_millis(u64::MAX));
        assert_eq!(backoff(&p, 64), Duration::from_millis(u64::MAX));
        assert_eq!(backoff(&p, u32::MAX), Duration::from_millis(u64::MAX));
    }

    #[test]
    fn mode_decides_which_exits_fire() {
        let now = Instant::now();
        let first = RestartDecision::Restart(Duration::from_millis(100));
        let decide =
            |mode, code, signal| decide(&policy(mode), code, signal, &mut VecDeque::new(), now);
        assert_eq!(
            decide(RestartMode::Never, Some(1), false),
            RestartDecision::None
        );
        assert_eq!(
            decide(RestartMode::Never, None, true),
            RestartDecision::None
        );
        assert_eq!(
            decide(RestartMode::OnFailure, Some(0), false),
            RestartDecision::None
        );
        assert_eq!(decide(RestartMode::OnFailure, Some(1), false), first);
        assert_eq!(decide(RestartMode::OnFailure, None, true), first);
        assert_eq!(decide(RestartMode::Always, Some(0), false), first);
    }

    #[test]
    fn on_failure_honours_the_success_codes() {
        let mut p = policy(RestartMode::OnFailure);
        p.exit_codes = vec![0, 3];
        let now = Instant::now();
        let mut times = VecDeque::new();
        assert_eq!(
            decide(&p, Some(3), false, &mut times, now),
            RestartDecision::None
        );
        assert!(matches!(
            decide(&p, Some(2), false, &mut times, now),
            RestartDecision::Restart(_)
        ));
    }

    #[test]
    fn the_budget_counts_only_restarts_inside_the_window() {
        let p = policy(RestartMode::Always);
        let now = Instant::now() + Duration::from_secs(1_000);
        let old = now - Duration::from_secs(61);
        let inside = now - Duration::from_secs(10);
        // Two recent ones: the third restart waits 4x the minimum.
        let mut times = VecDeque::from([old, inside, inside]);
        assert_eq!(
            decide(&p, Some(1), false, &mut times, now),
            RestartDecision::Restart(Duration::from_millis(400))
        );
        assert_eq!(times.len(), 2, "the restart outside the window is pruned");
        // Three recent ones: the budget (3 in 60 s) is spent.
        times.push_back(now);
        assert_eq!(
            decide(&p, Some(1), false, &mut times, now),
            RestartDecision::GaveUp(3, 60)
        );
    }
}
