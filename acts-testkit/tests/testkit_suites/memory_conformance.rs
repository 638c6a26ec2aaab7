//! `MemoryStore` runs the whole conformance suite (it is not durable, so the
//! reopen and damage cases do not apply).

use acts_testkit::MemoryFactory;

acts_testkit::conformance_tests!(MemoryFactory::new());
