//! Recurring schedules in the store (issue 20): declaring (new, unchanged, updated and audited,
//! refused before anything is stored), the compare-and-swap that gives each tick one job, the
//! missed-tick policies, pause, resume and trigger, orphans. Both backends, a manual clock.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::backend::both_backends;
use crate::store::{Fixture, ADMIN, T0};
use backwave::schedule::{MissedTicks, Schedule, SCHEDULE_LABEL, TICK_LABEL};
use backwave::store::{Declared, SchedulePauseResult, ScheduleResumeResult};
use backwave::{Clock, Error, JobId, JobState, NewJob, Store, StoreTarget};

fn every_second() -> Schedule {
    Schedule::new("heartbeat", "* * * * * *", "beat", "ticks", br#"{"k":1}"#.to_vec())
}

fn hourly() -> Schedule {
    Schedule::new("hourly", "0 * * * *", "report", "reports", "{}")
}

/// Jobs the schedules made, by wire name.
fn jobs_of(store: &Store, wire_name: &str) -> i64 {
    store.raw_scalar(&format!("SELECT count(*) FROM jobs WHERE wire_name = '{wire_name}'"), &[]).unwrap().as_i64()
}

/// The unique key a job holds, if any.
fn unique_key(store: &Store, id: JobId) -> Option<String> {
    let sql = format!("SELECT unique_key FROM jobs WHERE id = '{id}'");
    store.raw_scalar(&sql, &[]).unwrap().as_opt_str().map(str::to_string)
}

fn names(actions: &[backwave::store::AuditEntry]) -> Vec<&str> {
    actions.iter().map(|a| a.action.as_str()).collect()
}

both_backends! {
    fn declaring_stores_a_new_schedule_keeps_an_unchanged_one_and_updates_and_audits_a_changed_one() {
        let f = Fixture::new();
        assert_eq!(f.store.declare_schedules("app", &[hourly()]).unwrap(), vec![Declared::New]);
        let stored = f.store.schedule("hourly").unwrap();
        assert_eq!(stored.row.schedule, hourly());
        assert_eq!(stored.row.last_tick, T0, "a new schedule starts with its next tick");
        assert_eq!(stored.next_fire, Some(T0 + 3_600_000));
        assert_eq!(f.store.declare_schedules("app", &[hourly()]).unwrap(), vec![Declared::Unchanged]);

        f.clock.advance(Duration::from_secs(10));
        let changed = hourly().zone("Europe/Berlin").missed(MissedTicks::CatchUp { max: 4 });
        let Declared::Updated { changes } = &f.store.declare_schedules("app", std::slice::from_ref(&changed)).unwrap()[0] else {
            panic!("not updated")
        };
        assert_eq!(changes, &["zone \"UTC\" -> \"Europe/Berlin\"", "missed \"latest\" -> \"catch-up 4\""]);
        let row = f.store.schedule("hourly").unwrap().row;
        assert_eq!(row.schedule, changed);
        assert_eq!(row.last_tick, T0, "an update keeps the cursor");
        assert_eq!(row.updated_at, T0 + 10_000);
        let audit = f.store.audit_entries(0, 10).unwrap();
        assert!(names(&audit).contains(&"schedule-declare") && names(&audit).contains(&"schedule-update"), "{audit:?}");
        let update = audit.iter().find(|a| a.action == "schedule-update").unwrap();
        assert_eq!(update.actor, "app");
        assert!(update.detail.as_deref().unwrap().contains("Europe/Berlin"), "{update:?}");
    }

    fn an_invalid_cron_an_unknown_zone_or_a_control_character_in_a_name_is_refused_and_nothing_is_stored() {
        let f = Fixture::new();
        let bad = [
            (Schedule::new("x", "61 * * * *", "w", "q", "{}"), "invalid cron expression '61 * * * *'"),
            (Schedule::new("x", "* * * *", "w", "q", "{}"), "invalid cron expression '* * * *'"),
            (hourly().zone("Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
            (Schedule::new("bad\u{1b}[2Jname", "0 * * * *", "w", "q", "{}"), "\"bad\\u{1b}[2Jname\""),
            (hourly().missed(MissedTicks::CatchUp { max: 0 }), "catch-up needs a bound"),
        ];
        for (s, quoted) in bad {
            // Declared beside a valid one: the whole declaration is refused.
            let e = f.store.declare_schedules("app", &[every_second(), s]).unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
            assert!(e.to_string().contains(quoted), "{e} lacks {quoted}");
            assert!(!e.to_string().contains('\n'), "one line: {e}");
        }
        assert!(f.store.schedules().unwrap().is_empty(), "nothing stored");
        let e = f.store.declare_schedules("app", &[hourly(), hourly()]).unwrap_err();
        assert!(e.to_string().contains("two schedules are named 'hourly'"), "{e}");
    }

    // Issue 20: a schedule whose payload is over the store's payload_limit was stored, and then
    // every tick failed to enqueue, seen only in the ticker's error count.
    fn a_schedule_whose_payload_is_over_the_payload_limit_is_refused_when_declared() {
        let f = Fixture::new();
        f.store.set_setting(ADMIN, backwave::store::SettingKey::PayloadLimit, "1KiB").unwrap();
        let big = format!("\"{}\"", "x".repeat(2000));
        let e = f.store.declare_schedules("app", &[every_second(), Schedule::new("nightly-export", "0 2 * * *", "export", "bulk", big)]).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("schedule 'nightly-export'") && text.contains("2002 bytes") && text.contains("1024"), "{text}");
        assert!(f.store.schedules().unwrap().is_empty(), "nothing stored");
        // At the limit exactly, it is stored and fires.
        let fits = format!("\"{}\"", "x".repeat(1022));
        f.store.declare_schedules("app", &[Schedule::new("nightly-export", "0 2 * * *", "export", "bulk", fits)]).unwrap();
        assert_eq!(f.store.schedules().unwrap().len(), 1);
    }

    fn each_due_tick_fires_once_and_a_second_firing_of_the_same_cursor_changes_nothing() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[every_second()]).unwrap();
        let names = vec!["heartbeat".to_string()];
        assert!(f.store.fire_due_schedules(&names).unwrap().0.is_empty(), "nothing due at declaration");
        f.clock.advance(Duration::from_millis(1_500));
        let (fired, next) = f.store.fire_due_schedules(&names).unwrap();
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].fired.len(), 1);
        let (tick, id) = fired[0].fired[0];
        assert_eq!(tick, T0 + 1_000);
        assert_eq!(next, Some(T0 + 2_000));
        let job = f.job(id);
        assert_eq!((job.wire_name.as_str(), job.queue.as_str(), job.state), ("beat", "ticks", JobState::Scheduled));
        assert_eq!(job.payload, br#"{"k":1}"#);
        assert_eq!(job.labels.get(SCHEDULE_LABEL).map(String::as_str), Some("heartbeat"));
        assert_eq!(job.labels.get(TICK_LABEL).map(String::as_str), Some("2026-01-01T00:00:01Z"));
        // Fired already: nothing more is due.
        assert!(f.store.fire_due_schedules(&names).unwrap().0.is_empty());
        // A process that read the old cursor loses the compare-and-swap and writes nothing.
        let stale = f.store.claim_ticks("heartbeat", T0, T0 + 1_000, &[NewJob::new("beat", "ticks", "{}")]).unwrap();
        assert_eq!(stale, None);
        assert_eq!(jobs_of(&f.store, "beat"), 1);
        let row = f.store.schedule("heartbeat").unwrap().row;
        assert_eq!((row.last_tick, row.last_job_id, row.last_job_state), (T0 + 1_000, Some(id), Some(JobState::Scheduled)));
        f.assert_sound();
    }

    fn a_unique_schedule_skips_the_ticks_that_come_while_its_last_job_is_pending_and_never_stalls() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[every_second().unique()]).unwrap();
        let names = vec!["heartbeat".to_string()];
        let fire = |by_ms: u64| {
            f.clock.advance(Duration::from_millis(by_ms));
            let (mut fired, _) = f.store.fire_due_schedules(&names).unwrap();
            assert_eq!(fired.len(), 1, "a tick is due");
            fired.pop().unwrap()
        };
        let first = fire(1_500);
        assert_eq!(first.skipped, vec![]);
        let (_, job) = first.fired[0];
        assert_eq!(unique_key(&f.store, job).as_deref(), Some("schedule:heartbeat"));

        // Pending (scheduled, then running): each tick is consumed without a job.
        let second = fire(1_000);
        assert_eq!((second.fired, second.skipped, second.through), (vec![], vec![(T0 + 2_000, job)], T0 + 2_000));
        let claimed = f.claim_one("ticks", &backwave::RetryPolicy::default());
        assert_eq!(claimed.id, job);
        let third = fire(1_000);
        assert_eq!((third.fired, third.skipped), (vec![], vec![(T0 + 3_000, job)]));
        let row = f.store.schedule("heartbeat").unwrap().row;
        assert_eq!((row.last_tick, row.skipped_ticks, row.last_job_id), (T0 + 3_000, 2, Some(job)));
        assert_eq!(jobs_of(&f.store, "beat"), 1);

        // Done: the very next tick makes a job again.
        f.report(&claimed, backwave::store::Outcome::Succeeded);
        let fourth = fire(1_000);
        assert_eq!(fourth.skipped, vec![]);
        let (tick, next_job) = fourth.fired[0];
        assert_ne!(next_job, job);
        assert_eq!(tick, T0 + 4_000);
        assert_eq!(f.store.schedule("heartbeat").unwrap().row.last_job_id, Some(next_job));

        // A trigger is outside the tick sequence: it holds no key and is never skipped.
        let triggered = f.store.trigger_schedule(ADMIN, "heartbeat").unwrap().job;
        assert_eq!(unique_key(&f.store, triggered), None);
        f.assert_sound();
    }

    fn missed_ticks_caught_up_by_a_unique_schedule_make_one_job_and_count_the_rest_skipped() {
        let f = Fixture::new();
        let s = every_second().unique().missed(MissedTicks::CatchUp { max: 5 });
        f.store.declare_schedules("app", std::slice::from_ref(&s)).unwrap();
        f.clock.advance(Duration::from_millis(4_500));
        let (fired, _) = f.store.fire_due_schedules(&["heartbeat".to_string()]).unwrap();
        let job = fired[0].fired[0].1;
        assert_eq!(fired[0].fired, vec![(T0 + 1_000, job)]);
        assert_eq!(fired[0].skipped, vec![(T0 + 2_000, job), (T0 + 3_000, job), (T0 + 4_000, job)]);
        let row = f.store.schedule("heartbeat").unwrap().row;
        assert_eq!((row.last_tick, row.skipped_ticks, row.schedule.unique), (T0 + 4_000, 3, true));
        assert_eq!(jobs_of(&f.store, "beat"), 1);

        // Declaring it without `unique` is an audited change like any other.
        let Declared::Updated { changes } = &f.store.declare_schedules("app", &[every_second().missed(MissedTicks::CatchUp { max: 5 })]).unwrap()[0] else {
            panic!("not updated")
        };
        assert_eq!(changes, &["unique \"true\" -> \"false\""]);
        f.assert_sound();
    }

    fn eight_stores_racing_on_one_clock_make_exactly_one_job_per_tick() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[every_second()]).unwrap();
        let clock = f.clock.clone();
        let barrier = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (db, clock, barrier) = (StoreTarget::from(&f.db), clock.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let store = Store::open(&db).unwrap().with_clock(clock);
                    let names = vec!["heartbeat".to_string()];
                    let mut mine = 0;
                    for _ in 0..60 {
                        barrier.wait();
                        mine += store.fire_due_schedules(&names).unwrap().0.iter().map(|t| t.fired.len()).sum::<usize>();
                        barrier.wait();
                    }
                    mine
                })
            })
            .collect();
        // The clock moves while every thread waits at the barrier: 60 ticks, 8 racers each.
        let ticker = std::thread::spawn(move || {
            for _ in 0..60 {
                clock.advance(Duration::from_secs(1));
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        ticker.join().unwrap();
        let made = jobs_of(&f.store, "beat");
        assert_eq!(total as i64, made, "every job a racer reported is in the store");
        let ticks: Vec<String> = f
            .store
            .raw_query("SELECT job_id FROM transitions WHERE from_state IS NULL", &[])
            .unwrap()
            .into_iter()
            .map(|r| f.job(r[0].as_str().parse::<JobId>().unwrap()).labels[TICK_LABEL].clone())
            .collect();
        let mut unique = ticks.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ticks.len(), "a tick fired twice: {ticks:?}");
        f.assert_sound();
    }

    fn a_failed_job_insert_rolls_the_claimed_tick_back() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[every_second()]).unwrap();
        f.clock.advance(Duration::from_secs(2));
        // The transaction claims the tick first, then inserts the job: make the insert fail.
        let postgres = crate::backend::current() == crate::backend::Backend::Postgres;
        let sql_break = match crate::backend::current() {
            crate::backend::Backend::Sqlite => {
                "CREATE TRIGGER no_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            }
            crate::backend::Backend::Postgres => {
                "CREATE FUNCTION no_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
                 CREATE TRIGGER no_jobs BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION no_jobs()"
            }
        };
        f.store.raw_batch(sql_break).unwrap();
        let e = f.store.claim_ticks("heartbeat", T0, T0 + 2_000, &[NewJob::new("beat", "ticks", "{}")]).unwrap_err();
        assert!(format!("{e:?}").contains("disk full"), "{e:?}");
        assert_eq!(f.store.schedule("heartbeat").unwrap().row.last_tick, T0, "the cursor did not move");
        f.store.raw_batch(if postgres { "DROP TRIGGER no_jobs ON jobs" } else { "DROP TRIGGER no_jobs" }).unwrap();
        assert_eq!(jobs_of(&f.store, "beat"), 0, "and no job was left");
        let (fired, _) = f.store.fire_due_schedules(&["heartbeat".to_string()]).unwrap();
        assert_eq!(fired[0].fired.len(), 1, "the tick fires once the store takes jobs again");
    }

    fn missed_ticks_fire_by_policy_latest_once_catch_up_to_its_bound_or_skip() {
        let f = Fixture::new();
        let defs = [
            hourly(),
            Schedule::new("catch-up", "0 * * * *", "catch", "reports", "{}").missed(MissedTicks::CatchUp { max: 3 }),
            Schedule::new("skip", "0 * * * *", "skipped", "reports", "{}").missed(MissedTicks::Skip),
        ];
        f.store.declare_schedules("app", &defs).unwrap();
        // Nobody ran them for five hours and ten minutes: ticks 01:00 to 05:00 were missed.
        f.clock.advance(Duration::from_secs(5 * 3600 + 600));
        assert!(f.store.schedule("hourly").unwrap().overdue.is_some());
        let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
        let (fired, _) = f.store.fire_due_schedules(&names).unwrap();
        let ticks = |name: &str| -> Vec<i64> {
            fired.iter().find(|t| t.name == name).map(|t| t.fired.iter().map(|(tick, _)| *tick).collect()).unwrap()
        };
        let h = 3_600_000;
        assert_eq!(ticks("hourly"), vec![T0 + 5 * h]);
        assert_eq!(ticks("catch-up"), vec![T0 + 3 * h, T0 + 4 * h, T0 + 5 * h]);
        assert_eq!(ticks("skip"), Vec::<i64>::new());
        for name in &names {
            let info = f.store.schedule(name).unwrap();
            assert_eq!(info.row.last_tick, T0 + 5 * h, "{name}: the cursor is past every missed tick");
            assert_eq!(info.overdue, None);
        }
        assert_eq!((jobs_of(&f.store, "report"), jobs_of(&f.store, "catch"), jobs_of(&f.store, "skipped")), (1, 3, 0));
        // On time, Skip fires.
        f.clock.advance(Duration::from_secs(50 * 60 + 5));
        f.store.fire_due_schedules(&names).unwrap();
        assert_eq!(jobs_of(&f.store, "skipped"), 1);
    }

    fn a_paused_schedule_drops_its_ticks_and_resume_and_trigger_are_audited() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[every_second()]).unwrap();
        let names = vec!["heartbeat".to_string()];
        assert_eq!(f.store.pause_schedule(ADMIN, "heartbeat", None).unwrap(), SchedulePauseResult::Paused);
        assert_eq!(
            f.store.pause_schedule(ADMIN, "heartbeat", Some(T0 + 60_000)).unwrap(),
            SchedulePauseResult::Extended { previous_until: None }
        );
        let info = f.store.schedule("heartbeat").unwrap();
        assert!(info.paused);
        assert_eq!(info.next_fire, Some(T0 + 60_000), "the first tick from the pause's end");
        f.clock.advance(Duration::from_secs(5));
        let (fired, _) = f.store.fire_due_schedules(&names).unwrap();
        assert!(fired[0].fired.is_empty(), "paused: no job");
        assert_eq!(f.store.schedule("heartbeat").unwrap().row.last_tick, T0 + 5_000, "the ticks were dropped");

        // A trigger makes one job now and leaves the cursor where it is.
        let t = f.store.trigger_schedule(ADMIN, "heartbeat").unwrap();
        let job = f.job(t.job);
        assert_eq!(job.labels.get("triggered-by").map(String::as_str), Some(ADMIN));
        let row = f.store.schedule("heartbeat").unwrap().row;
        assert_eq!((row.last_tick, row.last_job_id, row.last_fired_at), (T0 + 5_000, Some(t.job), Some(T0 + 5_000)));

        assert_eq!(f.store.resume_schedule(ADMIN, "heartbeat").unwrap(), ScheduleResumeResult::Resumed);
        assert_eq!(f.store.resume_schedule(ADMIN, "heartbeat").unwrap(), ScheduleResumeResult::NotPaused);
        f.clock.advance(Duration::from_secs(1));
        let (fired, _) = f.store.fire_due_schedules(&names).unwrap();
        assert_eq!(fired[0].fired.len(), 1, "resumed: the next tick fires");
        let audit = f.store.audit_entries(0, 20).unwrap();
        for action in ["schedule-pause", "schedule-trigger", "schedule-resume"] {
            assert!(names_of(&audit).contains(&action), "{action} not audited: {audit:?}");
        }
        assert_eq!(audit.iter().find(|a| a.action == "schedule-trigger").unwrap().job_id, Some(t.job));
        // Operating needs `operate`; an unknown name is refused by name.
        let e = f.store.pause_schedule("mallory", "heartbeat", None).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e:?}");
        let e = f.store.trigger_schedule(ADMIN, "nope").unwrap_err();
        assert_eq!(e.to_string(), "no schedule named 'nope' (`Store::schedules` lists them)");
    }

    fn a_schedules_priority_is_stored_updated_and_carried_by_its_ticks_and_triggers() {
        let f = Fixture::new();
        let low = every_second().priority(7);
        f.store.declare_schedules("app", std::slice::from_ref(&low)).unwrap();
        assert_eq!(f.store.schedule("heartbeat").unwrap().row.schedule.priority, 7);
        let names = vec!["heartbeat".to_string()];
        f.clock.advance(Duration::from_millis(1_500));
        let (fired, _) = f.store.fire_due_schedules(&names).unwrap();
        assert_eq!(f.job(fired[0].fired[0].1).priority, 7);
        assert_eq!(f.job(f.store.trigger_schedule(ADMIN, "heartbeat").unwrap().job).priority, 7);
        // A redeclaration with another priority is an update, audited with the change.
        let Declared::Updated { changes } = &f.store.declare_schedules("app", &[every_second().priority(2)]).unwrap()[0]
        else {
            panic!("not updated")
        };
        assert_eq!(changes, &["priority \"7\" -> \"2\""]);
        f.clock.advance(Duration::from_secs(1));
        let (fired, _) = f.store.fire_due_schedules(&names).unwrap();
        assert_eq!(f.job(fired[0].fired[0].1).priority, 2);
        // Out of range: refused when declared, quoting it, nothing stored.
        let e = f.store.declare_schedules("app", &[hourly().priority(10)]).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "schedule 'hourly': the priority 10 is out of range: a priority is 0 (claimed first) to 9 (claimed last)"
        );
        assert!(f.store.schedule("hourly").is_err());
    }

    fn a_schedule_nobody_declares_for_a_minute_is_orphaned_never_deleted() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[hourly(), every_second()]).unwrap();
        f.clock.advance(Duration::from_secs(45));
        f.store.touch_schedules(&["hourly".to_string()]).unwrap();
        f.clock.advance(Duration::from_secs(30));
        let all = f.store.schedules().unwrap();
        let orphaned: Vec<(&str, bool)> = all.iter().map(|s| (s.row.schedule.name.as_str(), s.orphaned)).collect();
        assert_eq!(orphaned, vec![("heartbeat", true), ("hourly", false)]);
        // Declared again, it is no longer orphaned.
        f.store.declare_schedules("app", &[every_second()]).unwrap();
        assert!(!f.store.schedule("heartbeat").unwrap().orphaned);
    }
}

fn names_of(actions: &[backwave::store::AuditEntry]) -> Vec<&str> {
    names(actions)
}

#[test]
fn a_store_opened_read_only_at_an_old_version_has_no_schedules_and_refuses_to_declare() {
    let f = Fixture::new();
    // What versions 7 to 18 added goes, so that the store is what version 6 wrote (but for the
    // `waiting` state in the CHECKs, which migration 18 leaves as it finds it).
    f.store
        .raw_batch(
            "DROP TABLE schedules; DROP INDEX jobs_failed_list; ALTER TABLE jobs DROP COLUMN traceparent;
             DROP INDEX jobs_claim_priority; ALTER TABLE jobs DROP COLUMN priority;
             ALTER TABLE jobs DROP COLUMN output; ALTER TABLE jobs DROP COLUMN progress;
             ALTER TABLE jobs DROP COLUMN progress_message;
             DROP TRIGGER jobs_release; DROP TABLE job_edges; DROP TABLE workflows; DROP INDEX jobs_workflow; DROP INDEX jobs_waiting;
             ALTER TABLE jobs DROP COLUMN workflow_id;
             PRAGMA user_version = 6",
        )
        .unwrap();
    drop(f.store);
    let old = Store::open(&f.db);
    // A writable open migrates it back to the current version with an empty table.
    let store = old.unwrap().with_clock(Clock::manual(T0));
    assert_eq!(store.schema_version(), backwave::store::SCHEMA_VERSION);
    assert!(store.schedules().unwrap().is_empty());
    assert_eq!(store.declare_schedules("app", &[hourly()]).unwrap(), vec![Declared::New]);
}

both_backends! {
    fn a_label_value_another_program_stored_as_a_number_reads_as_its_json_text_on_both_backends() {
        let f = Fixture::new();
        f.store.declare_schedules("app", &[hourly()]).unwrap();
        f.store
            .raw_execute(r#"UPDATE schedules SET labels = '{"team":"ops","n":5}' WHERE name = 'hourly'"#, &[])
            .unwrap();
        let labels = f.store.schedule("hourly").unwrap().row.schedule.labels;
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(labels, [("n", "5"), ("team", "ops")]);
    }
}

/// The SDK's exporter interface, keeping each span it is handed.
#[derive(Debug, Clone, Default)]
struct Kept(std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Kept {
    async fn export(&self, batch: Vec<opentelemetry_sdk::trace::SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

both_backends! {
    /// A tick's job carries the trace of the code that fired it, through a producer span naming
    /// the schedule, so that its attempt continues that trace; with no OpenTelemetry layer the
    /// job carries none and nothing is spent on it.
    fn a_tick_s_job_carries_the_trace_of_its_enqueue_span_which_names_the_schedule() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt;

        let f = Fixture::new();
        f.store.declare_schedules("app", &[every_second()]).unwrap();
        f.clock.advance(Duration::from_millis(1_500));
        let kept = Kept::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().with_simple_exporter(kept.clone()).build();
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("ticks")));
        let (fired, _) = tracing::subscriber::with_default(subscriber, || {
            let _ticker = tracing::info_span!("ticker").entered();
            f.store.fire_due_schedules(&["heartbeat".to_string()]).unwrap()
        });
        let job = f.store.job(fired[0].fired[0].1).unwrap().unwrap();
        let tp = job.traceparent.expect("the tick's job carries a trace");
        let spans = kept.0.lock().unwrap().clone();
        let enqueue = spans.iter().find(|s| s.name == "backwave.enqueue").expect("an enqueue span was exported");
        let attr = |k: &str| enqueue.attributes.iter().find(|kv| kv.key.as_str() == k).map(|kv| kv.value.to_string());
        assert_eq!(attr("backwave.schedule").as_deref(), Some("heartbeat"));
        assert_eq!(attr("messaging.destination.name").as_deref(), Some("ticks"));
        assert_eq!(&tp[3..35], enqueue.span_context.trace_id().to_string(), "{tp}");
        let ticker = spans.iter().find(|s| s.name == "ticker").expect("the firing code's span");
        assert_eq!(ticker.span_context.trace_id(), enqueue.span_context.trace_id(), "one trace");

        f.clock.advance(Duration::from_millis(1_000));
        let (fired, _) = f.store.fire_due_schedules(&["heartbeat".to_string()]).unwrap();
        assert_eq!(f.store.job(fired[0].fired[0].1).unwrap().unwrap().traceparent, None);
    }
}
