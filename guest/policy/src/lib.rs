//! The cdplace placement policy: where may a ComputeDomain pod go on NVL72 racks?
//!
//! Plain `no_std` Rust with no I/O, so the same code runs natively (tests, benchmarks) and inside
//! the WebAssembly component (`cdplace-guest`). The host feeds a [`View`] with [`Delta`]s of
//! extracted [`facts`]; [`View::pre_filter`] then answers for every node at once.
//!
//! The rules, each enforced at scheduling time so that no conflict reaches kubelet Prepare:
//! 1. only NVLink trays (a clique label with a clique ID, not cordoned) take ComputeDomain pods;
//! 2. one ComputeDomain per node under driver-managed IMEX, counting bound, assumed and
//!    nominated pods and the driver's node label that outlives a claim until Unprepare;
//! 3. one workload pod per ComputeDomain per node;
//! 4. whole trays (`wholeTray: Require|Prefer|Off`);
//! 5. all pods of a domain in the clique where it started; a domain larger than any clique
//!    could hold is placed as segments instead, each whole in one clique, in the fewest
//!    cliques, all or none ([`segments`] is the rule, `span` carries it out);
//! 6. a domain starts only once its size is known ([`size`]: annotation, PodGroups and owners,
//!    `spec.numNodes`, else the pods seen after `sizeSettleSeconds` without a new one), and only
//!    in a clique that can hold all its pods, not counting trays promised to other starting
//!    domains or kept spare by `reserveTraysPerClique`;
//! 7. best fit across cliques;
//! 8. host-managed IMEX relaxes rule 2.
//!
//! 9. gang preemption ([`preempt`]): whole lower-priority domains and plain GPU pods are
//!    evicted from one clique for a domain that has not started and fits it when empty.
//!
//! A domain at the head of its size class that has waited `cliqueReservationAfterSeconds` gets a
//! clique reserved, which others only backfill (`reserve`).
//!
//! Pods without a ComputeDomain are steered away from intact cliques and off free trays a
//! starting domain still needs ([`View::steer`], `plainPodSteering`).
//!
//! Modules: [`args`] (plugin arguments), [`facts`] (input), [`view`] (incremental aggregates),
//! `nodes` (per-node summaries, per-clique aggregates), `member` (ComputeDomain membership),
//! [`size`] (a domain's size and its source), `decide` (PreFilter), [`segments`] (the layout of
//! a domain larger than a clique), `span` (its decision), [`preempt`] (PostFilter),
//! `reserve` (head-of-queue reservations), `steer` (plain pods), [`status`] (the fleet for
//! metrics and Events), [`verdict`] (output), [`error`], `lookup` (read-only lookups by key for
//! policies that wrap this one).
#![no_std]

extern crate alloc;

pub mod args;
mod decide;
pub mod error;
pub mod facts;
mod lookup;
mod member;
mod nodes;
mod pernode;
pub mod preempt;
mod reserve;
pub mod segments;
pub mod size;
mod span;
pub mod status;
mod steer;
#[cfg(test)]
mod testutil;
mod trays;
pub mod verdict;
pub mod view;

pub use args::{Args, ImexMode, WholeTray};
pub use decide::CANDIDATE_CLIQUES;
pub use error::{Error, Result};
pub use facts::*;
pub use preempt::{Plan, Preemption};
pub use reserve::SIZE_CLASSES;
pub use size::{DomainSize, SizeSource};
pub use status::{CliqueStatus, DomainPhase, DomainStatus, FleetStatus, PendingReason};
pub use steer::{SCORE_BROKEN_MIN, SCORE_BROKEN_SPAN, SCORE_INTACT, SCORE_NO_CLIQUE, SCORE_RESERVED};
pub use trays::{LabelKind, label_kind};
pub use verdict::*;
pub use view::View;
