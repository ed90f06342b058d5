//! One Rust type per `zookeeper.jute` class, with the same names and field
//! order, grouped by family. Field docs come from the schema's comments.

mod data;
mod multi;
mod proto;
mod session;
mod shared_acl;
mod txn;

pub use data::*;
pub use multi::*;
pub use proto::*;
pub use session::*;
pub use shared_acl::SharedAcl;
pub use txn::*;
