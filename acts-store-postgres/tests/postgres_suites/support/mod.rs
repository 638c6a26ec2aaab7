//! What the PostgreSQL store's tests share: a client of their own on the
//! server (beside the store's pool), and a wait for what the server's
//! views say.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use tokio_postgres::types::ToSql;

/// A client of `url` of its own, its connection driven by a task.
pub async fn raw_client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("a client of the test's own");
    tokio::spawn(conn);
    client
}

/// Waits until `count` (a `SELECT count(*) …`) answers `want` on `client`
/// (hang guard: a minute, then panics naming `what`).
pub async fn wait_for_count(
    client: &tokio_postgres::Client,
    count: &str,
    params: &[&(dyn ToSql + Sync)],
    want: i64,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: i64 = client
            .query_one(count, params)
            .await
            .expect("a count of the server's views")
            .get(0);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {got} of {want}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
