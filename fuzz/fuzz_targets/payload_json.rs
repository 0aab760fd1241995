//! Payloads: what `bw enqueue --payload` accepts (any JSON), what `bw jobs show` prints of any
//! stored bytes (sanitized), and decoding into a handler's type never panics.
#![no_main]

use bw::cli::output::sanitize_bytes;
use libfuzzer_sys::fuzz_target;

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct ChargeCard {
    card_token: String,
    amount: u64,
}

fuzz_target!(|bytes: &[u8]| {
    let _ = serde_json::from_slice::<serde_json::Value>(bytes);
    let _ = serde_json::from_slice::<ChargeCard>(bytes);
    let shown = sanitize_bytes(bytes);
    assert!(!shown.chars().any(|c| c.is_control()), "a control character survived: {shown:?}");
});
