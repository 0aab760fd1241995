//! PostgreSQL's side of `store/listen.rs`: `LISTEN backwave` on a connection of its own. The
//! count trigger on `jobs` (`schema-postgres.sql`, migration 14) sends one notification per
//! queue per transaction that inserted scheduled jobs or moved jobs back to Scheduled (the
//! server merges identical ones within a transaction), so a batch of 1,000 jobs sends one.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use super::super::listen::{Heard, CHANNEL};
use super::{PgStore, PostgresUrl};
use crate::error::Result;

pub(crate) struct PgListener {
    store: PgStore,
    /// The store's schema, once `LISTEN` ran on the current connection; `None` after the
    /// connection broke (the next wait listens again and reports [`Heard::Anything`]).
    schema: Option<String>,
}

impl PgListener {
    pub(crate) fn open(url: &PostgresUrl) -> Result<PgListener> {
        let mut l = PgListener { store: PgStore::connect(url)?, schema: None };
        l.listen()?;
        Ok(l)
    }

    fn listen(&mut self) -> Result<()> {
        let schema = self.store.with_client(|c| {
            c.batch_execute(&format!("LISTEN {CHANNEL}"))?;
            // Named in `pg_stat_activity` for what it is, and for which store.
            let row = c.query_one(
                "SELECT current_schema()::text,
                        set_config('application_name', left('backwave listen ' || current_schema(), 63), false)",
                &[],
            )?;
            Ok(row.get::<_, Option<String>>(0).unwrap_or_default())
        })?;
        self.schema = Some(schema);
        Ok(())
    }

    pub(crate) fn wait(&mut self, timeout: Duration) -> Result<Vec<Heard>> {
        let Some(schema) = self.schema.clone() else {
            self.listen()?;
            return Ok(vec![Heard::Anything]);
        };
        let heard = self.store.with_client(|c| {
            let mut out = Vec::new();
            let mut notes = c.notifications();
            let first = notes.timeout_iter(timeout).next()?;
            let Some(first) = first else { return Ok(out) };
            heard(&schema, first.payload(), &mut out);
            // Whatever else has arrived, without waiting.
            let mut rest = notes.iter();
            while let Some(n) = rest.next()? {
                heard(&schema, n.payload(), &mut out);
            }
            Ok(out)
        });
        if heard.is_err() {
            self.schema = None;
        }
        heard
    }
}

/// What a notification's payload says for the store of `schema`: `[schema, queue]` a queue,
/// `[schema]` any queue; another schema's, or a payload of another shape (another version), is
/// ignored: the poll still finds its jobs.
fn heard(schema: &str, payload: &str, out: &mut Vec<Heard>) {
    let Ok(parts) = serde_json::from_str::<Vec<String>>(payload) else { return };
    let news = match parts.as_slice() {
        [s, queue] if s == schema => Heard::Queue(queue.clone()),
        [s] if s == schema => Heard::Anything,
        _ => return,
    };
    if !out.contains(&news) {
        out.push(news);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_of_another_schema_or_shape_is_ignored() {
        let mut out = Vec::new();
        heard("public", r#"["public","high"]"#, &mut out);
        heard("public", r#"["public","high"]"#, &mut out);
        heard("public", r#"["other","low"]"#, &mut out);
        heard("public", "high", &mut out);
        heard("public", r#"{"queue":"x"}"#, &mut out);
        heard("public", r#"["public","a","b"]"#, &mut out);
        assert_eq!(out, [Heard::Queue("high".into())]);
        heard("public", r#"["public"]"#, &mut out);
        assert_eq!(out, [Heard::Queue("high".into()), Heard::Anything]);
    }
}
