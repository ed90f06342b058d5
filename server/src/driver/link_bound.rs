//! The bound on a quorum link's queue, one rule for the runtime's links and
//! the simulator's: a message that would take what waits unread past the
//! bound closes the link instead (SNAP chunks count as any message), and the
//! member that closed it hears `ZabClosed` for it. A lone message may be
//! larger than the bound (a snapshot chunk, a large txn): the bound is on a
//! peer that does not keep up, not on message size.

/// Whether queueing `bytes` behind `queued` unread bytes passes `max`.
pub fn passes_bound(queued: usize, bytes: usize, max: usize) -> bool {
    queued > 0 && queued + bytes > max
}

#[cfg(test)]
mod tests {
    use super::passes_bound;

    #[test]
    fn a_lone_message_passes_and_one_behind_others_may_not() {
        assert!(!passes_bound(0, 100, 10), "alone, any size");
        assert!(!passes_bound(5, 5, 10), "up to the bound");
        assert!(passes_bound(5, 6, 10), "past it, behind others");
    }
}
