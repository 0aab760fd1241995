//! The `/` filter language of `bw top`: parse, then use what parsed.
#![no_main]

use bw::tui::filter::Filter;
use backwave::JobState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match Filter::parse(text, 1_800_000_000_000) {
        Ok(f) => {
            for state in JobState::ALL {
                let _ = f.job_filter(state, &["high".into()], &["charge-card".into()]);
            }
            let _ = f.check_log();
        }
        Err(e) => assert!(!e.is_empty()),
    }
});
