//! `bw workflows`, `bw workflow show`, `bw jobs show` of a workflow job, and the bulk actions
//! with `--workflow` (issue 42) through the real binary, on both backends: the table and its
//! JSON, a workflow stuck behind a dead-lettered parent, cancel and requeue through the same
//! plan as every bulk action.

use backwave::store::{current_actor, Completion, Outcome};
use backwave::{Clock, JobId, JobState, NewJob, Store, Workflow};

use super::backend::both_backends;
use super::harness::*;

struct Flow {
    f: Fixture,
    wf: backwave::WorkflowId,
    fetch: JobId,
    resizes: Vec<JobId>,
    publish: JobId,
}

/// fetch -> resize x3 -> publish, enqueued an hour before `T`: fetch and the first resize
/// succeeded, the second resize dead-lettered, the third is Scheduled, publish waits.
fn flow() -> Flow {
    let f = Fixture::empty();
    let store = Store::create(&f.db).unwrap().with_clock(Clock::manual(T_MS - 3_600_000));
    store.bootstrap_admin(&current_actor()).unwrap();
    let mut w = Workflow::new("thumbnails");
    let fetch = w.add(NewJob::new("fetch", "media", r#"{"url":"s3://in/cat.png"}"#));
    let resizes: Vec<_> = [64, 256, 1024]
        .iter()
        .map(|px| w.add_after(NewJob::new("resize", "media", format!(r#"{{"px":{px}}}"#)), &[fetch]).unwrap())
        .collect();
    let publish = w.add_after(NewJob::new("publish", "media", "{}"), &resizes).unwrap();
    let e = store.enqueue_workflow(&w).unwrap();
    let end = |outcome: Outcome| {
        let j = claim_all(&store, "media", 1).pop().expect("a due job");
        store.complete(&Completion { job_id: j.id, worker_id: "w-test".into(), attempt: j.attempt, outcome }).unwrap();
        j.id
    };
    assert_eq!(end(Outcome::Succeeded), e.job(fetch));
    end(Outcome::Succeeded);
    end(Outcome::Failed { message: "image too large".into(), detail: None, retry_in: None });
    Flow {
        f,
        wf: e.id,
        fetch: e.job(fetch),
        resizes: resizes.iter().map(|r| e.job(*r)).collect(),
        publish: e.job(publish),
    }
}

impl Flow {
    /// Random ids as stand-ins of the same width, so that a snapshot holds still.
    fn steady(&self, text: &str) -> String {
        let wf = self.wf.to_string();
        let mut out = text.replace(&wf, "wwwwwwww-wwww-wwww-wwww-wwwwwwwwwwww").replace(&wf[..8], "wwwwwwww");
        let ids = [
            ("f", self.fetch),
            ("1", self.resizes[0]),
            ("2", self.resizes[1]),
            ("3", self.resizes[2]),
            ("p", self.publish),
        ];
        for (k, id) in ids {
            out = out.replace(&id.to_string(), &k.repeat(36)).replace(&id.short(), &k.repeat(id.short().len()));
        }
        out
    }
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, text);
    });
}

both_backends! {
    fn workflows_list_and_show_a_graph_stuck_behind_a_dead_lettered_parent() {
        let flow = flow();
        let f = &flow.f;
        let wf = flow.wf.to_string();
        let runs = [
            f.run(&["workflows"]),
            f.run(&["workflow", "show", &wf[..8]]),
            f.run(&["jobs", "list", "--state", "waiting"]),
            f.run(&["workflow", "show", "ffffffff"]),
            // A part of a big graph: the states asked for, at most --limit, the rest counted.
            f.run(&["workflow", "show", &wf[..8], "--state", "scheduled,waiting", "--limit", "1"]),
            f.run(&["workflow", "show", &wf[..8], "--state", "running"]),
            f.run(&["workflow", "show", &wf[..8], "--limit", "0"]),
            f.run(&["workflow", "show", &wf[..8], "--state", "nope"]),
        ];
        snapshot("cli__workflows_list_and_show_a_graph_stuck_behind_a_dead_lettered_parent", &flow.steady(&transcript(&runs)));

        let v = json(&f.bw().args(["--format", "json", "workflows"]).assert().success().get_output().stdout);
        let w = &v["workflows"][0];
        assert_eq!(w["id"], wf);
        assert_eq!(w["name"], "thumbnails");
        assert_eq!(w["jobs"], 5);
        assert_eq!(w["counts"]["succeeded"], 2);
        assert_eq!(w["counts"]["dead-lettered"], 1);
        assert_eq!(w["counts"]["scheduled"], 1);
        assert_eq!(w["counts"]["waiting"], 1);
        assert_eq!(w["stuck"], 1);

        let v = json(&f.bw().args(["--format", "json", "workflow", "show", &wf]).assert().success().get_output().stdout);
        let graph = v["graph"].as_array().unwrap();
        assert_eq!(graph.len(), 5);
        assert_eq!(graph[0]["id"], flow.fetch.to_string(), "parents first");
        assert_eq!(graph[4]["id"], flow.publish.to_string());
        assert_eq!(graph[4]["parents"].as_array().unwrap().len(), 3);
        assert_eq!(v["more"], 0);
        let v = json(&f.bw().args(["--format", "json", "workflow", "show", &wf, "--limit", "2"]).assert().success().get_output().stdout);
        assert_eq!((v["graph"].as_array().unwrap().len(), v["more"].as_u64(), v["jobs"].as_u64()), (2, Some(3), Some(5)));

        let publish = flow.publish.to_string();
        let v = json(&f.bw().args(["--format", "json", "jobs", "show", &publish]).assert().success().get_output().stdout);
        assert_eq!(v["job"]["state"], "waiting");
        assert_eq!(v["workflow"]["id"], wf);
        let parents = v["workflow"]["parents"].as_array().unwrap();
        assert_eq!(parents.len(), 3);
        assert_eq!(parents.iter().filter(|p| p["met"] == true).count(), 1);
        // `bw check` flags the workflow stuck behind its dead-lettered resize; `bw metrics`
        // counts its waiting job.
        let v = json(&f.bw().args(["--format", "json", "check"]).output().unwrap().stdout);
        let check = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "stuck-workflow").unwrap().clone();
        assert_eq!((check["status"].as_str(), check["value"].as_f64()), (Some("warning"), Some(1.0)));
        assert!(check["message"].as_str().unwrap().contains("'thumbnails'"), "{check}");
        let metrics = text(&f.bw().arg("metrics").assert().success().get_output().stdout);
        assert!(metrics.contains(r#"backwave_jobs{queue="media",state="waiting"} 1"#), "{metrics}");
        let fetch = flow.fetch.to_string();
        let v = json(&f.bw().args(["--format", "json", "jobs", "show", &fetch]).assert().success().get_output().stdout);
        assert_eq!(v["workflow"]["children"].as_array().unwrap().len(), 3);
    }

    fn cancel_and_requeue_by_workflow_go_through_the_bulk_plan() {
        let flow = flow();
        let f = &flow.f;
        let wf = flow.wf.to_string();
        // Requeue the workflow's dead-lettered job: the same plan and audit as any bulk requeue.
        f.bw().args(["requeue", "--workflow", &wf, "--state", "dead-lettered", "--yes"]).assert().success();
        let store = f.store();
        assert_eq!(store.job(flow.resizes[1]).unwrap().unwrap().state, JobState::Scheduled);
        // Cancel what has not finished: the two Scheduled resizes and the Waiting publish.
        let dry = f.bw().args(["cancel", "--workflow", &wf, "--dry-run"]).assert().success();
        let dry = String::from_utf8_lossy(&dry.get_output().stdout).to_string();
        assert!(dry.contains('3'), "the plan counts three jobs: {dry}");
        f.bw().args(["cancel", "--workflow", &wf, "--yes"]).assert().success();
        for id in [flow.resizes[1], flow.resizes[2], flow.publish] {
            assert_eq!(store.job(id).unwrap().unwrap().state, JobState::Cancelled, "{id}");
        }
        assert_eq!(store.job(flow.fetch).unwrap().unwrap().state, JobState::Succeeded);
        let log = store.history(flow.publish).unwrap();
        let last = log.last().unwrap();
        assert_eq!((last.from, last.to), (Some(JobState::Waiting), JobState::Cancelled));
        // A workflow id that is not one: exit 2, quoted.
        let out = f.bw().args(["cancel", "--workflow", "nope", "--yes"]).assert().code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(err.contains("'nope' is not a workflow id"), "{err}");
    }
}

both_backends! {
    fn the_workflow_example_runs_fetch_resize_publish_and_bw_shows_it_done() {
        let f = Fixture::empty();
        let out = std::process::Command::new(crate::programs::example("workflow")).arg(f.db.arg()).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "the example failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(r#"{"published":["s3://media/cat-64.png","s3://media/cat-256.png","s3://media/cat-1024.png"]}"#), "{stdout}");

        let v = json(&f.bw().args(["--format", "json", "workflows"]).assert().success().get_output().stdout);
        let w = &v["workflows"][0];
        assert_eq!((w["name"].as_str(), w["jobs"].as_u64(), w["counts"]["succeeded"].as_u64()), (Some("thumbnails"), Some(5), Some(5)));
        let id = w["id"].as_str().unwrap().to_string();
        let shown = text(&f.bw().args(["workflow", "show", &id]).assert().success().get_output().stdout);
        assert!(shown.contains("Status   done"), "{shown}");
        assert_eq!(shown.lines().filter(|l| l.contains(" succeeded ")).count(), 5, "{shown}");

        let v = json(&f.bw().args(["--format", "json", "workflow", "show", &id]).assert().success().get_output().stdout);
        for job in v["graph"].as_array().unwrap() {
            assert_eq!(job["state"], "succeeded");
            let id = job["id"].as_str().unwrap();
            let shown = json(&f.bw().args(["--format", "json", "jobs", "show", id]).assert().success().get_output().stdout);
            assert!(shown["job"]["output"].is_object(), "job {id} shows no output: {}", shown["job"]);
        }
    }
}

both_backends! {
    /// A workflow that cancels on failure: its failed parent's children are cancelled at once,
    /// `bw workflow show` says so, the JSON carries `on_failure`, and the child's cause names
    /// the parent.
    fn a_workflow_that_cancels_on_failure_says_so_and_shows_its_cancelled_children() {
        let f = Fixture::empty();
        let store = Store::create(&f.db).unwrap().with_clock(Clock::manual(T_MS - 60_000));
        store.bootstrap_admin(&current_actor()).unwrap();
        let mut w = Workflow::new("export");
        w.on_failure(backwave::workflow::OnFailure::Cancel);
        let dump = w.add(NewJob::new("dump", "exports", "{}"));
        let upload = w.add_after(NewJob::new("upload", "exports", "{}"), &[dump]).unwrap();
        let e = store.enqueue_workflow(&w).unwrap();
        let j = claim_all(&store, "exports", 1).pop().expect("the dump");
        let failed = Outcome::Failed { message: "disk full".into(), detail: None, retry_in: None };
        store.complete(&Completion { job_id: j.id, worker_id: "w-test".into(), attempt: j.attempt, outcome: failed }).unwrap();

        let wf = e.id.to_string();
        let shown = text(&f.bw().args(["workflow", "show", &wf]).assert().success().get_output().stdout);
        assert!(shown.contains("Failure  a job that fails for good cancels what depends on it"), "{shown}");
        assert!(shown.contains("done, 2 not succeeded"), "{shown}");
        let v = json(&f.bw().args(["--format", "json", "workflows"]).assert().success().get_output().stdout);
        assert_eq!(v["workflows"][0]["on_failure"], "cancel");
        assert_eq!(v["workflows"][0]["counts"]["cancelled"], 1);
        let child = e.job(upload).to_string();
        let v = json(&f.bw().args(["--format", "json", "jobs", "show", &child]).assert().success().get_output().stdout);
        assert_eq!(v["job"]["state"], "cancelled");
        let cause = v["job"]["terminal_cause"].as_str().unwrap_or_default().to_string();
        assert!(cause.contains(&e.job(dump).to_string()) && cause.contains("dead-lettered"), "{v}");
    }
}
