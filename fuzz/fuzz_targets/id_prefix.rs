//! `Store::resolve_id` on any text: a job, a clear refusal quoting the text, never a panic.
#![no_main]

use std::cell::RefCell;

use backwave::{Error, NewJob, Store};
use libfuzzer_sys::fuzz_target;

thread_local! {
    // One small store for the whole run: ids of the same millisecond share long prefixes,
    // which is where ambiguity lives.
    static STORE: RefCell<(tempfile::TempDir, Store)> = RefCell::new({
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("fuzz.db")).unwrap();
        store.enqueue_many(&(0..50).map(|_| NewJob::new("w", "q", "{}")).collect::<Vec<_>>()).unwrap();
        (dir, store)
    });
}

fuzz_target!(|text: &str| {
    STORE.with(|s| {
        let s = s.borrow();
        match s.1.resolve_id(text) {
            Ok(id) => {
                let hex: String = text.trim().chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
                // A prefix of the id, or (short ids, up to 12 hex digits) its random tail.
                let simple = id.0.simple().to_string();
                assert!(simple.starts_with(&hex) || (hex.len() <= 12 && simple.ends_with(&hex)));
            }
            Err(e @ (Error::InvalidInput(_) | Error::JobNotFound(_) | Error::AmbiguousId { .. })) => {
                assert!(e.to_string().contains(text.trim()) || e.to_string().contains(text));
            }
            Err(e) => panic!("unexpected error for {text:?}: {e:?}"),
        }
    });
});
