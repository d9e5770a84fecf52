//! Requests that hold their connection: waits (`sessions.wait`, `stream.wait`), which end
//! when their caller hangs up, and streams (`sessions.watch`, `stream.watch`,
//! `sessions.attach`), which write until the end or a slow or gone reader.

use super::*;

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

/// `sessions.watch`: a snapshot line, an event line per new audit entry, a lifecycle line
/// per transition, and an end line (`ended`, `timeout`, or `dropped` for a watcher that
/// fell more than `WATCH_BUFFER` lines behind). A caller that disconnects ends it, and
/// its subscription is removed at once.
pub(super) async fn watch(
    p: WatchParams,
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    let (tx, mut rx) = mpsc::channel(WATCH_BUFFER);
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
    let mut out = line(&json!({"type": "snapshot", "session": snapshot}));
    let (read_half, mut write_half) = stream.split();
    let gone = peer_closed(read_half.as_ref());
    tokio::pin!(gone);
    loop {
        if write_bounded(&mut write_half, &out).await.is_err() {
            break;
        }
        let next = tokio::select! {
            item = rx.recv() => item,
            _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() => {
                let _ = write_bounded(&mut write_half, &line(&json!({"type": "end", "reason": "timeout"}))).await;
                break;
            }
            _ = &mut gone => break,
        };
        out = match next {
            Some(WatchLine::Event(e)) => line(&json!({"type": "event", "event": e})),
            Some(WatchLine::Lifecycle(v)) => line(&json!({
                "type": "lifecycle", "lifecycle": v.lifecycle, "session": v
            })),
            Some(WatchLine::End) => {
                let _ = write_bounded(
                    &mut write_half,
                    &line(&json!({"type": "end", "reason": "ended"})),
                )
                .await;
                break;
            }
            None => {
                let _ = write_bounded(
                    &mut write_half,
                    &line(&json!({"type": "end", "reason": "dropped"})),
                )
                .await;
                break;
            }
        };
    }
    let _ = actor.cast(SessionMsg::Unwatch(sub));
    Ok(())
}

/// Subscribe to the bus; returns the hello and the queue events arrive on.
async fn subscribe(
    ctx: &DaemonContext,
    filter: maxx_protocol::stream::StreamFilter,
    since: Option<u64>,
) -> Result<(crate::bus::Hello, mpsc::Receiver<Delivered>), ErrorBody> {
    let (tx, rx) = mpsc::channel(subscriber_queue(ctx.bus_capacity));
    let hello = ask(
        &ctx.bus,
        |reply| BusMsg::Subscribe {
            filter,
            since,
            tx,
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
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    let single = p.filter.session_id.clone();
    if let Some(id) = &single {
        run_ended(ctx, id).await?;
    }
    let (hello, mut rx) = subscribe(ctx, p.filter, p.since).await?;
    let mut first = json!({"type": "hello", "schema": STREAM_SCHEMA, "cursor": hello.cursor});
    if hello.reset {
        first["reset"] = json!(true);
        first["dropped_through"] = json!(hello.dropped_through);
    }
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
    let mut out = line(&first);
    let mut last_cursor = hello.cursor;
    loop {
        if write_bounded(&mut write_half, &out).await.is_err() {
            break;
        }
        if ended_already && rx.is_empty() {
            let _ = write_bounded(&mut write_half, &line(&json!({"type": "end"}))).await;
            break;
        }
        let next = tokio::select! {
            item = rx.recv() => item,
            _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() => {
                let _ = write_bounded(&mut write_half, &line(&json!({"type": "end", "reason": "timeout"}))).await;
                break;
            }
            _ = &mut gone => break,
        };
        match next {
            Some(event) => {
                last_cursor = last_cursor.max(event.cursor);
                let mut bytes = line(&json!({"type": "event", "event": &*event}));
                if single.is_some() && ends_run(&event) {
                    bytes.extend(line(&json!({"type": "end"})));
                    let _ = write_bounded(&mut write_half, &bytes).await;
                    break;
                }
                out = bytes;
            }
            None => {
                // The bus dropped us: our queue was full.
                let mut bytes = line(&json!({
                    "type": "reset", "reason": "slow_consumer", "resume_since": last_cursor
                }));
                bytes.extend(line(&json!({"type": "end"})));
                let _ = write_bounded(&mut write_half, &bytes).await;
                break;
            }
        }
    }
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
        StreamWaitFor::All(condition) => {
            let group = p.filter.group.clone().unwrap_or_default();
            let asked = ask(
                &ctx.registry,
                |reply| RegistryMsg::GroupWait {
                    group: group.clone(),
                    condition,
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
            Some(answer.map(|answer| {
                json!({"outcome": answer.outcome, "group": group, "members": answer.members})
            }))
        }
        StreamWaitFor::Event(name) => {
            let single = p.filter.session_id.clone();
            if let Some(id) = &single {
                if let Err(e) = run_ended(ctx, id).await {
                    return Some(Err(e));
                }
            }
            let (hello, mut rx) = match subscribe(ctx, p.filter, None).await {
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
                match event {
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
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
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
    let (sub, view, repaint) = attached?;
    let (mut read_half, mut write_half) = stream.split();
    let mut first = Response::ok(json!({ "session": view })).to_line();
    first.extend(repaint);
    let outbound = async {
        if write_bounded(&mut write_half, &first).await.is_err() {
            return;
        }
        while let Some(chunk) = rx.recv().await {
            if write_bounded(&mut write_half, &chunk).await.is_err() {
                return;
            }
        }
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
