//! `BW_BENCH_ONLY=workflow`: what a workflow's edges cost (issue 42). On each backend, one
//! fan-out/fan-in workflow of 1 -> N -> 1 jobs (`BW_BENCH_FANOUT`, default 10,000) against N + 2
//! plain jobs, each enqueued in one transaction and drained through the store the way a worker
//! does (claim 256, complete the batch, again), alternating plain and workflow rounds
//! (`BW_BENCH_ROUNDS`, default 3; medians). Printed per backend: the enqueue and the drain of
//! each, the root's completion alone (the transaction that releases the N children), and the
//! release cost per child: (workflow drain - plain drain) / N, which holds both the fan-out
//! release and the fan-in edge each child's completion meets.

use std::path::Path;
use std::time::{Duration, Instant};

use backwave::store::{ClaimRequest, Completion, Outcome};
use backwave::{NewJob, RetryPolicy, Store, Workflow};

fn job(name: &str) -> NewJob {
    NewJob::new(name, "fan", b"{}".to_vec())
}

/// Claim and complete until nothing is due; returns the time it took, how long the first
/// completion that held the root took, and the time spent in completions.
fn drain(store: &Store, total: usize) -> (Duration, Duration, Duration) {
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let queues = ["fan".to_string()];
    let start = Instant::now();
    let mut root = Duration::ZERO;
    let mut completing = Duration::ZERO;
    let mut done = 0;
    while done < total {
        let claimed = store
            .claim(&ClaimRequest {
                worker_id: "bench",
                group: "bench",
                queues: &queues,
                limit: 256,
                lease: Duration::from_secs(600),
                policy: &policy,
                handler_policies: &[],
            })
            .expect("claim");
        assert!(!claimed.is_empty(), "nothing due after {done} of {total} jobs: a child was not released");
        let completions: Vec<Completion> = claimed
            .iter()
            .map(|j| Completion {
                job_id: j.id,
                worker_id: "bench".into(),
                attempt: j.attempt,
                outcome: Outcome::Succeeded,
            })
            .collect();
        let t = Instant::now();
        store.complete_many(&completions).expect("complete");
        completing += t.elapsed();
        if done == 0 {
            root = t.elapsed();
        }
        done += claimed.len();
    }
    (start.elapsed(), root, completing)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn rows(dir: &Path, server: &str) {
    let n: usize = std::env::var("BW_BENCH_FANOUT").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let rounds: usize = std::env::var("BW_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    println!();
    println!("workflow bench: 1 -> {n} -> 1 against {} plain jobs, median of {rounds} alternating rounds", n + 2);
    println!("| backend    | plain enqueue | workflow enqueue | plain drain (completing) | workflow drain (completing) | root completion | release per child |");
    println!("|------------|--------------:|-----------------:|-------------------------:|----------------------------:|----------------:|------------------:|");
    for backend in ["sqlite", "postgres"] {
        let (mut pe, mut we, mut pd, mut wd, mut rc) = (vec![], vec![], vec![], vec![], vec![]);
        let (mut pc, mut wc) = (vec![], vec![]);
        for round in 0..rounds {
            let open = |what: &str| -> (Store, Option<super::pg::Schema>) {
                if backend == "sqlite" {
                    let path = dir.join(format!("workflow-{what}-{round}.db"));
                    (Store::create(&path).expect("create store"), None)
                } else {
                    let schema = super::pg::Schema::new(server, &format!("bench_wf_{what}_{round}"));
                    (Store::create(schema.url.as_str()).expect("create store"), Some(schema))
                }
            };
            {
                let (store, _schema) = open("plain");
                let jobs: Vec<NewJob> = (0..n + 2).map(|_| job("plain")).collect();
                let t = Instant::now();
                store.enqueue_many(&jobs).expect("enqueue");
                pe.push(t.elapsed());
                let (d, _, c) = drain(&store, n + 2);
                pd.push(d);
                pc.push(c);
            }
            {
                let (store, _schema) = open("flow");
                let mut wf = Workflow::new("fan");
                let root = wf.add(job("root"));
                let children: Vec<_> = (0..n).map(|_| wf.add_after(job("child"), &[root]).unwrap()).collect();
                wf.add_after(job("last"), &children).unwrap();
                let t = Instant::now();
                store.enqueue_workflow(&wf).expect("enqueue the workflow");
                we.push(t.elapsed());
                let (d, r, c) = drain(&store, n + 2);
                wd.push(d);
                rc.push(r);
                wc.push(c);
            }
        }
        let (pe, we, pd, wd, rc) = (median(pe), median(we), median(pd), median(wd), median(rc));
        let (pc, wc) = (median(pc), median(wc));
        let per_child = wd.saturating_sub(pd).as_secs_f64() * 1e6 / n as f64;
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
        println!(
            "| {backend:<10} | {:>13} | {:>16} | {:>24} | {:>27} | {:>15} | {:>14.1} µs |",
            ms(pe),
            ms(we),
            format!("{} ({})", ms(pd), ms(pc)),
            format!("{} ({})", ms(wd), ms(wc)),
            ms(rc),
            per_child
        );
    }
}
