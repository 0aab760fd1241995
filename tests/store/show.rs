//! `Store::job_view`, what `bw jobs show` reads in one go: the same answers as the separate
//! reads it replaces, for every way of naming a job and for an id that names none.

use backwave::store::SettingKey;
use backwave::{Error, JobId};

use super::{failed, policy, Fixture, ADMIN, WORKER};
use crate::backend::both_backends;

fn separate_reads(fx: &Fixture, text: &str) -> Result<String, String> {
    let s = &fx.store;
    let id = s.resolve_id(text).map_err(|e| e.to_string())?;
    let job = s.job(id).unwrap().expect("a resolved id names a job");
    let live = s.live_handlers().unwrap().get(&job.wire_name).copied().unwrap_or(0);
    Ok(format!("{job:?} {:?} {live} {}", s.history(id).unwrap(), s.failure_detail_enabled().unwrap()))
}

fn one_read(fx: &Fixture, text: &str) -> Result<String, String> {
    let v = fx.store.job_view(text).map_err(|e| e.to_string())?;
    Ok(format!("{:?} {:?} {} {}", v.job, v.history, v.live_handlers, v.failure_detail))
}

both_backends! {
    fn a_job_view_answers_as_the_separate_reads_for_a_full_id_a_prefix_a_short_id_and_no_job() {
        let fx = Fixture::new();
        fx.enqueue("email", "mail");
        fx.enqueue("email", "mail");
        let job = fx.claim_one("mail", &policy(3, std::time::Duration::from_secs(1)));
        fx.report(&job, failed("smtp down"));
        let (id, other) = (job.id, fx.enqueue("sms", "mail"));
        fx.register_worker(WORKER, "web-1");
        let full = id.to_string();
        let upper_no_hyphens = full.replace('-', "").to_uppercase();
        let unknown: JobId = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b99".parse().unwrap();
        for text in [full.as_str(), &upper_no_hyphens, &full[..34], &other.short(), &unknown.to_string(), "0", "zz"] {
            assert_eq!(one_read(&fx, text), separate_reads(&fx, text), "naming the job as {text:?}");
        }
        let view = fx.store.job_view(&full).unwrap();
        assert_eq!((view.job.id, view.history.len(), view.live_handlers, view.failure_detail), (id, 3, 1, true));
        assert!(matches!(fx.store.job_view(&unknown.to_string()), Err(Error::JobNotFound(t)) if t == unknown.to_string()));
        fx.store.set_setting(ADMIN, SettingKey::FailureDetail, "off").unwrap();
        assert!(!fx.store.job_view(&other.to_string()).unwrap().failure_detail);
        assert_eq!(one_read(&fx, &other.to_string()), separate_reads(&fx, &other.to_string()));
    }
}
