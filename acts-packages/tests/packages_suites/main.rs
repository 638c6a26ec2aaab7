//! acts-packages' integration tests, one binary (the helpers in
//! `support/`): the http and shell packages.

mod support;

mod http;
mod shell;
