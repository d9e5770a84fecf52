//! `BusActor`: the process-wide event stream. It stamps every event with the next cursor
//! (never reused in a control dir, even across a crash: [`CURSOR_FILE`] holds a reserved
//! high-water mark and a daemon starts above it), keeps the newest `capacity` events for
//! `since` replay, and fans them out to subscribers.
//!
//! The ring keeps each event encoded, in one allocation (~350 B), and decodes it only to
//! replay it: 10,000 live `StreamEvent`s took ~8.6 MiB in ~100,000 small allocations, which
//! a long-running daemon paid for in fragmentation long after the burst that made them.
//!
//! Every subscriber has a bounded queue, accounted in bytes (the event's JSON size) against
//! its share and the daemon's total in the [`StreamBudget`](crate::stats::StreamBudget). The
//! bus never waits on one: a subscriber over its share (or holding the most when the total
//! is spent) is dropped on the spot, its connection throws the queue away at once, and its
//! stream ends with a reset marker telling the client where to resume. One stalled reader
//! can neither grow memory nor slow anyone else.
//!
//! A `since` replay is not queued whole: the subscription returns where it starts and the
//! connection reads the ring in batches ([`BusMsg::Replay`]) of about
//! `STREAM_REPLAY_BATCH_BYTES`, the next once the previous is written. If the ring evicts
//! events the reader had not reached yet, the batch says so and the stream is reset.

use crate::stats::{Charge, Stats};
use maxx_protocol::limits::STREAM_REPLAY_BATCH_BYTES;
use maxx_protocol::stream::{StreamEvent, StreamFilter, STREAM_SCHEMA};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;

/// An event as a session hands it to the bus: everything but the cursor.
pub type Draft = StreamEvent;

/// What a subscriber receives.
pub type Delivered = Arc<StreamEvent>;

/// A queued event and the bytes charged for it (its JSON size), to release once written.
pub type Queued = (Delivered, usize);

/// Events a replay batch examines at most, so one batch holds the bus only briefly.
const REPLAY_BATCH_SCAN: usize = 4096;

/// One batch of a `since` replay.
#[derive(Debug, Default)]
pub struct Batch {
    /// Retained events passing the filter, oldest first; the caller charges them.
    pub events: Vec<Queued>,
    /// The cursor the next batch continues after.
    pub last: u64,
    /// Events between the asked position and the batch were evicted from the ring.
    pub gap: bool,
}

/// The answer to a subscription: where the stream starts.
#[derive(Debug, Clone)]
pub struct Hello {
    /// Subscription id, for `Unsubscribe`.
    pub id: u64,
    /// The newest cursor at subscription time (0 if none yet).
    pub cursor: u64,
    /// Whether `since` could not be honoured exactly (evicted, or from another run).
    pub reset: bool,
    /// With `reset`: every event up to this cursor is gone.
    pub dropped_through: Option<u64>,
    /// Replay events after this cursor through `cursor` (live events follow it); `None`:
    /// nothing to replay.
    pub replay_after: Option<u64>,
}

/// Messages the bus handles.
pub enum BusMsg {
    /// Stamp and fan out an event.
    Publish(Box<Draft>),
    /// Follow events passing `filter` from the next one on; the hello says where a replay
    /// of retained ones after `since` starts.
    Subscribe {
        /// Which events.
        filter: StreamFilter,
        /// Replay from here.
        since: Option<u64>,
        /// Where they go.
        tx: mpsc::Sender<Queued>,
        /// The subscriber's byte account.
        charge: Arc<Charge>,
        /// Answer.
        reply: RpcReplyPort<Hello>,
    },
    /// The next replay batch: retained events passing `filter` after `after`, through
    /// `through`.
    Replay {
        /// Which events.
        filter: StreamFilter,
        /// The last cursor already replayed (or skipped).
        after: u64,
        /// The subscription's hello cursor: live events follow it.
        through: u64,
        /// Answer.
        reply: RpcReplyPort<Batch>,
    },
    /// Stop following.
    Unsubscribe(u64),
    /// The newest cursor.
    Cursor(RpcReplyPort<u64>),
}

/// A retained event: its cursor and its JSON.
struct Retained {
    cursor: u64,
    json: Box<serde_json::value::RawValue>,
}

impl Retained {
    /// The event again (replay only). `None` cannot happen for what `encode` wrote.
    fn decode(&self) -> Option<Delivered> {
        serde_json::from_str(self.json.get()).ok().map(Arc::new)
    }
}

struct Subscriber {
    id: u64,
    filter: StreamFilter,
    tx: mpsc::Sender<Queued>,
    charge: Arc<Charge>,
}

/// The file holding the cursor high-water mark: every cursor ever issued in this control dir
/// is at most the number in it.
pub const CURSOR_FILE: &str = "bus.cursor";
/// Cursors reserved per write of [`CURSOR_FILE`] (one write and fsync per this many events).
const CURSOR_BLOCK: u64 = 65_536;

/// What the bus starts with.
pub struct BusArgs {
    /// Events retained for `since` replay.
    pub capacity: usize,
    /// Live-object counters.
    pub stats: Arc<Stats>,
    /// Where [`CURSOR_FILE`] lives (`None`: cursors start at 1 and nothing is written).
    pub dir: Option<crate::control_dir::ControlDir>,
}

/// Bus state.
pub struct BusState {
    capacity: usize,
    ring: VecDeque<Retained>,
    last_cursor: u64,
    /// Cursors up to this one are reserved on disk; stamping past it writes a new
    /// reservation first, so a daemon that dies never issued a cursor the next one reuses.
    reserved: u64,
    dir: Option<crate::control_dir::ControlDir>,
    subscribers: Vec<Subscriber>,
    next_id: u64,
    stats: Arc<Stats>,
}

impl BusState {
    /// Reserve cursors through `last_cursor + CURSOR_BLOCK` in [`CURSOR_FILE`] (temp file,
    /// fsync, rename). A failed write is logged and retried at the next block: events keep
    /// flowing, but a crash before a write succeeds may let the next daemon reuse cursors.
    fn reserve(&mut self) {
        let next = self.last_cursor + CURSOR_BLOCK;
        if let Some(dir) = &self.dir {
            let written = tokio::task::block_in_place(|| {
                dir.write_private(CURSOR_FILE, format!("{next}\n").as_bytes())
            });
            if let Err(e) = written {
                tracing::error!(error = %e, "cannot reserve bus cursors on disk");
            }
        }
        self.reserved = next;
    }

    /// The high-water mark an earlier daemon left, 0 if none (or unreadable).
    fn high_water(dir: &crate::control_dir::ControlDir) -> u64 {
        match crate::control_dir::read_regular_bounded(&dir.path().join(CURSOR_FILE), 32, false) {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).trim().parse().unwrap_or(0),
            _ => 0,
        }
    }

    /// The next replay batch after `after` through `through`.
    fn replay(&self, filter: &StreamFilter, after: u64, through: u64) -> Batch {
        let mut batch = Batch {
            last: through,
            ..Batch::default()
        };
        let oldest = self.ring.front().map_or(self.last_cursor + 1, |e| e.cursor);
        if after >= through {
            return batch;
        }
        if after + 1 < oldest {
            batch.gap = true;
            return batch;
        }
        let start = self.ring.partition_point(|r| r.cursor <= after);
        let mut bytes = 0;
        for (scanned, r) in self.ring.range(start..).enumerate() {
            if r.cursor > through {
                break;
            }
            if scanned == REPLAY_BATCH_SCAN || bytes >= STREAM_REPLAY_BATCH_BYTES {
                batch.last = r.cursor - 1;
                return batch;
            }
            if let Some(event) = r.decode().filter(|e| filter.matches(e)) {
                let size = r.json.get().len();
                bytes += size;
                batch.events.push((event, size));
            }
        }
        batch
    }

    fn count(&self) {
        self.stats.streams.store(
            self.subscribers.len() as i64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// The actor; its arguments are the ring capacity and the daemon's counters.
pub struct BusActor;

/// Queue length of one subscriber, a backstop behind its byte share: live events only (a
/// replay goes in batches), so the bus's ring plus headroom is plenty.
pub fn subscriber_queue(capacity: usize) -> usize {
    capacity + maxx_protocol::limits::WATCH_BUFFER
}

impl Subscriber {
    /// Queue `event` (`bytes` of JSON); `false` when the subscriber must be dropped.
    fn offer(&self, event: &Delivered, bytes: usize) -> bool {
        if !self.filter.matches(event) {
            return !self.charge.is_evicted() && !self.tx.is_closed();
        }
        if !self.charge.add(bytes) {
            return false;
        }
        match self.tx.try_send((event.clone(), bytes)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.charge.evict();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.charge.sub(bytes);
                false
            }
        }
    }
}

impl Actor for BusActor {
    type Msg = BusMsg;
    type State = BusState;
    type Arguments = BusArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<BusMsg>,
        BusArgs {
            capacity,
            stats,
            dir,
        }: BusArgs,
    ) -> Result<BusState, ActorProcessingErr> {
        // Cursors never go back: start above every one an earlier daemon may have issued.
        let start = dir.as_ref().map_or(0, BusState::high_water);
        let mut state = BusState {
            capacity: capacity.max(1),
            ring: VecDeque::new(),
            last_cursor: start,
            reserved: start,
            dir,
            subscribers: Vec::new(),
            next_id: 0,
            stats,
        };
        state.reserve();
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<BusMsg>,
        msg: BusMsg,
        state: &mut BusState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BusMsg::Publish(draft) => {
                let mut event = *draft;
                if state.last_cursor >= state.reserved {
                    state.reserve();
                }
                state.last_cursor += 1;
                event.cursor = state.last_cursor;
                event.schema = STREAM_SCHEMA;
                let event = Arc::new(event);
                if state.ring.len() == state.capacity {
                    state.ring.pop_front();
                }
                let bytes = match serde_json::value::to_raw_value(&*event) {
                    Ok(json) => {
                        let bytes = json.get().len();
                        state.ring.push_back(Retained {
                            cursor: event.cursor,
                            json,
                        });
                        bytes
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "bus event not retained");
                        1024
                    }
                };
                let before = state.subscribers.len();
                state.subscribers.retain(|s| s.offer(&event, bytes));
                if state.subscribers.len() != before {
                    state.count();
                }
            }
            BusMsg::Subscribe {
                filter,
                since,
                tx,
                charge,
                reply,
            } => {
                state.next_id += 1;
                let id = state.next_id;
                let oldest = state
                    .ring
                    .front()
                    .map_or(state.last_cursor + 1, |e| e.cursor);
                let (from, reset) = match since {
                    None => (state.last_cursor + 1, false),
                    // From another run (or the future): replay everything retained.
                    Some(s) if s > state.last_cursor => (oldest, true),
                    // Older than the window: some events are gone.
                    Some(s) if s + 1 < oldest => (oldest, true),
                    Some(s) => (s + 1, false),
                };
                let hello = Hello {
                    id,
                    cursor: state.last_cursor,
                    reset,
                    dropped_through: reset.then(|| oldest.saturating_sub(1)),
                    replay_after: (from <= state.last_cursor).then(|| from - 1),
                };
                if reply.send(hello).is_ok() {
                    state.subscribers.push(Subscriber {
                        id,
                        filter,
                        tx,
                        charge,
                    });
                    state.count();
                }
            }
            BusMsg::Replay {
                filter,
                after,
                through,
                reply,
            } => {
                let _ = reply.send(state.replay(&filter, after, through));
            }
            BusMsg::Unsubscribe(id) => {
                state.subscribers.retain(|s| s.id != id);
                state.count();
            }
            BusMsg::Cursor(reply) => {
                let _ = reply.send(state.last_cursor);
            }
        }
        Ok(())
    }
}
