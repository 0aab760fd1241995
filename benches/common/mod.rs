//! What the `cli` and `top` benchmarks share: the large store they both measure, built once by
//! `bw generate` at one path so that neither builds it again.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// The large store: `BW_BENCH_STORE`, or `target/bench/top-<size>.db` with `BW_BENCH_JOBS` jobs
/// (1,000,000 by default), generated on first use.
pub fn large_store(bin: &str) -> (PathBuf, u64) {
    let jobs: u64 = std::env::var("BW_BENCH_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let path = std::env::var_os("BW_BENCH_STORE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("target/bench/top-{}.db", short_count(jobs)))
    });
    if !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        eprintln!("building a {jobs}-job store at {} (once)…", path.display());
        let t = Instant::now();
        let status = Command::new(bin)
            .args(["--db", path.to_str().unwrap(), "generate", "--jobs", &jobs.to_string()])
            .status()
            .expect("run bw generate");
        assert!(status.success(), "bw generate failed");
        eprintln!("built in {:.0}s", t.elapsed().as_secs_f64());
    }
    (path, jobs)
}

/// `1m`, `20k`, `1234`: a job count as it appears in a file name.
pub fn short_count(n: u64) -> String {
    match n {
        n if n % 1_000_000 == 0 => format!("{}m", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}
