//! Storage failures. Any of these ends the node: it exits and restarts from disk.

use std::fmt;

/// A failure of the durable store, or corruption found in it.
#[derive(Debug)]
pub enum StorageError {
    /// The underlying database failed.
    Db(String),
    /// Stored bytes did not decode or failed their checksum.
    Corrupt(String),
    /// A caller broke the contract (e.g. appended a zxid out of order).
    Misuse(String),
    /// The data directory holds files zkd will not take: another server's
    /// (Apache ZooKeeper's), or two versions of zkd's own. Nothing was changed.
    Foreign(String),
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Db(e) => write!(f, "storage failed: {e}"),
            StorageError::Corrupt(e) => write!(f, "storage corrupt: {e}"),
            StorageError::Misuse(e) => write!(f, "storage misuse: {e}"),
            StorageError::Foreign(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StorageError {}

impl From<::sled::Error> for StorageError {
    fn from(e: ::sled::Error) -> Self {
        StorageError::Db(e.to_string())
    }
}

/// Result alias for storage calls.
pub type Result<T> = std::result::Result<T, StorageError>;
