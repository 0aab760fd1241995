//! Harness for the dashboard tests: a small store built through the library with a pinned
//! clock, an `App` driven by actions whose store requests are served synchronously with the
//! same `serve` the background thread runs, and screens rendered on ratatui's TestBackend. The
//! store is on the test's backend (`crate::backend`); screens name it `./backwave.db` on both.

use std::time::Duration;

use backwave::store::{ClaimRequest, Completion, Outcome};
use backwave::{
    Clock, FailureDetail, JobId, Millis, NewJob, Permission, QuarantineReason, RetryPolicy, Store, WorkerInfo,
};
use bw::tui::{serve, Action, App, Config, Response};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use crate::backend::{load_sqlite_fixture, TestDb};

/// 2026-11-30T12:00:00Z, the fixtures' reference time.
pub const T0: Millis = 1_796_040_000_000;
pub const ACTOR: &str = "alice";

/// Fields drop in order: the store's connections close before its schema is dropped.
pub struct Fixture {
    pub store: Store,
    pub clock: Clock,
    /// Every job id in creation order, for stable names in snapshots.
    pub ids: Vec<JobId>,
    /// Where the store is: `f.db.arg()` for a `bw` child's `--db`.
    pub db: TestDb,
    pub _dir: tempfile::TempDir,
}

impl Fixture {
    pub fn empty() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::named(dir.path(), "top.db");
        let clock = Clock::manual(T0 - 3_000_000);
        let store = Store::create(&db).unwrap().with_clock(clock.clone());
        store.bootstrap_admin("root").unwrap();
        Fixture { store, clock, ids: Vec::new(), db, _dir: dir }
    }

    /// The hostile fixture (fixtures/hostile.sql), with a pinned clock at its reference time.
    pub fn hostile() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::named(dir.path(), "hostile.db");
        drop(Store::create(&db).unwrap());
        load_sqlite_fixture(&db, include_str!("../../fixtures/hostile.sql"));
        let clock = Clock::manual(T0);
        let store = Store::open(&db).unwrap().with_clock(clock.clone());
        // As another program would grant it: the fixture has no admin to grant through.
        store
            .raw_execute(
                &format!(
                    "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES ('{ACTOR}', 'admin', 'test', 0)"
                ),
                &[],
            )
            .unwrap();
        Fixture { store, clock, ids: Vec::new(), db, _dir: dir }
    }

    /// Every state, a dead-letter group of three, two quarantines without a handler, a live
    /// worker, failure detail captured; `alice` may operate and view failure detail.
    pub fn with_jobs() -> Fixture {
        let mut f = Fixture::empty();
        f.store.grant("root", ACTOR, Permission::Operate).unwrap();
        f.store.grant("root", ACTOR, Permission::ViewFailureDetail).unwrap();
        f.store
            .register_worker(&WorkerInfo {
                id: "w0000001-0000-7000-8000-000000000001".replace('w', "b"),
                group: "default".into(),
                host: "host-a".into(),
                pid: 4411,
                wire_names: vec!["charge-card".into(), "send-email".into(), "resize-image".into()],
                queues: vec!["high".into(), "critical".into(), "bulk".into(), "low".into()],
                started_at: T0 - 3_000_000,
                last_heartbeat_at: T0 + 10_000_000,
                stale_after_ms: 30_000,
            })
            .unwrap();
        let three = RetryPolicy::new(3, Duration::from_secs(2)).unwrap();
        let one = RetryPolicy::new(1, Duration::from_secs(2)).unwrap();
        for i in 0..3 {
            let id = f.enqueue(NewJob::new("charge-card", "high", format!("{{\"amount\":{}}}", 100 + i)));
            for attempt in 1..=3 {
                f.claim_one("high", &three);
                f.fail(id, attempt, &format!("gateway timeout (attempt {attempt})"));
                f.tick(2_500);
            }
        }
        let mail = f.enqueue(NewJob::new("send-email", "critical", "{\"to\":\"bob\"}"));
        f.claim_one("critical", &one);
        f.fail(mail, 1, "smtp 550 mailbox 'bob' unavailable");
        for _ in 0..2 {
            let id = f.enqueue(NewJob::new("invoice.render", "low", "{}"));
            f.claim_one("low", &three);
            f.complete(
                id,
                1,
                Outcome::Quarantined {
                    reason: QuarantineReason::NoHandler,
                    cause: "no handler registered for wire name 'invoice.render'".into(),
                },
            );
        }
        for _ in 0..4 {
            let id = f.enqueue(NewJob::new("noop", "low", "{}"));
            f.claim_one("low", &three);
            f.complete(id, 1, Outcome::Succeeded);
            f.tick(60_000);
        }
        let retry = f.enqueue(NewJob::new("resize-image", "bulk", "{\"w\":640}"));
        f.claim_one("bulk", &three);
        f.fail(retry, 1, "image too large");
        f.enqueue(NewJob::new("resize-image", "bulk", "{\"w\":320}"));
        f.enqueue(NewJob::new("charge-card", "high", "{\"amount\":7}").due_at(T0 + 600_000));
        f.claim_one("bulk", &three);
        f.clock.set(T0);
        f
    }

    pub fn tick(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    pub fn enqueue(&mut self, job: NewJob) -> JobId {
        let id = self.store.enqueue(&job).unwrap();
        self.ids.push(id);
        self.tick(100);
        id
    }

    /// A job that fails its one attempt now, in a queue of its own: a new failure arriving at
    /// the top of the Dead-Lettered list while the dashboard is open.
    pub fn dead_letter_now(&mut self, wire_name: &str) -> JobId {
        let id = self.enqueue(NewJob::new(wire_name, "arrivals", "{}"));
        self.claim_one("arrivals", &RetryPolicy::new(1, Duration::from_secs(2)).unwrap());
        self.fail(id, 1, "arrived while watching");
        id
    }

    /// The one job enqueued in `queue` (`id`) claimed and failed on its one attempt.
    pub fn dead_letter_enqueued(&mut self, id: JobId, queue: &str) {
        self.claim_one(queue, &RetryPolicy::new(1, Duration::from_secs(2)).unwrap());
        self.fail(id, 1, "gateway timeout");
    }

    /// A job of `wire_name` quarantined now because no handler is registered for it.
    pub fn quarantine_no_handler_now(&mut self, wire_name: &str) -> JobId {
        let id = self.enqueue(NewJob::new(wire_name, "arrivals", "{}"));
        self.claim_one("arrivals", &RetryPolicy::new(3, Duration::from_secs(2)).unwrap());
        let cause = format!("no handler registered for wire name '{wire_name}'");
        self.complete(id, 1, Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause });
        id
    }

    /// A `charge-card` job (a wire name with a live worker) whose payload did not decode.
    pub fn quarantine_undecodable_now(&mut self) -> JobId {
        let id = self.enqueue(NewJob::new("charge-card", "arrivals", "{\"amount\":\"ten\"}"));
        self.claim_one("arrivals", &RetryPolicy::new(3, Duration::from_secs(2)).unwrap());
        let cause = "payload does not decode: invalid type: string \"ten\", expected u64".to_string();
        self.complete(id, 1, Outcome::Quarantined { reason: QuarantineReason::UndecodablePayload, cause });
        id
    }

    fn claim_one(&self, queue: &str, policy: &RetryPolicy) {
        let queues = vec![queue.to_string()];
        let req = ClaimRequest {
            worker_id: "demo-host/4242/strict-priority#0001",
            group: "default",
            queues: &queues,
            limit: 1,
            lease: Duration::from_secs(60),
            policy,
            handler_policies: &[],
        };
        assert_eq!(self.store.claim(&req).unwrap().len(), 1, "a job to claim in {queue}");
        self.tick(100);
    }

    fn fail(&self, id: JobId, attempt: u32, message: &str) {
        let detail = FailureDetail {
            kind: "GatewayError".into(),
            message: message.into(),
            chain: vec!["connection reset by peer".into()],
            backtrace: Some("at charge_card (src/jobs.rs:42)\nat run (src/worker.rs:7)".into()),
        };
        self.complete(id, attempt, Outcome::Failed { message: message.into(), detail: Some(detail), retry_in: None });
    }

    fn complete(&self, id: JobId, attempt: u32, outcome: Outcome) {
        self.store
            .complete(&Completion {
                job_id: id,
                worker_id: "demo-host/4242/strict-priority#0001".into(),
                attempt,
                outcome,
            })
            .unwrap();
        self.tick(100);
    }

    pub fn app(&self, w: u16, h: u16) -> App {
        let mut app = App::new(
            Config {
                store: "./backwave.db".into(),
                actor: ACTOR.into(),
                interval: Duration::from_secs(1),
                read_only: false,
                color: true,
                ask_before_quit: false,
            },
            self.clock.now(),
        );
        app.update(Action::Resize(w, h));
        app
    }

    /// Run every request the app has queued, as the background thread would, and hand the
    /// answers back. Query times are zeroed so that screens are stable.
    pub fn serve(&self, app: &mut App) -> usize {
        let mut served = 0;
        for _ in 0..10 {
            let requests = app.take_requests();
            if requests.is_empty() {
                break;
            }
            for r in requests {
                let mut resp = serve(&self.store, ACTOR, &r);
                if let Response::Snapshot(s) = &mut resp {
                    s.query_time = Duration::ZERO;
                }
                app.update(Action::Store(resp));
                served += 1;
            }
        }
        served
    }

    /// A refresh now: tick the app at the store's time and serve what it asks.
    pub fn refresh(&self, app: &mut App) {
        app.refresh_soon();
        app.update(Action::Tick(self.clock.now()));
        self.serve(app);
    }

    /// Actions in order, each followed by serving what it asked for.
    pub fn press(&self, app: &mut App, actions: impl IntoIterator<Item = Action>) {
        for a in actions {
            app.update(a);
            self.serve(app);
            app.update(Action::Tick(self.clock.now()));
            self.serve(app);
        }
    }

    /// Replace job ids by stable names of the same width: `j0000001` is the first job made.
    pub fn redact(&self, screen: &str) -> String {
        let mut out = screen.to_string();
        for (i, id) in self.ids.iter().enumerate() {
            let full = id.to_string();
            out = out.replace(&full, &format!("00000000-0000-0000-0000-0000j{:07}", i + 1));
            out = out.replace(&id.short(), &format!("j{:07}", i + 1));
        }
        out
    }
}

/// The screen as text, one line per row (trailing spaces trimmed).
pub fn render(app: &App) -> String {
    let mut term = Terminal::new(TestBackend::new(app.width, app.height)).unwrap();
    term.draw(|f| f.render_widget(app, f.area())).unwrap();
    buffer_text(term.backend().buffer())
}

pub fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The rendered buffer itself, for style assertions.
pub fn render_buffer(app: &App) -> ratatui::buffer::Buffer {
    let mut term = Terminal::new(TestBackend::new(app.width, app.height)).unwrap();
    term.draw(|f| f.render_widget(app, f.area())).unwrap();
    term.backend().buffer().clone()
}
