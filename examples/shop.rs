//! A small shop service on tokio that keeps its orders and its job store in one SQLite file:
//! `POST /orders` writes the order and enqueues its `ship-order` job in ONE transaction (a
//! failure anywhere leaves neither), workers in the same process ship it, and `GET /orders/N`
//! shows the order with its job's state (read through `AsyncStore`). Ctrl-C (SIGINT) stops
//! accepting, lets the workers finish and exits 0.
//!
//! ```text
//! cargo run --example shop -- shop.db            # listens on 127.0.0.1:3000 (SHOP_ADDR to change)
//! curl -d 'teapot' localhost:3000/orders         # {"order":1,"job":"0193…"}
//! curl localhost:3000/orders/1                   # {"order":1,"item":"teapot","status":"shipped","job_state":"succeeded"}
//! ```
//!
//! HTTP/1.1 by hand over `tokio::net` (one request per connection), to stay free of a web
//! framework; the BackWave parts are what an axum or hyper service would write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, Enqueuer, HandlerResult, JobContext, Registry, WorkerGroup};
use backwave::rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use backwave::{AsyncStore, JobId, Store};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Serialize, Deserialize)]
struct ShipOrder {
    order: i64,
}

/// What the request path shares: the application's own connection to the file (its tables and
/// the store's), and the store for async reads.
struct App {
    db: Mutex<Connection>,
    store: AsyncStore,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "shop.db".into());
    let addr = std::env::var("SHOP_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());

    // The store first (it refuses to be created in a file that already holds other tables),
    // then the application's own tables beside it.
    let store = AsyncStore::create(path.as_str()).await?;
    let db = tokio::task::spawn_blocking({
        let path = path.clone();
        move || -> Result<Connection, BoxError> {
            let db = Connection::open(&path)?;
            db.busy_timeout(Duration::from_secs(5))?;
            db.execute_batch(
                "CREATE TABLE IF NOT EXISTS orders (
                     id INTEGER PRIMARY KEY, item TEXT NOT NULL, status TEXT NOT NULL, job_id TEXT NOT NULL)",
            )?;
            Ok(db)
        }
    })
    .await??;
    let app = Arc::new(App { db: Mutex::new(db), store });

    // The workers, in this process: an async handler on this runtime. Claims, heartbeats and
    // completions stay on the engine's own threads, so a slow request never costs a lease.
    let mut registry = Registry::new();
    let shipping = app.clone();
    registry
        .handle_async::<ShipOrder, _, _>("ship-order", move |job, ctx| ship(shipping.clone(), job, ctx))
        .queue("orders");
    let mut engine = Engine::new(path.as_str(), registry);
    // Typed enqueue for the request handlers: the registry's queue and payload type, cloned
    // into each connection's task.
    let jobs = engine.enqueuer();
    engine.runtime(tokio::runtime::Handle::current());
    engine.add_worker_group(WorkerGroup {
        name: "shipping".into(),
        policy: DispatchPolicy::strict(["orders"]),
        poll_interval: Duration::from_millis(50),
        ..WorkerGroup::default()
    });
    let workers = tokio::task::spawn_blocking(move || engine.start()).await??;

    let listener = TcpListener::bind(&addr).await?;
    // One Ctrl-C listener for the whole loop: a new `ctrl_c()` per turn would miss a signal
    // that came between two turns (while a connection was being accepted), and the shop would
    // never stop.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    println!("shop listening on http://{}", listener.local_addr()?);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                let (app, jobs) = (app.clone(), jobs.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve(&app, &jobs, stream).await {
                        eprintln!("shop: a request failed: {e}");
                    }
                });
            }
            _ = &mut ctrl_c => break,
        }
    }
    println!("shop: stopping");
    // Running jobs get 5 s; the shutdown blocks, so it runs off the runtime's threads.
    tokio::task::spawn_blocking(move || workers.shutdown(Duration::from_secs(5))).await?;
    println!("shop: stopped");
    Ok(())
}

/// The `ship-order` handler: mark the order shipped (at least once, so it is idempotent). The
/// write blocks, so it runs on the blocking pool, never on a runtime thread.
async fn ship(app: Arc<App>, job: ShipOrder, _ctx: JobContext) -> HandlerResult {
    tokio::task::spawn_blocking(move || -> HandlerResult {
        let db = app.db.lock().unwrap_or_else(|p| p.into_inner());
        db.execute("UPDATE orders SET status = 'shipped' WHERE id = ?1", [job.order])?;
        Ok(())
    })
    .await?
}

/// Place an order: the order row and its job in one transaction of the application's own. The
/// job is typed: its queue and payload check come from the registry's `ship-order`.
fn place_order(db: &mut Connection, jobs: &Enqueuer, item: &str) -> Result<(i64, JobId), BoxError> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute("INSERT INTO orders (item, status, job_id) VALUES (?1, 'paid', '')", [item])?;
    let order = tx.last_insert_rowid();
    let id = jobs.job("ship-order", &ShipOrder { order })?.enqueue_in_sqlite(&tx)?.id();
    tx.execute("UPDATE orders SET job_id = ?2 WHERE id = ?1", params![order, id.to_string()])?;
    tx.commit()?;
    Ok((order, id))
}

async fn serve(app: &Arc<App>, jobs: &Enqueuer, stream: TcpStream) -> Result<(), BoxError> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).await?;
    let mut content_length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse()?;
            }
        }
    }
    let mut body = vec![0; content_length.min(64 * 1024)];
    reader.read_exact(&mut body).await?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));

    let (status, reply) = match (method, target.strip_prefix("/orders")) {
        ("POST", Some("")) => {
            let item = String::from_utf8_lossy(&body).trim().to_string();
            let (app, jobs) = (app.clone(), jobs.clone());
            // rusqlite blocks: the transaction runs on the blocking pool, never on a runtime thread.
            let placed = tokio::task::spawn_blocking(move || {
                let mut db = app.db.lock().unwrap_or_else(|p| p.into_inner());
                place_order(&mut db, &jobs, &item)
            })
            .await?;
            match placed {
                Ok((order, job)) => ("201 Created", serde_json::json!({ "order": order, "job": job.to_string() })),
                Err(e) => ("500 Internal Server Error", serde_json::json!({ "error": e.to_string() })),
            }
        }
        ("GET", Some(n)) if n.len() > 1 => match n[1..].parse::<i64>() {
            Ok(order) => show_order(app, order).await?,
            Err(_) => {
                ("400 Bad Request", serde_json::json!({ "error": format!("not an order number: {:?}", &n[1..]) }))
            }
        },
        _ => ("404 Not Found", serde_json::json!({ "error": format!("no route {method} {target}") })),
    };
    let body = reply.to_string();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    reader.into_inner().write_all(response.as_bytes()).await?;
    Ok(())
}

/// The order, and its job's state as the store tells it (through `AsyncStore`).
///
/// The job's state is read first, the order row after: the handler's write commits before the
/// engine records the success, so a job read as Succeeded always comes with its order read as
/// shipped. Read the other way round, the job could run between the two reads and the reply
/// would pair "paid" with "succeeded".
async fn show_order(app: &Arc<App>, order: i64) -> Result<(&'static str, serde_json::Value), BoxError> {
    let job_id = tokio::task::spawn_blocking({
        let app = app.clone();
        move || {
            let db = app.db.lock().unwrap_or_else(|p| p.into_inner());
            db.query_row("SELECT job_id FROM orders WHERE id = ?1", [order], |r| r.get::<_, String>(0)).optional()
        }
    })
    .await??;
    let Some(job_id) = job_id else {
        return Ok(("404 Not Found", serde_json::json!({ "error": format!("no order {order}") })));
    };
    let id: JobId = job_id.parse()?;
    let job = app.store.call(move |s: &Store| s.job(id)).await?;
    let job_state = job.map(|j| j.state.as_str().to_string());
    let row = tokio::task::spawn_blocking({
        let app = app.clone();
        move || {
            let db = app.db.lock().unwrap_or_else(|p| p.into_inner());
            db.query_row("SELECT item, status FROM orders WHERE id = ?1", [order], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .optional()
        }
    })
    .await??;
    let Some((item, status)) = row else {
        return Ok(("404 Not Found", serde_json::json!({ "error": format!("no order {order}") })));
    };
    Ok(("200 OK", serde_json::json!({ "order": order, "item": item, "status": status, "job_state": job_state })))
}
