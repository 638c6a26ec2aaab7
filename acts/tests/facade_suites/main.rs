//! The facade's integration tests, one binary: its public API as listed in
//! `public-api.txt`, and the store URLs it opens.

mod public_api;
mod store_urls;
