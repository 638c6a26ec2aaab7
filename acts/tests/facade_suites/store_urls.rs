//! Fuzzing store URLs: any text is a store or a clear error, never a
//! panic — unknown schemes, and any options after a redb path (opened in a
//! temporary folder, so nothing is written elsewhere).

use proptest::prelude::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Text that names no file store: a store (`memory:`) or an error.
    #[test]
    fn any_url_without_a_file_scheme_opens_or_fails_cleanly(url in "\\PC{0,40}") {
        prop_assume!(!url.starts_with("redb:") && !url.starts_with("rocksdb:") && !url.starts_with("redis://"));
        let opened = runtime().block_on(acts::open_store(&url));
        if url != "memory:" && url != "memory" {
            let err = opened.err().map(|e| e.to_string()).unwrap_or_default();
            prop_assert!(err.contains(&url), "the error names the URL: {}", err);
        }
    }

    /// Any options after a redb path: opened or refused with the option
    /// named, never a panic.
    #[test]
    fn any_redb_options_open_or_fail_cleanly(options in "[?&=a-z_0-9]{0,30}|\\PC{0,20}") {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("redb:{}{options}", dir.path().join("s.redb").display());
        let _ = runtime().block_on(acts::open_store(&url));
    }
}
