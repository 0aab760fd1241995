//! Limits and quiet workers in the store (issue 21): what `bw limit` writes and audits, how the
//! claim honours a concurrency and a rate limit (a job over the limit stays Scheduled with no
//! attempt spent, a lapsed lease frees its slot, other queues go on), the application's default
//! beside the operator's, and a quiet worker's claims. Manual clock throughout, but for one test
//! of a quiet worker on the database's clock (PostgreSQL reads its holds another way there).

use std::time::Duration;

use backwave::store::{
    ClaimRequest, LimitDefault, LimitResult, LimitSource, LimitSpec, PauseKind, Rate, WorkerSelector,
};
use backwave::{Error, NewJob};

use super::{policy, Fixture, ADMIN, OTHER_WORKER, T0, WORKER};
use crate::backend::both_backends;

fn concurrency(n: u32) -> LimitSpec {
    LimitSpec { concurrency: Some(n), rate: None }
}

fn rate(text: &str) -> LimitSpec {
    LimitSpec { concurrency: None, rate: Some(Rate::parse(text).unwrap()) }
}

fn enqueue(fx: &Fixture, wire_name: &str, queue: &str, n: usize) {
    let jobs: Vec<NewJob> = (0..n).map(|_| NewJob::new(wire_name, queue, b"1".to_vec())).collect();
    fx.store.enqueue_many(&jobs).unwrap();
}

fn claim(fx: &Fixture, worker: &str, queues: &[&str], limit: usize) -> Vec<backwave::Job> {
    let p = policy(3, Duration::from_secs(1));
    let queues: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    fx.store
        .claim(&ClaimRequest {
            worker_id: worker,
            group: "g",
            queues: &queues,
            limit,
            lease: crate::store::LEASE,
            policy: &p,
            handler_policies: &[],
        })
        .unwrap()
}

fn wire_names(jobs: &[backwave::Job]) -> Vec<&str> {
    jobs.iter().map(|j| j.wire_name.as_str()).collect()
}

both_backends! {
    fn a_concurrency_limit_caps_running_jobs_and_a_job_over_it_stays_scheduled_with_no_attempt() {
        let fx = Fixture::new();
        enqueue(&fx, "limited", "mixed", 6);
        enqueue(&fx, "free", "mixed", 4);
        assert_eq!(fx.store.set_limit(ADMIN, PauseKind::WireName, "limited", &concurrency(2), None, true).unwrap(), LimitResult::Limited);
        let first = claim(&fx, WORKER, &["mixed"], 10);
        assert_eq!(wire_names(&first).iter().filter(|w| **w == "limited").count(), 2, "{:?}", wire_names(&first));
        assert_eq!(wire_names(&first).iter().filter(|w| **w == "free").count(), 4, "the other wire name is claimed");
        // Full: another worker's claim takes none.
        assert!(claim(&fx, OTHER_WORKER, &["mixed"], 10).is_empty());
        let waiting = fx.store.raw_query(
            "SELECT count(*) FROM jobs WHERE wire_name = 'limited' AND state = 'scheduled' AND attempt = 0", &[]).unwrap();
        assert_eq!(waiting[0][0].as_i64(), 4, "jobs over the limit stay Scheduled, no attempt spent");
        let status = fx.store.limits().unwrap();
        assert_eq!(status.len(), 1);
        assert_eq!((status[0].running, status[0].budget, status[0].held_back), (2, 0, 4));

        // One finishes: one slot frees.
        let done = first.iter().find(|j| j.wire_name == "limited").unwrap();
        fx.report(done, backwave::store::Outcome::Succeeded);
        assert_eq!(wire_names(&claim(&fx, OTHER_WORKER, &["mixed"], 10)), ["limited"]);
        // A lease that lapses frees its slot, before any reap.
        fx.clock.advance(crate::store::LEASE + Duration::from_millis(1));
        assert_eq!(wire_names(&claim(&fx, OTHER_WORKER, &["mixed"], 10)), ["limited", "limited"]);
        fx.assert_sound();
    }
}

both_backends! {
    fn a_rate_limit_counts_claims_per_fixed_window_and_other_queues_go_on_under_strict_order() {
        let fx = Fixture::new();
        enqueue(&fx, "rated", "first", 10);
        enqueue(&fx, "other", "second", 3);
        fx.store.set_limit(ADMIN, PauseKind::Queue, "first", &rate("3/s"), None, true).unwrap();
        // Strict order: the limited first queue gives its 3, the second queue the rest.
        let got = claim(&fx, WORKER, &["first", "second"], 5);
        assert_eq!(wire_names(&got), ["rated", "rated", "rated", "other", "other"]);
        assert_eq!(wire_names(&claim(&fx, WORKER, &["first", "second"], 5)), ["other"]);
        // The next window starts the count over.
        fx.clock.advance(Duration::from_secs(1));
        assert_eq!(claim(&fx, WORKER, &["first"], 5).len(), 3);
        let status = &fx.store.limits().unwrap()[0];
        assert_eq!((status.window_claimed, status.budget), (3, 0));
        assert_eq!(status.held_back, 4);
    }
}

both_backends! {
    fn the_operators_limit_wins_over_the_applications_default_and_clearing_it_restores_the_default() {
        let fx = Fixture::new();
        enqueue(&fx, "email", "mail", 10);
        let default = LimitDefault { kind: PauseKind::WireName, name: "email".into(), spec: concurrency(1) };
        fx.store.declare_limits("host/1", &[default]).unwrap();
        assert_eq!(claim(&fx, WORKER, &["mail"], 10).len(), 1);
        // The operator raises it: the store wins.
        fx.store.set_limit(ADMIN, PauseKind::WireName, "email", &concurrency(3), None, true).unwrap();
        assert_eq!(claim(&fx, WORKER, &["mail"], 10).len(), 2);
        let l = &fx.store.limits().unwrap()[0];
        assert_eq!(l.operator.as_ref().unwrap().source, LimitSource::Operator);
        assert_eq!(l.application.as_ref().unwrap().spec, concurrency(1));
        assert_eq!(l.effective, concurrency(3));
        // A rate added later keeps the concurrency: flags not given stay.
        let r = fx.store.set_limit(ADMIN, PauseKind::WireName, "email", &rate("100/m"), None, true).unwrap();
        assert_eq!(r, LimitResult::Changed { previous: concurrency(3) });
        assert_eq!(fx.store.limits().unwrap()[0].effective.concurrency, Some(3));
        assert!(fx.store.clear_limit(ADMIN, PauseKind::WireName, "email").unwrap());
        assert!(!fx.store.clear_limit(ADMIN, PauseKind::WireName, "email").unwrap());
        assert_eq!(fx.store.limits().unwrap()[0].effective, concurrency(1));
        let audit: Vec<(String, String)> =
            fx.store.audit_entries(0, 100).unwrap().into_iter().map(|e| (e.action, e.detail.unwrap_or_default())).collect();
        assert!(audit.contains(&("limit".into(), "wire-name email concurrency 3 until cleared".into())), "{audit:?}");
        assert!(audit.contains(&("unlimit".into(), "wire-name email".into())), "{audit:?}");
    }
}

both_backends! {
    fn a_limit_for_a_while_lapses_by_itself_and_bad_limits_are_refused_naming_the_value() {
        let fx = Fixture::new();
        enqueue(&fx, "email", "mail", 5);
        fx.store.set_limit(ADMIN, PauseKind::Queue, "mail", &concurrency(1), Some(T0 + 1_000), true).unwrap();
        assert_eq!(claim(&fx, WORKER, &["mail"], 10).len(), 1);
        fx.clock.advance(Duration::from_secs(1));
        assert_eq!(claim(&fx, WORKER, &["mail"], 10).len(), 4, "the limit lapsed at its time");
        assert!(fx.store.limits().unwrap().is_empty());
        let e = fx.store.set_limit(ADMIN, PauseKind::Queue, "mail", &concurrency(0), None, true).unwrap_err();
        assert!(e.to_string().contains("concurrency of 0"), "{e}");
        let e = fx.store.set_limit("mallory", PauseKind::Queue, "mail", &concurrency(2), None, true).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e}");
        let e = fx.store.set_limit(ADMIN, PauseKind::Queue, "mail", &concurrency(2), Some(T0), true).unwrap_err();
        assert!(e.to_string().contains("would end at once"), "{e}");
    }

    fn a_limit_on_a_name_nothing_mentions_is_refused_as_a_pause_is_unless_forced() {
        // `bw limit queue mial` was accepted and limited nothing, while `bw pause` refused it.
        let fx = Fixture::new();
        enqueue(&fx, "email", "mail", 1);
        let before = fx.store.audit_entries(0, 100).unwrap().len();
        for (kind, name) in [(PauseKind::Queue, "mial"), (PauseKind::WireName, "emial")] {
            let e = fx.store.set_limit(ADMIN, kind, name, &concurrency(2), None, false).unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "unknown {kind} '{name}': no job or worker mentions it (check the spelling, or set `force` to \
                     limit it ahead of its first job)"
                )
            );
            let p = fx.store.pause(ADMIN, kind, name, None, false).unwrap_err();
            assert_eq!(p.to_string(), e.to_string().replace("to limit it", "to pause it"), "refused alike");
        }
        // The permission first, as a pause: a stranger learns nothing of the name.
        let e = fx.store.set_limit("mallory", PauseKind::Queue, "mial", &concurrency(2), None, false).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e}");
        assert!(fx.store.limits().unwrap().is_empty());
        assert_eq!(fx.store.audit_entries(0, 100).unwrap().len(), before, "a refusal audits nothing");
        // Known names, and any name with force.
        assert_eq!(fx.store.set_limit(ADMIN, PauseKind::Queue, "mail", &concurrency(2), None, false).unwrap(), LimitResult::Limited);
        assert_eq!(fx.store.set_limit(ADMIN, PauseKind::Queue, "mial", &concurrency(2), None, true).unwrap(), LimitResult::Limited);
        assert_eq!(fx.store.limits().unwrap().len(), 2);
    }
}

both_backends! {
    fn a_quiet_worker_claims_nothing_until_resumed_and_others_claim_meanwhile() {
        let fx = Fixture::new();
        enqueue(&fx, "email", "mail", 4);
        for (id, host) in [(WORKER, "web-1"), (OTHER_WORKER, "web-2")] {
            fx.register_worker(id, host);
        }
        assert_eq!(fx.store.quiet_workers(ADMIN, &WorkerSelector::Host("web-1".into())).unwrap(), [WORKER]);
        assert!(fx.store.quiet_workers(ADMIN, &WorkerSelector::Host("web-1".into())).unwrap().is_empty());
        assert!(claim(&fx, WORKER, &["mail"], 10).is_empty(), "a quiet worker claims nothing");
        assert_eq!(claim(&fx, OTHER_WORKER, &["mail"], 2).len(), 2);
        let states = fx.store.worker_states().unwrap();
        let quiet = states.iter().find(|s| s.id == WORKER).unwrap();
        assert_eq!((quiet.quiet_at, quiet.quiet_by.as_deref()), (Some(T0), Some(ADMIN)));
        assert_eq!(states.iter().find(|s| s.id == OTHER_WORKER).unwrap().running, 2);
        assert_eq!(fx.store.resume_workers(ADMIN, &WorkerSelector::Group("g".into())).unwrap(), [WORKER]);
        assert_eq!(claim(&fx, WORKER, &["mail"], 10).len(), 2);
        let e = fx.store.quiet_workers(ADMIN, &WorkerSelector::Id("nobody".into())).unwrap_err();
        assert!(e.to_string().contains("'nobody'"), "{e}");
        let e = fx.store.quiet_workers("mallory", &WorkerSelector::Group("g".into())).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e}");
    }
}

both_backends! {
    /// On the database's clock PostgreSQL names the claiming worker in the text of the read that
    /// precedes a claim (so that its plan is kept): a worker id with quotes, a backslash and SQL
    /// after them is still that worker's id, quiet or not, and nothing else.
    fn a_quiet_worker_on_the_database_clock_claims_nothing_whatever_its_id_holds() {
        let mut fx = Fixture::new();
        fx.store = backwave::Store::open(&fx.db).unwrap();
        enqueue(&fx, "email", "mail", 3);
        let (odd, plain) = (r"web-1 o'brien\' OR true; --", "web-2");
        for id in [odd, plain] {
            fx.register_worker(id, id);
        }
        let claimed = |worker: &str| claim(&fx, worker, &["mail"], 1).len();
        let store = &fx.store;
        assert_eq!(store.quiet_workers(ADMIN, &WorkerSelector::Id(odd.into())).unwrap(), [odd]);
        assert_eq!(claimed(odd), 0, "the quiet worker claims nothing");
        assert_eq!(claimed(plain), 1, "another worker is not taken for it");
        assert_eq!(store.resume_workers(ADMIN, &WorkerSelector::Id(odd.into())).unwrap(), [odd]);
        assert_eq!(claimed(odd), 1);
        assert_eq!(store.quiet_workers(ADMIN, &WorkerSelector::Id(plain.into())).unwrap(), [plain]);
        assert_eq!(claimed(plain), 0);
        assert_eq!(claimed(odd), 1, "nor is it taken for the other");
    }
}
