//! # acts: an embeddable, durable workflow engine
//!
//! The facade crate applications depend on: it will re-export `acts-core`'s
//! public API and pick a store backend per cargo feature (`redb` by default,
//! `rocksdb`, `redis`).
//!
//! **Layering rule:** depends on `acts-core` and, behind features, on the
//! backend crates; nothing depends on it but applications and `acts-cli`.
//!
//! **Status:** not built yet; it exports nothing until the engine lands. The
//! store layer is usable today through `acts-store` and the backend crates.
