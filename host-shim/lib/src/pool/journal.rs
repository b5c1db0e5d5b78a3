//! The journal: every change the [`State`] makes, in order, so an instance that is some way
//! behind catches up by applying the entries it has not seen. It records where each instance
//! stands, drops the entries no instance needs, cuts itself when it passes its
//! [`JournalBounds`], and compacts the interned strings (starting a new generation) when they
//! have grown past a threshold. Held with the state under the pool's lock.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::state::State;
use crate::wit::Delta;

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

/// The state and the journal of its changes, under one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: State,
    pub(super) journal: Vec<Delta>,
    /// Journal position of `journal[0]`.
    pub(super) base: u64,
    /// When entries were appended: `(position of the first, time)`, oldest first.
    stamps: VecDeque<(u64, Instant)>,
    pub(super) bounds: JournalBounds,
    /// Positions of the instances checked out or idle, with how many are at each.
    positions: BTreeMap<u64, usize>,
    /// Bumped when the strings are compacted: instances of an older generation are dropped.
    pub(super) generation: u64,
    /// Compact the strings when the table holds this many.
    pub(super) compact_at: usize,
}

impl Shared {
    /// An empty state and journal, no instance registered, default bounds.
    pub(super) fn new() -> Shared {
        Shared {
            state: State::default(),
            journal: Vec::new(),
            base: 0,
            stamps: VecDeque::new(),
            bounds: JournalBounds::default(),
            positions: BTreeMap::new(),
            generation: 0,
            compact_at: MIN_COMPACTION,
        }
    }

    pub(super) fn end(&self) -> u64 {
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
    pub(super) fn enter(&mut self) -> u64 {
        let before = self.end();
        self.state.flush(&mut self.journal);
        self.stamp(before);
        let end = self.end();
        *self.positions.entry(end).or_default() += 1;
        end
    }

    /// Registers an instance at `pos`, a position the journal still holds (`base..=end`): a
    /// shadow instance brought up to the position a live decision was made at, not to the end.
    pub(super) fn pin(&mut self, pos: u64) {
        debug_assert!(pos >= self.base && pos <= self.end());
        *self.positions.entry(pos).or_default() += 1;
    }

    /// Forgets an instance's position and drops the journal entries no instance needs.
    pub(super) fn release(&mut self, pos: u64, generation: u64) {
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
    pub(super) fn invalidate(&mut self) {
        let end = self.end();
        self.journal.clear();
        self.stamps.clear();
        self.base = end;
        self.positions.clear();
        self.generation += 1;
    }

    /// Compacts the strings when they have grown past the threshold; true when it did (every
    /// instance must then be replaced).
    pub(super) fn maybe_compact(&mut self) -> bool {
        if self.state.interner.len() < self.compact_at {
            return false;
        }
        self.state.compact();
        self.compact_at = (2 * self.state.interner.len()).max(self.compact_at.min(MIN_COMPACTION));
        self.invalidate();
        tracing::info!(strings = self.state.interner.len(), "cdplace: interned strings compacted");
        true
    }
}
