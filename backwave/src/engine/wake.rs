//! How an idle group learns that work may be due, so that a job starts the moment it is
//! enqueued rather than at the next poll: the engine's [`Doorbell`] tells each group's dispatcher
//! to claim now. Two things ring it: this process's own enqueues into the store (the store's
//! process-wide bell, no round trip), and one listener thread per engine on a connection of its
//! own (`store/listen.rs`: PostgreSQL notifications, SQLite's `data_version`). Nothing here
//! decides anything: a ring only brings a claim forward, and the poll stays the safety net.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use super::outage::Watch;
use super::shared::{Counters, Done};
use crate::store::{Ear, Heard, Listener, Store, StoreTarget};

/// How long the listener waits for news before it looks at its stop flag.
const LISTEN_SLICE: Duration = Duration::from_millis(100);
/// After its connection broke, how long the listener waits before it connects again, first and
/// at most (doubling in between).
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// One group's line: its queues, its dispatcher's channel, and whether a ring waits there.
struct Line {
    queues: Vec<String>,
    tx: Sender<Done>,
    rung: Arc<Rung>,
}

/// What a group's dispatcher has been told since it last looked (see [`Doorbell::ring`]).
#[derive(Default)]
pub(super) struct Rung {
    /// Set by a ring, cleared by the dispatcher when it takes [`Done::Work`]: at most one ring
    /// waits in a channel, however many enqueues there are.
    pub pending: AtomicBool,
    /// Set by a ring that knows jobs of the group's queues were added (an enqueue here, a
    /// PostgreSQL notification), as opposed to one that only knows the store changed (SQLite's
    /// `data_version`, moved by any commit, a heartbeat as much as an enqueue): for the latter
    /// the dispatcher first looks whether anything is due, which takes no write lock, before a
    /// claim that would.
    pub sure: AtomicBool,
}

/// Every group of one engine, to be told that jobs of some queue (or any) may be due.
#[derive(Default)]
pub(super) struct Doorbell {
    lines: Vec<Line>,
}

impl Doorbell {
    /// Add a group; returns what its dispatcher reads and clears when it takes a ring.
    pub(super) fn add(&mut self, queues: Vec<String>, tx: Sender<Done>) -> Arc<Rung> {
        let rung = Arc::new(Rung::default());
        self.lines.push(Line { queues, tx, rung: Arc::clone(&rung) });
        rung
    }

    /// Tell the groups serving `queue` (every group for `None`) that jobs may be due now;
    /// `sure` when jobs were added (see [`Rung::sure`]).
    pub(super) fn ring(&self, queue: Option<&str>, sure: bool) {
        for line in &self.lines {
            if queue.is_some_and(|q| !line.queues.iter().any(|l| l == q)) {
                continue;
            }
            if sure {
                line.rung.sure.store(true, Ordering::SeqCst);
            }
            if !line.rung.pending.swap(true, Ordering::SeqCst) {
                let _ = line.tx.send(Done::Work);
            }
        }
    }

    /// Hear this process's enqueues into `store` for as long as the returned ear lives.
    pub(super) fn ear(self: &Arc<Self>, store: &Store) -> Arc<Ear> {
        let bell = Arc::clone(self);
        let ear: Arc<Ear> = Arc::new(move |queues: &[&str]| {
            for q in queues {
                bell.ring(Some(q), true);
            }
        });
        crate::store::add_ear(store.bell_key(), &ear);
        ear
    }
}

/// The listener thread: rings `bell` with what a listener on `target` hears until `stop` is set. A
/// broken connection is opened again (backing off up to [`RECONNECT_MAX`]), and then every group
/// claims at once: what was sent while it was down is lost.
pub(super) fn listen(
    target: StoreTarget,
    bell: Arc<Doorbell>,
    stop: Arc<AtomicBool>,
    stats: Arc<Counters>,
    mut watch: Watch,
) {
    let mut listener = None;
    let mut backoff = RECONNECT_FIRST;
    while !stop.load(Ordering::SeqCst) {
        let began = std::time::Instant::now();
        let l = match &mut listener {
            Some(l) => l,
            None => match Listener::open(target.clone()) {
                Ok(l) => {
                    watch.worked();
                    backoff = RECONNECT_FIRST;
                    bell.ring(None, false);
                    listener.insert(l)
                }
                Err(e) => {
                    stats.listener_error(&e);
                    watch.failed(&e.to_string(), began);
                    sleep_unless_stopped(&stop, backoff);
                    backoff = (backoff * 2).min(RECONNECT_MAX);
                    continue;
                }
            },
        };
        match l.wait(LISTEN_SLICE) {
            Ok(heard) => {
                for h in heard {
                    match h {
                        Heard::Queue(q) => bell.ring(Some(&q), true),
                        Heard::Anything => bell.ring(None, false),
                    }
                }
            }
            Err(e) => {
                stats.listener_error(&e);
                watch.failed(&e.to_string(), began);
                listener = None;
                sleep_unless_stopped(&stop, backoff);
            }
        }
    }
}

fn sleep_unless_stopped(stop: &AtomicBool, d: Duration) {
    let until = std::time::Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(LISTEN_SLICE));
    }
}
