//! zkd-server: the sans-IO `core` and the tokio `runtime` around it.

pub mod config;
pub mod core;
pub mod driver;
pub mod failpoints;
pub mod http;
pub mod launcher;
pub mod runtime;
pub mod secret;
#[cfg(test)]
pub mod sim;
