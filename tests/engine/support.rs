//! Harness for the engine tests: a fresh store per test on the test's backend, short leases and
//! polls so that every test takes seconds, waiting on the store's own state, the
//! `engine_worker` child process, and the handler flavor (`both_flavors!`: each behaviour test
//! runs with plain handlers and with async ones).

use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, HandlerResult, JobContext, Registration, Registry, WorkerGroup};
use backwave::{Job, JobId, RetryPolicy, Store};

use crate::backend::TestDb;

pub const ACTOR: &str = "tester";

/// How a test's handlers are registered: `Registry::handle`, or `Registry::handle_async` with
/// the same body inside the future (run on the engine's own runtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Sync,
    Async,
}

thread_local! {
    static FLAVOR: Cell<Flavor> = const { Cell::new(Flavor::Sync) };
}

pub fn flavor() -> Flavor {
    FLAVOR.with(Cell::get)
}

/// Puts this thread's test on a flavor until dropped (as `backend::use_backend`).
#[must_use]
pub struct FlavorGuard(Flavor);

pub fn use_flavor(f: Flavor) -> FlavorGuard {
    FlavorGuard(FLAVOR.with(|c| c.replace(f)))
}

impl Drop for FlavorGuard {
    fn drop(&mut self) {
        FLAVOR.with(|c| c.set(self.0));
    }
}

/// Register `handler` in the test's flavor. Async: the future yields to the runtime once (so
/// that the job really is a task that is suspended and resumed) and then runs the body.
pub fn handle<'r, T>(
    registry: &'r mut Registry,
    wire_name: &str,
    handler: impl Fn(T, &JobContext) -> HandlerResult + Send + Sync + 'static,
) -> Registration<'r>
where
    T: serde::de::DeserializeOwned + Send + 'static,
{
    match flavor() {
        Flavor::Sync => registry.handle::<T>(wire_name, handler),
        Flavor::Async => {
            let handler = std::sync::Arc::new(handler);
            registry.handle_async::<T, _, _>(wire_name, move |payload, ctx| {
                let handler = std::sync::Arc::clone(&handler);
                async move {
                    tokio::task::yield_now().await;
                    handler(payload, &ctx)
                }
            })
        }
    }
}

/// `both_flavors! { fn name() { body } … }`: `name::sync_handler::{sqlite,postgres}` and
/// `name::async_handler::{sqlite,postgres}`, the body run with [`flavor`] set (and child
/// workers started in it).
macro_rules! both_flavors {
    ($($(#[$attr:meta])* fn $name:ident() $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            crate::backend::both_backends! {
                $(#[$attr])*
                fn sync_handler() {
                    let _flavor = $crate::engine::support::use_flavor($crate::engine::support::Flavor::Sync);
                    $body
                }

                $(#[$attr])*
                fn async_handler() {
                    let _flavor = $crate::engine::support::use_flavor($crate::engine::support::Flavor::Async);
                    $body
                }
            }
        }
    )*};
}
pub(crate) use both_flavors;

/// Fields drop in order: the store's connections close before its schema is dropped.
pub struct TestStore {
    pub store: Store,
    /// Where the store lives: `Engine::new(&t.db, …)`, and `t.db.arg()` for a child's `--db`.
    pub db: TestDb,
    _dir: tempfile::TempDir,
}

/// A new store on the test's backend whose `tester` is admin (so requeue, cancel and settings
/// are allowed).
pub fn test_store() -> TestStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = TestDb::new(dir.path());
    let store = Store::create(&db).expect("create store");
    store.bootstrap_admin(ACTOR).expect("bootstrap admin");
    TestStore { store, db, _dir: dir }
}

/// A group tuned for tests: fast polls, a short lease, retries 10 ms apart.
pub fn group(name: &str, policy: DispatchPolicy, max_attempts: u32) -> WorkerGroup {
    WorkerGroup {
        name: name.into(),
        policy,
        poll_interval: Duration::from_millis(20),
        retry_policy: RetryPolicy::new(max_attempts, |_| Duration::from_millis(10)).unwrap(),
        concurrency: 1,
        lease: Duration::from_millis(600),
        ..WorkerGroup::default()
    }
}

/// Poll `f` until it gives a value; fail the test with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn job(store: &Store, id: JobId) -> Job {
    store.job(id).expect("read job").expect("job exists")
}

/// Wait until the job is in a terminal state and return it.
pub fn wait_terminal(store: &Store, id: JobId) -> Job {
    wait_for(&format!("job {id} to finish"), Duration::from_secs(15), || {
        let j = job(store, id);
        j.state.is_terminal().then_some(j)
    })
}

/// The queue of every claim, in commit order.
pub fn claim_order(store: &Store) -> Vec<String> {
    store
        .raw_query(
            "SELECT j.queue FROM transitions t JOIN jobs j ON j.id = t.job_id
             WHERE t.to_state = 'running' ORDER BY t.seq",
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|r| r[0].as_str().to_string())
        .collect()
}

/// The `engine_worker` example, built for this run.
pub fn worker_binary() -> PathBuf {
    crate::programs::example("engine_worker")
}

/// A worker child process, SIGKILLed when dropped.
pub struct ChildWorker {
    pub child: Child,
    pub worker_id: String,
    /// Every line of the child's stdout except its ready line (those printed before it come
    /// first), a line at a time, read on a thread of its own so that a wait for a line can end.
    lines: std::sync::mpsc::Receiver<String>,
}

impl ChildWorker {
    pub fn spawn(args: &[&str]) -> ChildWorker {
        let mut child = Command::new(worker_binary())
            .args(args)
            .env("BW_WORKER_ASYNC", if flavor() == Flavor::Async { "1" } else { "0" })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn engine_worker");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        // A handler may start (and say so) before the child says it is ready: those lines are
        // kept for `next_line`.
        let (tx, lines) = std::sync::mpsc::channel();
        let worker_id = loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).expect("read the child's stdout") == 0 {
                let _ = child.kill();
                panic!("the child ended before it was ready: {:?}", child.wait());
            }
            match line.trim().strip_prefix("ready ") {
                Some(id) => break id.to_string(),
                None => tx.send(line.trim().to_string()).expect("the receiver is here"),
            }
        };
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if tx.send(line.trim().to_string()).is_err() {
                    return;
                }
            }
        });
        ChildWorker { child, worker_id, lines }
    }

    /// The next line the child prints, waiting up to a minute (a loaded machine has taken over
    /// 30 s to schedule a child).
    pub fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => line,
            Err(e) => panic!("no line from the child within a minute ({e}); its status: {:?}", self.child.try_wait()),
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0, "kill({sig}) failed");
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for ChildWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
