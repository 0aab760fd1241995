//! Sample material for newcomers and benchmarks: the handlers and worker groups `bw demo` runs
//! (a readable example of the engine's API, the file to copy when starting a worker), the demo
//! runner, and the large-store generator behind the hidden `bw generate`. The engine never
//! depends on anything here.

pub mod generate;
pub mod handlers;
mod rng;
pub mod run;

pub use run::{Demo, DemoOptions, DemoReport, Sample};
