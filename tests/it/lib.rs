//! Support for the integration tests: building the test plugins and fixtures once, and
//! temporary Hermes homes to install them into. The tests themselves are in `main.rs`.

pub mod http_server;
pub mod support;
