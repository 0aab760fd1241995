//! The refusal table (issue 18): every operator action refused for each reason it can be
//! refused for (a permission missing, bad input, a job or name not found, a wrong state), through
//! the real `bw`, on both backends. Each row asserts its kind and exit status, and the whole
//! transcript is one snapshot both backends share, so a backend that decides in another order
//! (as pause with a past expiry once did) or words a refusal differently fails here.
//!
//! The one order, on both backends: what the command line alone shows to be wrong is refused
//! before the store is opened (exit 2); then the actor's permission (exit 1), before any name,
//! value or job is looked at, so that someone who may not act learns nothing else first; then
//! input checked against the store (exit 2; a name nothing has is such input: a typo); then per
//! job or name, not found or in a wrong state (exit 1). A refusal changes nothing: the audit
//! trail is the same afterwards.

use backwave::schedule::Schedule;
use backwave::{Store, WorkerInfo};

use super::backend::both_backends;
use super::harness::*;

/// Why a row is refused, and so its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The actor lacks this permission: exit 1, before anything else is looked at.
    Permission(&'static str),
    /// Bad input: exit 2.
    BadInput,
    /// A queue, wire name, schedule or worker nothing has: most likely a typo, so bad input
    /// (exit 2), named with what exists.
    UnknownName,
    /// No such job (by id), or no limit in force or permission held to take away: exit 1.
    NotFound,
    /// The job or name is in a state the action does not apply to: exit 1.
    WrongState,
}

/// Who runs the row: the test user holding nothing, or holding admin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Stranger,
    Admin,
}

use Kind::*;
use Who::*;

/// A job no store holds.
const MISSING: &str = "a00000ff-0000-7000-8000-0000000000ff";

/// Every operator action, refused for each reason it can be. Jobs of fixtures/hostile.sql:
/// a0000001 Succeeded, a0000003 Dead-Lettered, a0000017 Scheduled.
const TABLE: &[(Who, &[&str], Kind)] = &[
    // requeue
    (Stranger, &["requeue", "a0000003"], Permission("operate")),
    (Stranger, &["requeue", "--state", "dead-lettered", "--yes"], Permission("operate")),
    (Stranger, &["requeue", MISSING], Permission("operate")),
    (Stranger, &["requeue", "a"], Permission("operate")),
    (Admin, &["requeue", "not-an-id"], BadInput),
    // An empty cause text, which every cause contains (an unset shell variable): all of them.
    (Admin, &["requeue", "--state", "dead-lettered", "--cause", "", "--yes"], BadInput),
    (Admin, &["requeue", MISSING], NotFound),
    (Admin, &["requeue", "a0000017"], WrongState),
    // A wire name nothing has, in a bulk filter: a typo, refused (it said "no jobs to requeue", exit 0).
    (Stranger, &["requeue", "--state", "dead-lettered", "--wire-name", "flakey", "--yes"], Permission("operate")),
    (Admin, &["requeue", "--state", "dead-lettered", "--wire-name", "flakey", "--yes"], UnknownName),
    (Admin, &["requeue", "--state", "dead-lettered", "--wire-name", "flakey", "--dry-run"], UnknownName),
    // cancel
    (Stranger, &["cancel", "a0000017"], Permission("operate")),
    (Stranger, &["cancel", "--state", "scheduled", "--yes"], Permission("operate")),
    (Stranger, &["cancel", MISSING], Permission("operate")),
    // An ambiguous prefix would list the jobs it matches: the permission comes first.
    (Stranger, &["cancel", "a"], Permission("operate")),
    (Admin, &["cancel", "--state", "nope", "--yes"], BadInput),
    (Admin, &["cancel", MISSING], NotFound),
    (Admin, &["cancel", "a0000001"], WrongState),
    (Admin, &["cancel", "--state", "scheduled", "--queue", "hgih", "--yes"], UnknownName),
    // A workflow id no workflow has: "no jobs to cancel", exit 0, read as done.
    (Admin, &["cancel", "--workflow", "01a24c1a-0000-7000-8000-000000000000", "--yes"], UnknownName),
    // run-now
    (Stranger, &["run-now", "a0000017"], Permission("operate")),
    (Stranger, &["run-now", "--queue", "high", "--yes"], Permission("operate")),
    (Stranger, &["run-now", "a0000003"], Permission("operate")),
    (Stranger, &["run-now", "a0000017", "a"], Permission("operate")),
    (Admin, &["run-now", "a0000017x"], BadInput),
    (Admin, &["run-now", MISSING], NotFound),
    (Admin, &["run-now", "a0000003"], WrongState),
    (Admin, &["run-now", "--wire-name", "flakey", "--yes"], UnknownName),
    // pause / resume
    (Stranger, &["pause", "queue", "high"], Permission("operate")),
    (Stranger, &["pause", "queue", "hgih"], Permission("operate")),
    (Stranger, &["pause", "queue", "high", "--dry-run"], Permission("operate")),
    (Stranger, &["resume", "queue", "high"], Permission("operate")),
    // The drift of issue 18, from the command line: an expiry `--for` shows to be now is refused
    // before the store is opened, for anyone (exit 2). A past expiry the store sees (the
    // library's call) is refused for the permission first on both backends: the store test
    // a_pause_is_refused_for_its_permission_before_its_input_on_both_backends.
    (Stranger, &["pause", "queue", "high", "--for", "0s"], BadInput),
    (Admin, &["pause", "queue", "high", "--for", "0s"], BadInput),
    (Admin, &["pause", "queue", "hgih"], UnknownName),
    (Admin, &["pause", "wire-name", "bad\u{7}name", "--force"], BadInput),
    (Admin, &["resume", "queue", "high"], WrongState),
    // purge
    (Stranger, &["purge", "a0000001", "--yes"], Permission("operate")),
    (Stranger, &["purge", "--older-than", "1d", "--yes"], Permission("operate")),
    (Admin, &["purge", "--older-than", "soon", "--yes"], BadInput),
    (Admin, &["purge", MISSING, "--yes"], NotFound),
    (Admin, &["purge", "a0000017", "--yes"], WrongState),
    // payload edit
    (Stranger, &["jobs", "edit", "a0000003", "--payload", "{}"], Permission("operate")),
    (Stranger, &["jobs", "edit", "a", "--payload", "{}"], Permission("operate")),
    (Stranger, &["jobs", "set-priority", "ffffffff", "3"], Permission("operate")),
    (Stranger, &["jobs", "set-priority", "a", "3"], Permission("operate")),
    (Admin, &["jobs", "edit", "a0000003", "--payload", "{oops"], BadInput),
    (Admin, &["jobs", "edit", MISSING, "--payload", "{}"], NotFound),
    (Admin, &["jobs", "edit", "a0000017", "--payload", "{}"], WrongState),
    // grant / revoke
    (Stranger, &["grant", "bob", "operate"], Permission("admin")),
    (Stranger, &["revoke", "someone-else", "admin"], Permission("admin")),
    (Admin, &["grant", "bob", "superuser"], BadInput),
    (Admin, &["grant", "bad\u{1b}name", "operate"], BadInput),
    (Admin, &["grant", "ali ce", "operate"], BadInput),
    (Admin, &["revoke", "bob", "operate"], NotFound),
    // limit
    (Stranger, &["limit", "queue", "high", "--concurrency", "2"], Permission("operate")),
    (Stranger, &["limit", "queue", "high", "--clear"], Permission("operate")),
    (Admin, &["limit", "queue", "high", "--rate", "fast"], BadInput),
    (Admin, &["limit", "queue", "high", "--concurrency", "0"], BadInput),
    (Admin, &["limit", "queue", "high", "--clear"], NotFound),
    (Admin, &["limit", "queue", "hgih", "--concurrency", "2"], UnknownName),
    (Admin, &["limit", "wire-name", "bad\u{7}name", "--rate", "5/s", "--force"], BadInput),
    // quiet / resume workers
    (Stranger, &["workers", "quiet", "web-1/7/payments#0001"], Permission("operate")),
    (Stranger, &["workers", "resume", "--host", "web-1"], Permission("operate")),
    (Admin, &["workers", "quiet", "--host", ""], BadInput),
    (Admin, &["workers", "quiet", "no-such-worker"], UnknownName),
    (Admin, &["workers", "resume", "web-1/7/payments#0001"], WrongState),
    // schedules
    (Stranger, &["schedule", "pause", "nightly"], Permission("operate")),
    (Stranger, &["schedule", "resume", "nightly"], Permission("operate")),
    (Stranger, &["schedule", "trigger", "nightly"], Permission("operate")),
    (Stranger, &["schedule", "trigger", "nosuch"], Permission("operate")),
    (Admin, &["schedule", "pause", "nightly", "--for", "0s"], BadInput),
    (Admin, &["schedule", "pause", "nosuch"], UnknownName),
    // A typo of a schedule's name says the name meant, after the permission, as for queues.
    (Stranger, &["schedule", "pause", "nighlty"], Permission("operate")),
    (Admin, &["schedule", "pause", "nighlty"], UnknownName),
    (Admin, &["schedule", "trigger", "nosuch"], UnknownName),
    (Admin, &["schedule", "resume", "nightly"], WrongState),
    // settings
    (Stranger, &["config", "set", "retention", "7d"], Permission("admin")),
    (Stranger, &["config", "set", "retention", "forever"], Permission("admin")),
    (Admin, &["config", "set", "retention", "forever"], BadInput),
    (Admin, &["config", "set", "colour", "on"], BadInput),
];

/// The hostile store with one registered worker and one schedule; the test user holds admin or
/// nothing.
fn store(who: Who) -> Fixture {
    let f = match who {
        Stranger => Fixture::hostile_stranger(),
        Admin => Fixture::hostile_admin(),
    };
    let store = f.store();
    store
        .register_worker(&WorkerInfo {
            id: "web-1/7/payments#0001".into(),
            group: "payments".into(),
            host: "web-1".into(),
            pid: 1,
            wire_names: vec!["charge-card".into()],
            queues: vec!["critical".into()],
            started_at: T_MS - 60_000,
            last_heartbeat_at: T_MS,
            stale_after_ms: 30_000,
        })
        .unwrap();
    store.declare_schedules("app", &[Schedule::new("nightly", "0 2 * * *", "export", "bulk", "{}")]).unwrap();
    f
}

fn audit_rows(store: &Store) -> usize {
    store.audit_entries(0, 10_000).unwrap().len()
}

both_backends! {
    fn every_operator_action_is_refused_alike_on_both_backends_in_one_order() {
        let fixtures = [(Stranger, store(Stranger)), (Admin, store(Admin))];
        let audited: Vec<usize> = fixtures.iter().map(|(_, f)| audit_rows(&f.store())).collect();
        let mut runs = Vec::new();
        let mut wrong = Vec::new();
        for &(who, args, kind) in TABLE {
            let f = &fixtures.iter().find(|(w, _)| *w == who).unwrap().1;
            let r = f.run(args);
            let ok = match kind {
                Permission(p) => {
                    r.code == Some(1)
                        && r.stdout.is_empty()
                        && r.stderr.contains(&format!("lacks the '{p}' permission"))
                }
                BadInput => r.code == Some(2) && r.stdout.is_empty() && r.stderr.starts_with("bw: error: "),
                UnknownName => {
                    r.code == Some(2)
                        && r.stdout.is_empty()
                        && (r.stderr.contains("unknown")
                            || r.stderr.contains("no job or worker has")
                            || r.stderr.contains("no schedule named")
                            || r.stderr.contains("no registered worker")
                            || r.stderr.contains("no workflow has the id"))
                }
                NotFound => {
                    let out = format!("{}{}", r.stdout, r.stderr);
                    r.code == Some(1) && ["NotFound", "no job matches", "no operator limit", "did not hold"].iter().any(|w| out.contains(w))
                }
                WrongState => {
                    let out = format!("{}{}", r.stdout, r.stderr);
                    r.code == Some(1)
                        && ["NotRequeueable", "NotCancellable", "NotScheduled", "NotTerminal", "is not paused", ", not ", "nothing resumed"]
                            .iter()
                            .any(|w| out.contains(w))
                }
            };
            if !ok {
                wrong.push(format!("{who:?} expected {kind:?}:\n{r}"));
            }
            runs.push(format!("# {who:?}, {kind:?}\n{r}"));
        }
        assert!(wrong.is_empty(), "{} of {} rows refused otherwise:\n\n{}", wrong.len(), TABLE.len(), wrong.join("\n"));
        for ((_, f), before) in fixtures.iter().zip(audited) {
            assert_eq!(audit_rows(&f.store()), before, "a refusal wrote to the audit trail");
        }
        insta::assert_snapshot!("cli__refusal_table", runs.join("\n"));
    }
}

both_backends! {
    /// Revealing failure detail (`jobs show --detail`, `log tail --detail`) prints what it may and then
    /// refuses, so it is not a row of the table above (whose refusals print nothing); its order
    /// is the same: the permission first, and only to someone who may reveal, that capture is
    /// switched off.
    fn revealing_failure_detail_is_refused_for_its_permission_before_capture_is_said_to_be_off() {
        let (stranger, admin) = (store(Stranger), store(Admin));
        let lacks = "lacks the 'view-failure-detail' permission";
        let off = "failure detail is switched off";
        for capture in ["on", "off"] {
            stranger.store().set_setting("someone-else", backwave::store::SettingKey::FailureDetail, capture).unwrap();
            admin.store().set_setting(&backwave::store::current_actor(), backwave::store::SettingKey::FailureDetail, capture).unwrap();
            for args in [&["jobs", "show", "a0000003", "--detail"][..], &["log", "tail", "--detail"][..]] {
                let r = stranger.run(args);
                assert!(r.code == Some(1) && r.stderr.contains(lacks), "capture {capture}, a stranger:\n{r}");
                let r = admin.run(args);
                match capture {
                    "on" => assert_eq!(r.code, Some(0), "capture on, the admin:\n{r}"),
                    _ => assert!(r.code == Some(1) && r.stderr.contains(off), "capture off, the admin:\n{r}"),
                }
            }
        }
        // Capture off, a job with nothing hidden (a0000017 never failed): nothing to reveal, yet
        // the stranger still hears of the permission first.
        let r = stranger.run(&["jobs", "show", "a0000017", "--detail"]);
        assert!(r.code == Some(1) && r.stderr.contains(lacks), "capture off, nothing hidden, a stranger:\n{r}");
    }
}
