//! zkd-storage
