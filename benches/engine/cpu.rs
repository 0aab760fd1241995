//! Where a run's CPU goes, from /proc (Linux): the PostgreSQL server's processes when the server
//! runs on this host (its postmaster's children, and through the postmaster's count of the
//! children it reaped, those that ended), the worker processes a drain started, this bench
//! process, and the host's idle share. On the bench's two-core host the PostgreSQL drains and
//! raw loops keep both cores busy from two connections or processes on, so two rows' rates are
//! then in the inverse ratio of their CPU per job: this is how the table says where a drain's
//! time goes against the ceiling (`docs/benchmarks.md`, "Where the rest goes, by CPU").

use std::time::Duration;

/// CPU time so far, in clock ticks.
pub struct Sample {
    /// The server's processes, `None` when the server is not on this host.
    server: Option<u64>,
    /// The worker processes named at the sample.
    workers: u64,
    /// This bench process.
    bench: u64,
    /// The host's busy and idle time, all cores.
    busy: u64,
    idle: u64,
}

/// One process's user + system CPU time so far, from /proc/PID/stat (fields 14 and 15).
pub fn process(pid: u32) -> Duration {
    let (own, _, _) = stat(pid).expect("read /proc stat");
    Duration::from_micros(own * 1_000_000 / ticks_per_second())
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// (own user + system ticks, those of its reaped children, parent pid) of a process.
fn stat(pid: u32) -> Option<(u64, u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from the closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<u64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
    Some((f[11] + f[12], f[13] + f[14], f[1] as u32))
}

/// The server's postmaster, found from one of its backends: `None` when that backend is not a
/// process of this host (a server elsewhere, or in a container with its own process ids).
pub fn postmaster(url: &str) -> Option<u32> {
    let mut c = backwave::postgres::Client::connect(url, backwave::postgres::NoTls).ok()?;
    let backend: i32 = c.query_one("SELECT pg_backend_pid()", &[]).ok()?.get(0);
    let comm = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let (_, _, parent) = stat(backend as u32)?;
    (comm(backend as u32).trim() == "postgres" && comm(parent).trim() == "postgres").then_some(parent)
}

impl Sample {
    /// Now: the server's processes under `postmaster`, and the `workers`.
    pub fn take(postmaster: Option<u32>, workers: &[u32]) -> Sample {
        let server = postmaster.map(|pm| {
            let (own, reaped, _) = stat(pm).unwrap_or_default();
            let children: u64 = std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(stat)
                .filter(|&(_, _, parent)| parent == pm)
                .map(|(own, _, _)| own)
                .sum();
            own + reaped + children
        });
        let workers = workers.iter().filter_map(|&pid| stat(pid)).map(|(own, _, _)| own).sum();
        let bench = stat(std::process::id()).map_or(0, |(own, _, _)| own);
        let host = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let c: Vec<u64> = host
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let at = |i: usize| c.get(i).copied().unwrap_or(0);
        Sample { server, workers, bench, busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7), idle: at(3) + at(4) }
    }

    /// What `self` to `later` cost for `n` jobs, in CPU a job.
    pub fn per_job(&self, later: &Sample, n: usize) -> Cost {
        let us = |ticks: u64| ticks as f64 * 1e6 / ticks_per_second() as f64 / n as f64;
        let (busy, idle) = (later.busy.saturating_sub(self.busy), later.idle.saturating_sub(self.idle));
        Cost {
            server: self.server.zip(later.server).map(|(a, b)| us(b.saturating_sub(a))),
            workers: us(later.workers.saturating_sub(self.workers)),
            bench: us(later.bench.saturating_sub(self.bench)),
            idle_pct: 100.0 * idle as f64 / (busy + idle).max(1) as f64,
        }
    }
}

/// A run's CPU a job, in microseconds, and the host's idle share over it.
pub struct Cost {
    /// The server's processes; `None` when the server is not on this host.
    pub server: Option<f64>,
    /// The worker processes a drain started (none in a raw loop).
    workers: f64,
    /// This bench process: a raw loop's client.
    bench: f64,
    idle_pct: f64,
}

impl std::fmt::Display for Cost {
    /// "CPU: server 36.5 µs, workers 4.0 µs, bench 0.1 µs a job; host idle 3 %".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.server {
            Some(us) => write!(f, "CPU: server {us:.1} µs")?,
            None => write!(f, "CPU: server not on this host")?,
        }
        if self.workers > 0.0 {
            write!(f, ", workers {:.1} µs", self.workers)?;
        }
        write!(f, ", bench {:.1} µs a job; host idle {:.0} %", self.bench, self.idle_pct)
    }
}
