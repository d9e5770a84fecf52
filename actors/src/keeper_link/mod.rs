//! The daemon's side of its link to the keeper (`maxx daemon` runs the daemon under a small
//! keeper process; see `docs/recovery.md` and the binary's `keeper` module).
//!
//! At start the daemon reads the keeper's handoff: the sessions that outlived the previous
//! daemon ([`Survivor`]: master, pid, ids, registration secret, recorded exit status). Then
//! one tokio task serves the link: it sends what the sessions tell the keeper ([`Keeper`]:
//! a master to hold when a child is spawned, a surface closed, ready, stopping), in order,
//! and delivers what the keeper reports (the exit status of a child the keeper is the parent
//! of, i.e. a re-adopted session). A packet with nothing queued before it is sent by the
//! caller itself, at once (a create's master reaches the kernel before its answer without a
//! hop to the task); the task sends what the socket could not take then, and what queued
//! behind it.
//!
//! [`proof`] decides whether a survivor is a restored record's own live program.

pub mod packet;
pub mod proof;

use maxx_protocol::keeper::{ChildStatus, FromKeeper, ToKeeper, MESSAGE_MAX};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};

/// Exit reports kept for surfaces nobody waits on yet (a keeper reporting more is not
/// believed beyond this).
const EARLY_MAX: usize = 65_536;
/// How long the keeper may take to hand over the survivors.
const HANDOFF_TIMEOUT: Duration = Duration::from_secs(10);

/// A session that outlived the previous daemon, as the keeper presents it.
pub struct Survivor {
    /// The session it was registered for.
    pub session_id: String,
    /// Its surface.
    pub surface_id: String,
    /// Its child's pid (the keeper's child now).
    pub pid: u32,
    /// The surface's registration secret (memory only).
    pub token: String,
    /// A duplicate of its PTY master.
    pub master: OwnedFd,
    /// Its screen memory (the memfd the dead daemon logged its output into), if the keeper
    /// held one: untrusted until `screen_model::store` validated it.
    pub screen: Option<OwnedFd>,
    /// How the child ended while no daemon was there, if it did.
    pub status: Option<ChildStatus>,
}

impl std::fmt::Debug for Survivor {
    // Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Survivor")
            .field("session_id", &self.session_id)
            .field("surface_id", &self.surface_id)
            .field("pid", &self.pid)
            .field("status", &self.status)
            .finish()
    }
}

/// What the keeper handed this daemon at start.
pub struct Handoff {
    /// The survivors.
    pub survivors: Vec<Survivor>,
    /// Daemons the keeper started before this one (0: a first start, not a recovery).
    pub daemons_before: u32,
}

enum Outgoing {
    Packet(ToKeeper, Vec<OwnedFd>),
    /// Answer once everything queued before has been sent.
    Flushed(oneshot::Sender<()>),
}

/// Exit statuses the keeper reported, and who waits for them.
#[derive(Default)]
struct Exits {
    waiting: HashMap<String, oneshot::Sender<ChildStatus>>,
    /// Reported before anyone asked (a child that ended during the start).
    early: HashMap<String, ChildStatus>,
    /// The link is gone: nobody will report any more.
    gone: bool,
}

/// Who sends next: the caller at once, or the link's task (see [`Keeper::send`]).
struct Sending {
    /// Packets handed to the task and not sent yet (in order: nothing is sent directly
    /// while any wait).
    queued: usize,
    /// The link failed a send: nothing more is sent.
    closed: bool,
}

/// A handle on the keeper link; cheap to clone. Every session's `Pty` holds one.
#[derive(Clone)]
pub struct Keeper {
    tx: mpsc::UnboundedSender<Outgoing>,
    link: Arc<AsyncFd<OwnedFd>>,
    sending: Arc<Mutex<Sending>>,
    exits: Arc<Mutex<Exits>>,
    /// The keeper's pid (our parent at start), for `daemon.status`.
    pid: u32,
    /// Daemons the keeper started before this one.
    daemons_before: u32,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keeper")
    }
}

impl Keeper {
    /// Take the link at `fd` (passed by the keeper), read the handoff, and start the task
    /// that serves the link from then on.
    pub async fn connect(fd: RawFd) -> io::Result<(Keeper, Handoff)> {
        // SAFETY: the keeper placed our end of the socketpair at this descriptor for us.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        set_cloexec_nonblocking(owned.as_raw_fd())?;
        let link = crate::pty::register_fd(owned)?;
        let handoff = tokio::time::timeout(HANDOFF_TIMEOUT, read_handoff(&link))
            .await
            .map_err(|_| io::Error::other("the keeper did not hand over its sessions in time"))??;
        let (tx, rx) = mpsc::unbounded_channel();
        let exits = Arc::new(Mutex::new(Exits::default()));
        let link = Arc::new(link);
        let sending = Arc::new(Mutex::new(Sending {
            queued: 0,
            closed: false,
        }));
        tokio::spawn(serve(link.clone(), rx, exits.clone(), sending.clone()));
        let keeper = Keeper {
            tx,
            link,
            sending,
            exits,
            pid: nix::unistd::getppid().as_raw() as u32,
            daemons_before: handoff.daemons_before,
        };
        Ok((keeper, handoff))
    }

    /// Send `msg` now if nothing is queued before it and the socket takes it; else queue it
    /// for the link's task, behind what is queued.
    fn send(&self, msg: ToKeeper, fds: Vec<OwnedFd>) {
        let mut sending = self.sending.lock().unwrap_or_else(|e| e.into_inner());
        if sending.closed {
            return;
        }
        if sending.queued == 0 {
            match send_now(&self.link, &msg, &fds) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    drop(sending);
                    link_closed(&self.sending, &self.exits);
                    return;
                }
            }
        }
        if self.tx.send(Outgoing::Packet(msg, fds)).is_ok() {
            sending.queued += 1;
        }
    }

    /// A child was spawned on this master: the keeper holds a duplicate under `surface_id`.
    pub fn register(
        &self,
        session_id: &str,
        surface_id: &str,
        pid: u32,
        token: &str,
        master: BorrowedFd<'_>,
        screen: Option<BorrowedFd<'_>>,
    ) {
        match master.try_clone_to_owned() {
            Ok(dup) => {
                let mut fds = vec![dup];
                // Without it the program still survives; its screen would start empty.
                fds.extend(screen.and_then(|s| s.try_clone_to_owned().ok()));
                self.send(
                    ToKeeper::Register {
                        session_id: session_id.into(),
                        surface_id: surface_id.into(),
                        pid,
                        token: token.into(),
                    },
                    fds,
                )
            }
            Err(e) => {
                tracing::warn!(session_id, error = %e, "cannot hand the keeper a master; this session will not survive a daemon crash")
            }
        }
    }

    /// Resolves once everything queued before it has been handed to the kernel (`sendmsg`
    /// returned: the keeper gets those packets and their descriptors even if this daemon
    /// dies now), or once the link is gone (nothing will be sent, so waiting is pointless).
    pub fn flushed(&self) -> oneshot::Receiver<()> {
        let (done, rx) = oneshot::channel();
        let sending = self.sending.lock().unwrap_or_else(|e| e.into_inner());
        if sending.queued == 0 {
            // Everything was sent by its caller already (or the link is gone).
            let _ = done.send(());
        } else {
            let _ = self.tx.send(Outgoing::Flushed(done));
        }
        rx
    }

    /// The surface is gone: the keeper drops its master (and ends the group if it is the
    /// child's parent).
    pub fn close(&self, surface_id: &str) {
        {
            let mut exits = self.exits.lock().unwrap_or_else(|e| e.into_inner());
            exits.waiting.remove(surface_id);
            exits.early.remove(surface_id);
        }
        self.send(
            ToKeeper::Close {
                surface_id: surface_id.into(),
            },
            Vec::new(),
        );
    }

    /// The daemon serves its socket.
    pub fn ready(&self) {
        self.send(ToKeeper::Ready, Vec::new());
    }

    /// The daemon is stopping on purpose; resolves once the keeper has been told (or the
    /// link is gone), so the daemon never exits before it.
    pub async fn stopping(&self) {
        self.send(ToKeeper::Stopping, Vec::new());
        let (done, rx) = oneshot::channel();
        if self.tx.send(Outgoing::Flushed(done)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
    }

    /// `daemon.status`'s `keeper`: `{pid, connected, daemons_before}`.
    pub fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "pid": self.pid,
            "connected": self.connected(),
            "daemons_before": self.daemons_before,
        })
    }

    /// Whether the keeper is still there.
    pub fn connected(&self) -> bool {
        !self.exits.lock().unwrap_or_else(|e| e.into_inner()).gone
    }

    /// The exit status of the keeper's child on `surface_id`, once the keeper reaps it. An
    /// error if the link is gone (nobody will report it).
    pub fn exit_of(&self, surface_id: &str) -> oneshot::Receiver<ChildStatus> {
        let (tx, rx) = oneshot::channel();
        let mut exits = self.exits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(status) = exits.early.remove(surface_id) {
            let _ = tx.send(status);
        } else if !exits.gone {
            exits.waiting.insert(surface_id.to_string(), tx);
        }
        rx
    }
}

fn set_cloexec_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One packet from the keeper (`None`: it closed the link), refusing malformed ones.
async fn recv(link: &AsyncFd<OwnedFd>) -> io::Result<Option<(FromKeeper, Vec<OwnedFd>)>> {
    let mut buf = [0u8; MESSAGE_MAX];
    loop {
        let mut guard = link.readable().await?;
        let received = match guard
            .try_io(|fd| packet::recv(std::os::fd::AsFd::as_fd(fd.get_ref()), &mut buf))
        {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        };
        let fds = received.fds;
        if received.truncated {
            tracing::warn!("refused an oversized packet from the keeper");
            continue;
        }
        match FromKeeper::decode(&buf[..received.len]) {
            Ok(msg) if msg.fds_allowed().contains(&fds.len()) => {
                return Ok(Some((msg, fds)));
            }
            Ok(_) => tracing::warn!("refused a keeper packet with the wrong descriptors"),
            Err(e) => tracing::warn!(error = %e, "refused a malformed keeper packet"),
        }
    }
}

async fn read_handoff(link: &AsyncFd<OwnedFd>) -> io::Result<Handoff> {
    let mut survivors = Vec::new();
    loop {
        match recv(link).await? {
            None => {
                return Err(io::Error::other(
                    "the keeper closed the link during the handoff",
                ))
            }
            Some((
                FromKeeper::Survivor {
                    session_id,
                    surface_id,
                    pid,
                    token,
                    status,
                },
                fds,
            )) => {
                let mut fds = fds.into_iter();
                if let Some(master) = fds.next() {
                    survivors.push(Survivor {
                        session_id,
                        surface_id,
                        pid,
                        token,
                        master,
                        screen: fds.next(),
                        status,
                    });
                }
            }
            Some((FromKeeper::HandoffEnd { daemons_before, .. }, _)) => {
                return Ok(Handoff {
                    survivors,
                    daemons_before,
                })
            }
            // An exit reported during the handoff would be about a survivor already sent
            // with its status; the keeper only reports exits after the handoff.
            Some(_) => {}
        }
    }
}

/// One `sendmsg` of `msg` with `fds` (`WouldBlock` when the socket is full).
fn send_now(link: &AsyncFd<OwnedFd>, msg: &ToKeeper, fds: &[OwnedFd]) -> io::Result<()> {
    let Some(bytes) = msg.encode() else {
        // Ids and tokens are ours and always encode; never send a half message.
        return Ok(());
    };
    let fds: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
    packet::send(link.get_ref().as_fd(), &bytes, &fds)
}

async fn send_packet(link: &AsyncFd<OwnedFd>, msg: &ToKeeper, fds: &[OwnedFd]) -> io::Result<()> {
    loop {
        let mut guard = link.writable().await?;
        match guard.try_io(|_| send_now(link, msg, fds)) {
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

/// The link's task: send in order, deliver exit reports, and when the keeper goes, say so
/// (once) and fail every pending exit wait.
async fn serve(
    link: Arc<AsyncFd<OwnedFd>>,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    exits: Arc<Mutex<Exits>>,
    sending: Arc<Mutex<Sending>>,
) {
    let mut open = true;
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                None => return,
                Some(Outgoing::Flushed(done)) => { let _ = done.send(()); }
                Some(Outgoing::Packet(msg, fds)) => {
                    let failed = open && send_packet(&link, &msg, &fds).await.is_err();
                    sending.lock().unwrap_or_else(|e| e.into_inner()).queued -= 1;
                    if failed {
                        open = false;
                        link_closed(&sending, &exits);
                    }
                }
            },
            got = recv(&link), if open => match got {
                Ok(Some((FromKeeper::Exited { surface_id, status, .. }, _))) => {
                    let mut e = exits.lock().unwrap_or_else(|e| e.into_inner());
                    match e.waiting.remove(&surface_id) {
                        Some(tx) => { let _ = tx.send(status); }
                        None if e.early.len() < EARLY_MAX => { e.early.insert(surface_id, status); }
                        None => {}
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    open = false;
                    link_closed(&sending, &exits);
                }
            },
        }
    }
}

/// The link failed (a send, or the keeper hung up): nothing more is sent, and the keeper's
/// going is said once, whichever side noticed first.
fn link_closed(sending: &Mutex<Sending>, exits: &Mutex<Exits>) {
    let was = std::mem::replace(
        &mut sending.lock().unwrap_or_else(|e| e.into_inner()).closed,
        true,
    );
    if was {
        return;
    }
    tracing::warn!(
        "the keeper is gone: sessions keep running, but will not survive this daemon's death"
    );
    let mut e = exits.lock().unwrap_or_else(|e| e.into_inner());
    e.gone = true;
    // Dropping the senders fails each wait: nobody will report those exits.
    e.waiting.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets reach the keeper in the order they were sent, whether the caller sent them
    /// itself or the socket was full and the link's task sent them later; `flushed` resolves
    /// at once when nothing waits, and only after what waits was sent otherwise.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn packets_keep_their_order_when_the_socket_fills() {
        let (ours, theirs) = packet::pair().unwrap();
        let end = FromKeeper::HandoffEnd {
            count: 0,
            daemons_before: 0,
        };
        packet::send(theirs.as_fd(), &end.encode().unwrap(), &[]).unwrap();
        let (keeper, handoff) = Keeper::connect(std::os::fd::IntoRawFd::into_raw_fd(ours))
            .await
            .unwrap();
        assert_eq!(handoff.daemons_before, 0);
        let close = |n: usize| ToKeeper::Close {
            surface_id: format!("s{n}"),
        };
        // Nobody reads: the socket fills, then packets wait for the task.
        let mut n = 0;
        while keeper.sending.lock().unwrap().queued == 0 {
            assert!(keeper.flushed().try_recv().is_ok(), "nothing waits yet");
            keeper.send(close(n), Vec::new());
            n += 1;
            assert!(n < 1_000_000, "the socket never filled");
        }
        for _ in 0..10 {
            keeper.send(close(n), Vec::new());
            n += 1;
        }
        let mut flushed = keeper.flushed();
        assert!(flushed.try_recv().is_err(), "packets wait for the task");
        // The keeper reads: every packet arrives, in order, and then `flushed` resolves.
        let mut buf = [0u8; MESSAGE_MAX];
        let mut got = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got < n {
            assert!(std::time::Instant::now() < deadline, "{got} of {n} arrived");
            match packet::recv(theirs.as_fd(), &mut buf) {
                Ok(Some(r)) => {
                    assert_eq!(ToKeeper::decode(&buf[..r.len]).unwrap(), close(got));
                    got += 1;
                    if got == 1 {
                        // Room for one: a packet sent now still goes behind those waiting.
                        keeper.send(close(n), Vec::new());
                        n += 1;
                    }
                }
                Ok(None) => panic!("the link closed"),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tokio::task::yield_now().await;
                }
                Err(e) => panic!("{e}"),
            }
        }
        tokio::time::timeout(Duration::from_secs(10), flushed)
            .await
            .expect("flushed once all was sent")
            .unwrap();
        assert_eq!(keeper.sending.lock().unwrap().queued, 0);
        // And the caller sends directly again.
        keeper.send(close(n), Vec::new());
        assert!(keeper.flushed().try_recv().is_ok());
    }
}
