//! Strings to ids. The host interns every string a fact uses and sends each to the guest once;
//! ids are never freed one by one, so the state rebuilds the table from the live strings when it
//! has grown (`State::compact`).

use std::collections::HashMap;

use cdplace_policy::StrId;

/// Strings to ids, grown as objects arrive.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    ids: HashMap<String, StrId>,
    texts: Vec<String>,
    /// Strings interned since the last [`Interner::take_fresh`].
    fresh: Vec<(StrId, String)>,
}

impl Interner {
    /// The id of `s`, interning it when new.
    pub fn id(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = StrId::try_from(self.texts.len()).expect("fewer than 2^32 interned strings");
        self.texts.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        self.fresh.push((id, s.to_string()));
        id
    }

    /// The text of an id ("" for an unknown id).
    pub fn text(&self, id: StrId) -> &str {
        self.texts.get(id as usize).map_or("", String::as_str)
    }

    /// How many strings are interned.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Every string with its id, for a new instance.
    pub fn all(&self) -> Vec<(StrId, String)> {
        self.texts.iter().enumerate().map(|(i, s)| (i as StrId, s.clone())).collect()
    }

    /// The strings interned since the last call (to journal them).
    pub fn take_fresh(&mut self) -> Vec<(StrId, String)> {
        std::mem::take(&mut self.fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_fresh_strings_are_handed_out_once() {
        let mut i = Interner::default();
        let (a, b) = (i.id("a"), i.id("b"));
        assert_eq!((a, b, i.id("a")), (0, 1, 0));
        assert_eq!((i.text(b), i.text(7)), ("b", ""));
        assert_eq!(i.take_fresh(), vec![(0, "a".to_string()), (1, "b".to_string())]);
        i.id("a");
        assert!(i.take_fresh().is_empty());
        assert_eq!(i.len(), 2);
    }
}
