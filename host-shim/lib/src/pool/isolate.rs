//! Quarantine isolation: after applying deltas traps the guest, the object whose facts trap a
//! new instance on their own is found, held out of the view (see [`crate::quarantine`]) and
//! every instance rebuilt without it.

use std::time::Instant;

use super::Pool;
use crate::Error;
use crate::facts::Record;
use crate::quarantine;

impl Pool {
    /// After a trap while applying deltas: finds the object whose facts trap a new instance on
    /// their own, quarantines it (drops it from the view, every instance to be rebuilt without
    /// it) and reports it; false when no single object does (the trap is not an object's).
    pub(super) fn isolate(&self, deadline: Instant) -> bool {
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
        let mut instance = self.current().backend.evaluator(self.limits).ok()?;
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
}
