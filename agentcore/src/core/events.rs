//! Following an owner's events as they happen (`GET /api/events`): a stream reads what the
//! database holds after the client's last event, then waits for the owner's bell
//! (`crate::event_hub`) and reads again.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use super::{Core, Principal, numbering};
use crate::domain::event::{Event, EventFilter, MOST_REPLAYED};
use crate::domain::quota::Quota;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};
use crate::event_hub::{EventHub, Refused, Subscription};
use crate::store::{Backend, Signal, Store};

/// Events read from the database at a time.
const BATCH: i64 = 100;
/// Events waiting for a slow client before its stream stops reading.
const BUFFER: usize = 64;

/// An open stream of events; ends when the service stops or the stream is dropped.
#[derive(Debug)]
pub struct EventStream {
    events: mpsc::Receiver<Event>,
}

impl futures_util::Stream for EventStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events.poll_recv(cx)
    }
}

impl Core {
    /// Follows the owner's events that `filter` admits: those after `last_event_id` first
    /// (when the client had one), then each as it happens. A client whose last event is no
    /// longer kept, or more than 1,000 behind, gets one `resync` first. At most
    /// `quotas.streams_per_user` streams of one user are open on this node.
    pub async fn events(
        &self,
        who: &Principal,
        filter: EventFilter,
        last_event_id: Option<i64>,
    ) -> Result<EventStream> {
        let owner = &who.workspace;
        match (&filter.agent, &filter.task) {
            (Some(agent), Some(task)) => drop(self.store().task(owner, agent, task).await?),
            (Some(agent), None) => drop(self.store().agent(owner, agent).await?),
            _ => {}
        }
        // Where the stream starts is read before it subscribes to live events: a live event
        // told before this point is not sent, so none can come after its own step's end.
        // Every event committed so far counts as before the stream (numbered now if it was
        // not yet, as a PostgreSQL node does soon after each commit). A numbering that fails
        // (a full disk) leaves them to be sent as new: no reason to refuse the stream.
        match self.store().number_events(Some(owner)).await {
            Ok(owners) => numbering::announce(self, &owners),
            Err(error) => tracing::debug!(%error, "cannot number events before a stream"),
        }
        let bounds = self.store().event_bounds(owner).await?;
        let limit = self.quotas().streams_per_user;
        let subscription = match self.inner.events.subscribe(owner, limit) {
            Ok(subscription) => subscription,
            Err(Refused::Closed) => {
                return Err(Error::Storage {
                    fault: crate::error::StorageFault::Unavailable,
                    cause: "the server is stopping".into(),
                });
            }
            Err(Refused::Full(_)) => {
                return Err(Error::QuotaExceeded {
                    quota: Quota::StreamsPerUser,
                    limit: u64::from(limit),
                });
            }
        };
        self.start_event_poll();
        let (cursor, resync) = match last_event_id {
            None => (bounds.latest, false),
            Some(last) => {
                let missed_pruned =
                    last < bounds.latest && bounds.oldest.is_none_or(|o| o > last + 1);
                let too_far = bounds.latest - last > MOST_REPLAYED;
                if last > bounds.latest || missed_pruned || too_far {
                    (bounds.latest, true)
                } else {
                    (last.max(0), false)
                }
            }
        };
        let (sender, events) = mpsc::channel(BUFFER);
        if resync {
            let _ = sender.try_send(Event::resync(bounds.latest));
        }
        let follower = Follower {
            store: Arc::clone(&self.inner.store),
            owner: owner.clone(),
            filter,
            cursor,
            subscription,
            sender,
            held: Vec::new(),
            late: Vec::new(),
        };
        tokio::spawn(follower.run());
        Ok(EventStream { events })
    }

    /// The owner's events may have grown (this node wrote some): its streams here look, and on
    /// PostgreSQL the events are numbered soon (`numbering.rs`).
    pub(crate) fn ring_events(&self, owner: &WorkspaceId) {
        self.inner.events.ring(owner);
        self.wakeups().webhooks.notify_one();
        self.number_soon();
    }

    /// A count that moves whenever this node wrote events of `owner`'s (the runtime's and the
    /// facade's writes ring the owner's bell) or heard of another node's: a read of the
    /// owner's cached before it moved may be stale. Owners share 256 such counts, so another
    /// owner's events move it too at times.
    pub fn event_changes(&self, owner: &WorkspaceId) -> u64 {
        self.inner.events.rung(owner)
    }

    /// Tells the owner's streams on this node of a live-only event.
    pub(crate) fn live_event(&self, owner: &WorkspaceId, event: Event) {
        self.inner.events.live(owner, event);
    }

    /// Ends every stream on this node and refuses new ones: the server is stopping.
    pub fn close_event_streams(&self) {
        self.inner.events.close();
        self.inner.events_stop.send_replace(true);
    }

    /// Event streams open on this node.
    pub fn open_event_streams(&self) -> usize {
        self.inner.events.open()
    }

    /// Starts, once per node, what rings the bells of followed owners for events written
    /// elsewhere: on PostgreSQL a listener for `events:<owner>` notifications (any node's
    /// commits) with a slow poll under it, on SQLite a poll of the owners' latest event ids
    /// every 250 ms (other processes on the same file). Both end with
    /// [`Core::close_event_streams`].
    fn start_event_poll(&self) {
        if self.inner.event_poll.set(()).is_err() {
            return;
        }
        let every = match self.backend() {
            Backend::Sqlite => Duration::from_millis(250),
            Backend::Postgres => Duration::from_secs(5),
        };
        let stop = self.inner.events_stop.subscribe();
        let weak = Arc::downgrade(&self.inner.events);
        let _listener = self.listen(
            Arc::new(move |signal| {
                let Some(hub) = weak.upgrade() else { return };
                match signal {
                    Signal::Events(owner) => hub.ring(&owner),
                    // What was published while the listener was away is lost: everyone looks.
                    Signal::Connected => hub.ring_all(),
                    _ => {}
                }
            }),
            stop.clone(),
        );
        let hub = Arc::downgrade(&self.inner.events);
        let store = Arc::downgrade(&self.inner.store);
        tokio::spawn(poll(hub, store, every, stop));
    }
}

/// One stream's reader.
struct Follower {
    store: Arc<dyn Store>,
    owner: WorkspaceId,
    filter: EventFilter,
    /// The last event id read (of any of the owner's events, sent or filtered out).
    cursor: i64,
    subscription: Subscription,
    sender: mpsc::Sender<Event>,
    /// Live events waiting for the stored ones read with them (see [`Follower::run`]).
    held: Vec<Event>,
    /// Live events told while the last read ran: they wait for the next read.
    late: Vec<Event>,
}

impl Follower {
    /// Sends what is stored after the cursor, then waits for the bell or a live event, and
    /// again. Live events are told before what they announce is stored (a step starts before
    /// it is written) and reach the stream on their own channel, so each wake-up merges:
    /// the live events waiting are held, the stored events read, a held `step.started` sent
    /// just before its own step's `step.finished`, and the rest after the stored events (which
    /// committed before them: a step starts after its task's `task.started`). A live event
    /// told while the read ran may follow stored events the read missed: it waits for the
    /// next read, which comes at once.
    async fn run(mut self) {
        loop {
            self.subscription.bell.borrow_and_update();
            match self.catch_up().await {
                Ok(true) => {}
                Ok(false) => return,
                Err(error) => {
                    tracing::debug!(%error, "cannot read events; trying again at the next bell");
                    // Not again at once: the late ones go with the rest.
                    let late = std::mem::take(&mut self.late);
                    self.held.extend(late);
                }
            }
            for event in std::mem::take(&mut self.held) {
                if self.sender.send(event).await.is_err() {
                    return;
                }
            }
            if !self.late.is_empty() {
                continue;
            }
            tokio::select! {
                rung = self.subscription.bell.changed() => {
                    if rung.is_err() {
                        return;
                    }
                }
                live = self.subscription.live.recv() => match live {
                    Ok(event) => self.hold(&event),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                () = self.sender.closed() => return,
            }
        }
    }

    /// Holds the live events waiting on the channel (in `late` when `late`).
    fn hold_live(&mut self, late: bool) {
        loop {
            match self.subscription.live.try_recv() {
                Ok(event) if late => {
                    if self.filter.admits(&event) {
                        self.late.push(Event::clone(&event));
                    }
                }
                Ok(event) => self.hold(&event),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    }

    fn hold(&mut self, event: &Event) {
        if self.filter.admits(event) {
            self.held.push(Event::clone(event));
        }
    }

    /// The held (or late) `step.started` of `finished`'s step, if any.
    fn start_of(&mut self, finished: &Event) -> Option<Event> {
        let step = finished.step.as_ref()?;
        let of_step = |held: &Event| {
            held.task_id == finished.task_id
                && held.started.as_ref().is_some_and(|started| started.seq == step.seq)
        };
        if let Some(index) = self.held.iter().position(of_step) {
            return Some(self.held.remove(index));
        }
        let index = self.late.iter().position(of_step)?;
        Some(self.late.remove(index))
    }

    /// Sends every event after the cursor; false once the client is gone.
    async fn catch_up(&mut self) -> Result<bool> {
        loop {
            // A live event held is sent after what this read returns, which must hold every
            // event committed before it was told (its task's `task.started`). On PostgreSQL
            // such an event may not be numbered yet (`numbering.rs`): with live events held,
            // what has committed is numbered first. Without, the numbering rings again.
            let late = std::mem::take(&mut self.late);
            self.held.extend(late);
            self.hold_live(false);
            if !self.held.is_empty()
                && let Err(error) = self.store.number_events(Some(&self.owner)).await
            {
                // What is numbered is still read and sent.
                tracing::debug!(%error, "cannot number events before a read");
            }
            // Every event up to `latest` has committed, so the read below sees all of them:
            // past the last one it returns, the cursor may skip to `latest`.
            let owner = std::slice::from_ref(&self.owner);
            let latest = self.store.latest_events(owner).await?.first().map_or(0, |(_, seq)| *seq);
            let batch =
                self.store.events_after(&self.owner, self.cursor, &self.filter, BATCH).await?;
            // A step's start is told before the step is stored: any step whose end this read
            // returned had its start on the channel before the read began, so holding what is
            // there now lets the merge below put each start before its end. The rest told
            // since the read began wait for the next read: what was committed before them may
            // have missed this one.
            self.hold_live(true);
            let full = i64::try_from(batch.len()).unwrap_or(i64::MAX) >= BATCH;
            for event in batch {
                if let Some(id) = event.id {
                    self.cursor = self.cursor.max(id);
                }
                if let Some(start) = self.start_of(&event)
                    && self.sender.send(start).await.is_err()
                {
                    return Ok(false);
                }
                if self.sender.send(event).await.is_err() {
                    return Ok(false);
                }
            }
            if !full {
                self.cursor = self.cursor.max(latest);
                return Ok(true);
            }
        }
    }
}

/// Every `every`, reads the latest event id of each followed owner and rings those that moved.
async fn poll(
    hub: Weak<EventHub>,
    store: Weak<dyn Store>,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !*stop.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let (Some(hub), Some(store)) = (hub.upgrade(), store.upgrade()) else { return };
        let owners = hub.followed();
        for chunk in owners.chunks(100) {
            match store.latest_events(chunk).await {
                Ok(latest) => {
                    for (owner, seq) in latest {
                        hub.polled(&owner, seq);
                    }
                }
                Err(error) => tracing::debug!(%error, "cannot poll for events"),
            }
        }
    }
}
