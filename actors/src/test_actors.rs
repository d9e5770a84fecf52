//! Actors for unit tests (compiled into tests only).

use ractor::{Actor, ActorProcessingErr, ActorRef};

/// Stands in for any actor a test does not exercise: takes every message, does nothing.
pub struct Sink<M>(std::marker::PhantomData<fn() -> M>);

impl<M: ractor::Message> Actor for Sink<M> {
    type Msg = M;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<M>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// A running [`Sink`].
pub async fn sink<M: ractor::Message>() -> ActorRef<M> {
    Actor::spawn(None, Sink(std::marker::PhantomData), ())
        .await
        .unwrap()
        .0
}
