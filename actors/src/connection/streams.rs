//! Requests that hold their connection: waits (`sessions.wait`, `stream.wait`), which end
//! when their caller hangs up, and streams (`sessions.watch`, `stream.watch`,
//! `sessions.attach`), which write until the end or a slow or gone reader.

use super::*;
use crate::bus::Queued;
use crate::stats::Charge;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

/// `sessions.wait`. `None` when the caller hung up first: its waiter is dropped at once.
pub(super) async fn wait(
    p: WaitParams,
    ctx: &DaemonContext,
    stream: &UnixStream,
) -> Option<Result<Value, ErrorBody>> {
    let output_only = matches!(&p.condition, WaitCondition::Text(t) if t.output_only);
    // The session actor owns the timer; the call timeout is only a backstop.
    let asked = ask_session(
        ctx,
        &p.session_id,
        |reply| SessionMsg::Wait {
            condition: p.condition.clone(),
            timeout: p.timeout,
            reply,
        },
        p.timeout + ACTOR_CALL_TIMEOUT,
    );
    let answer = tokio::select! {
        answer = asked => answer,
        _ = peer_closed(stream) => {
            // Dropping the call closed the waiter's reply port; have the actor drop it now
            // rather than at its timeout.
            if let Ok(actor) = session_actor(ctx, &p.session_id).await {
                let _ = actor.cast(SessionMsg::PruneWaiters);
            }
            return None;
        }
    };
    Some(wait_result(answer, output_only))
}

fn wait_result(
    answer: Result<crate::session::WaitAnswer, ErrorBody>,
    output_only: bool,
) -> Result<Value, ErrorBody> {
    let answer = answer?;
    let mut result = json!({ "outcome": answer.outcome, "session": answer.session });
    if let Some(event) = answer.event {
        result["event"] = json!(event);
    }
    if output_only {
        // false: the session never marked input (OSC 133 B), so nothing was left out.
        result["output_only_filtered"] = json!(answer.input_marks);
    }
    Ok(result)
}

/// Resolves when the client has closed its end entirely (not merely half-closed its
/// write side, which a client may do right after sending its request). Event-driven: a
/// separate registration of the socket wakes on the kernel's hang-up, no polling.
pub(super) async fn peer_closed(stream: &UnixStream) {
    // SAFETY: F_DUPFD_CLOEXEC on a live fd returns a new fd we own.
    let dup = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return std::future::pending().await;
    }
    // SAFETY: `dup` is ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(dup) };
    // SAFETY: the AsyncFd owns `fd` until it is dropped.
    let Ok(afd) = (unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::WRITABLE) })
    else {
        return std::future::pending().await;
    };
    loop {
        let Ok(mut guard) = afd.writable().await else {
            return std::future::pending().await;
        };
        if guard.ready().is_write_closed() {
            return;
        }
        // Writable but still connected: wait for the next change of state.
        guard.clear_ready();
    }
}

/// How a stream client's output ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Its source closed (a session ended a watch or dropped an attacher; the bus is gone).
    Source,
    /// It was dropped as a slow consumer: its queue is gone already.
    Evicted,
    /// A write failed or timed out.
    Write,
    /// The client hung up.
    Gone,
    /// The caller's `timeout` passed.
    Timeout,
    /// Nothing left to send (`idle` asked for it).
    Idle,
}

/// A stream client's queue, byte-accounted in the daemon's stream budget. With `eager`,
/// items are pulled off the source while a write is blocked and charged here (the session
/// actors' watch and attach channels are counted in lines and chunks, not bytes); without,
/// the sender charged them (the bus). Either way an eviction throws the queue away at once,
/// without waiting for the client to read.
struct Pump<T> {
    rx: mpsc::Receiver<T>,
    queue: VecDeque<(T, usize)>,
    charge: Arc<Charge>,
    /// The bytes an item is (or was) charged.
    size: fn(&T) -> usize,
    eager: bool,
    closed: bool,
}

impl<T> Pump<T> {
    fn new(rx: mpsc::Receiver<T>, charge: Arc<Charge>, size: fn(&T) -> usize, eager: bool) -> Self {
        Pump {
            rx,
            queue: VecDeque::new(),
            charge,
            size,
            eager,
            closed: false,
        }
    }

    /// Drop everything queued and stop the source (its sender sees a closed channel).
    fn discard(&mut self) {
        self.queue.clear();
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
        self.closed = true;
    }

    /// Queue an item already charged `n` bytes (the sender's charge or `charge.add`).
    fn push_charged(&mut self, item: T, n: usize) {
        self.queue.push_back((item, n));
    }

    /// Queue an item pulled off the source (`None`: the source closed).
    fn pulled(&mut self, item: Option<T>) {
        let Some(item) = item else {
            self.closed = true;
            return;
        };
        let n = (self.size)(&item);
        if !self.eager || self.charge.add(n) {
            self.queue.push_back((item, n));
        } else {
            self.discard();
        }
    }

    /// An item's line was written (or skipped): release its bytes.
    fn done(&self, n: usize) {
        self.charge.sub(n);
    }

    /// Write `bytes`, watching for an eviction (the queue is dropped at once, the write
    /// goes on within its timeout) and, when eager, pulling new items meanwhile. An
    /// eviction is reported by the next [`Pump::next`], once this line is whole.
    async fn write<W: AsyncWrite + Unpin, G: Future<Output = ()>>(
        &mut self,
        w: &mut W,
        bytes: &[u8],
        gone: &mut Pin<&mut G>,
    ) -> Result<(), Ended> {
        let write = write_bounded(w, bytes);
        tokio::pin!(write);
        let pull = self.eager;
        loop {
            let evicted = self.charge.is_evicted();
            if evicted && !self.closed {
                self.discard();
            }
            tokio::select! {
                biased;
                _ = self.charge.evicted(), if !evicted => {}
                item = self.rx.recv(), if pull && !self.closed => self.pulled(item),
                result = &mut write => {
                    result.map_err(|_| Ended::Write)?;
                    break;
                }
                _ = gone.as_mut() => return Err(Ended::Gone),
            }
        }
        // Written whole: the client has it. An eviction meanwhile shows on the next `next`.
        if self.charge.is_evicted() {
            self.discard();
        }
        Ok(())
    }

    /// The next item and its bytes. With `idle`, `Err(Idle)` instead of waiting when
    /// nothing is queued.
    async fn next<G: Future<Output = ()>>(
        &mut self,
        gone: &mut Pin<&mut G>,
        deadline: Option<tokio::time::Instant>,
        idle: bool,
    ) -> Result<(T, usize), Ended> {
        loop {
            if self.charge.is_evicted() {
                self.discard();
                return Err(Ended::Evicted);
            }
            if let Some(item) = self.queue.pop_front() {
                return Ok(item);
            }
            if self.closed {
                return Err(Ended::Source);
            }
            if idle {
                match self.rx.try_recv() {
                    Ok(item) => self.pulled(Some(item)),
                    Err(mpsc::error::TryRecvError::Empty) => return Err(Ended::Idle),
                    Err(mpsc::error::TryRecvError::Disconnected) => self.pulled(None),
                }
                continue;
            }
            tokio::select! {
                biased;
                _ = self.charge.evicted() => {}
                item = self.rx.recv() => self.pulled(item),
                _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() => {
                    return Err(Ended::Timeout);
                }
                _ = gone.as_mut() => return Err(Ended::Gone),
            }
        }
    }
}

/// The JSON size of a value, counted without building it.
fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// What a queued `sessions.watch` line is charged: its JSON size plus the envelope.
fn watch_line_bytes(line: &WatchLine) -> usize {
    64 + match line {
        WatchLine::Event(e) => json_len(e),
        WatchLine::Lifecycle(v) => json_len(v),
        WatchLine::End => 0,
    }
}

/// `sessions.watch`: a snapshot line, an event line per new audit entry, a lifecycle line
/// per transition, and an end line (`ended`, `timeout`, or `dropped` for a watcher that
/// fell more than `WATCH_BUFFER` lines behind). A caller that disconnects ends it, and
/// its subscription is removed at once.
/// A stream's first line names the params the daemon ignored, like a one-answer response.
fn with_warnings(first: &mut Value, warnings: &[Warning]) {
    if !warnings.is_empty() {
        first["warnings"] = json!(warnings);
    }
}

pub(super) async fn watch(
    p: WatchParams,
    warnings: &[Warning],
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    let (tx, rx) = mpsc::channel(WATCH_BUFFER);
    let (actor, (sub, snapshot)) = ask_session_actor(
        ctx,
        &p.session_id,
        |reply| SessionMsg::Watch {
            lines: tx.clone(),
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    drop(tx);
    let deadline = p.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut first = json!({"type": "snapshot", "session": snapshot});
    with_warnings(&mut first, warnings);
    let first = line(&first);
    let (read_half, mut write_half) = stream.split();
    let gone = peer_closed(read_half.as_ref());
    tokio::pin!(gone);
    let charge = Charge::open(&ctx.spawn.stats);
    let mut pump = Pump::new(rx, charge.clone(), watch_line_bytes, true);
    let lines = async {
        pump.write(&mut write_half, &first, &mut gone).await?;
        loop {
            let (item, n) = pump.next(&mut gone, deadline, false).await?;
            let (out, last) = match item {
                WatchLine::Event(e) => (line(&json!({"type": "event", "event": e})), false),
                WatchLine::Lifecycle(v) => (
                    line(&json!({"type": "lifecycle", "lifecycle": v.lifecycle, "session": v})),
                    false,
                ),
                WatchLine::End => (line(&json!({"type": "end", "reason": "ended"})), true),
            };
            let written = pump.write(&mut write_half, &out, &mut gone).await;
            pump.done(n);
            written?;
            if last {
                return Ok::<(), Ended>(());
            }
        }
    };
    let end = lines.await;
    drop(pump);
    // A watcher dropped as too slow (its queue is gone already), or by its session (its
    // line queue filled), is told so; a timeout too. Within the write timeout, then closed.
    let notice = match end {
        Err(Ended::Timeout) => Some(json!({"type": "end", "reason": "timeout"})),
        Err(Ended::Evicted | Ended::Source) => Some(json!({"type": "end", "reason": "dropped"})),
        _ => None,
    };
    if let Some(notice) = notice {
        let _ = write_bounded(&mut write_half, &line(&notice)).await;
    }
    charge.close();
    let _ = actor.cast(SessionMsg::Unwatch(sub));
    Ok(())
}

/// Subscribe to the bus; returns the hello and the queue events arrive on.
async fn subscribe(
    ctx: &DaemonContext,
    filter: maxx_protocol::stream::StreamFilter,
    since: Option<u64>,
    charge: Arc<Charge>,
) -> Result<(crate::bus::Hello, mpsc::Receiver<Queued>), ErrorBody> {
    let (tx, rx) = mpsc::channel(subscriber_queue(ctx.bus_capacity));
    let hello = ask(
        &ctx.bus,
        |reply| BusMsg::Subscribe {
            filter,
            since,
            tx,
            charge,
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    Ok((hello, rx))
}

/// Whether a session's run is over; `not_found` if there is no such session.
async fn run_ended(ctx: &DaemonContext, id: &str) -> Result<bool, ErrorBody> {
    let view = ask(
        &ctx.registry,
        |r| RegistryMsg::Get(id.to_string(), r),
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    view.map(|v| v.lifecycle.has_ended())
        .ok_or_else(|| ErrorBody::no_session(id))
}

/// Whether an event ends the run of its session.
fn ends_run(e: &StreamEvent) -> bool {
    // An exit its restart policy will restart does not end the session's run.
    let restart_pending = e
        .payload
        .as_ref()
        .is_some_and(|p| p["restart_pending"] == true);
    e.kind == "lifecycle"
        && matches!(e.name.as_deref(), Some("exited" | "closed" | "archived"))
        && !restart_pending
}

/// `stream.watch`: a hello line `{type: hello, schema, cursor, reset?, dropped_through?}`,
/// then `{type: event, event}` lines, and `{type: end}` when a single-session stream's
/// session ends. A subscriber that falls a whole queue behind gets `{type: reset,
/// reason: slow_consumer, resume_since}` and `{type: end}`.
pub(super) async fn stream_watch(
    p: StreamWatchParams,
    warnings: &[Warning],
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    let single = p.filter.session_id.clone();
    if let Some(id) = &single {
        run_ended(ctx, id).await?;
    }
    let charge = Charge::open(&ctx.spawn.stats);
    let (hello, rx) = subscribe(ctx, p.filter.clone(), p.since, charge.clone()).await?;
    let mut first = json!({"type": "hello", "schema": STREAM_SCHEMA, "cursor": hello.cursor});
    if hello.reset {
        first["reset"] = json!(true);
        first["dropped_through"] = json!(hello.dropped_through);
    }
    with_warnings(&mut first, warnings);
    // Checked after subscribing, so an end cannot slip between the check and the stream:
    // a single-session stream whose session already ended replays, then ends.
    let ended_already = match &single {
        Some(id) => run_ended(ctx, id).await.unwrap_or(true),
        None => false,
    };
    let deadline = p.timeout.map(|t| tokio::time::Instant::now() + t);
    let (read_half, mut write_half) = stream.split();
    let gone = peer_closed(read_half.as_ref());
    tokio::pin!(gone);
    let mut pump = Pump::new(rx, charge.clone(), |q: &Queued| q.1, false);
    // The last cursor the client has (every event through it passed, written or filtered).
    let mut position = hello.replay_after.unwrap_or(hello.cursor);
    let mut replay_after = hello.replay_after;
    let lines = async {
        pump.write(&mut write_half, &line(&first), &mut gone)
            .await?;
        loop {
            if pump.charge.is_evicted() {
                pump.discard();
                return Err(Ended::Evicted);
            }
            // Replay: the next batch from the ring once the previous one is written; live
            // events wait in the subscription's queue meanwhile.
            while let Some(after) = replay_after.filter(|_| pump.queue.is_empty()) {
                position = position.max(after);
                if after >= hello.cursor {
                    replay_after = None;
                    break;
                }
                let batch = ask(
                    &ctx.bus,
                    |reply| BusMsg::Replay {
                        filter: p.filter.clone(),
                        after,
                        through: hello.cursor,
                        reply,
                    },
                    ACTOR_CALL_TIMEOUT,
                )
                .await
                .map_err(|_| Ended::Source)?;
                if batch.gap {
                    // The ring moved past what this reader had reached.
                    pump.charge.evict();
                    return Err(Ended::Evicted);
                }
                for (event, n) in batch.events {
                    if !pump.charge.add(n) {
                        pump.discard();
                        return Err(Ended::Evicted);
                    }
                    pump.push_charged((event, n), n);
                }
                replay_after = Some(batch.last);
            }
            let idle = ended_already && replay_after.is_none();
            let ((event, _), n) = pump.next(&mut gone, deadline, idle).await?;
            let mut bytes = line(&json!({"type": "event", "event": &*event}));
            let last = single.is_some() && ends_run(&event);
            if last {
                bytes.extend(line(&json!({"type": "end"})));
            }
            let written = pump.write(&mut write_half, &bytes, &mut gone).await;
            pump.done(n);
            written?;
            position = position.max(event.cursor);
            if last {
                return Ok::<(), Ended>(());
            }
        }
    };
    let end = lines.await;
    drop(pump);
    let notice = match end {
        Err(Ended::Timeout) => line(&json!({"type": "end", "reason": "timeout"})),
        Err(Ended::Idle) => line(&json!({"type": "end"})),
        // Dropped as too slow: the queue is gone already; tell it where to resume.
        Err(Ended::Evicted | Ended::Source) => {
            let mut bytes = line(&json!({
                "type": "reset", "reason": "slow_consumer", "resume_since": position
            }));
            bytes.extend(line(&json!({"type": "end"})));
            bytes
        }
        _ => Vec::new(),
    };
    if !notice.is_empty() {
        let _ = write_bounded(&mut write_half, &notice).await;
    }
    charge.close();
    let _ = ctx.bus.cast(BusMsg::Unsubscribe(hello.id));
    Ok(())
}

/// `stream.wait`: `--event` (edge-triggered on the bus) or `--group G --all C` (the
/// registry's exact group counters). One response: outcome, and the event or members.
/// `None` when the caller hung up first: its waiter or subscription is dropped at once.
pub(super) async fn stream_wait(
    p: StreamWaitParams,
    ctx: &DaemonContext,
    stream: &UnixStream,
) -> Option<Result<Value, ErrorBody>> {
    let gone = peer_closed(stream);
    tokio::pin!(gone);
    match p.wait_for {
        StreamWaitFor::All {
            condition,
            require_members,
        } => {
            let group = p.filter.group.clone().unwrap_or_default();
            let asked = ask(
                &ctx.registry,
                |reply| RegistryMsg::GroupWait {
                    group: group.clone(),
                    condition,
                    require_members,
                    timeout: p.timeout,
                    reply,
                },
                p.timeout + ACTOR_CALL_TIMEOUT,
            );
            let answer = tokio::select! {
                answer = asked => answer,
                _ = &mut gone => {
                    let _ = ctx.registry.cast(RegistryMsg::PruneWaiters);
                    return None;
                }
            };
            Some(answer.and_then(|answer| answer).map(|answer| {
                let mut v = json!({
                    "outcome": answer.outcome, "group": group,
                    "member_count": answer.members.len(), "members": answer.members,
                });
                if answer.members.is_empty() {
                    // "Every member" of none holds: say so, so an empty or mistyped group is
                    // not mistaken for a group that finished.
                    v["note"] = json!(format!(
                        "group {group:?} has no members; pass require_members to refuse an \
                         empty group"
                    ));
                }
                v
            }))
        }
        StreamWaitFor::Event(name) => {
            let single = p.filter.session_id.clone();
            if let Some(id) = &single {
                if let Err(e) = run_ended(ctx, id).await {
                    return Some(Err(e));
                }
            }
            let charge = Charge::open(&ctx.spawn.stats);
            let (hello, mut rx) = match subscribe(ctx, p.filter, None, charge.clone()).await {
                Ok(subscribed) => subscribed,
                Err(e) => return Some(Err(e)),
            };
            let deadline = tokio::time::Instant::now() + p.timeout;
            let ended = match &single {
                Some(id) => run_ended(ctx, id).await.unwrap_or(true),
                None => false,
            };
            let result = loop {
                if ended && rx.is_empty() {
                    break Some(json!({"outcome": Outcome::Ended}));
                }
                let event = tokio::select! {
                    e = rx.recv() => e,
                    _ = tokio::time::sleep_until(deadline) => break Some(json!({"outcome": Outcome::Timeout})),
                    _ = &mut gone => break None,
                };
                if let Some((_, n)) = &event {
                    charge.sub(*n);
                }
                match event.map(|(e, _)| e) {
                    Some(e) if e.kind == "event" && e.name.as_deref() == Some(name.as_str()) => {
                        break Some(json!({"outcome": Outcome::Matched, "stream_event": &*e}));
                    }
                    Some(e) if single.is_some() && ends_run(&e) => {
                        break Some(json!({"outcome": Outcome::Ended}));
                    }
                    Some(_) => continue,
                    None => {
                        break Some(json!({"outcome": Outcome::Ended, "reason": "slow_consumer"}))
                    }
                }
            };
            charge.close();
            let _ = ctx.bus.cast(BusMsg::Unsubscribe(hello.id));
            result.map(Ok)
        }
    }
}

/// `sessions.attach`: after one JSON answer line, the connection carries raw PTY output to
/// the client and framed input/resize/detach from it (see `maxx_protocol::attach`). Ends on
/// detach, disconnect, the session's end, or a client too slow to take the output.
pub(super) async fn attach(
    session_id: Option<String>,
    size: Option<maxx_protocol::screen::Size>,
    warnings: &[Warning],
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    use maxx_protocol::attach::*;
    let id = match session_id {
        Some(id) => id,
        None => ask(&ctx.registry, RegistryMsg::Focused, ACTOR_CALL_TIMEOUT)
            .await?
            .ok_or_else(|| {
                ErrorBody::new(ErrorCode::NotFound, "no session is focused")
                    .with_remedy("name one: `maxx attach ID`")
            })?,
    };
    if let Some(size) = size {
        let _ = ask_session(ctx, &id, |r| resize(&id, size, r), ACTOR_CALL_TIMEOUT).await?;
    }
    let (tx, rx) = mpsc::channel::<Vec<u8>>(256);
    let (actor, attached) = ask_session_actor(
        ctx,
        &id,
        |reply| SessionMsg::Attach {
            output: tx.clone(),
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    drop(tx);
    let (sub, view, repaint, repaint_charge) = attached?;
    let (mut read_half, mut write_half) = stream.split();
    let mut first = Response::ok(json!({ "session": view }));
    first.warnings = warnings.to_vec();
    let mut first = first.to_line();
    first.extend(repaint);
    // Output is pulled off the session's channel while a write is blocked and charged to
    // the stream budget: a client over its share is detached at once, its queue dropped.
    let charge = Charge::open(&ctx.spawn.stats);
    let mut pump = Pump::new(rx, charge.clone(), |c: &Vec<u8>| c.len() + 64, true);
    let outbound = async {
        let never = std::future::pending::<()>();
        tokio::pin!(never);
        pump.write(&mut write_half, &first, &mut never).await?;
        // Written: the repaint is not held for the attachment's life, nor charged.
        drop(first);
        drop(repaint_charge);
        loop {
            let (chunk, n) = pump.next(&mut never, None, false).await?;
            let written = pump.write(&mut write_half, &chunk, &mut never).await;
            pump.done(n);
            written?;
        }
        #[allow(unreachable_code)]
        Ok::<(), Ended>(())
    };
    let inbound = async {
        let mut header = [0u8; 5];
        loop {
            if read_half.read_exact(&mut header).await.is_err() {
                return;
            }
            let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
            if len > FRAME_MAX {
                return;
            }
            let mut payload = vec![0u8; len];
            if read_half.read_exact(&mut payload).await.is_err() {
                return;
            }
            match header[0] {
                FRAME_INPUT => {
                    let _ = actor.cast(SessionMsg::AttachInput(payload));
                }
                FRAME_RESIZE if len == 4 => {
                    use maxx_protocol::limits::{MAX_DIMENSION, MIN_COLS};
                    let size = maxx_protocol::screen::Size {
                        cols: u16::from_be_bytes([payload[0], payload[1]])
                            .clamp(MIN_COLS, MAX_DIMENSION),
                        rows: u16::from_be_bytes([payload[2], payload[3]]).clamp(1, MAX_DIMENSION),
                    };
                    let _ = ask(&actor, |r| resize(&id, size, r), ACTOR_CALL_TIMEOUT).await;
                }
                FRAME_DETACH => return,
                _ => return,
            }
        }
    };
    tokio::select! {
        _ = outbound => {}
        _ = inbound => {}
    }
    drop(pump);
    charge.close();
    let _ = actor.cast(SessionMsg::Detach(sub));
    Ok(())
}

/// An attached terminal's new size, as a `sessions.resize` request.
fn resize(session_id: &str, size: maxx_protocol::screen::Size, reply: Reply) -> SessionMsg {
    SessionMsg::Request {
        call: Call::Screen(ScreenCall::Resize {
            session_id: session_id.to_string(),
            size,
        }),
        caller: DEFAULT_SOURCE.to_string(),
        reply,
    }
}
