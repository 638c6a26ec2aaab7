//! Point reads asked at the same time share statements and each gets its
//! own key's value: a thousand `get`s (present, missing and repeated keys)
//! in a few statements; a read asked after a write sees it.

use acts_store::{BatchOp, KvStore};
use acts_store_postgres::PostgresStore;
use acts_testkit::postgres_server::PostgresServer;

#[test]
fn reads_asked_together_share_statements_and_each_gets_its_value() {
    let server = PostgresServer::shared_or_start().unwrap_or_else(|e| panic!("{e}"));
    // One thread. How the reads are grouped still depends on when the
    // reader task gets to run (the runtime's cooperative budget makes the
    // asking task yield every so often, and the server's answers come when
    // they come: 8 to 10 statements were seen), so the check is what
    // sharing must give whatever the grouping: far fewer statements than
    // reads (one a read would be 1,000).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store =
            PostgresStore::connect(&server.url_of(&format!("reads_{}", std::process::id())))
                .await
                .expect("connect");
        let ops = (0..300u32)
            .map(|i| BatchOp::put(format!("k{i}").into_bytes(), format!("v{i}").into_bytes()))
            .collect();
        store.batch(ops).await.expect("batch");
        let before = store.point_read_statements();
        // Keys 0..500 twice: 300 present, 200 missing, each asked twice.
        let keys: Vec<u32> = (0..500).chain(0..500).collect();
        let reads = keys.iter().map(|i| {
            let (store, key) = (store.clone(), format!("k{i}").into_bytes());
            async move { store.get(&key).await }
        });
        let got = futures_util::future::join_all(reads).await;
        for (i, value) in keys.iter().zip(got) {
            let want = (*i < 300).then(|| format!("v{i}").into_bytes());
            assert_eq!(value.expect("get"), want, "key k{i}");
        }
        let statements = store.point_read_statements() - before;
        assert!(
            (1..=100).contains(&statements),
            "1,000 reads asked together took {statements} statements"
        );
        store
            .batch(vec![BatchOp::put(b"k0".to_vec(), b"new".to_vec())])
            .await
            .expect("batch");
        assert_eq!(
            store.get(b"k0").await.expect("get").as_deref(),
            Some(&b"new"[..]),
            "a read asked after a write sees it"
        );
    });
}
