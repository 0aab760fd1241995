//! Faults only a database server has. The server ends a worker's connections mid-drain
//! (`pg_terminate_backend`, as a restart, a failover or a network cut would): the worker
//! reconnects on its next call and carries on; every job still ends Succeeded exactly once, the
//! counts stay exact, and the store errors it went through are in its stats. And roles, each
//! with exactly the statements of docs/postgres.md ("Roles on PostgreSQL") and tried by raw SQL
//! as that role: a worker drains and sweeps and can do nothing more; a scheduler fires schedules
//! but pauses none; no role writes a row under another name; a role without
//! `view-failure-detail` reads everything but the detail, and `bw` refuses it that part alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::store::{ClaimRequest, Completion, Outcome, PauseKind, SettingKey};
use backwave::{DetailStatus, Error, FailureDetail, JobId, JobState, NewJob, Permission, RetryPolicy, Schedule, Store};

use super::backend::{use_backend, Backend, TestDb};

const JOBS: usize = 600;

#[test]
fn a_worker_whose_connections_are_cut_mid_drain_reconnects_and_every_job_succeeds_once() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.enqueue_many(&(0..JOBS).map(|i| NewJob::new("work", "q", format!("{i}"))).collect::<Vec<_>>()).unwrap();
    // The engine's own connections carry a name of their own, so that only they are cut (the
    // test server is shared with other tests).
    let name = format!("cut_{}", std::process::id());
    let target = format!("{}&application_name={name}", db.arg());
    let mut registry = Registry::new();
    registry
        .handle::<u32>("work", |_, _| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        })
        .queue("q");
    let mut engine = Engine::new(target.as_str(), registry);
    engine.add_worker_group(WorkerGroup {
        name: "cut".into(),
        policy: DispatchPolicy::strict(["q"]),
        poll_interval: Duration::from_millis(20),
        retry_policy: RetryPolicy::new(5, Duration::ZERO).unwrap(),
        concurrency: 4,
        ..WorkerGroup::default()
    });
    let running = engine.start().unwrap();

    let mut killer = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let started = Instant::now();
    let mut cut = 0;
    // Cut again only once a job has finished since the last cut: on a loaded machine a
    // reconnect can take longer than any fixed period, and cutting on a timer alone could then
    // starve the engine of every connection it makes (a test of the load, not of the engine).
    let mut done_at_last_cut = None;
    loop {
        let done = store.counts().unwrap().total(JobState::Succeeded);
        if done >= JOBS as u64 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the drain stalled at {done} of {JOBS}");
        if done_at_last_cut.is_none_or(|at| done > at) {
            let n = killer
                .query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", &[&name])
                .unwrap()
                .len();
            if n > 0 {
                cut += n;
                done_at_last_cut = Some(done);
            }
        }
        std::thread::sleep(Duration::from_millis(60));
    }
    let stats = running.stats();
    running.shutdown(Duration::from_secs(5));
    assert!(cut > 0, "no connection was cut: the test proved nothing");
    assert!(stats.iter().map(|s| s.errors).sum::<u64>() > 0, "the engine saw no store error: {stats:?}");

    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    let counts = store.counts().unwrap();
    assert_eq!(counts.total(JobState::Succeeded), JOBS as u64, "{counts:?}");
    let page = store.list_jobs(&backwave::store::JobFilter::state(JobState::Succeeded), JOBS, 0).unwrap();
    for job in &page.jobs {
        let outcomes = store.history(job.id).unwrap().into_iter().filter(|t| t.to == JobState::Succeeded).count();
        assert_eq!(outcomes, 1, "job {} succeeded {outcomes} times", job.id);
    }
    eprintln!("connection loss: {cut} connections cut; {stats:?}");
}

/// The role statements of docs/postgres.md (the block of "Roles on PostgreSQL" that starts
/// `-- BackWave roles`), run as written but for two names: the group roles get a prefix of this
/// test's own (the test server is shared, and roles are the whole cluster's) and the schema is
/// the test's.
/// Everything made is dropped afterwards, with its grants.
struct Roles {
    admin: String,
    prefix: String,
    made: Vec<String>,
}

const GROUPS: [&str; 6] = ["read", "operate", "admin", "worker", "scheduler", "app"];

impl Roles {
    fn new(db: &TestDb) -> Roles {
        static N: AtomicUsize = AtomicUsize::new(0);
        let prefix = format!("bw{}_{}_", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let page = include_str!("../../docs/postgres.md");
        let start =
            page.find("```sql\n-- BackWave roles\n").expect("docs/postgres.md has the roles block") + "```sql\n".len();
        let mut sql = page[start..][..page[start..].find("```").unwrap()].to_string();
        for group in GROUPS {
            sql = sql.replace(&format!("backwave_{group}"), &format!("{prefix}{group}"));
        }
        sql = sql.replace("SCHEMA backwave ", &format!("SCHEMA {} ", db.schema().unwrap()));
        assert!(!sql.contains("backwave_read") && sql.contains("GRANT"), "{sql}");
        let roles = Roles {
            admin: db.arg().to_string(),
            prefix: prefix.clone(),
            made: GROUPS.map(|g| format!("{prefix}{g}")).to_vec(),
        };
        connect(&roles.admin).batch_execute(&sql).unwrap();
        roles
    }

    /// A login role that is a member of the docs page's group `group`; its name and its URL.
    fn login(&mut self, name: &str, group: &str) -> (String, String) {
        let login = format!("{}login_{name}", self.prefix);
        connect(&self.admin)
            .batch_execute(&format!("CREATE ROLE {login} LOGIN IN ROLE {}{group}", self.prefix))
            .unwrap();
        self.made.insert(0, login.clone());
        let url = self.admin.replacen("user=postgres", &format!("user={login}"), 1);
        (login, url)
    }
}

impl Drop for Roles {
    fn drop(&mut self) {
        if let Ok(mut c) = backwave::postgres::Client::connect(&self.admin, backwave::postgres::NoTls) {
            for role in &self.made {
                let _ = c.batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE IF EXISTS {role}"));
            }
        }
    }
}

fn connect(url: &str) -> backwave::postgres::Client {
    backwave::postgres::Client::connect(url, backwave::postgres::NoTls).unwrap()
}

/// `sql` as the connected role must fail for want of a privilege or a permission (SQLSTATE
/// 42501), whichever of the server's walls stops it.
fn assert_denied(c: &mut backwave::postgres::Client, what: &str, sql: &str) {
    match c.batch_execute(sql) {
        Ok(()) => panic!("the role could {what}: {sql}"),
        Err(e) => {
            let code = e.code().map(|c| c.code().to_string());
            assert_eq!(code.as_deref(), Some("42501"), "{what}: {sql}: {e:?}");
        }
    }
}

/// The one text a statement returns.
fn one(c: &mut backwave::postgres::Client, sql: &str) -> String {
    c.query_one(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e:?}")).get(0)
}

/// A job that failed its one attempt with failure detail (`panic`, "the secret"), as the owner.
fn dead_with_detail(store: &Store) -> JobId {
    let id = store.enqueue(&NewJob::new("work", "dead", "1")).unwrap();
    let queues = ["dead".to_string()];
    let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
    let job = store
        .claim(&ClaimRequest {
            worker_id: "w1",
            group: "g",
            queues: &queues,
            limit: 1,
            lease: Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap()
        .remove(0);
    let detail = FailureDetail { kind: "panic".into(), message: "the secret".into(), ..Default::default() };
    store
        .complete(&Completion {
            job_id: id,
            worker_id: "w1".into(),
            attempt: job.attempt,
            outcome: Outcome::Failed { message: "boom".into(), detail: Some(detail), retry_in: None },
        })
        .unwrap();
    assert_eq!(store.job(id).unwrap().unwrap().state, JobState::DeadLettered);
    id
}

#[test]
fn a_worker_role_with_the_readmes_grants_drains_and_sweeps_and_can_do_nothing_more() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin("alice").unwrap();
    store.set_setting("alice", SettingKey::Retention, "1ms").unwrap();
    store.enqueue_many(&(0..50).map(|i| NewJob::new("work", "q", format!("{i}"))).collect::<Vec<_>>()).unwrap();
    // A limit in force that never binds: every claim reads it, counts under it and charges its
    // rate window, with the worker's grants.
    let spec = backwave::store::LimitSpec {
        concurrency: Some(1000),
        rate: Some(backwave::store::Rate::parse("100000/s").unwrap()),
    };
    store.set_limit("alice", backwave::store::PauseKind::WireName, "work", &spec, None, true).unwrap();

    let mut roles = Roles::new(&db);
    let (_, worker) = roles.login("worker", "worker");

    let mut registry = Registry::new();
    registry.handle::<u32>("work", |_, _| Ok(())).queue("q");
    let mut engine = Engine::new(worker.as_str(), registry);
    engine.sweep_interval(Duration::from_millis(50));
    engine.add_worker_group(WorkerGroup {
        name: "restricted".into(),
        policy: DispatchPolicy::strict(["q"]),
        poll_interval: Duration::from_millis(20),
        ..WorkerGroup::default()
    });
    let running = engine.start().unwrap();
    let started = Instant::now();
    // Drained, then swept away by the retention sweep (1 ms), all under the worker's role.
    while store.counts().unwrap().total(JobState::Succeeded) > 0 || store.count_jobs(&Default::default()).unwrap() > 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "stalled: {:?}", running.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = running.stats();
    running.shutdown(Duration::from_secs(5));
    assert_eq!(stats.iter().map(|s| s.succeeded).sum::<u64>(), 50, "{stats:?}");
    assert_eq!(stats.iter().map(|s| s.errors).sum::<u64>(), 0, "the worker role lacked a grant: {stats:?}");
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());

    // What only an operator, an admin or the owner does, tried by SQL as the worker.
    store.set_setting("alice", SettingKey::Retention, "14d").unwrap();
    let dead = dead_with_detail(&store);
    let waiting = store.enqueue(&NewJob::new("work", "later", "1")).unwrap();
    let cancelled = store.enqueue(&NewJob::new("work", "later", "2")).unwrap();
    store.cancel("alice", &[cancelled]).unwrap();
    let before: Vec<_> =
        [dead, waiting, cancelled].iter().map(|id| (store.job(*id).unwrap(), store.history(*id).unwrap())).collect();
    let mut c = connect(&worker);
    for (what, sql) in [
        (
            "rewrite an operator's log entry",
            "UPDATE transitions SET actor = 'mallory' WHERE actor = 'alice'".to_string(),
        ),
        ("delete a log entry", format!("DELETE FROM transitions WHERE job_id = '{cancelled}'")),
        (
            "log an entry under an operator's name",
            format!(
                "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor)
                 VALUES ('{waiting}', 0, 'scheduled', 'cancelled', 0, 'alice')"
            ),
        ),
        (
            "requeue",
            format!(
                "UPDATE jobs SET state = 'scheduled', finished_at = NULL, terminal_cause = NULL,
                 cause_fingerprint = NULL WHERE id = '{dead}'"
            ),
        ),
        ("cancel", format!("UPDATE jobs SET state = 'cancelled', finished_at = 1 WHERE id = '{waiting}'")),
        ("run a job now", format!("UPDATE jobs SET due_at = 0 WHERE id = '{waiting}'")),
        ("edit a payload", format!("UPDATE jobs SET payload = 'x' WHERE id = '{waiting}'")),
        ("ask a job to stop", format!("UPDATE jobs SET cancel_requested_by = 'alice' WHERE id = '{waiting}'")),
        ("delete an unfinished job", format!("DELETE FROM jobs WHERE id = '{waiting}'")),
        (
            "enqueue",
            "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
             VALUES (gen_random_uuid(), 'w', 'q', 0, 0, 0)"
                .to_string(),
        ),
        ("write the audit trail", "INSERT INTO audit (at, actor, action) VALUES (0, 'alice', 'pause')".to_string()),
        (
            "pause a queue",
            "INSERT INTO pauses (kind, name, paused_by, paused_at) VALUES ('queue', 'q', 'alice', 0)".to_string(),
        ),
        (
            "grant itself a permission",
            "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES (session_user, 'admin', 'alice', 0)"
                .to_string(),
        ),
        ("change a setting", "UPDATE settings SET value = '1ms'".to_string()),
        ("read the grants", "SELECT * FROM grants".to_string()),
        ("read failure detail", "SELECT failure_detail FROM transitions".to_string()),
        ("reveal failure detail", format!("SELECT * FROM bw_reveal_failure_detail('{dead}', 0, 'alice')")),
    ] {
        assert_denied(&mut c, what, &sql);
    }
    let after: Vec<_> =
        [dead, waiting, cancelled].iter().map(|id| (store.job(*id).unwrap(), store.history(*id).unwrap())).collect();
    assert_eq!(after, before, "nothing changed");
    assert!(store.audit_entries(0, 100).unwrap().iter().all(|a| a.action != "reveal-failure-detail"));

    // A worker ends a job an operator asked to stop under the operator's name (the one stamped
    // on the request), and under no other.
    let as_worker = Store::open(worker.as_str()).unwrap();
    let stop = store.enqueue(&NewJob::new("work", "stop", "1")).unwrap();
    let queues = ["stop".to_string()];
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let claim = ClaimRequest {
        worker_id: "w9",
        group: "g",
        queues: &queues,
        limit: 1,
        lease: Duration::from_secs(600),
        policy: &policy,
        handler_policies: &[],
    };
    let job = as_worker.claim(&claim).unwrap().remove(0);
    store.cancel("alice", &[stop]).unwrap();
    assert_denied(
        &mut c,
        "end it under another name",
        &format!(
            "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor)
             VALUES ('{stop}', 0, 'running', 'cancelled', 1, 'mallory')"
        ),
    );
    as_worker
        .complete(&Completion {
            job_id: stop,
            worker_id: "w9".into(),
            attempt: job.attempt,
            outcome: Outcome::Cancelled,
        })
        .unwrap();
    let last = store.history(stop).unwrap().pop().unwrap();
    assert_eq!((last.to, last.actor.as_deref()), (JobState::Cancelled, Some("alice")));
}

#[test]
fn no_role_can_write_a_log_entry_audit_row_pause_or_grant_under_another_name() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin("alice").unwrap();
    let mut roles = Roles::new(&db);
    let (op, op_url) = roles.login("op", "operate");
    let (adm, adm_url) = roles.login("adm", "admin");
    let (_, ungranted_url) = roles.login("ungranted", "operate");
    store.grant("alice", &op, Permission::Operate).unwrap();
    store.grant("alice", &adm, Permission::Admin).unwrap();
    let dead = dead_with_detail(&store);
    let running = store.enqueue(&NewJob::new("work", "run", "1")).unwrap();
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let queues = ["run".to_string()];
    let claim = ClaimRequest {
        worker_id: "w2",
        group: "g",
        queues: &queues,
        limit: 1,
        lease: Duration::from_secs(600),
        policy: &policy,
        handler_policies: &[],
    };
    assert_eq!(store.claim(&claim).unwrap().len(), 1);

    // Raw SQL as an operator, each row claiming to be alice's: the server writes the operator.
    let mut c = connect(&op_url);
    assert_eq!(one(&mut c, "INSERT INTO audit (at, actor, action) VALUES (0, 'alice', 'pause') RETURNING actor"), op);
    assert_eq!(
        one(
            &mut c,
            &format!(
                "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor, reason)
                 VALUES ('{dead}', 0, 'dead-lettered', 'dead-lettered', 1, 'alice', 'note') RETURNING actor"
            )
        ),
        op
    );
    assert_eq!(
        one(
            &mut c,
            "INSERT INTO pauses (kind, name, paused_by, paused_at) VALUES ('queue', 'q', 'alice', 0) RETURNING paused_by"
        ),
        op
    );
    assert_eq!(one(&mut c, "UPDATE pauses SET paused_by = 'alice' RETURNING paused_by"), op);
    assert_eq!(
        one(
            &mut c,
            &format!(
                "UPDATE jobs SET cancel_requested_by = 'alice' WHERE id = '{running}' RETURNING cancel_requested_by"
            )
        ),
        op
    );
    for (what, sql) in [
        ("rewrite the audit trail", "UPDATE audit SET actor = 'alice'"),
        ("delete from the audit trail", "DELETE FROM audit"),
        ("rewrite the log", "UPDATE transitions SET actor = 'alice'"),
        ("delete from the log", "DELETE FROM transitions"),
        (
            "grant",
            "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES ('mallory', 'operate', 'alice', 0)",
        ),
        ("audit as an admin would", "INSERT INTO audit (at, actor, action) VALUES (0, 'alice', 'grant')"),
        ("read failure detail", "SELECT failure_detail FROM transitions"),
    ] {
        assert_denied(&mut c, what, sql);
    }
    // An admin's grant is its own, whoever it names as granter.
    assert_eq!(
        one(
            &mut connect(&adm_url),
            "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES ('mallory', 'operate', 'alice', 0)
             RETURNING granted_by"
        ),
        adm
    );
    // The operate group's table privileges without BackWave's `operate` grant: the server refuses.
    let mut u = connect(&ungranted_url);
    assert_denied(
        &mut u,
        "audit without operate",
        "INSERT INTO audit (at, actor, action) VALUES (0, 'alice', 'pause')",
    );
    assert_denied(
        &mut u,
        "requeue without operate",
        &format!("UPDATE jobs SET state = 'scheduled', finished_at = NULL WHERE id = '{dead}'"),
    );

    // Through the library the actor argument is informational: the log and the audit trail name
    // the operator's role, and its permission is looked up under that name.
    let as_op = Store::open(op_url.as_str()).unwrap();
    as_op.requeue("alice", &[dead]).unwrap();
    let last = store.history(dead).unwrap().pop().unwrap();
    assert_eq!((last.to, last.actor.as_deref()), (JobState::Scheduled, Some(op.as_str())));
    as_op.pause("alice", PauseKind::WireName, "work", None, true).unwrap();
    let audit = store.audit_entries(0, 100).unwrap();
    assert_eq!(audit.last().map(|a| (a.actor.as_str(), a.action.as_str())), Some((op.as_str(), "pause")));
    match Store::open(ungranted_url.as_str()).unwrap().requeue("alice", &[dead]) {
        Err(Error::PermissionDenied { actor, permission }) => {
            assert_eq!(
                (actor.as_str(), permission),
                (format!("{}login_ungranted", roles.prefix).as_str(), Permission::Operate)
            )
        }
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
    // `bw` as the operator, with the page's grants: its operator commands work, and the log
    // and the audit trail name the role, not the OS user running `bw`.
    let bw = |args: &[&str]| {
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_bw")).env("BW_DB", &op_url).args(args).output().unwrap();
        assert!(out.status.success(), "bw {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let seen = store.audit_entries(0, 1000).unwrap().len();
    bw(&["enqueue", "work", "--queue", "later"]);
    bw(&["pause", "queue", "later"]);
    bw(&["resume", "queue", "later"]);
    bw(&["cancel", "--state", "scheduled", "--yes"]);
    let page = store.list_jobs(&backwave::store::JobFilter::state(JobState::Cancelled), 100, 0).unwrap();
    assert!(!page.jobs.is_empty());
    for job in &page.jobs {
        let last = store.history(job.id).unwrap().pop().unwrap();
        assert_eq!(last.actor.as_deref(), Some(op.as_str()), "{last:?}");
    }
    std::thread::sleep(Duration::from_millis(5));
    bw(&["purge", "--older-than", "1ms", "--yes"]);
    assert_eq!(store.counts().unwrap().total(JobState::Cancelled), 0, "the operator's purge deleted them");
    let audit = store.audit_entries(0, 1000).unwrap();
    let actions: Vec<_> = audit[seen..].iter().map(|a| (a.action.as_str(), a.actor.as_str())).collect();
    for action in ["pause", "resume", "purge"] {
        assert!(actions.contains(&(action, op.as_str())), "{action} by {op} is not audited: {actions:?}");
    }
    assert!(audit[seen..].iter().all(|a| a.actor == op), "{actions:?}");

    // The owner alone is taken at its word: it could rewrite any row anyway (docs/postgres.md).
    assert_eq!(audit.iter().find(|a| a.action == "grant").map(|a| a.actor.as_str()), Some("alice"));
}

#[test]
fn a_role_without_view_failure_detail_reads_everything_but_the_detail_and_bw_refuses_that_alone() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin("alice").unwrap();
    let dead = dead_with_detail(&store);
    store.enqueue(&NewJob::new("work", "q", "1")).unwrap();
    let mut roles = Roles::new(&db);
    let (reader, reader_url) = roles.login("reader", "read");

    let mut c = connect(&reader_url);
    for (what, sql) in [
        ("read failure detail", "SELECT failure_detail FROM transitions".to_string()),
        ("read failure detail with the rest", "SELECT * FROM transitions".to_string()),
        ("reveal failure detail", format!("SELECT * FROM bw_reveal_failure_detail('{dead}', 0, 'alice')")),
    ] {
        assert_denied(&mut c, what, &sql);
    }
    assert_eq!(one(&mut c, "SELECT kind FROM bw_failure_detail_shapes"), "panic");

    let bw = |args: &[&str]| {
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_bw")).env("BW_DB", &reader_url).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let id = dead.to_string();
    let (code, stdout, stderr) = bw(&["jobs", "show", &id]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("hidden: panic"), "{stdout}");
    let (code, stdout, stderr) = bw(&["jobs", "show", &id, "--detail"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.contains("boom") && !stdout.contains("the secret"), "{stdout}");
    assert!(stderr.contains(&format!("{reader} lacks the 'view-failure-detail' permission")), "{stderr}");
    let (code, stdout, stderr) = bw(&["log", "tail", "--detail"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stdout.contains("Dead-Lettered") && stdout.contains("detail hidden: panic") && !stdout.contains("the secret"),
        "{stdout}"
    );
    assert!(stderr.contains("lacks the 'view-failure-detail' permission"), "{stderr}");
    // What `bw top` calls: the log reads, the reveal is refused under the role's name.
    let as_reader = Store::open(reader_url.as_str()).unwrap();
    let entry = as_reader.history(dead).unwrap().pop().unwrap();
    assert!(
        matches!(&entry.detail, DetailStatus::Hidden { kind, bytes } if kind == "panic" && *bytes > 0),
        "{entry:?}"
    );
    assert!(
        matches!(as_reader.reveal_failure_detail("alice", dead), Err(Error::PermissionDenied { actor, .. }) if actor == reader)
    );
    assert!(store.audit_entries(0, 100).unwrap().iter().all(|a| a.action != "reveal-failure-detail"));

    // Granted the permission, the same role (opened read-only: it may not update jobs) reveals,
    // and the server audits it under its name.
    store.grant("alice", &reader, Permission::ViewFailureDetail).unwrap();
    let (code, stdout, stderr) = bw(&["jobs", "show", &id, "--detail"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("the secret"), "{stdout}");
    let audit = store.audit_entries(0, 100).unwrap();
    let reveal = audit.iter().find(|a| a.action == "reveal-failure-detail").expect("the reveal is audited");
    assert_eq!((reveal.actor.as_str(), reveal.job_id), (reader.as_str(), Some(dead)));

    // And it may not act: refused before the plan, under the role's own name (not the OS user
    // running `bw`), as a permission it lacks; nothing changes.
    let (code, _, stderr) = bw(&["cancel", "--state", "scheduled", "--yes"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&format!("{reader} lacks the 'operate' permission")), "{stderr}");
    // By id too (found at 3 a.m.: `requeue ID` and `cancel ID` said the store was read-only,
    // exit 3 "unavailable", where `pause` and the bulk forms said the permission is missing).
    for args in [&["requeue", &id][..], &["cancel", &id], &["run-now", &id]] {
        let (code, _, stderr) = bw(args);
        assert_eq!(code, Some(1), "bw {}: {stderr}", args.join(" "));
        assert!(
            stderr.contains(&format!("{reader} lacks the 'operate' permission")),
            "bw {}: {stderr}",
            args.join(" ")
        );
    }
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 1, "nothing changed");
}

#[test]
fn a_server_error_quotes_the_servers_message_and_sqlstate_not_db_error() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    Store::create(&db).unwrap();
    // Another session holds every table of the store, so `bw stats` waits on a lock until the
    // server ends its statement (a statement timeout) or its connection (an administrator).
    let mut holder = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("LOCK TABLE jobs, job_counts, job_count_deltas, transitions, workers IN ACCESS EXCLUSIVE MODE")
        .unwrap();

    let name = format!("quote_{}", std::process::id());
    let url = |options: &str| format!("{}%20{options}&application_name={name}", db.arg());
    let timed_out = std::process::Command::new(env!("CARGO_BIN_EXE_bw"))
        .env("BW_DB", url("-cstatement_timeout%3D200"))
        .arg("stats")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&timed_out.stderr);
    assert_eq!(timed_out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("canceling statement due to statement timeout (SQLSTATE 57014)"),
        "the server's message and SQLSTATE are not quoted: {stderr}"
    );
    assert!(!stderr.contains("db error"), "{stderr}");

    let waiting = std::process::Command::new(env!("CARGO_BIN_EXE_bw"))
        .env("BW_DB", url("-clock_timeout%3D60s"))
        .args(["--busy-timeout", "60s", "stats"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut killer = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let started = Instant::now();
    while killer
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
            &[&name],
        )
        .unwrap()
        .is_empty()
    {
        assert!(started.elapsed() < Duration::from_secs(30), "bw stats never waited on the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = waiting.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // The server sends its reason (FATAL 57P01) and closes the socket. When the client reads
    // both at once, as it does on a loaded machine (12 runs in 15 beside three busy loops), the
    // `postgres` crate's blocking client returns the connection's end and drops the reason;
    // `bw` then says who may have ended it, never the driver's bare "connection closed".
    assert!(
        stderr.contains("terminating connection due to administrator command (SQLSTATE 57P01)")
            || stderr.contains(
                "the server closed the connection (an administrator, a restart or a failover: the server's log says which)"
            ),
        "the server's message and SQLSTATE are not quoted: {stderr}"
    );
    assert!(!stderr.contains("db error") && !stderr.contains("error: connection closed"), "{stderr}");
    tx.rollback().unwrap();
}

#[test]
fn a_scheduler_role_declares_and_fires_schedules_and_only_an_operator_pauses_one_under_its_own_name() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin("alice").unwrap();
    let mut roles = Roles::new(&db);
    let (ticker, scheduler) = roles.login("ticker", "scheduler");
    let (bob, operator) = roles.login("bob", "operate");
    store.grant("alice", &bob, Permission::Operate).unwrap();
    let clock = backwave::Clock::manual(1_796_040_000_000);
    let every_second = Schedule::new("heartbeat", "* * * * * *", "beat", "ticks", "{}");

    // The scheduler declares (audited under its own role, with no BackWave permission) and
    // fires the due ticks: the tick jobs are inserted under its role.
    let as_scheduler = Store::open(scheduler.as_str()).unwrap().with_clock(clock.clone());
    as_scheduler.declare_schedules("claimed-name", std::slice::from_ref(&every_second)).unwrap();
    clock.advance(Duration::from_millis(3_500));
    let (fired, _) = as_scheduler.fire_due_schedules(&["heartbeat".to_string()]).unwrap();
    assert_eq!(fired.len(), 1, "{fired:?}");
    let job = fired[0].fired.last().unwrap().1;
    assert_eq!(store.job(job).unwrap().unwrap().wire_name, "beat");
    let declared = store.audit_entries(0, 100).unwrap().into_iter().find(|a| a.action == "schedule-declare").unwrap();
    assert_eq!(declared.actor, ticker, "the server stamps the declaring role");

    // The scheduler may not pause a schedule, by bw or by SQL, nor enqueue from an operator's
    // audit action; a plain worker may not fire ticks (no INSERT on jobs).
    assert!(as_scheduler.pause_schedule("alice", "heartbeat", None).is_err());
    assert!(!store.schedule("heartbeat").unwrap().paused);
    let mut c = connect(&scheduler);
    assert_denied(&mut c, "pause a schedule", "UPDATE schedules SET paused_by = 'alice', paused_at = 0");
    assert_denied(
        &mut c,
        "audit a pause",
        "INSERT INTO audit (at, actor, action) VALUES (0, 'alice', 'schedule-pause')",
    );
    let (_, worker) = roles.login("plain", "worker");
    let as_worker = Store::open(worker.as_str()).unwrap().with_clock(clock.clone());
    clock.advance(Duration::from_secs(2));
    assert!(as_worker.fire_due_schedules(&["heartbeat".to_string()]).is_err(), "a worker role fires no tick");

    // An operator pauses it under its own authenticated name, whatever name it claims.
    let as_operator = Store::open(operator.as_str()).unwrap();
    as_operator.pause_schedule("mallory", "heartbeat", None).unwrap();
    let row = store.schedule("heartbeat").unwrap().row;
    assert_eq!(row.paused_by.as_deref(), Some(bob.as_str()));
    as_operator.resume_schedule("mallory", "heartbeat").unwrap();
    assert_eq!(store.schedule("heartbeat").unwrap().row.paused_by, None);
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
}

#[test]
fn an_application_role_enqueues_by_the_sql_function_in_its_transaction_and_can_do_nothing_more() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    let mut roles = Roles::new(&db);
    let (app, app_url) = roles.login("shop", "app");
    let (_, reader_url) = roles.login("reader", "read");
    let mut c = connect(&app_url);

    // In the application's transaction: a rollback leaves nothing, a commit is the job.
    let mut tx = c.transaction().unwrap();
    let rolled_back: uuid::Uuid = tx.query_one("SELECT job_id FROM backwave_enqueue('ship', '1')", &[]).unwrap().get(0);
    tx.rollback().unwrap();
    let mut tx = c.transaction().unwrap();
    let row =
        tx.query_one("SELECT job_id, created FROM backwave_enqueue('ship', '2', unique_key => 'o-2')", &[]).unwrap();
    let id = JobId(row.get(0));
    assert!(row.get::<_, bool>(1));
    let again =
        tx.query_one("SELECT job_id, created FROM backwave_enqueue('ship', '2', unique_key => 'o-2')", &[]).unwrap();
    assert_eq!((JobId(again.get(0)), again.get::<_, bool>(1)), (id, false));
    tx.commit().unwrap();
    assert!(store.job(JobId(rolled_back)).unwrap().is_none());
    assert_eq!(store.job(id).unwrap().unwrap().state, JobState::Scheduled);
    assert_eq!(store.history(id).unwrap().len(), 1);
    // Through the library too, on the application's own connection.
    let mut tx = c.transaction().unwrap();
    let lib = backwave::enqueue_in_postgres(&mut tx, &NewJob::new("ship", "default", "3")).unwrap();
    tx.commit().unwrap();
    assert!(store.job(lib.id()).unwrap().is_some());

    // Nothing more: no table of the store, and no one else's function.
    assert_denied(
        &mut c,
        "insert a job directly",
        "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
         VALUES (gen_random_uuid(), 'x', 'q', 0, 0, 0)",
    );
    assert_denied(&mut c, "read the jobs", "SELECT count(*) FROM jobs");
    assert_denied(&mut c, "read the settings", "SELECT count(*) FROM settings");
    // And a role without the grant cannot enqueue by the function.
    assert_denied(
        &mut connect(&reader_url),
        "enqueue without the grant",
        "SELECT * FROM backwave_enqueue('ship', '4')",
    );
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 2, "{app}");
}

#[test]
fn a_worker_role_dead_lettering_a_parent_cancels_its_dependents_but_cannot_cancel_a_waiting_job_itself() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin("alice").unwrap();
    let mut wf = backwave::Workflow::new("export");
    wf.on_failure(backwave::workflow::OnFailure::Cancel);
    let dump = wf.add(NewJob::new("dump", "first", "1"));
    let pack = wf.add_after(NewJob::new("pack", "q", "1"), &[dump]).unwrap();
    let mut other = backwave::Workflow::new("other");
    let a = other.add(NewJob::new("a", "later", "1"));
    let b = other.add_after(NewJob::new("b", "later", "1"), &[a]).unwrap();
    let e = store.enqueue_workflow(&wf).unwrap();
    let o = store.enqueue_workflow(&other).unwrap();

    let mut roles = Roles::new(&db);
    let (_, worker) = roles.login("worker", "worker");
    let mut c = connect(&worker);
    assert_denied(
        &mut c,
        "cancel a waiting job",
        &format!("UPDATE jobs SET state = 'cancelled', finished_at = 1 WHERE id = '{}'", o.job(b)),
    );
    // Calling the cascade on a parent that has not failed does nothing.
    let n: i64 = c.query_one("SELECT bw_cancel_dependents(ARRAY[$1::uuid], 0)", &[&o.job(a).0]).unwrap().get(0);
    assert_eq!(n, 0);
    assert_eq!(store.job(o.job(b)).unwrap().unwrap().state, JobState::Waiting);

    let as_worker = Store::open(worker.as_str()).unwrap();
    let queues = ["first".to_string()];
    let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
    let req = ClaimRequest {
        worker_id: "w1",
        group: "g",
        queues: &queues,
        limit: 1,
        lease: Duration::from_secs(60),
        policy: &policy,
        handler_policies: &[],
    };
    let job = as_worker.claim(&req).unwrap().remove(0);
    let failed = Outcome::Failed { message: "boom".into(), detail: None, retry_in: None };
    as_worker
        .complete(&Completion { job_id: job.id, worker_id: "w1".into(), attempt: job.attempt, outcome: failed })
        .unwrap();
    assert_eq!(store.job(e.job(dump)).unwrap().unwrap().state, JobState::DeadLettered);
    assert_eq!(
        store.job(e.job(pack)).unwrap().unwrap().state,
        JobState::Cancelled,
        "the worker's dead-letter cascaded"
    );
    let h = store.history(e.job(pack)).unwrap();
    assert_eq!(h.last().map(|t| (t.from, t.to)), Some((Some(JobState::Waiting), JobState::Cancelled)));
}
