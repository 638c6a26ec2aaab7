//! Packages: what an act `uses`.
//!
//! - [`PackageDefinition`]: id, run mode ([`RunAs`]), catalog and a JSON
//!   Schema for the params.
//! - [`PackageRegistry`]: the built-ins (`acts.core.irq|msg|block|action|
//!   parallel|sequence|subflow`, `acts.transform.set|code`) plus the
//!   application's packages, with schemas compiled at registration and
//!   params checked at deploy (literal params) and at run time.
//!
//! Running a package (the `ActPackage` trait and the built-ins' behaviour)
//! comes with the scheduler, which owns the context a package runs in.
//!
//! May use: `model`.

mod builtin;
mod definition;
mod registry;

pub use builtin::{ACTION_NAMES, builtin_packages};
pub use definition::{Catalog, PackageDefinition, RunAs};
pub use registry::{PackageError, PackageRegistry};
