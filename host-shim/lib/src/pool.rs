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
//! - time: one deadline (`guestCallTimeout`) covers the whole call: waiting for an instance,
//!   instantiating and configuring it, applying a snapshot or catching up, the decision, and the
//!   retries after a string compaction.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cdplace_policy::PreFilterResult;

use crate::evaluator::{Backend, Evaluator, wit::Delta};
use crate::facts::Record;
use crate::overlay::Overlay;
use crate::quarantine::{self, Quarantine, Quarantined};
use crate::runtime::Limits;
use crate::settings::Settings;
use crate::state::State;
use crate::{Error, Result};

/// How many entries the journal may hold before it is cut (and an instance this far behind is
/// rebuilt from a snapshot rather than caught up).
const MAX_JOURNAL: usize = 100_000;
/// How old the journal's oldest entry may be before it is cut: an instance idle for longer than
/// this is rebuilt from a snapshot, so a burst of parallel calls does not pin the journal.
const MAX_JOURNAL_AGE: Duration = Duration::from_secs(120);
/// Interned strings are never freed one by one (pods come and go with new names); once the table
/// passes this size and twice its live size, it is rebuilt with only the live strings.
const MIN_COMPACTION: usize = 50_000;

/// When the journal is cut (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalBounds {
    /// Most entries it holds.
    pub max_len: usize,
    /// Oldest entry it keeps.
    pub max_age: Duration,
}

impl Default for JournalBounds {
    fn default() -> Self {
        JournalBounds { max_len: MAX_JOURNAL, max_age: MAX_JOURNAL_AGE }
    }
}

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
}

/// The state and the journal of its changes, under one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: State,
    journal: Vec<Delta>,
    /// Journal position of `journal[0]`.
    base: u64,
    /// When entries were appended: `(position of the first, time)`, oldest first.
    stamps: VecDeque<(u64, Instant)>,
    bounds: JournalBounds,
    /// Positions of the instances checked out or idle, with how many are at each.
    positions: BTreeMap<u64, usize>,
    /// Bumped when the strings are compacted: instances of an older generation are dropped.
    generation: u64,
    /// Compact the strings when the table holds this many.
    compact_at: usize,
}

impl Shared {
    fn end(&self) -> u64 {
        self.base + self.journal.len() as u64
    }

    /// Runs a change of the state and journals the deltas it emits (none when no instance is
    /// there to need them: a new one starts from a snapshot). Returns the change's result and,
    /// when the journal was cut because it passed its bounds, the new start: instances behind it
    /// must be rebuilt.
    pub fn change<R>(&mut self, f: impl FnOnce(&mut State, &mut Vec<Delta>) -> R) -> (R, Option<u64>) {
        let before = self.end();
        let r = f(&mut self.state, &mut self.journal);
        if self.positions.is_empty() {
            self.base = self.end();
            self.journal.clear();
            self.stamps.clear();
            return (r, None);
        }
        self.stamp(before);
        (r, self.bound())
    }

    /// Notes the time of the entries appended since `before`.
    fn stamp(&mut self, before: u64) {
        if self.end() > before {
            self.stamps.push_back((before, Instant::now()));
        }
    }

    /// Cuts the journal at its end when it is longer or older than its bounds, forgetting the
    /// positions behind the cut; returns the cut.
    fn bound(&mut self) -> Option<u64> {
        let too_long = self.journal.len() > self.bounds.max_len;
        let too_old = self.stamps.front().is_some_and(|(_, t)| t.elapsed() > self.bounds.max_age);
        if !too_long && !too_old {
            return None;
        }
        let end = self.end();
        tracing::debug!(
            entries = self.journal.len(),
            too_long,
            too_old,
            "cdplace: journal cut; lagging instances are rebuilt"
        );
        self.journal.clear();
        self.stamps.clear();
        self.base = end;
        self.positions.retain(|&p, _| p >= end);
        Some(end)
    }

    /// Registers an instance at the end of the journal (strings flushed first).
    fn enter(&mut self) -> u64 {
        let before = self.end();
        self.state.flush(&mut self.journal);
        self.stamp(before);
        let end = self.end();
        *self.positions.entry(end).or_default() += 1;
        end
    }

    /// Forgets an instance's position and drops the journal entries no instance needs.
    fn release(&mut self, pos: u64, generation: u64) {
        if generation != self.generation {
            return; // compaction forgot every older position
        }
        if let Some(n) = self.positions.get_mut(&pos) {
            *n -= 1;
            if *n == 0 {
                self.positions.remove(&pos);
            }
        }
        let keep_from = self.positions.keys().next().copied().unwrap_or_else(|| self.end());
        if keep_from > self.base {
            self.journal.drain(..(keep_from - self.base) as usize);
            self.base = keep_from;
            // A stamp stays while some of its entries do.
            while self.stamps.get(1).is_some_and(|&(p, _)| p <= keep_from) {
                self.stamps.pop_front();
            }
            if self.journal.is_empty() {
                self.stamps.clear();
            }
        }
    }

    /// Forgets every instance (each is rebuilt from a snapshot): the journal may hold facts no
    /// instance must see again.
    fn invalidate(&mut self) {
        let end = self.end();
        self.journal.clear();
        self.stamps.clear();
        self.base = end;
        self.positions.clear();
        self.generation += 1;
    }

    /// Compacts the strings when they have grown past the threshold; true when it did (every
    /// instance must then be replaced).
    fn maybe_compact(&mut self) -> bool {
        if self.state.interner.len() < self.compact_at {
            return false;
        }
        self.state.compact();
        self.compact_at = (2 * self.state.interner.len()).max(self.compact_at.min(MIN_COMPACTION));
        let end = self.end();
        self.journal.clear();
        self.stamps.clear();
        self.base = end;
        self.positions.clear();
        self.generation += 1;
        tracing::info!(strings = self.state.interner.len(), "cdplace: interned strings compacted");
        true
    }
}

/// An instance checked out of the pool, with its journal position and generation.
#[derive(Debug)]
struct Lease {
    instance: Box<dyn Evaluator>,
    pos: u64,
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
    backend: Arc<dyn Backend>,
    args: String,
    limits: Limits,
    /// `maxPolicyInstances`.
    max_instances: usize,
    shared: Mutex<Shared>,
    slots: Mutex<Slots>,
    /// Signalled when an instance is checked in or discarded.
    freed: Condvar,
    quarantine: Mutex<Quarantine>,
}

impl Pool {
    /// A pool for `args`, whose instances run under the limits of the settings they validate to;
    /// returns the settings too. Invalid arguments fail here.
    pub fn new(backend: Arc<dyn Backend>, args: &str) -> Result<(Pool, Settings)> {
        let mut first = backend.clone().evaluator(Limits::default())?;
        let settings = first.configure(args)?;
        let limits = settings.limits();
        let shared = Shared {
            state: State::default(),
            journal: Vec::new(),
            base: 0,
            stamps: VecDeque::new(),
            bounds: JournalBounds::default(),
            positions: BTreeMap::new(),
            generation: 0,
            compact_at: MIN_COMPACTION,
        };
        let pool = Pool {
            backend,
            args: args.to_string(),
            limits,
            max_instances: settings.max_policy_instances.max(1) as usize,
            shared: Mutex::new(shared),
            slots: Mutex::new(Slots::default()),
            freed: Condvar::new(),
            quarantine: Mutex::new(Quarantine::default()),
        };
        if limits == Limits::default() {
            // Keep the instance that validated the arguments; any other runs under other limits.
            let pos = pool.shared().enter();
            let mut slots = pool.slots();
            slots.live += 1;
            slots.idle.push(Lease { instance: first, pos, generation: 0 });
        }
        Ok((pool, settings))
    }

    /// The limits every instance runs under.
    pub fn limits(&self) -> Limits {
        self.limits
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
        }
    }

    /// A new instance (its slot already taken), configured and given a snapshot before `deadline`.
    fn fresh(&self, deadline: Instant) -> Result<Lease> {
        let mut instance = self.backend.clone().evaluator(self.limits)?;
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
        Ok(Lease { instance, pos, generation })
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

    /// After a trap while applying deltas: finds the object whose facts trap a new instance on
    /// their own, quarantines it (drops it from the view, every instance to be rebuilt without
    /// it) and reports it; false when no single object does (the trap is not an object's).
    fn isolate(&self, deadline: Instant) -> bool {
        // The search instance takes a slot like any other (an idle one gives its slot up).
        match self.take_slot(deadline) {
            Err(_) => return false,
            Ok(Some(idle)) => self.shared().release(idle.pos, idle.generation),
            Ok(None) => {}
        }
        let found = self.find_poison(deadline);
        self.discard();
        let Some(((kind, namespace, name), e)) = found else { return false };
        let error = crate::error::chain(&e);
        tracing::warn!(kind = kind.as_str(), %namespace, %name, %error, "cdplace: object quarantined: applying its facts traps the policy guest");
        self.quarantine().hold(kind, namespace.clone(), name.clone(), error);
        self.change(|st, out| st.apply(out, Record::Remove { kind, namespace, name }));
        self.shared().invalidate();
        self.drop_idle(|_| true);
        true
    }

    /// Applies a snapshot one delta at a time on a new instance; the object of the first delta
    /// that traps, with the trap.
    fn find_poison(&self, deadline: Instant) -> Option<((crate::Kind, String, String), Error)> {
        let (snapshot, generation) = {
            let mut sh = self.shared();
            (sh.state.snapshot(), sh.generation)
        };
        let mut instance = self.backend.clone().evaluator(self.limits).ok()?;
        instance.set_deadline(deadline);
        instance.configure(&self.args).ok()?;
        // Reset and the strings first, then each fact on its own.
        let facts = snapshot.iter().position(|d| quarantine::object_of(d, &self.shared().state.interner).is_some());
        let (head, facts) = snapshot.split_at(facts.unwrap_or(snapshot.len()));
        instance.apply(head).ok()?;
        for d in facts {
            match instance.apply(std::slice::from_ref(d)) {
                Ok(()) => {}
                Err(e @ Error::Trap { .. }) => {
                    let sh = self.shared();
                    if sh.generation != generation {
                        return None; // the strings were compacted meanwhile: ids moved
                    }
                    return quarantine::object_of(d, &sh.state.interner).map(|o| (o, e));
                }
                Err(_) => return None,
            }
        }
        None
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
    /// when it fell behind a cut or a compaction).
    fn catch_up(&self, mut lease: Lease, deadline: Instant) -> Result<Lease> {
        lease.instance.set_deadline(deadline);
        let caught_up = {
            let mut sh = self.shared();
            if lease.generation != sh.generation || lease.pos < sh.base {
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
    /// meanwhile (then it is dropped: rebuilding it later costs the same as catching it up).
    fn checkin(&self, lease: Lease) {
        let keep = {
            let mut sh = self.shared();
            let keep = lease.generation == sh.generation
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

    /// Runs PreFilter for the pod `namespace/name` and turns the result (ids) into `T` with the
    /// state it was computed against; if the strings were compacted meanwhile, it runs again.
    /// A guest failure discards the instance; the next call gets a fresh one.
    pub fn pre_filter<T>(
        &self,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
        convert: impl Fn(&State, &PreFilterResult) -> T,
    ) -> Result<T> {
        let what = || format!("{namespace}/{name}");
        self.decide(what, convert, |sh| {
            let Some(pod) = sh.state.pod(namespace, name) else {
                return Err(Error::UnknownPod(what()));
            };
            let ops = sh.state.overlay(overlay);
            Ok(move |e: &mut dyn Evaluator| e.pre_filter(pod, &ops, now_ms()))
        })
    }

    /// Plain-pod steering (`gpus`: the pod uses GPUs), turned into `T` like [`Pool::pre_filter`].
    pub fn steer<T>(&self, gpus: bool, convert: impl Fn(&State, &PreFilterResult) -> T) -> Result<T> {
        let what = || String::from(if gpus { "plain GPU pod" } else { "plain pod" });
        self.decide(what, convert, |_| Ok(move |e: &mut dyn Evaluator| e.steer(gpus, now_ms())))
    }

    /// One decision call: `prepare` reads the ids it needs from the state (under the lock), the
    /// call it returns runs on a caught-up instance, and the result is converted against the state
    /// of the same string generation; if the strings were compacted meanwhile, it runs again. A
    /// guest failure discards the instance; the next call gets a fresh one.
    fn decide<R, T, F>(
        &self,
        what: impl Fn() -> String,
        convert: impl Fn(&State, &R) -> T,
        prepare: impl Fn(&mut Shared) -> Result<F>,
    ) -> Result<T>
    where
        F: FnOnce(&mut dyn Evaluator) -> Result<R>,
    {
        let deadline = Instant::now() + self.limits.deadline;
        loop {
            let (call, wanted) = {
                let mut sh = self.shared();
                (prepare(&mut sh)?, sh.generation)
            };
            let mut lease = self.checkout(deadline)?;
            if lease.generation != wanted {
                // Compacted between reading the ids and getting an instance: ask again.
                self.checkin(lease);
                continue;
            }
            let r = match call(lease.instance.as_mut()) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %crate::error::chain(&e), pod = %what(), "policy call failed; instance discarded");
                    self.shared().release(lease.pos, lease.generation);
                    self.discard();
                    return Err(e);
                }
            };
            let generation = lease.generation;
            self.checkin(lease);
            let sh = self.shared();
            if sh.generation == generation {
                return Ok(convert(&sh.state, &r));
            }
        }
    }
}

impl Pool {
    /// Runs gang preemption for the pod `namespace/name` and turns the result into `T` with the
    /// state it was computed against (as [`Pool::pre_filter`]). It journals nothing: the view
    /// changes only when the victims' deletions come back through the informers.
    pub fn preempt<T>(
        &self,
        namespace: &str,
        name: &str,
        convert: impl Fn(&State, &cdplace_policy::Preemption) -> T,
    ) -> Result<T> {
        let what = || format!("{namespace}/{name}");
        self.decide(what, convert, |sh| {
            let Some(pod) = sh.state.pod(namespace, name) else {
                return Err(Error::UnknownPod(what()));
            };
            Ok(move |e: &mut dyn Evaluator| e.preempt(pod, now_ms()))
        })
    }
}

impl Pool {
    /// The fleet status, turned into `T` with the state it was computed against (as
    /// [`Pool::pre_filter`]). It journals nothing.
    pub fn status<T>(&self, convert: impl Fn(&State, &cdplace_policy::FleetStatus) -> T) -> Result<T> {
        let what = || String::from("fleet status");
        self.decide(what, convert, |_| Ok(move |e: &mut dyn Evaluator| e.status(now_ms())))
    }
}

/// The host's clock for the policy (Unix milliseconds).
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
