//! Durations as the CLI and the retention setting read them, and the retry curves they feed.
#![no_main]

use bw::cli::{parse_duration, parse_when};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match parse_duration(text) {
        Ok(d) => {
            // Every accepted duration can be used against "now" without wrapping.
            let ms = i64::try_from(d.as_millis()).expect("an accepted duration fits in i64 ms");
            assert!(1_800_000_000_000i64.checked_sub(ms).is_some());
        }
        Err(e) => assert!(e.contains(text)),
    }
    if let Ok(w) = parse_when(text) {
        let _ = w.resolve(1_800_000_000_000);
    }
});
