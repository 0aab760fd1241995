//! Job output and progress in the store (issue 42), both backends: an output is written with
//! the success (in the batch's one statement, or one at a time), only an attempt's success keeps
//! one, one over `output_limit` fails the attempt naming the limit and the size; progress rides
//! on the heartbeat of a held lease and is cleared by the next claim; a store as version 15
//! wrote it gains the columns when opened for writing.

use std::time::Duration;

use backwave::store::{Fenced, Outcome, SettingKey, SCHEMA_VERSION};
use backwave::{Error, JobState, NewJob, Progress, Store};

use super::{failed, policy, Fixture, ADMIN, LEASE, WORKER};
use crate::backend::{both_backends, Backend};

fn with_output(json: &str) -> Outcome {
    Outcome::SucceededWith { output: json.as_bytes().to_vec() }
}

both_backends! {
    /// A batch of successes, some with an output, one statement: each output is kept with its job
    /// and read back by `Store::output`, `Store::outputs` and `Store::job`; lists never read it.
    fn outputs_are_kept_with_their_successes_and_read_back_by_id() {
        let fx = Fixture::new();
        let jobs: Vec<NewJob> = (0..3).map(|i| NewJob::new("w", "q", format!("{i}"))).collect();
        let claimed = fx.ended("q", &jobs, |i, _| match i {
            0 => with_output(r#"{"width":640}"#),
            1 => Outcome::Succeeded,
            _ => with_output("[1,2,3]"),
        });
        let ids: Vec<_> = claimed.iter().map(|j| j.id).collect();
        assert_eq!(fx.store.output(ids[0]).unwrap().as_deref(), Some(&br#"{"width":640}"#[..]));
        assert_eq!(fx.store.output(ids[1]).unwrap(), None, "succeeded without an output");
        let job = fx.job(ids[2]);
        assert_eq!(job.state, JobState::Succeeded);
        assert_eq!(job.output_as::<Vec<u32>>().unwrap().unwrap(), vec![1, 2, 3]);
        let all = fx.store.outputs(&ids).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[&ids[2]], b"[1,2,3]");
        let listed = fx.store.list_jobs(&backwave::store::JobFilter::state(JobState::Succeeded), 10, 0).unwrap();
        assert!(listed.jobs.iter().all(|j| j.output.is_none()), "lists do not read outputs");

        let unknown = backwave::JobId::new();
        assert!(matches!(fx.store.output(unknown), Err(Error::JobNotFound(_))));
        assert!(fx.store.outputs(&[unknown]).unwrap().is_empty());
    }

    /// One job reported twice in a batch takes the one-at-a-time path: its output is kept too,
    /// and the second report meets the first's result.
    fn a_success_reported_twice_in_a_batch_keeps_its_output() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let j = fx.claim_one("q", &policy(3, Duration::from_secs(1)));
        let c = |o: Outcome| backwave::store::Completion { job_id: id, worker_id: WORKER.into(), attempt: j.attempt, outcome: o };
        let fenced = fx.store.complete_many(&[c(with_output(r#""first""#)), c(with_output(r#""second""#))]).unwrap();
        assert_eq!(fenced, vec![Fenced::Accepted(JobState::Succeeded), Fenced::Rejected]);
        assert_eq!(fx.store.output(id).unwrap().as_deref(), Some(&br#""first""#[..]));
    }

    /// An output over `output_limit` is never cut and never written: the attempt fails with a
    /// cause naming the limit and the size (retried, then dead-lettered as any failure), while an
    /// output within the limit in the same batch succeeds.
    fn an_output_over_the_limit_fails_the_attempt_naming_the_limit_and_the_size() {
        let fx = Fixture::new();
        assert_eq!(fx.store.output_limit().unwrap(), backwave::store::DEFAULT_OUTPUT_LIMIT);
        fx.store.set_setting(ADMIN, SettingKey::OutputLimit, "16B").unwrap();
        assert_eq!(fx.store.output_limit().unwrap(), 16);
        let big = format!("\"{}\"", "x".repeat(30)); // 32 bytes
        let p = policy(2, Duration::ZERO);
        let (a, b) = (fx.enqueue("w", "q"), fx.enqueue("w", "q"));
        let claimed = fx.claim_as(WORKER, "q", 2, &p);
        fx.report_all(&claimed, |_, j| if j.id == a { with_output(&big) } else { with_output("{}") });
        let job_a = fx.job(a);
        assert_eq!(job_a.state, JobState::Scheduled, "a failed attempt with budget left is retried");
        assert_eq!(job_a.output, None);
        let entry = fx.store.history(a).unwrap().pop().unwrap();
        let cause = "the handler's output is 32 bytes, over the store's output_limit of 16 bytes: it was not \
                     recorded; record a smaller output (a reference to data kept elsewhere), or raise the limit";
        assert_eq!(entry.reason.as_deref(), Some(cause));
        assert!(matches!(&entry.detail, backwave::DetailStatus::Hidden { kind, .. } if kind == "output over output_limit"));
        assert_eq!((fx.job(b).state, fx.store.output(b).unwrap().as_deref()), (JobState::Succeeded, Some(&b"{}"[..])));

        // The last attempt: dead-lettered with the same cause.
        let again = fx.claim_one("q", &p);
        assert_eq!(fx.report(&again, with_output(&big)), Fenced::Accepted(JobState::DeadLettered));
        let dead = fx.job(a);
        assert_eq!((dead.terminal_cause.as_deref(), dead.output), (Some(cause), None));

        let refused = fx.store.set_setting(ADMIN, SettingKey::OutputLimit, "lots").unwrap_err();
        assert_eq!(refused.to_string(), "output_limit is a size from 1 byte to 1GB (e.g. 32KiB, 1MiB, 65536), not 'lots'");
    }

    /// The output is a column of the job's row: the retention sweep deletes it with the job.
    fn the_retention_sweep_deletes_the_output_with_its_job() {
        let fx = Fixture::new();
        let claimed = fx.ended("q", &[NewJob::new("w", "q", "1")], |_, _| with_output(r#"{"kept":"until swept"}"#));
        let id = claimed[0].id;
        assert!(fx.store.output(id).unwrap().is_some());
        fx.clock.advance(fx.store.retention().unwrap() + Duration::from_secs(1));
        assert_eq!(fx.store.sweep_expired(100).unwrap(), 1);
        assert!(matches!(fx.store.output(id), Err(Error::JobNotFound(_))));
        let left = fx.store.raw_query("SELECT count(*) FROM jobs WHERE output IS NOT NULL", &[]).unwrap();
        assert_eq!(left[0][0].as_i64(), 0);
    }

    /// Only a success keeps an output: a stale worker's output is fenced out with its success.
    fn a_fenced_out_success_writes_no_output() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let j = fx.claim_one("q", &policy(3, Duration::from_secs(1)));
        assert_eq!(fx.report_as("someone-else", id, j.attempt, with_output("1")), Fenced::Rejected);
        assert_eq!(fx.report(&j, failed("boom")), Fenced::Accepted(JobState::Scheduled));
        assert_eq!(fx.store.output(id).unwrap(), None);
    }

    /// Progress rides on the heartbeat of a held lease (a list of Running jobs reads it, a list
    /// of others does not), a lease no longer held writes none, and the next claim clears it.
    fn progress_rides_on_the_heartbeat_and_the_next_claim_clears_it() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let p = policy(3, Duration::ZERO);
        let j = fx.claim_one("q", &p);
        let half = Progress::new(0.5, "half way").unwrap();
        let statuses = fx
            .store
            .heartbeat_with_progress(WORKER, &[(id, j.attempt), (id, j.attempt + 1)], &[Some(half.clone()), Some(Progress::new(1.0, "no").unwrap())], LEASE)
            .unwrap();
        assert_eq!(statuses[1], backwave::store::LeaseStatus::Lost);
        assert_eq!(fx.job(id).progress, Some(half.clone()));
        // A heartbeat without news keeps it.
        fx.store.heartbeat_with_progress(WORKER, &[(id, j.attempt)], &[None], LEASE).unwrap();
        fx.store.heartbeat(WORKER, &[(id, j.attempt)], LEASE).unwrap();
        assert_eq!(fx.job(id).progress, Some(half.clone()));
        let running = fx.store.list_jobs(&backwave::store::JobFilter::state(JobState::Running), 10, 0).unwrap();
        assert_eq!(running.jobs[0].progress, Some(half.clone()));
        let any = backwave::store::JobFilter { states: vec![JobState::Running, JobState::Scheduled], ..Default::default() };
        assert_eq!(fx.store.list_jobs(&any, 10, 0).unwrap().jobs[0].progress, None);

        // It stays after the attempt ends, until the next claim.
        assert_eq!(fx.report(&j, failed("boom")), Fenced::Accepted(JobState::Scheduled));
        assert_eq!(fx.job(id).progress, Some(half));
        let again = fx.claim_one("q", &p);
        assert_eq!((again.attempt, fx.job(id).progress), (2, None));
    }

    /// A store as version 16 wrote it (no output or progress columns, no workflows, no
    /// `on_failure`) gains them
    /// when opened for writing, every job kept; and they work at once.
    fn a_version_16_store_gains_the_output_and_progress_columns_when_opened() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let old = match fx.db.backend() {
            Backend::Sqlite => "ALTER TABLE jobs DROP COLUMN output; ALTER TABLE jobs DROP COLUMN progress;
                                ALTER TABLE jobs DROP COLUMN progress_message;
                                DROP TRIGGER jobs_release; DROP TABLE job_edges; DROP TABLE workflows;
                                DROP INDEX jobs_workflow; DROP INDEX jobs_waiting; ALTER TABLE jobs DROP COLUMN workflow_id;
                                PRAGMA user_version = 16",
            Backend::Postgres => "ALTER TABLE jobs DROP COLUMN output, DROP COLUMN progress, DROP COLUMN progress_message;
                                  DROP TRIGGER jobs_release ON jobs; DROP FUNCTION bw_release_children();
                                  DROP TRIGGER jobs_release_mark ON jobs; DROP FUNCTION bw_mark_release();
                                  DROP TABLE job_edges; DROP TABLE workflows; ALTER TABLE jobs DROP COLUMN workflow_id;
                                  DROP FUNCTION bw_cancel_dependents(uuid[], bigint);
                                  UPDATE backwave_schema SET version = 16",
        };
        fx.store.raw_batch(old).unwrap();
        let Fixture { store, clock, db, _dir } = fx;
        drop(store);
        let store = Store::open(&db).unwrap().with_clock(clock);
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        assert_eq!(store.job(id).unwrap().unwrap().output, None);
        let queues = ["q".to_string()];
        let p = policy(1, Duration::ZERO);
        let claimed = store
            .claim(&backwave::store::ClaimRequest {
                worker_id: WORKER,
                group: "g",
                queues: &queues,
                limit: 1,
                lease: LEASE,
                policy: &p,
                handler_policies: &[],
            })
            .unwrap();
        store.heartbeat_with_progress(WORKER, &[(id, 1)], &[Some(Progress::new(0.25, "a quarter").unwrap())], LEASE).unwrap();
        assert_eq!(store.job(id).unwrap().unwrap().progress.map(|p| p.to_string()).as_deref(), Some("25% a quarter"));
        let done = backwave::store::Completion { job_id: claimed[0].id, worker_id: WORKER.into(), attempt: 1, outcome: with_output("true") };
        assert_eq!(store.complete(&done).unwrap(), Fenced::Accepted(JobState::Succeeded));
        assert_eq!(store.output(id).unwrap().as_deref(), Some(&b"true"[..]));
        assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    }
}

/// A fraction outside 0..=1, or NaN, is refused quoting it; a long message is cut at 200
/// characters, ending in `…`.
#[test]
fn a_progress_fraction_outside_0_to_1_is_refused_quoting_it() {
    for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
        let e = Progress::new(bad, "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("progress fraction {bad} is not between 0 and 1 (0.42 is 42%): nothing was reported")
        );
    }
    assert_eq!(Progress::new(0.999, "").unwrap().to_string(), "99%");
    assert_eq!(Progress::new(1.0, "done").unwrap().to_string(), "100% done");
    let long = Progress::new(0.5, "é".repeat(300)).unwrap();
    assert_eq!(long.message.chars().count(), Progress::MAX_MESSAGE_CHARS);
    assert!(long.message.ends_with('…'));
    assert_eq!(Progress::new(0.5, "é".repeat(200)).unwrap().message, "é".repeat(200));
}
