//! The policy instances that mirror the host's [`State`], and the journal that keeps them in
//! step. Every change the state makes is appended to the journal; an instance remembers how far
//! into it it is and catches up when it is checked out, so parallel callers each get their own
//! instance (no lock is held during a guest call) and every instance sees the same cluster. A
//! new instance starts from a snapshot. When the interned strings have grown past a threshold,
//! they are compacted: the journal restarts under a new generation and older instances are
//! dropped. Instances come from the cluster's [`Backend`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cdplace_policy::PreFilterResult;

use crate::evaluator::{Backend, Evaluator, wit::Delta};
use crate::overlay::Overlay;
use crate::runtime::Limits;
use crate::settings::Settings;
use crate::state::State;
use crate::{Error, Result};

/// How far an idle instance may fall behind the journal before it is dropped instead of caught up.
const MAX_LAG: usize = 100_000;
/// Idle instances kept for parallel callers.
const MAX_IDLE: usize = 16;
/// Interned strings are never freed one by one (pods come and go with new names); once the table
/// passes this size and twice its live size, it is rebuilt with only the live strings.
const MIN_COMPACTION: usize = 50_000;

/// The state and the journal of its changes, under one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: State,
    journal: Vec<Delta>,
    /// Journal position of `journal[0]`.
    base: u64,
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
    /// there to need them: a new one starts from a snapshot).
    pub fn change<R>(&mut self, f: impl FnOnce(&mut State, &mut Vec<Delta>) -> R) -> R {
        let r = f(&mut self.state, &mut self.journal);
        if self.positions.is_empty() {
            self.base = self.end();
            self.journal.clear();
        }
        r
    }

    /// Registers an instance at the end of the journal (strings flushed first).
    fn enter(&mut self) -> u64 {
        self.state.flush(&mut self.journal);
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
        }
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

/// The instances of one cluster and the state they mirror.
#[derive(Debug)]
pub(crate) struct Pool {
    backend: Arc<dyn Backend>,
    args: String,
    limits: Limits,
    shared: Mutex<Shared>,
    idle: Mutex<Vec<Lease>>,
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
            positions: BTreeMap::new(),
            generation: 0,
            compact_at: MIN_COMPACTION,
        };
        let pool =
            Pool { backend, args: args.to_string(), limits, shared: Mutex::new(shared), idle: Mutex::new(vec![]) };
        if limits == Limits::default() {
            // Keep the instance that validated the arguments; any other runs under other limits.
            let pos = pool.shared().enter();
            pool.idle().push(Lease { instance: first, pos, generation: 0 });
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

    fn idle(&self) -> MutexGuard<'_, Vec<Lease>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state under the lock, then compacts the strings when due (idle instances are
    /// dropped then; the next call starts a fresh one from a snapshot).
    pub fn change<R>(&self, f: impl FnOnce(&mut State, &mut Vec<Delta>) -> R) -> R {
        let (r, compacted) = {
            let mut sh = self.shared();
            let r = sh.change(f);
            (r, sh.maybe_compact())
        };
        if compacted {
            self.idle().clear();
        }
        r
    }

    /// Lowers the compaction threshold (tests exercise compaction without 50,000 pods).
    pub fn compact_strings_above(&self, n: usize) {
        self.shared().compact_at = n;
    }

    fn fresh(&self) -> Result<Lease> {
        let mut instance = self.backend.clone().evaluator(self.limits)?;
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

    /// An instance caught up with the journal.
    fn checkout(&self) -> Result<Lease> {
        let popped = self.idle().pop();
        let Some(mut lease) = popped else { return self.fresh() };
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
        let Some((deltas, end)) = caught_up else { return self.fresh() };
        lease.pos = end;
        if let Err(e) = lease.instance.apply(&deltas) {
            self.shared().release(end, lease.generation);
            return Err(e);
        }
        Ok(lease)
    }

    fn checkin(&self, lease: Lease) {
        let (lag, current) = {
            let sh = self.shared();
            (sh.end().saturating_sub(lease.pos) as usize, sh.generation)
        };
        let mut idle = self.idle();
        if idle.len() >= MAX_IDLE || lag > MAX_LAG || lease.generation != current {
            drop(idle);
            self.shared().release(lease.pos, lease.generation);
            return;
        }
        idle.push(lease);
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
        loop {
            let (call, wanted) = {
                let mut sh = self.shared();
                (prepare(&mut sh)?, sh.generation)
            };
            let mut lease = self.checkout()?;
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
