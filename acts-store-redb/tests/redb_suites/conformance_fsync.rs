//! `RedbStore` with an fsync on every commit runs the whole conformance
//! suite, reopen and damage cases included.

use crate::common;

use acts_store_redb::Durability;
use common::RedbFactory;

acts_testkit::conformance_tests!(durable: RedbFactory::new(Durability::Immediate));
