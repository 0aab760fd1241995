//! Sample material for newcomers and benchmarks: the handlers `bw demo` runs (a readable
//! example of the engine's API, to copy when starting a worker) and the large-store generator
//! behind the hidden `bw generate`. Nothing here is used by the engine itself.

pub mod generate;
