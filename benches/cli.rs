//! Benchmark: cli (prints a table). Filled in by its owner.
fn main() {}
