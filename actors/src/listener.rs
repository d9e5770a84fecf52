//! `Listener`: owns the bound `control.sock` and an accept loop. Each accepted stream
//! gets one `ConnectionActor`, linked here. At most
//! [`MAX_CONNECTIONS`] are served at once; beyond
//! that, new clients wait in the kernel's accept queue. Long-lived requests (watches,
//! attaches, waits, runs) may hold at most
//! [`MAX_LONG_LIVED_CONNECTIONS`](maxx_protocol::limits::MAX_LONG_LIVED_CONNECTIONS) of those
//! slots (a second cap, taken by the connection once it knows the method; over it: `busy`),
//! so the rest always serve short requests.

use crate::connection::{ConnectionActor, ConnectionArgs, DaemonContext};
use maxx_protocol::limits::MAX_CONNECTIONS;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// The actor.
pub struct Listener;

/// Arguments: the bound socket and the routing context.
pub struct ListenerArgs {
    /// Bound `control.sock`.
    pub listener: UnixListener,
    /// Shared with every connection.
    pub ctx: Arc<DaemonContext>,
}

/// Messages besides supervision events.
pub enum ListenerMsg {
    /// Stop accepting (`maxx daemon upgrade`): the socket is closed, so a new client finds no
    /// daemon and (with a keeper running) waits for the next one; connections already
    /// accepted are served to their end.
    Close(ractor::RpcReplyPort<()>),
}

/// State: the accept loop, aborted when the listener stops.
pub struct ListenerState {
    accept: JoinHandle<()>,
}

impl Drop for ListenerState {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Actor for Listener {
    type Msg = ListenerMsg;
    type State = ListenerState;
    type Arguments = ListenerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ListenerMsg>,
        args: ListenerArgs,
    ) -> Result<ListenerState, ActorProcessingErr> {
        let cell = myself.get_cell();
        let accept = tokio::spawn(async move {
            let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
            loop {
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    return;
                };
                let stream = match args.listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let conn = ConnectionArgs {
                    stream,
                    permit,
                    ctx: args.ctx.clone(),
                };
                if let Err(e) = Actor::spawn_linked(None, ConnectionActor, conn, cell.clone()).await
                {
                    tracing::error!(error = %e, "could not start a connection actor");
                }
            }
        });
        Ok(ListenerState { accept })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ListenerMsg>,
        msg: ListenerMsg,
        state: &mut ListenerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ListenerMsg::Close(reply) => {
                state.accept.abort();
                // The accept task owns the socket: it is closed once the task is gone.
                let _ = (&mut state.accept).await;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<ListenerMsg>,
        event: SupervisionEvent,
        _state: &mut ListenerState,
    ) -> Result<(), ActorProcessingErr> {
        // A connection that ends, however it ends, concerns only its own client.
        if let SupervisionEvent::ActorFailed(_, reason) = event {
            tracing::warn!(%reason, "connection actor failed");
        }
        Ok(())
    }
}
