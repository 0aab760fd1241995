//! Health checks and metrics (issue #11): `Store::health` and its seven checks crossing each
//! threshold both ways, `bw check`'s exit statuses and JSON, `bw stats`' queue latency, and
//! `bw metrics` read back by a real Prometheus text parser, printed and served over loopback;
//! and how each treats pauses (issue #10): reported and held apart, not judged as latency.
//! Stores are written row by row through the schema contract with the clock pinned. Every test
//! but those about SQLite's query plans and files runs on both backends.

#[path = "health/checks.rs"]
mod checks;
#[path = "health/cli.rs"]
mod cli;
#[path = "health/fixture.rs"]
mod fixture;
#[path = "health/metrics.rs"]
mod metrics;
#[path = "health/pauses.rs"]
mod pauses;
