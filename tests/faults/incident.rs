//! Bulk incident actions killed part-way: each job is whole (changed with its log entry and
//! audit, or untouched), and a rerun finishes the rest, changing each job exactly once.

use backwave::store::current_actor;
use backwave::{JobState, NewJob, Store};

use super::races::{assert_log_matches_rows, bw, kill_after_first_batch};
use crate::backend::{both_backends, TestDb};

both_backends! {
    fn bulk_cancel_killed_part_way_leaves_each_job_whole_and_a_rerun_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        let store = Store::create(&db).unwrap();
        store.bootstrap_admin(&current_actor()).unwrap();
        for _ in 0..12 {
            let jobs: Vec<NewJob> = (0..1_000).map(|_| NewJob::new("charge-card", "critical", vec![])).collect();
            store.enqueue_many(&jobs).unwrap();
        }
        store.enqueue(&NewJob::new("send-email", "critical", vec![])).unwrap();
        let args = ["cancel", "--state", "scheduled", "--wire-name", "charge-card", "--yes"];

        kill_after_first_batch(&db, &args, "cancelled ");
        assert_log_matches_rows(&db);
        let cancelled = store.counts().unwrap().total(JobState::Cancelled);
        assert!(cancelled > 0 && cancelled < 12_000, "the kill was not part-way: {cancelled} of 12,000 cancelled");

        let out = bw(&db).args(args).output().unwrap();
        assert!(out.status.success(), "the rerun failed: {}", String::from_utf8_lossy(&out.stderr));
        assert_log_matches_rows(&db);
        let counts = store.counts().unwrap();
        assert_eq!((counts.total(JobState::Cancelled), counts.total(JobState::Scheduled)), (12_000, 1));
        let entries =
            store.raw_scalar("SELECT count(*) FROM transitions WHERE to_state = 'cancelled'", &[]).unwrap().as_i64();
        assert_eq!(entries, 12_000, "each job cancelled exactly once over the two runs");
    }
}
