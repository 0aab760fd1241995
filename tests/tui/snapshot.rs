//! A refresh of `bw top` reads in one snapshot of the store: a writer committing between its
//! reads (here, between the header's counts and the page) changes nothing the refresh shows, so
//! the counts, the page, its total and the log agree.

use backwave::{JobState, NewJob, Store};
use bw::tui::data::refresh_racing;
use bw::tui::{Action, View};

use super::backend::both_backends;
use super::harness::Fixture;

both_backends! {
    fn a_refresh_racing_a_writer_shows_counts_that_agree_with_its_page_and_log() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 30);
        f.press(&mut app, [Action::ShowView(View::Scheduled)]);
        let mut q = app.query();
        q.log_cursor = Some(f.store.log_end().unwrap());
        let other = Store::open(&f.db).unwrap().with_clock(f.clock.clone());
        let mut written = Vec::new();
        let s = refresh_racing(&f.store, &q, &mut || {
            for i in 0..3 {
                let job = NewJob::new("resize-image", "bulk", format!("{{\"w\":{i}}}"));
                written.push(other.enqueue(&job).unwrap());
            }
        })
        .unwrap();
        assert_eq!(written.len(), 3, "the writer ran between the refresh's reads");
        let page = s.page.as_ref().expect("the Scheduled view reads a page");
        let scheduled = s.counts.total(JobState::Scheduled);
        assert_eq!(page.total, scheduled, "the page's total is the header's count");
        assert!(page.jobs.iter().all(|j| !written.contains(&j.id)), "no job written after the snapshot is listed");
        assert!(s.log.iter().all(|t| !written.contains(&t.job_id)), "nor its log entry");
        // The next refresh sees them, its counts and page agreeing again.
        let s = refresh_racing(&f.store, &q, &mut || {}).unwrap();
        assert_eq!(s.counts.total(JobState::Scheduled), scheduled + 3);
        assert_eq!(s.page.as_ref().unwrap().total, scheduled + 3);
        assert_eq!(s.log.iter().filter(|t| written.contains(&t.job_id)).count(), 3);
    }
}
