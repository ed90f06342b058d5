//! zkd-server
