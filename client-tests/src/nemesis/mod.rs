//! The pure half of `zkd-nemesis`, the Jepsen-style fault harness: the
//! history a run records, the checkers that judge it, and the report a
//! person opens. The binary (`src/bin/nemesis`) runs ensembles, clients and
//! faults and fills the history in.

pub mod checker;
pub mod history;
pub mod report;
