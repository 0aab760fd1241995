//! `--before`/`BW_NOW` instants and `--state` spellings.
#![no_main]

use bw::cli::parse_instant;
use backwave::JobState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Err(e) = parse_instant(text) {
        assert!(e.contains(text));
    }
    match text.parse::<JobState>() {
        Ok(s) => assert!(JobState::ALL.contains(&s)),
        Err(e) => assert!(e.to_string().contains(text)),
    }
});
