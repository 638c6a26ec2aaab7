//! `RedbStore` without fsync runs the whole conformance suite too: a clean
//! close (drop) makes everything durable, so reopen keeps all the data.

use crate::common;

use acts_store_redb::Durability;
use common::RedbFactory;

acts_testkit::conformance_tests!(durable: RedbFactory::new(Durability::None));
