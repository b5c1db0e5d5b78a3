//! The policy instances that mirror the host's [`State`], and the journal that keeps them in
//! step. Every change the state makes is appended to the journal; an instance remembers how far
//! into it it is and catches up when it is checked out, so parallel callers each get their own
//! instance (no lock is held during a guest call) and every instance sees the same cluster. A
//! new instance starts from a snapshot. When the interned strings have grown past a threshold,
//! they are compacted: the journal restarts under a new generation and older instances are
//! dropped. Instances come from the cluster's [`Backend`].
//!
//! Bounds, whatever the instances do:
//! - the journal: when it holds more than [`JournalBounds::max_len`] entries, or its oldest
//!   entry is older than [`JournalBounds::max_age`], it is cut at its end on the next change;
//!   instances behind the cut (idle ones are dropped at once, checked-out ones when they come
//!   back) are rebuilt from a snapshot at their next checkout;
//! - live instances (idle and checked out): at most `maxPolicyInstances`; a call that finds
//!   them all busy waits for one within its deadline, then fails with [`Error::Busy`];
//! - bad objects: when applying deltas traps the guest, the object that traps it alone is found
//!   and quarantined (see [`crate::quarantine`]); every instance is then rebuilt without it;
//! - safety: every PreFilter answer is checked against the state it was computed on
//!   ([`crate::safety::check`]) before it is converted; one that breaks a rule is refused with
//!   [`Error::PolicyViolation`] and counted ([`Stats::policy_violations`]);
//! - time: one deadline (`guestCallTimeout`) covers the whole call: waiting for an instance,
//!   instantiating and configuring it, applying a snapshot or catching up, the decision, and the
//!   retries after a string compaction.

//!
//! The policy itself can be replaced while the pool serves (see `swap`): each instance belongs
//! to one policy generation; a swap bumps the generation, new calls get instances of the new
//! policy, instances of the old one finish the call they are in and are dropped when they come
//! back. The state and the journal stay: the new policy's instances start from a snapshot of the
//! same view, as any new instance does.
//!
//! A shadow policy (see `shadow`) is asked the live PreFilter questions of ComputeDomain pods
//! again, off the live path, on the same views, and never acts.
//!
//! Files: this one (the pool: checking instances out and in, changing the state), `journal`
//! (the journal, its bounds and string compaction), `calls` (the decision calls and their
//! deadline), `isolate` (finding and quarantining an object that traps the guest), `swap`
//! (checking a new policy on the live view and switching to it), `shadow` (the shadow policy).

mod calls;
mod isolate;
mod journal;
mod shadow;
mod swap;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::evaluator::{Backend, Evaluator};
use crate::facts::Record;
use crate::limits::Limits;
use crate::quarantine::{Quarantine, Quarantined};
use crate::settings::Settings;
use crate::state::State;
use crate::wit::Delta;
use crate::{Error, Result};

pub(crate) use calls::On;
pub use calls::now_ms;
pub use journal::JournalBounds;
pub(crate) use journal::Shared;
pub use shadow::{Divergence, Outcome as ShadowOutcome, SHADOW_LOG, SHADOW_QUEUE, ShadowReport};
pub use swap::{SELF_TEST_PLACED, SwapReport};

/// How the pool stands now (`cdplace_cluster_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Entries in the journal.
    pub journal_length: usize,
    /// Instances waiting for a call.
    pub idle_instances: usize,
    /// Instances in a call (checked out).
    pub busy_instances: usize,
    /// Objects held out of the view because they trap the guest.
    pub quarantined_objects: usize,
    /// The largest linear memory of an idle instance, in bytes (0 when none or unknown).
    pub largest_instance_bytes: usize,
    /// PreFilter answers refused by the safety rules ([`crate::safety`]) so far.
    pub policy_violations: u64,
}

/// An instance checked out of the pool, with its journal position, string generation and the
/// policy generation it is an instance of.
#[derive(Debug)]
pub(crate) struct Lease {
    instance: Box<dyn Evaluator>,
    pos: u64,
    generation: u64,
    policy: u64,
}

/// The policy deciding now: the backend new instances come from, and its generation (1 for the
/// policy the cluster was made with, one more for each swap).
#[derive(Debug, Clone)]
struct Current {
    backend: Arc<dyn Backend>,
    generation: u64,
}

/// The instances alive: idle ones, and how many there are in all (idle and checked out).
#[derive(Debug, Default)]
struct Slots {
    idle: Vec<Lease>,
    live: usize,
}

/// The instances of one cluster and the state they mirror.
#[derive(Debug)]
pub(crate) struct Pool {
    current: Mutex<Current>,
    /// Held for the whole of a swap: one at a time.
    swapping: Mutex<()>,
    args: String,
    limits: Limits,
    /// `maxPolicyInstances`.
    max_instances: usize,
    shared: Mutex<Shared>,
    slots: Mutex<Slots>,
    /// Signalled when an instance is checked in or discarded.
    freed: Condvar,
    quarantine: Mutex<Quarantine>,
    /// What the safety rules enforce (the IMEX mode, reserveTraysPerClique), read from the
    /// arguments by the host.
    enforced: crate::safety::Enforced,
    /// PreFilter answers refused by the safety rules.
    violations: AtomicU64,
    /// The shadow policy (see `shadow`), and whether one is set (read without the lock on the
    /// live path).
    shadow: Mutex<shadow::Shadow>,
    shadow_on: AtomicBool,
}

impl Pool {
    /// A pool for `args`, whose instances run under the limits of the settings they validate to;
    /// returns the settings too. Invalid arguments fail here.
    pub fn new(backend: Arc<dyn Backend>, args: &str) -> Result<(Pool, Settings)> {
        let mut first = backend.clone().evaluator(Limits::default())?;
        let settings = first.configure(args)?;
        let limits = settings.limits();
        let pool = Pool {
            current: Mutex::new(Current { backend, generation: 1 }),
            swapping: Mutex::new(()),
            args: args.to_string(),
            limits,
            max_instances: settings.max_policy_instances.max(1) as usize,
            shared: Mutex::new(Shared::new()),
            slots: Mutex::new(Slots::default()),
            freed: Condvar::new(),
            quarantine: Mutex::new(Quarantine::default()),
            enforced: crate::safety::enforced(args),
            violations: AtomicU64::new(0),
            shadow: Mutex::default(),
            shadow_on: AtomicBool::new(false),
        };
        if limits == Limits::default() {
            // Keep the instance that validated the arguments; any other runs under other limits.
            let pos = pool.shared().enter();
            let mut slots = pool.slots();
            slots.live += 1;
            slots.idle.push(Lease { instance: first, pos, generation: 0, policy: 1 });
        }
        Ok((pool, settings))
    }

    /// The limits every instance runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The policy deciding now.
    fn current(&self) -> Current {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The generation of the policy deciding now (1 until the first swap).
    pub fn policy_generation(&self) -> u64 {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).generation
    }

    pub fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn quarantine(&self) -> MutexGuard<'_, Quarantine> {
        self.quarantine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records about to be applied: an update or deletion of a quarantined object lifts its
    /// quarantine.
    pub fn lift(&self, records: &[Record]) {
        let mut q = self.quarantine();
        for r in records {
            q.lift(r);
        }
    }

    /// The objects quarantined since the last call.
    pub fn take_quarantined(&self) -> Vec<Quarantined> {
        self.quarantine().take_unreported()
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state under the lock, then compacts the strings when due (idle instances are
    /// dropped then; the next call starts a fresh one from a snapshot). When the journal was cut,
    /// the idle instances behind the cut are dropped.
    pub fn change<R>(&self, f: impl FnOnce(&mut State, &mut Vec<Delta>) -> R) -> R {
        let (r, cut, compacted) = {
            let mut sh = self.shared();
            let (r, cut) = sh.change(f);
            (r, cut, sh.maybe_compact())
        };
        if compacted {
            self.drop_idle(|_| true);
        } else if let Some(base) = cut {
            self.drop_idle(|l| l.pos < base);
        }
        r
    }

    /// Drops the idle instances `behind` says are (their positions are already forgotten).
    fn drop_idle(&self, behind: impl Fn(&Lease) -> bool) {
        let mut slots = self.slots();
        let before = slots.idle.len();
        slots.idle.retain(|l| !behind(l));
        let dropped = before - slots.idle.len();
        if dropped > 0 {
            slots.live -= dropped;
            drop(slots);
            self.freed.notify_all();
        }
    }

    /// An instance is gone (failed, or not kept at check-in): its slot is free.
    fn discard(&self) {
        self.slots().live -= 1;
        self.freed.notify_one();
    }

    /// Lowers the compaction threshold (tests exercise compaction without 50,000 pods).
    pub fn compact_strings_above(&self, n: usize) {
        self.shared().compact_at = n;
    }

    /// Sets when the journal is cut (tests use small bounds).
    pub fn bound_journal(&self, bounds: JournalBounds) {
        self.shared().bounds = bounds;
    }

    /// How the journal and the instances stand now.
    pub fn stats(&self) -> Stats {
        let journal_length = self.shared().journal.len();
        let quarantined_objects = self.quarantine().len();
        let slots = self.slots();
        Stats {
            journal_length,
            idle_instances: slots.idle.len(),
            busy_instances: slots.live - slots.idle.len(),
            quarantined_objects,
            largest_instance_bytes: slots.idle.iter().filter_map(|l| l.instance.memory_bytes()).max().unwrap_or(0),
            policy_violations: self.violations.load(Ordering::Relaxed),
        }
    }

    /// A new instance (its slot already taken), configured and given a snapshot before `deadline`.
    fn fresh(&self, deadline: Instant) -> Result<Lease> {
        let Current { backend, generation: policy } = self.current();
        let mut instance = backend.evaluator(self.limits)?;
        instance.set_deadline(deadline);
        instance.configure(&self.args)?;
        let (snapshot, pos, generation) = {
            let mut sh = self.shared();
            let pos = sh.enter();
            (sh.state.snapshot(), pos, sh.generation)
        };
        if let Err(e) = instance.apply(&snapshot) {
            self.shared().release(pos, generation);
            return Err(e);
        }
        Ok(Lease { instance, pos, generation, policy })
    }

    /// An instance caught up with the journal before `deadline`: an idle one, else a new one
    /// while fewer than `maxPolicyInstances` live, else the first one checked in (or
    /// [`Error::Busy`] at the deadline). Any failure frees the slot.
    /// A trap while applying deltas quarantines the object that causes it and tries once more.
    fn checkout(&self, deadline: Instant) -> Result<Lease> {
        let mut isolated = false;
        loop {
            let r = match self.take_slot(deadline)? {
                Some(lease) => self.catch_up(lease, deadline),
                None => self.fresh(deadline),
            };
            let e = match r {
                Ok(lease) => return Ok(lease),
                Err(e) => e,
            };
            self.discard();
            if isolated || !matches!(e, Error::Trap { .. }) || !self.isolate(deadline) {
                return Err(e);
            }
            isolated = true;
        }
    }

    /// An idle instance, or None with a slot taken for a new one.
    fn take_slot(&self, deadline: Instant) -> Result<Option<Lease>> {
        let start = Instant::now();
        let mut slots = self.slots();
        loop {
            if let Some(lease) = slots.idle.pop() {
                return Ok(Some(lease));
            }
            if slots.live < self.max_instances {
                slots.live += 1;
                return Ok(None);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Busy { instances: self.max_instances, waited: now - start });
            }
            slots = self.freed.wait_timeout(slots, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// The idle instance `lease` brought up to the end of the journal (or replaced by a new one
    /// when it fell behind a cut or a compaction, or is of a policy swapped out meanwhile).
    fn catch_up(&self, mut lease: Lease, deadline: Instant) -> Result<Lease> {
        lease.instance.set_deadline(deadline);
        let swapped_out = lease.policy != self.policy_generation();
        let caught_up = {
            let mut sh = self.shared();
            if swapped_out {
                sh.release(lease.pos, lease.generation);
                None
            } else if lease.generation != sh.generation || lease.pos < sh.base {
                None
            } else {
                let end = sh.enter();
                let from = (lease.pos - sh.base) as usize;
                let deltas = sh.journal[from..].to_vec();
                sh.release(lease.pos, lease.generation);
                Some((deltas, end))
            }
        };
        let Some((deltas, end)) = caught_up else { return self.fresh(deadline) };
        lease.pos = end;
        if let Err(e) = lease.instance.apply(&deltas) {
            self.shared().release(end, lease.generation);
            return Err(e);
        }
        Ok(lease)
    }

    /// Returns an instance to the idle ones, unless it fell behind a cut or a compaction
    /// meanwhile (then it is dropped: rebuilding it later costs the same as catching it up), or
    /// its policy was swapped out while it was in a call (then it is dropped for good).
    fn checkin(&self, lease: Lease) {
        let current = lease.policy == self.policy_generation();
        let keep = {
            let mut sh = self.shared();
            let keep = current
                && lease.generation == sh.generation
                && lease.pos >= sh.base
                && (sh.end() - lease.pos) as usize <= sh.bounds.max_len;
            if !keep {
                sh.release(lease.pos, lease.generation);
            }
            keep
        };
        if !keep {
            self.discard();
            return;
        }
        self.slots().idle.push(lease);
        self.freed.notify_one();
    }
}
