//! Zab's two persisted epochs (ZooKeeper's `acceptedEpoch` and `currentEpoch` files).

use crate::error::Result;

/// Durable storage of the accepted and current epochs.
pub trait EpochStore {
    /// The last epoch this member accepted in discovery (0 if none).
    fn accepted_epoch(&self) -> Result<u32>;
    /// Records the accepted epoch. **Durable on return.**
    fn set_accepted_epoch(&mut self, epoch: u32) -> Result<()>;
    /// The epoch of the last NEWLEADER this member acknowledged (0 if none).
    fn current_epoch(&self) -> Result<u32>;
    /// Records the current epoch. **Durable on return.**
    fn set_current_epoch(&mut self, epoch: u32) -> Result<()>;
}
