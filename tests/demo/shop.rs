//! The example application `examples/shop.rs` run for real (issue 22): it starts, takes an order
//! over HTTP (the order row and its job in one transaction of its own), its in-process workers run
//! the job, and SIGINT stops it with exit status 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP/1.1 request; the status line and the body.
fn request(addr: &str, method: &str, path: &str, body: &str) -> (String, serde_json::Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nhost: shop\r\ncontent-length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a response head");
    (head.lines().next().unwrap().to_string(), serde_json::from_str(body).unwrap())
}

#[test]
fn the_shop_example_takes_an_order_ships_it_in_process_and_stops_cleanly_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let mut child = Command::new(crate::programs::example("shop"))
        .arg(&db)
        .env("SHOP_ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("shop listening on http://").unwrap_or_else(|| panic!("{line:?}")).to_string();

    let (status, placed) = request(&addr, "POST", "/orders", "teapot");
    assert_eq!(status, "HTTP/1.1 201 Created", "{placed}");
    let order = placed["order"].as_i64().unwrap();
    let job: backwave::JobId = placed["job"].as_str().unwrap().parse().unwrap();
    // The order and its job were committed together: the store has the job.
    let store = backwave::Store::open(&db).unwrap();
    assert_eq!(store.job(job).unwrap().unwrap().wire_name, "ship-order");

    let started = Instant::now();
    let shown = loop {
        let (status, shown) = request(&addr, "GET", &format!("/orders/{order}"), "");
        assert_eq!(status, "HTTP/1.1 200 OK", "{shown}");
        if shown["job_state"] == "succeeded" {
            break shown;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the job did not run: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(shown["status"], "shipped", "{shown}");
    assert_eq!(shown["item"], "teapot");
    assert_eq!(request(&addr, "GET", "/orders/99", "").0, "HTTP/1.1 404 Not Found");

    // Ctrl-C, as a terminal sends it.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the shop did not stop within 15 s of SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "exit {status:?}; stdout after start: {rest}");
    assert_eq!(rest, "shop: stopping\nshop: stopped\n");
    // A clean shutdown leaves no worker registered.
    assert!(store.workers().unwrap().is_empty());
}
