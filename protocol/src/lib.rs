//! zkd-protocol: everything that is on ZooKeeper's client wire, and nothing else.
//!
//! ```text
//!  bytes ──client_codec──▶ frame ──records / request──▶ typed request
//!  typed reply ──records──▶ bytes ──client_codec──▶ socket
//! ```
//!
//! The crate is pure: it knows jute encoding, the records of `zookeeper.jute`,
//! the opcode and error tables, and the length-prefixed framing. It knows
//! nothing of storage, sessions or sockets.

pub mod client_codec;
pub mod jute;
pub mod op_code;
pub mod peer;
pub mod records;
pub mod request;
pub mod response;
pub mod zxid;

pub use jute::{DecodeError, Record};
pub use op_code::{AddWatchMode, CreateMode, ErrorCode, EventType, OpCode, Perms, WatcherType};
pub use zxid::{Zxid, MAX_EPOCH};

/// ZooKeeper's default `jute.maxbuffer`: the largest frame either side accepts.
pub const DEFAULT_MAX_BUFFER: usize = 0xfffff;
