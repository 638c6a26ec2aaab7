//! # acts-core: the workflow engine
//!
//! The pure scheduling core of acts: the workflow model (`Workflow`, `Step`,
//! `Branch`, `Act`), the node tree, processes and tasks with their state
//! machine, packages, scripts, the typed collections over the store, the
//! resident cache and the group-commit writer.
//!
//! **Layering rule:** this crate depends on `acts-store` (the `KvStore`
//! contract) and on no backend; applications choose the store.
//!
//! **Status:** not built yet. This crate exports nothing so far; the engine
//! issue fills it, folder per concept (`model/`, `tree/`, `script/`,
//! `scheduler/`, `package/`, `store/`, `cache/`, `event/`, `trigger/`,
//! `engine/`), as `docs/ARCHITECTURE.md` describes.
