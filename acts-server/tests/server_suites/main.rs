//! acts-server's integration tests, one binary (each file a module, the
//! helpers they share in `common/`): the HTTP and gRPC APIs, access, the
//! acts-server 0.25 drop-in, the OpenAPI document and its rules, the
//! dashboard in a headless browser. A suite is picked by module: `cargo
//! test -p acts-server --test server_suites -- openapi::`.

mod common;

mod access;
mod api;
mod api_service;
mod browser;
mod compat_rest;
mod contract;
mod durable;
mod openapi;
mod trace_context;
