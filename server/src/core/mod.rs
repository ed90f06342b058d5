//! The sans-IO core: sessions, watches and the request pipeline as one
//! deterministic state machine. No tokio, no clock reads, no unseeded
//! randomness, no HashMap iteration (the `tidy` test enforces this).
//!
//! ```text
//! runtime ──Event──▶ Node::handle_event(now, ev) ──▶ Command queue ──▶ runtime
//!         ──now────▶ Node::handle_timeout(now)     (poll_timeout() says when)
//! ```
//!
//! Standalone is an ensemble of one: a write is answered once the runtime
//! reports `Persisted` for its zxid, which is exactly where Zab's quorum ACK
//! will plug in.

pub mod acl;
pub mod admission;
pub mod connection;
pub mod digest_log;
pub mod election;
mod ensemble_config;
pub mod java_order;
mod local_snapshot;
pub(crate) mod member;
pub mod metrics;
mod node;
pub mod peer_event;
pub mod pipeline;
mod read_permit;
pub mod reply;
pub mod sasl;
pub mod server_spec;
pub mod session;
pub mod stats;
pub mod storage_job;
pub mod types;
pub mod watch;
pub mod zab;

pub use ensemble_config::EnsembleConfig;
pub(crate) use node::apply_to_tree;
pub use node::{Node, MAX_OUTSTANDING};
pub use read_permit::{budget_units, ReadPermit};
pub use server_spec::{ServerSpec, WILDCARD};
pub use types::{take_queued, Command, ConnId, CoreConfig, Event, Mode, Now};

#[cfg(test)]
mod divergence_tests;
#[cfg(test)]
pub(crate) mod snapshot_tests;
#[cfg(test)]
mod tests;
