//! What a handler records besides succeeding (issue 42): a typed output kept with the job
//! (`JobContext::set_output`), and progress that rides on the heartbeat (`JobContext::progress`),
//! with plain and async handlers on both backends, and what `bw jobs show` prints of them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry};
use backwave::store::SettingKey;
use backwave::JobState;

use super::support::*;
use crate::backend::TestDb;

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Resized {
    width: u32,
    path: String,
}

/// `bw jobs show ID` as text and as JSON.
fn bw_show(db: &TestDb, id: &str) -> (String, serde_json::Value) {
    let run = |json: bool| {
        let mut args = vec!["--db", db.arg()];
        if json {
            args.extend(["--format", "json"]);
        }
        args.extend(["jobs", "show", id]);
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
            .args(&args)
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(out.status.success(), "bw {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    (run(false), serde_json::from_str(&run(true)).unwrap())
}

both_flavors! {
    /// The output a handler records is kept with its success and read back typed; a failed
    /// attempt's output is dropped (attempt 1 records one and fails, attempt 2 succeeds without);
    /// `bw jobs show` prints it as pretty JSON, and `--format json` as the value itself.
    fn a_handler_s_output_is_kept_with_its_success_and_bw_jobs_show_prints_it() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "resize", |width, ctx| {
            ctx.set_output(&Resized { width, path: format!("/img/{width}.png") })?;
            Ok(())
        })
        .queue("q");
        handle::<u32>(&mut registry, "flaky", |_, ctx| {
            if ctx.attempt() == 1 {
                ctx.set_output(&"attempt 1's")?;
                return Err(HandlerError::msg("boom"));
            }
            Ok(())
        })
        .queue("q");
        let resized = registry.enqueue(&t.store, "resize", &640u32).unwrap();
        let flaky = registry.enqueue(&t.store, "flaky", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 3));
        let running = engine.start().unwrap();
        let (j, f) = (wait_terminal(&t.store, resized), wait_terminal(&t.store, flaky));
        running.shutdown(Duration::from_secs(1));

        assert_eq!(j.state, JobState::Succeeded);
        let want = Resized { width: 640, path: "/img/640.png".into() };
        assert_eq!(j.output_as::<Resized>().unwrap().unwrap(), want);
        let stored = t.store.output(resized).unwrap().unwrap();
        assert_eq!(serde_json::from_slice::<Resized>(&stored).unwrap(), want);
        assert_eq!((f.state, f.attempt), (JobState::Succeeded, 2));
        // Attempt 2's context is fresh: attempt 1's output went with its failure.
        assert_eq!(f.output, None);

        let (table, json) = bw_show(&t.db, &resized.to_string());
        assert_eq!(json["job"]["output"], serde_json::json!({"width": 640, "path": "/img/640.png"}));
        assert!(table.contains("Output (35 B):\n  {\n    \"width\": 640,\n    \"path\": \"/img/640.png\"\n  }\n"), "{table}");
        let (table, json) = bw_show(&t.db, &flaky.to_string());
        assert!(json["job"]["output"].is_null(), "{json}");
        assert!(!table.contains("Output"), "{table}");
    }

    /// An output over the store's `output_limit` fails the attempt with a cause naming the limit
    /// and the size, and the job is retried and dead-lettered like any failing job; nothing of the
    /// output is kept.
    fn an_output_over_the_limit_fails_the_attempt_and_the_job_dead_letters() {
        let t = test_store();
        t.store.set_setting(ACTOR, SettingKey::OutputLimit, "64B").unwrap();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "big", |n, ctx| ctx.set_output(&"x".repeat(n as usize))).queue("q");
        let big = registry.enqueue(&t.store, "big", &100u32).unwrap();
        let small = registry.enqueue(&t.store, "big", &10u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 2));
        let running = engine.start().unwrap();
        let (b, s) = (wait_terminal(&t.store, big), wait_terminal(&t.store, small));
        running.shutdown(Duration::from_secs(1));
        let cause = "the handler's output is 102 bytes, over the store's output_limit of 64 bytes: it was not \
                     recorded; record a smaller output (a reference to data kept elsewhere), or raise the limit";
        assert_eq!((b.state, b.attempt, b.terminal_cause.as_deref(), b.output), (JobState::DeadLettered, 2, Some(cause), None));
        let failures: Vec<_> = t.store.history(big).unwrap().into_iter().filter(|e| e.reason.as_deref() == Some(cause)).collect();
        assert_eq!(failures.len(), 2, "each attempt failed on it: retried once, then dead-lettered");
        assert_eq!((s.state, s.output.as_deref()), (JobState::Succeeded, Some(&b"\"xxxxxxxxxx\""[..])));
    }

    /// Progress a running handler reports is in the store within a heartbeat, while it runs, and
    /// `bw jobs show` prints it; a fraction out of range is refused quoting it and writes nothing.
    /// After the job succeeds, its last report stays, said to be the last.
    fn progress_reported_by_a_running_handler_is_in_the_store_while_it_runs() {
        let t = test_store();
        let release = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let mut registry = Registry::new();
        let (r, e) = (Arc::clone(&release), Arc::clone(&refused));
        handle::<u32>(&mut registry, "resize", move |_, ctx| {
            for bad in [1.5, f64::NAN] {
                e.lock().unwrap().push(ctx.progress(bad, "never").unwrap_err().message().to_string());
            }
            ctx.progress(0.42, "resizing 3 of 8")?;
            while !r.load(Ordering::SeqCst) {
                ctx.sleep(Duration::from_millis(5))?;
            }
            Ok(())
        })
        .queue("q");
        let id = registry.enqueue(&t.store, "resize", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 3));
        let running = engine.start().unwrap();
        // The group's lease is 600 ms: a heartbeat every 200 ms carries the report.
        let p = wait_for("the progress to reach the store", Duration::from_secs(10), || job(&t.store, id).progress);
        assert_eq!((p.fraction, p.message.as_str()), (0.42, "resizing 3 of 8"));
        assert_eq!(job(&t.store, id).state, JobState::Running);
        assert_eq!(
            *refused.lock().unwrap(),
            [
                "progress fraction 1.5 is not between 0 and 1 (0.42 is 42%): nothing was reported",
                "progress fraction NaN is not between 0 and 1 (0.42 is 42%): nothing was reported",
            ]
        );
        let (table, json) = bw_show(&t.db, &id.to_string());
        assert!(table.lines().any(|l| l.split_whitespace().eq(["Progress", "42%", "resizing", "3", "of", "8"])), "{table}");
        assert_eq!(json["job"]["progress"], serde_json::json!({"fraction": 0.42, "message": "resizing 3 of 8"}));

        release.store(true, Ordering::SeqCst);
        let done = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(done.state, JobState::Succeeded);
        assert_eq!(done.progress.map(|p| p.to_string()).as_deref(), Some("42% resizing 3 of 8"));
        let (table, _) = bw_show(&t.db, &id.to_string());
        let line = table.lines().find(|l| l.trim_start().starts_with("Progress")).unwrap_or_default();
        assert_eq!(line.split_whitespace().skip(1).collect::<Vec<_>>().join(" "), "42% resizing 3 of 8 (as attempt 1 last reported it)");
    }
}
