//! What the keeper knows and decides, apart from the syscalls that feed it: the table of
//! masters it holds, how each message from the daemon changes it, what a reaped child
//! means, what the next daemon is handed, and whether a daemon that died is restarted.
//! The process side (`mod.rs`) does the I/O; everything here is tested without it.

use maxx_protocol::keeper::{ChildStatus, FromKeeper, ToKeeper};
use nix::sys::signal::Signal;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// Masters held at once. A daemon that registers more is refused (the descriptor dropped):
/// a broken daemon cannot make the keeper hold descriptors without bound.
pub const ENTRIES_MAX: usize = 65_536;
/// Restarts allowed within [`RESTART_WINDOW`]; one more death in it and the keeper gives up
/// (a daemon that dies on every start, say on re-adopting one record, must not loop).
pub const RESTARTS_MAX: usize = 5;
/// The window [`RESTARTS_MAX`] counts in.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// How long an ended session's process group has after SIGHUP/SIGTERM before SIGKILL (the
/// daemon's own `KILL_GRACE`).
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// The kernel facts the state asks for and the signals it sends; the process side does them
/// for real, tests record them.
pub trait Os {
    /// Whether `pid` is this process's child, running or a zombie not yet reaped.
    fn is_child(&self, pid: u32) -> bool;
    /// Send `sig` to the process group `pid` (a session's child leads its own).
    fn signal_group(&mut self, pid: u32, sig: Signal);
}

/// One session's surface, as its daemon registered it.
pub struct Entry {
    /// The session.
    pub session_id: String,
    /// The child's pid; also its process group.
    pub pid: u32,
    /// The registration secret (memory only), handed to the next daemon so the program's
    /// `register-current` keeps working.
    pub token: String,
    /// A duplicate of the PTY master: while it is open the terminal never hangs up, so the
    /// program outlives a daemon that dies.
    pub master: OwnedFd,
    /// The session's screen memory (a memfd the daemon writes its output log into), if the
    /// daemon sent one: held and handed back, never read by the keeper.
    pub screen: Option<OwnedFd>,
    /// How the child ended, once the keeper reaped it.
    pub status: Option<ChildStatus>,
}

/// What became of one message from the daemon.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// Applied.
    Applied,
    /// Refused (and any descriptor it carried dropped), with why.
    Refused(&'static str),
}

/// Whose exit the keeper just reaped.
#[derive(Debug, PartialEq, Eq)]
pub enum Reaped {
    /// A session's child: the daemon that re-adopted it must hear the status.
    Session(FromKeeper),
    /// A child of the keeper that is no session (an orphaned grandchild, or a session
    /// already closed): nothing to tell.
    Stray,
}

/// How a daemon ended, from `waitpid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonEnd {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it (kill -9, the OOM killer, SIGSEGV, an abort).
    Signal(i32),
}

/// What the keeper heard from the daemon it is deciding about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// The keeper itself was told to stop (SIGTERM, SIGINT, SIGHUP).
    pub stop_requested: bool,
    /// The daemon said `Stopping`: it is ending its sessions on purpose.
    pub stopping: bool,
    /// The daemon said `Ready`: it served its socket.
    pub ready: bool,
    /// An earlier daemon of this keeper served: this one is a recovery.
    pub served_before: bool,
    /// An upgrade was asked of this daemon (SIGUSR2 to the keeper, forwarded): it hands its
    /// sessions over and exits, or dies of the signal if it predates upgrades.
    pub handover: bool,
    /// This daemon was started from the binary on disk by an upgrade.
    pub upgraded: bool,
}

/// The restart decision.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start a new daemon and hand it the survivors.
    Restart,
    /// An upgrade: start the binary now on disk and hand it the survivors.
    Upgrade,
    /// The upgraded binary could not start: start the keeper's own build again instead.
    FallBack,
    /// Stop: end the sessions the keeper is the parent of and exit with this code.
    Exit(i32),
}

/// Decide what a daemon's death means. In order:
/// 1. a stop was asked for (of the keeper, or the daemon said `Stopping`): exit with the
///    daemon's status — that is the clean-stop path, the sessions are being ended;
/// 2. an upgrade was asked of it: start the binary on disk ([`Decision::Upgrade`]);
/// 3. it was that upgrade and never said `Ready`: start the keeper's own build instead
///    ([`Decision::FallBack`]), so a broken build on disk never ends the sessions;
/// 4. it never said `Ready` and exited with a status, or no daemon of this keeper ever
///    served: it could not start (`already_running`, a bad control dir, a failing load) and a
///    retry would fail the same way: exit. (A recovering daemon killed by a signal before it
///    was ready — the OOM killer again — is a crash like any other: rule 4 bounds it.);
/// 5. it exited 0 on its own: it meant to;
/// 6. `restarts_in_window` restarts already happened within [`RESTART_WINDOW`]: give up;
/// 7. otherwise it crashed (a signal, a panic's exit code): restart.
pub fn decide(end: DaemonEnd, facts: Facts, restarts_in_window: usize) -> Decision {
    let code = match end {
        DaemonEnd::Code(c) => c,
        DaemonEnd::Signal(s) => 128 + s,
    };
    if facts.stop_requested || facts.stopping {
        return Decision::Exit(code);
    }
    if facts.handover {
        return Decision::Upgrade;
    }
    if facts.upgraded && !facts.ready {
        return Decision::FallBack;
    }
    if !facts.ready && (matches!(end, DaemonEnd::Code(_)) || !facts.served_before) {
        return Decision::Exit(if code == 0 { 1 } else { code });
    }
    if end == DaemonEnd::Code(0) {
        return Decision::Exit(0);
    }
    if restarts_in_window >= RESTARTS_MAX {
        return Decision::Exit(code);
    }
    Decision::Restart
}

/// How many of `restarts` fall within [`RESTART_WINDOW`] before `now`, dropping older ones.
pub fn restarts_in_window(restarts: &mut Vec<Instant>, now: Instant) -> usize {
    restarts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
    restarts.len()
}

/// The keeper's table: every surface a daemon registered and has not closed, and the
/// process groups being ended.
pub struct Table {
    /// Entries held at most ([`ENTRIES_MAX`]).
    max: usize,
    /// By surface id.
    entries: HashMap<String, Entry>,
    /// pid → surface id, to find the entry a reaped child belongs to.
    by_pid: HashMap<u32, String>,
    /// Process groups sent SIGHUP/SIGTERM (the keeper is their parent), with the time
    /// SIGKILL follows if their leader has not been reaped by then.
    ending: HashMap<u32, Instant>,
}

impl Default for Table {
    fn default() -> Table {
        Table::with_max(ENTRIES_MAX)
    }
}

impl Table {
    /// A table holding at most `max` surfaces.
    pub fn with_max(max: usize) -> Table {
        Table {
            max,
            entries: HashMap::new(),
            by_pid: HashMap::new(),
            ending: HashMap::new(),
        }
    }

    /// Surfaces held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// A surface held.
    #[cfg(test)]
    pub fn get(&self, surface_id: &str) -> Option<&Entry> {
        self.entries.get(surface_id)
    }

    /// Apply one packet from the daemon as it came off the socket: refused whole if the
    /// kernel had to cut it (`truncated`) or it does not decode; otherwise [`Self::handle`].
    pub fn handle_packet(
        &mut self,
        packet: &[u8],
        fds: Vec<OwnedFd>,
        truncated: bool,
        facts: &mut Facts,
        os: &mut impl Os,
        now: Instant,
    ) -> Handled {
        if truncated {
            return Handled::Refused("an oversized packet");
        }
        match ToKeeper::decode(packet) {
            Ok(msg) => self.handle(msg, fds, facts, os, now),
            Err(_) => Handled::Refused("a malformed packet"),
        }
    }

    /// Apply one message from the daemon (`fds`: what its packet carried). `Ready` and
    /// `Stopping` only change `facts`. A refused message changes nothing.
    pub fn handle(
        &mut self,
        msg: ToKeeper,
        mut fds: Vec<OwnedFd>,
        facts: &mut Facts,
        os: &mut impl Os,
        now: Instant,
    ) -> Handled {
        if !msg.fds_allowed().contains(&fds.len()) {
            return Handled::Refused("a message with the wrong number of descriptors");
        }
        match msg {
            ToKeeper::Register {
                session_id,
                surface_id,
                pid,
                token,
            } => {
                if pid <= 1 {
                    return Handled::Refused("a registration without a child pid");
                }
                if !self.entries.contains_key(&surface_id) && self.entries.len() >= self.max {
                    return Handled::Refused("more surfaces than the keeper holds");
                }
                // A pid names one live process: an entry still filed under it is stale.
                if let Some(old) = self.by_pid.get(&pid).cloned() {
                    self.entries.remove(&old);
                }
                if let Some(old) = self.entries.remove(&surface_id) {
                    self.by_pid.remove(&old.pid);
                }
                let screen = (fds.len() == 2).then(|| fds.pop()).flatten();
                let master = fds.pop().expect("checked: one or two descriptors");
                // A daemon that registers a session has served a create: it started, even if
                // its `Ready` has not reached us yet (it is sent after the socket serves, and
                // a kill -9 in between must still be a crash to recover, not a failed start).
                facts.ready = true;
                self.by_pid.insert(pid, surface_id.clone());
                self.entries.insert(
                    surface_id,
                    Entry {
                        session_id,
                        pid,
                        token,
                        master,
                        screen,
                        status: None,
                    },
                );
                Handled::Applied
            }
            ToKeeper::Close { surface_id } => {
                let Some(entry) = self.entries.remove(&surface_id) else {
                    return Handled::Refused("a close of a surface the keeper does not hold");
                };
                self.by_pid.remove(&entry.pid);
                // The daemon ends its own children; those re-parented to the keeper (re-adopted
                // sessions) are the keeper's to end, and to reap.
                if entry.status.is_none() && os.is_child(entry.pid) {
                    self.end_group(entry.pid, os, now);
                }
                Handled::Applied
            }
            ToKeeper::Ready => {
                facts.ready = true;
                Handled::Applied
            }
            ToKeeper::Stopping => {
                facts.stopping = true;
                Handled::Applied
            }
        }
    }

    /// SIGHUP, SIGTERM and SIGCONT to a group whose leader is the keeper's child, with
    /// SIGKILL due after [`KILL_GRACE`].
    fn end_group(&mut self, pid: u32, os: &mut impl Os, now: Instant) {
        for sig in [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGCONT] {
            os.signal_group(pid, sig);
        }
        self.ending.insert(pid, now + KILL_GRACE);
    }

    /// A child of the keeper is about to be reaped (its status read with `WNOWAIT`, so the
    /// zombie still holds its pid): SIGKILL what is left of its group if it was being ended,
    /// then record the status. Never called for the daemon's pid.
    pub fn reaped(&mut self, pid: u32, status: ChildStatus, os: &mut impl Os) -> Reaped {
        if self.ending.remove(&pid).is_some() {
            os.signal_group(pid, Signal::SIGKILL);
        }
        let Some(surface_id) = self.by_pid.get(&pid) else {
            return Reaped::Stray;
        };
        let Some(entry) = self.entries.get_mut(surface_id) else {
            return Reaped::Stray;
        };
        entry.status = Some(status);
        Reaped::Session(FromKeeper::Exited {
            surface_id: surface_id.clone(),
            pid,
            status,
        })
    }

    /// SIGKILL every group whose grace ran out by `now`; the next deadline, if any.
    pub fn overdue(&mut self, os: &mut impl Os, now: Instant) -> Option<Instant> {
        for (pid, due) in self.ending.iter_mut() {
            if *due <= now {
                os.signal_group(*pid, Signal::SIGKILL);
                // Signalled; the reap removes it. Check again a grace later if it is stuck.
                *due = now + KILL_GRACE;
            }
        }
        self.ending.values().min().copied()
    }

    /// Process groups being ended whose leader has not been reaped.
    pub fn ending(&self) -> usize {
        self.ending.len()
    }

    /// The survivors for a new daemon: each entry whose program is still the keeper's child
    /// (alive or a zombie) or whose status the keeper recorded, with a duplicate of its
    /// master, then the end marker. An entry that is neither names a program the dead daemon
    /// had already reaped (it died before its `Close` arrived): dropped, never handed on.
    pub fn handoff(
        &mut self,
        os: &impl Os,
        daemons_before: u32,
    ) -> Vec<(FromKeeper, Vec<OwnedFd>)> {
        self.entries
            .retain(|_, e| e.status.is_some() || os.is_child(e.pid));
        let entries = &self.entries;
        self.by_pid
            .retain(|_, surface| entries.contains_key(surface));
        let mut out = Vec::with_capacity(self.entries.len() + 1);
        for (surface_id, e) in &self.entries {
            let Ok(master) = e.master.try_clone() else {
                // Out of descriptors: this one is not handed on this time; the next
                // daemon's `Close` of an unknown surface is refused harmlessly.
                continue;
            };
            let mut fds = vec![master];
            // Without its screen memory the session still survives (its screen starts empty).
            fds.extend(e.screen.as_ref().and_then(|s| s.try_clone().ok()));
            out.push((
                FromKeeper::Survivor {
                    session_id: e.session_id.clone(),
                    surface_id: surface_id.clone(),
                    pid: e.pid,
                    token: e.token.clone(),
                    status: e.status,
                },
                fds,
            ));
        }
        let count = out.len() as u32;
        out.push((
            FromKeeper::HandoffEnd {
                count,
                daemons_before,
            },
            Vec::new(),
        ));
        out
    }

    /// The keeper is stopping: end every session group it is the parent of and drop every
    /// master (the daemon's own children were ended by the daemon).
    pub fn end_all(&mut self, os: &mut impl Os, now: Instant) {
        let entries = std::mem::take(&mut self.entries);
        self.by_pid.clear();
        for e in entries.into_values() {
            if e.status.is_none() && os.is_child(e.pid) {
                self.end_group(e.pid, os, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Children by pid; signals sent, in order.
    #[derive(Default)]
    struct FakeOs {
        children: Vec<u32>,
        sent: Vec<(u32, Signal)>,
    }

    impl Os for FakeOs {
        fn is_child(&self, pid: u32) -> bool {
            self.children.contains(&pid)
        }
        fn signal_group(&mut self, pid: u32, sig: Signal) {
            self.sent.push((pid, sig));
        }
    }

    fn fd() -> OwnedFd {
        std::fs::File::open("/dev/null").unwrap().into()
    }

    fn register(surface: &str, pid: u32) -> ToKeeper {
        ToKeeper::Register {
            session_id: format!("session-{surface}"),
            surface_id: surface.into(),
            pid,
            token: "t0k3n".into(),
        }
    }

    fn close(surface: &str) -> ToKeeper {
        ToKeeper::Close {
            surface_id: surface.into(),
        }
    }

    struct World {
        table: Table,
        facts: Facts,
        os: FakeOs,
        now: Instant,
    }

    impl World {
        fn new() -> World {
            World {
                table: Table::default(),
                facts: Facts::default(),
                os: FakeOs::default(),
                now: Instant::now(),
            }
        }
        fn send(&mut self, msg: ToKeeper, fds: Vec<OwnedFd>) -> Handled {
            self.table
                .handle(msg, fds, &mut self.facts, &mut self.os, self.now)
        }
    }

    #[test]
    fn a_packet_is_decoded_or_refused_whole() {
        let mut w = World::new();
        let packet = register("S1", 100).encode().unwrap();
        let apply = |w: &mut World, bytes: &[u8], fds, truncated| {
            w.table
                .handle_packet(bytes, fds, truncated, &mut w.facts, &mut w.os, w.now)
        };
        assert_eq!(
            apply(&mut w, &packet, vec![fd()], true),
            Handled::Refused("an oversized packet")
        );
        assert_eq!(
            apply(&mut w, b"garbage", vec![fd()], false),
            Handled::Refused("a malformed packet")
        );
        assert_eq!(w.table.len(), 0);
        assert_eq!(apply(&mut w, &packet, vec![fd()], false), Handled::Applied);
        assert_eq!(w.table.len(), 1);
    }

    #[test]
    fn register_files_the_master_under_its_surface() {
        let mut w = World::new();
        assert_eq!(w.send(register("S1", 100), vec![fd()]), Handled::Applied);
        let e = w.table.get("S1").unwrap();
        assert_eq!((e.pid, e.session_id.as_str()), (100, "session-S1"));
        assert_eq!(e.status, None);
        assert!(e.screen.is_none());
        // With the screen's memory as a second descriptor: held with the master.
        assert_eq!(
            w.send(register("S2", 101), vec![fd(), fd()]),
            Handled::Applied
        );
        assert!(w.table.get("S2").unwrap().screen.is_some());
    }

    #[test]
    fn a_message_with_the_wrong_descriptors_is_refused_and_changes_nothing() {
        let mut w = World::new();
        assert!(matches!(
            w.send(register("S1", 100), vec![]),
            Handled::Refused(_)
        ));
        assert!(matches!(
            w.send(register("S1", 100), vec![fd(), fd(), fd()]),
            Handled::Refused(_)
        ));
        assert!(matches!(
            w.send(ToKeeper::Ready, vec![fd()]),
            Handled::Refused(_)
        ));
        assert_eq!(w.table.len(), 0);
        assert!(!w.facts.ready);
    }

    #[test]
    fn a_registration_without_a_real_pid_is_refused() {
        let mut w = World::new();
        for pid in [0, 1] {
            assert!(matches!(
                w.send(register("S1", pid), vec![fd()]),
                Handled::Refused(_)
            ));
        }
        assert_eq!(w.table.len(), 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut w = World::new();
        w.table = Table::with_max(8);
        for i in 0..8 {
            assert_eq!(
                w.send(register(&format!("S{i}"), 1000 + i), vec![fd()]),
                Handled::Applied
            );
        }
        assert!(matches!(
            w.send(register("one-more", 5), vec![fd()]),
            Handled::Refused(_)
        ));
        // Replacing a surface already held is not growth.
        assert_eq!(w.send(register("S0", 7), vec![fd()]), Handled::Applied);
        assert_eq!(w.table.len(), 8);
    }

    #[test]
    fn a_re_registered_surface_or_reused_pid_replaces_the_stale_entry() {
        let mut w = World::new();
        w.send(register("S1", 100), vec![fd()]);
        w.send(register("S1", 101), vec![fd()]);
        assert_eq!(w.table.len(), 1);
        assert_eq!(w.table.get("S1").unwrap().pid, 101);
        // pid 101 now spawned for another surface: the old entry's program is gone.
        w.send(register("S2", 101), vec![fd()]);
        assert_eq!(w.table.len(), 1);
        assert!(w.table.get("S1").is_none());
        assert_eq!(
            w.table.reaped(101, ChildStatus::Code(0), &mut w.os),
            Reaped::Session(FromKeeper::Exited {
                surface_id: "S2".into(),
                pid: 101,
                status: ChildStatus::Code(0)
            })
        );
    }

    #[test]
    fn close_of_the_daemons_own_child_only_drops_the_master() {
        let mut w = World::new();
        w.send(register("S1", 100), vec![fd()]);
        assert_eq!(w.send(close("S1"), vec![]), Handled::Applied);
        assert_eq!(w.table.len(), 0);
        assert!(w.os.sent.is_empty(), "the daemon ends its own children");
        assert_eq!(w.table.ending(), 0);
    }

    #[test]
    fn close_of_a_keeper_child_ends_its_group_and_kills_it_after_the_grace() {
        let mut w = World::new();
        w.send(register("S1", 100), vec![fd()]);
        w.os.children.push(100);
        w.send(close("S1"), vec![]);
        assert_eq!(
            w.os.sent,
            vec![
                (100, Signal::SIGHUP),
                (100, Signal::SIGTERM),
                (100, Signal::SIGCONT)
            ]
        );
        // Before the grace: nothing more; the next deadline is the grace.
        assert_eq!(w.table.overdue(&mut w.os, w.now), Some(w.now + KILL_GRACE));
        assert_eq!(w.os.sent.len(), 3);
        // After it: SIGKILL, and another look a grace later.
        let later = w.now + KILL_GRACE;
        assert_eq!(w.table.overdue(&mut w.os, later), Some(later + KILL_GRACE));
        assert_eq!(w.os.sent[3], (100, Signal::SIGKILL));
        // Reaped: stragglers in its group killed before the pid is released; no one to tell.
        assert_eq!(
            w.table.reaped(100, ChildStatus::Signal(9), &mut w.os),
            Reaped::Stray
        );
        assert_eq!(w.os.sent[4], (100, Signal::SIGKILL));
        assert_eq!(w.table.ending(), 0);
        assert_eq!(w.table.overdue(&mut w.os, later), None);
    }

    #[test]
    fn close_of_a_child_already_reaped_signals_nothing() {
        let mut w = World::new();
        w.send(register("S1", 100), vec![fd()]);
        w.os.children.push(100);
        w.table.reaped(100, ChildStatus::Code(7), &mut w.os);
        w.send(close("S1"), vec![]);
        assert!(w.os.sent.is_empty());
    }

    #[test]
    fn close_of_an_unknown_surface_is_refused() {
        let mut w = World::new();
        assert!(matches!(w.send(close("nope"), vec![]), Handled::Refused(_)));
    }

    #[test]
    fn ready_and_stopping_are_facts_for_the_decision() {
        let mut w = World::new();
        assert_eq!(w.send(ToKeeper::Ready, vec![]), Handled::Applied);
        assert!(w.facts.ready && !w.facts.stopping);
        assert_eq!(w.send(ToKeeper::Stopping, vec![]), Handled::Applied);
        assert!(w.facts.stopping);
        // A registration says the daemon served (its Ready may still be on the way).
        let mut w = World::new();
        assert_eq!(w.send(register("S1", 100), vec![fd()]), Handled::Applied);
        assert!(w.facts.ready);
        assert_eq!(
            decide(DaemonEnd::Signal(9), w.facts, 0),
            Decision::Restart,
            "killed after serving a create: recovered"
        );
    }

    #[test]
    fn a_reaped_session_child_is_recorded_and_reported_a_stray_is_not() {
        let mut w = World::new();
        w.send(register("S1", 100), vec![fd()]);
        assert_eq!(
            w.table.reaped(100, ChildStatus::Code(7), &mut w.os),
            Reaped::Session(FromKeeper::Exited {
                surface_id: "S1".into(),
                pid: 100,
                status: ChildStatus::Code(7)
            })
        );
        assert_eq!(
            w.table.get("S1").unwrap().status,
            Some(ChildStatus::Code(7))
        );
        assert_eq!(
            w.table.reaped(555, ChildStatus::Code(0), &mut w.os),
            Reaped::Stray
        );
        assert!(w.os.sent.is_empty());
    }

    #[test]
    fn the_handoff_carries_live_and_exited_survivors_and_drops_the_gone() {
        let mut w = World::new();
        w.send(register("alive", 100), vec![fd(), fd()]);
        w.send(register("exited", 101), vec![fd()]);
        w.send(register("gone", 102), vec![fd()]);
        w.os.children = vec![100, 101];
        w.table.reaped(101, ChildStatus::Code(7), &mut w.os);
        w.os.children = vec![100];
        let mut out = w.table.handoff(&w.os, 3);
        let (end, fd) = out.pop().unwrap();
        assert_eq!(
            end,
            FromKeeper::HandoffEnd {
                count: 2,
                daemons_before: 3
            }
        );
        assert!(fd.is_empty());
        out.sort_by_key(|(m, _)| format!("{m:?}"));
        let summary: Vec<_> = out
            .iter()
            .map(|(m, fd)| match m {
                FromKeeper::Survivor {
                    surface_id,
                    pid,
                    status,
                    token,
                    session_id,
                } => {
                    assert_eq!(token, "t0k3n");
                    assert_eq!(session_id, &format!("session-{surface_id}"));
                    // The master, and the screen memory when the daemon sent one.
                    let want = if surface_id == "alive" { 2 } else { 1 };
                    assert_eq!(fd.len(), want);
                    (surface_id.clone(), *pid, *status)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("alive".to_string(), 100, None),
                ("exited".to_string(), 101, Some(ChildStatus::Code(7)))
            ]
        );
        // The gone one is forgotten for good.
        assert_eq!(w.table.len(), 2);
        assert_eq!(
            w.table.reaped(102, ChildStatus::Code(0), &mut w.os),
            Reaped::Stray
        );
    }

    #[test]
    fn an_empty_handoff_is_just_the_end_marker() {
        let mut w = World::new();
        let out = w.table.handoff(&w.os, 0);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].0,
            FromKeeper::HandoffEnd {
                count: 0,
                daemons_before: 0
            }
        );
    }

    #[test]
    fn stopping_ends_only_the_keepers_own_live_children() {
        let mut w = World::new();
        w.send(register("mine", 100), vec![fd()]);
        w.send(register("daemons", 200), vec![fd()]);
        w.send(register("done", 101), vec![fd()]);
        w.os.children = vec![100, 101];
        w.table.reaped(101, ChildStatus::Code(0), &mut w.os);
        w.table.end_all(&mut w.os, w.now);
        assert_eq!(w.table.len(), 0);
        let signalled: Vec<u32> = w.os.sent.iter().map(|(p, _)| *p).collect();
        assert_eq!(signalled, vec![100, 100, 100]);
        assert_eq!(w.table.ending(), 1);
    }

    #[test]
    fn the_restart_decision() {
        let crash = DaemonEnd::Signal(9);
        let ready = Facts {
            ready: true,
            ..Facts::default()
        };
        // A crash of a daemon that served: restart.
        assert_eq!(decide(crash, ready, 0), Decision::Restart);
        assert_eq!(decide(DaemonEnd::Code(101), ready, 0), Decision::Restart);
        // A stop was asked for, of the keeper or by the daemon: exit with its status.
        let asked = Facts {
            stop_requested: true,
            ..ready
        };
        assert_eq!(decide(crash, asked, 0), Decision::Exit(137));
        let stopping = Facts {
            stopping: true,
            ..ready
        };
        assert_eq!(decide(DaemonEnd::Code(0), stopping, 0), Decision::Exit(0));
        assert_eq!(decide(DaemonEnd::Code(1), stopping, 0), Decision::Exit(1));
        // Never ready: it could not start; a retry would not either.
        assert_eq!(
            decide(DaemonEnd::Code(1), Facts::default(), 0),
            Decision::Exit(1)
        );
        assert_eq!(
            decide(DaemonEnd::Code(0), Facts::default(), 0),
            Decision::Exit(1)
        );
        assert_eq!(decide(crash, Facts::default(), 0), Decision::Exit(137));
        // ... unless an earlier daemon served: a recovering daemon killed before it was
        // ready is retried (within the budget); one that exits with a status is not.
        let recovering = Facts {
            served_before: true,
            ..Facts::default()
        };
        assert_eq!(decide(crash, recovering, 0), Decision::Restart);
        assert_eq!(decide(crash, recovering, RESTARTS_MAX), Decision::Exit(137));
        assert_eq!(decide(DaemonEnd::Code(1), recovering, 0), Decision::Exit(1));
        // A ready daemon that exited 0 by itself meant to.
        assert_eq!(decide(DaemonEnd::Code(0), ready, 0), Decision::Exit(0));
        // Too many restarts in the window: give up.
        assert_eq!(decide(crash, ready, RESTARTS_MAX - 1), Decision::Restart);
        assert_eq!(decide(crash, ready, RESTARTS_MAX), Decision::Exit(137));
    }

    #[test]
    fn the_upgrade_decision() {
        let ready = Facts {
            ready: true,
            ..Facts::default()
        };
        let asked = Facts {
            handover: true,
            ..ready
        };
        // However the daemon ended (handed over and exited, or killed by the signal).
        assert_eq!(decide(DaemonEnd::Code(0), asked, 0), Decision::Upgrade);
        assert_eq!(decide(DaemonEnd::Signal(12), asked, 0), Decision::Upgrade);
        // Not counted against the restart budget.
        assert_eq!(
            decide(DaemonEnd::Code(0), asked, RESTARTS_MAX),
            Decision::Upgrade
        );
        // A stop asked meanwhile wins.
        let stopping = Facts {
            stop_requested: true,
            ..asked
        };
        assert_eq!(decide(DaemonEnd::Code(0), stopping, 0), Decision::Exit(0));
        // The upgraded build that cannot start: back to the keeper's own.
        let upgraded = Facts {
            upgraded: true,
            served_before: true,
            ..Facts::default()
        };
        assert_eq!(decide(DaemonEnd::Code(1), upgraded, 0), Decision::FallBack);
        assert_eq!(
            decide(DaemonEnd::Signal(11), upgraded, 0),
            Decision::FallBack
        );
        // Once it served, it is a daemon like any other.
        let served = Facts {
            ready: true,
            ..upgraded
        };
        assert_eq!(decide(DaemonEnd::Signal(9), served, 0), Decision::Restart);
    }

    #[test]
    fn restarts_outside_the_window_are_forgotten() {
        let now = Instant::now() + RESTART_WINDOW * 2;
        let mut restarts = vec![
            now - RESTART_WINDOW - Duration::from_secs(1),
            now - Duration::from_secs(1),
            now,
        ];
        assert_eq!(restarts_in_window(&mut restarts, now), 2);
        assert_eq!(restarts.len(), 2);
    }
}
