//! Whatever a job row holds, what reaches the terminal has no control characters (newlines and
//! tabs only where multi-line text is wanted).
#![no_main]

use bw::cli::output::{sanitize, sanitize_multiline};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    assert!(!sanitize(text).chars().any(|c| c.is_control()));
    assert!(!sanitize_multiline(text).chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
});
