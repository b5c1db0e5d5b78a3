//! The fact types of `wit/cdplace.wit`, as the journal holds them and the guest takes them.

pub use crate::bindings::wfacts::{
    ClaimFact, ClaimRef, Delta, DomainFact, GpuDemand, NodeFact, OwnerFact, Placement, PodFact, TemplateFact,
};

/// A policy delta in the WIT shape.
pub fn from_policy(d: &cdplace_policy::Delta) -> Delta {
    crate::convert::delta(d)
}
