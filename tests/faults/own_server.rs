//! Faults of the server itself, on a PostgreSQL cluster of the test's own (the shared test
//! server must not be restarted under other tests): restarted twice while `bw log tail
//! --follow` and `bw demo --no-tui` run, both carry on, every log entry printed once and in
//! order, every demo job in the store once. Killed right after a claim: the claim, whose commit
//! does not wait for the WAL flush, is undone whole and the job claimed again. And TLS: a
//! cluster with its own CA, listening on 127.0.0.1 with `ssl=on`: `bw` and the engine connect
//! with `verify-full`; a wrong CA or a wrong host name is refused, naming the mode.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::store::{ClaimRequest, Completion, Fenced, JobFilter, Outcome};
use backwave::{JobState, NewJob, RetryPolicy, Store};

use super::support;
use crate::backend::postgres_bindir;

/// A throwaway cluster in a folder of its own, stopped and removed when dropped.
struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    port: u16,
    /// The server's settings (`pg_ctl -o`), the same at every start.
    options: String,
}

impl Cluster {
    /// `initdb` and start, on a unix socket in its folder and, when `tls` is given (the
    /// certificate and key files), on 127.0.0.1 with `ssl=on`.
    fn start(tls: Option<(&Path, &Path)>) -> Cluster {
        Cluster::start_with(tls, "")
    }

    /// [`Cluster::start`] with more server settings (`extra`, each as ` -c name=value`).
    fn start_with(tls: Option<(&Path, &Path)>, extra: &str) -> Cluster {
        let bin = postgres_bindir().expect("no PostgreSQL binaries for a cluster of the test's own");
        let dir = tempfile::Builder::new().prefix("bwown").tempdir_in("/tmp").unwrap().keep();
        let as_postgres = support::is_root();
        let port = free_port();
        let mut cluster = Cluster { dir, bin, as_postgres, port, options: String::new() };
        if as_postgres {
            cluster.chown_to_postgres(&cluster.dir);
        }
        let data = cluster.dir.join("data");
        cluster.run(
            "initdb",
            &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync"],
        );
        let mut options = format!("-k {} -p {port} -c fsync=off -c max_connections=100", cluster.dir.display());
        match tls {
            Some((cert, key)) => {
                for f in [cert, key] {
                    let to = cluster.dir.join(f.file_name().unwrap());
                    std::fs::copy(f, &to).unwrap();
                    // The server refuses a key others may read.
                    std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
                    if as_postgres {
                        cluster.chown_to_postgres(&to);
                    }
                }
                options.push_str(&format!(
                    " -h 127.0.0.1 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                    cluster.dir.join(cert.file_name().unwrap()).display(),
                    cluster.dir.join(key.file_name().unwrap()).display()
                ));
            }
            None => options.push_str(" -h ''"),
        }
        options.push_str(extra);
        cluster.options = options;
        cluster.pg_start();
        cluster
    }

    fn pg_start(&self) {
        let (data, log) = (self.dir.join("data"), self.dir.join("log"));
        self.run(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-o", &self.options, "start"],
        );
    }

    fn chown_to_postgres(&self, path: &Path) {
        let user = nix::unistd::User::from_name("postgres").unwrap().expect("a `postgres` user");
        std::os::unix::fs::chown(path, Some(user.uid.as_raw()), Some(user.gid.as_raw())).unwrap();
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join(tool));
            c
        } else {
            Command::new(self.bin.join(tool))
        };
        let out = cmd.args(args).stdin(Stdio::null()).output().unwrap();
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
        );
    }

    /// The URL over the unix socket.
    fn socket_url(&self) -> String {
        format!("postgresql:///postgres?host={}&port={}&user=postgres", self.dir.display(), self.port)
    }

    /// A stop (`-m fast`: every connection is ended, as a real restart does), a pause with no
    /// server at all, and a start with the same settings.
    fn restart(&self, down_for: Duration) {
        let data = self.dir.join("data");
        self.run("pg_ctl", &["-D", data.to_str().unwrap(), "-m", "fast", "-w", "stop"]);
        std::thread::sleep(down_for);
        self.pg_start();
    }

    /// Kill the server as a crash would and start it again: SIGQUIT to the postmaster (what
    /// `pg_ctl -m immediate` sends, sent here at once so that nothing runs between the caller's
    /// last statement and the kill): every process ends, no shutdown checkpoint, the unwritten
    /// tail of the WAL buffers gone. At the start the server replays the WAL it had written.
    fn crash_and_start(&self) {
        let pidfile = self.dir.join("data").join("postmaster.pid");
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().lines().next().unwrap().trim().parse().unwrap();
        // SAFETY: kill(2) on this cluster's postmaster.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGQUIT) }, 0, "signal the postmaster {pid}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while pidfile.exists() {
            assert!(Instant::now() < deadline, "the postmaster {pid} did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.pg_start();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = cmd.args(["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn bw(url: &str) -> Command {
    let mut c = Command::new(support::bw());
    c.env("BW_DB", url).env_remove("BW_NOW").stdin(Stdio::null());
    c
}

/// Lines of a child's pipe, as they come, on a channel.
fn lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn interrupt(child: &Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

#[test]
fn log_tail_follow_carries_on_through_two_server_restarts_printing_every_entry_once_in_order() {
    let cluster = Cluster::start(None);
    let url = cluster.socket_url();
    let store = Store::create(url.as_str()).unwrap();
    store.enqueue(&NewJob::new("w", "q", "0")).unwrap();
    let mut child = bw(&url)
        .args(["--format", "json", "log", "tail", "-n", "10", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let err = lines(child.stderr.take().unwrap());
    let mut printed: Vec<serde_json::Value> = Vec::new();
    let wait_for = |n: usize, printed: &mut Vec<serde_json::Value>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while printed.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match out.recv_timeout(left) {
                Ok(line) => printed.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))),
                Err(_) => panic!("`bw log tail --follow` printed {} of {n} entries", printed.len()),
            }
        }
    };
    wait_for(1, &mut printed);

    let mut ids = vec![];
    for round in 0..3 {
        if round > 0 {
            cluster.restart(Duration::from_millis(1500));
        }
        // The store reconnects on its next call, as `bw` does.
        for i in 0..20 {
            let id = loop {
                match store.enqueue(&NewJob::new("w", "q", format!("{round}-{i}"))) {
                    Ok(id) => break id,
                    Err(e) if e.is_transient() => std::thread::sleep(Duration::from_millis(100)),
                    Err(e) => panic!("{e}"),
                }
            };
            ids.push(id);
        }
        wait_for(1 + ids.len(), &mut printed);
        assert!(child.try_wait().unwrap().is_none(), "`bw log tail --follow` ended at round {round}");
    }
    // Nothing more comes: no entry was printed twice.
    std::thread::sleep(Duration::from_millis(800));
    while let Ok(line) = out.try_recv() {
        printed.push(serde_json::from_str(&line).unwrap());
    }
    interrupt(&child);
    let status = child.wait().unwrap();
    let stderr: Vec<String> = err.try_iter().collect();
    assert!(status.success(), "{status}: {stderr:?}");

    let seqs: Vec<i64> = printed.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    let log: Vec<i64> = store.log_tail(&Default::default(), 1000).unwrap().iter().map(|t| t.seq).collect();
    assert_eq!(seqs, log, "printed entries differ from the log (missing, repeated or out of order)");
    let printed_ids: Vec<String> = printed.iter().skip(1).map(|e| e["job_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(printed_ids, ids.iter().map(|i| i.to_string()).collect::<Vec<_>>());
    let lost = stderr.iter().filter(|l| l.contains("lost the store")).count();
    let back = stderr.iter().filter(|l| l.contains("the store answers again")).count();
    assert_eq!((lost, back), (2, 2), "stderr should say each loss and each recovery once: {stderr:?}");
}

#[test]
fn demo_carries_on_through_two_server_restarts_and_every_job_is_in_the_store_once() {
    let cluster = Cluster::start(None);
    let url = cluster.socket_url();
    let mut demo = bw(&url)
        // Long enough that both restarts, each a few seconds on a loaded host, end well before it.
        .args(["--format", "json", "demo", "--no-tui", "--duration", "24s", "--rate", "40", "--reset"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines(demo.stderr.take().unwrap());
    std::thread::sleep(Duration::from_secs(3));
    cluster.restart(Duration::from_millis(1500));
    std::thread::sleep(Duration::from_secs(3));
    let before_second = Store::open(url.as_str()).unwrap().count_jobs(&JobFilter::default()).unwrap();
    cluster.restart(Duration::from_millis(1500));
    let out = demo.wait_with_output().unwrap();
    let stderr: Vec<String> = err.try_iter().collect();
    assert!(out.status.success(), "{}: {stderr:#?}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let enqueued = summary["enqueued"].as_u64().unwrap();

    // Said as it happened, not only at the end.
    let before_stop = stderr.iter().position(|l| l.contains("stopping the workers")).unwrap();
    assert!(
        stderr[..before_stop].iter().any(|l| l.contains("enqueue:") && l.contains("retrying")),
        "the enqueuer's store error was not shown when it happened: {stderr:#?}"
    );
    assert!(stderr[..before_stop].iter().any(|l| l.contains("answers again")), "{stderr:#?}");

    // Still enqueuing after the second restart (about 14 s of the run are left by then).
    assert!(
        enqueued > before_second + 40,
        "{enqueued} jobs enqueued, {before_second} before the second restart: the enqueuer stalled"
    );
    let recovered = stderr[..before_stop].iter().filter(|l| l.contains("enqueue: the store answers again")).count();
    assert_eq!(recovered, 2, "{stderr:#?}");
    let store = Store::open(url.as_str()).unwrap();
    let jobs = store.list_jobs(&JobFilter::default(), 100_000, 0).unwrap().jobs;
    // The demo's schedules make jobs of their own (labelled with the schedule, not numbered).
    let mut seqs: Vec<u64> = jobs
        .iter()
        .filter(|j| !j.labels.contains_key(backwave::schedule::SCHEDULE_LABEL))
        .map(|j| j.labels.get("demo-seq").expect("a demo job without its number").parse().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..enqueued).collect::<Vec<_>>(), "each of the {enqueued} jobs exactly once");
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
}

/// A CA, and a server certificate it signed for `localhost` only.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki { dir };
        for ca in ["ca", "other-ca"] {
            pki.openssl(&[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN=bw test {ca}"),
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.crt"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
        }
        pki.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
        std::fs::write(
            pki.path("server.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n",
        )
        .unwrap();
        pki.openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]);
        pki
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl").args(args).current_dir(self.dir.path()).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

#[test]
fn tls_verify_full_reaches_a_server_of_its_own_ca_and_a_wrong_ca_or_host_name_is_refused_naming_the_mode() {
    let pki = Pki::new();
    let cluster = Cluster::start(Some((&pki.path("server.crt"), &pki.path("server.key"))));
    let url = |host: &str, mode: &str, ca: Option<&str>| {
        let mut u = format!("postgresql://postgres@{host}:{}/postgres?sslmode={mode}", cluster.port);
        if let Some(ca) = ca {
            u.push_str(&format!("&sslrootcert={}", pki.path(ca).display()));
        }
        u
    };
    let good = url("localhost", "verify-full", Some("ca.crt"));

    // bw: init, then a read and a write, over TLS checked against the CA.
    for args in [&["init"][..], &["stats"], &["enqueue", "w", "--queue", "q", "--payload", "{}"]] {
        let out = bw(&good).args(args).output().unwrap();
        assert!(out.status.success(), "bw {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // The server sees the store's connection encrypted (asked over the unix socket).
    let store = Store::open(good.as_str()).unwrap();
    store.counts().unwrap();
    let mut admin = backwave::postgres::Client::connect(&cluster.socket_url(), backwave::postgres::NoTls).unwrap();
    let encrypted: Vec<bool> = admin
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'backwave'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(encrypted, vec![true], "the store's connection is not encrypted");

    // The engine drains over it.
    store.enqueue(&NewJob::new("w", "q", "{}")).unwrap();
    let mut registry = Registry::new();
    registry.handle::<serde_json::Value>("w", |_, _| Ok(())).queue("q");
    let mut engine = Engine::new(good.as_str(), registry);
    engine.add_worker_group(WorkerGroup {
        name: "tls".into(),
        policy: DispatchPolicy::strict(["q"]),
        poll_interval: Duration::from_millis(20),
        ..WorkerGroup::default()
    });
    let running = engine.start().unwrap();
    let started = Instant::now();
    while store.counts().unwrap().total(JobState::Succeeded) < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the engine did not drain over TLS: {:?}",
            running.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    running.shutdown(Duration::from_secs(5));

    // Refused: a CA that did not sign it, a host name it does not name; each names the mode.
    let refused = [
        (url("localhost", "verify-full", Some("other-ca.crt")), "sslmode=verify-full", "UnknownIssuer"),
        (url("127.0.0.1", "verify-full", Some("ca.crt")), "sslmode=verify-full", "not valid for name"),
        (url("localhost", "verify-ca", Some("other-ca.crt")), "sslmode=verify-ca", "UnknownIssuer"),
    ];
    for (target, mode, why) in &refused {
        let out = bw(target).arg("stats").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{target}: {stderr}");
        assert!(stderr.contains(mode) && stderr.contains(why), "{target}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        let e = Store::open(target.as_str()).unwrap_err();
        assert!(e.to_string().contains(mode), "{e}");
    }
    // verify-ca checks the chain only; require (no CA) only encrypts: both connect.
    for target in [url("127.0.0.1", "verify-ca", Some("ca.crt")), url("127.0.0.1", "require", None)] {
        let out = bw(&target).arg("stats").output().unwrap();
        assert!(out.status.success(), "{target}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// A claim commits without waiting for its WAL to be flushed (`claim_tail!` in the store's
/// PostgreSQL jobs module says why), so a server crash before the server writes that WAL out
/// undoes the claim whole. Here the WAL writer waits 10 s between rounds and nothing else writes
/// WAL out meanwhile (no autovacuum, no background writer, no other commit), and the server is
/// killed (`pg_ctl -m immediate`) right after the claim. Once it is back: the job enqueued before
/// is there, Scheduled, its attempt unspent, its log without the claim, the counts exact; claimed
/// again it is attempt 1 again, and the first worker's outcome is fenced out while the second's
/// is recorded. At-least-once: the body may have run twice, never lost, never counted twice.
#[test]
fn a_claim_lost_in_a_server_crash_puts_its_job_back_unspent_and_fences_the_first_worker_out() {
    let cluster = Cluster::start_with(None, " -c wal_writer_delay=10000 -c autovacuum=off -c bgwriter_lru_maxpages=0");
    let url = cluster.socket_url();
    let store = Store::create(url.as_str()).unwrap();
    let id = store.enqueue(&NewJob::new("w", "q", "1")).unwrap();
    let policy = RetryPolicy::new(3, Duration::from_secs(1)).unwrap();
    let queues = ["q".to_string()];
    let claim = |worker: &str| {
        let req = ClaimRequest {
            worker_id: worker,
            group: "default",
            queues: &queues,
            limit: 10,
            lease: Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        };
        // The store reconnects on its next call after the server came back.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match store.claim(&req) {
                Ok(jobs) => break jobs,
                Err(e) if e.is_transient() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => panic!("{e}"),
            }
        }
    };
    let first = claim("first");
    assert_eq!(first.iter().map(|j| (j.id, j.attempt)).collect::<Vec<_>>(), vec![(id, 1)]);

    cluster.crash_and_start();
    let second = claim("second");
    assert_eq!(
        second.iter().map(|j| (j.id, j.attempt)).collect::<Vec<_>>(),
        vec![(id, 1)],
        "the claim lost in the crash spent no attempt: the job is claimed again as attempt 1"
    );
    let log = store.history(id).unwrap();
    let moves: Vec<_> = log.iter().map(|t| (t.from, t.to, t.worker_id.as_deref())).collect();
    assert_eq!(
        moves,
        vec![(None, JobState::Scheduled, None), (Some(JobState::Scheduled), JobState::Running, Some("second"))],
        "the first claim left no entry"
    );
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new(), "the counts agree with the jobs");

    let outcome =
        |worker: &str| Completion { job_id: id, worker_id: worker.into(), attempt: 1, outcome: Outcome::Succeeded };
    assert_eq!(store.complete(&outcome("first")).unwrap(), Fenced::Rejected, "the first worker is fenced out");
    assert_eq!(store.complete(&outcome("second")).unwrap(), Fenced::Accepted(JobState::Succeeded));
    let job = store.job(id).unwrap().unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Succeeded, 1));
}
