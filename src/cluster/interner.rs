//! Values many pods share (job shapes, node names), each kept once under a reusable number.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

use crate::hashing::HashMap;

/// Values many pods share, each kept once under a number while some pod holds it; a number is
/// reused once no pod does.
#[derive(Debug)]
pub(super) struct Interner<T: ?Sized> {
    /// The value and how many pods hold it, by number; `None` for a free number.
    slots: Vec<(Option<Arc<T>>, u32)>,
    free: Vec<u32>,
    ids: HashMap<Arc<T>, u32>,
}

// Derived `Clone` would ask `T: Clone`, which `str` is not; the values are shared.
impl<T: ?Sized> Clone for Interner<T> {
    fn clone(&self) -> Self {
        Interner {
            slots: self.slots.clone(),
            free: self.free.clone(),
            ids: self.ids.clone(),
        }
    }
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            slots: Vec::new(),
            free: Vec::new(),
            ids: HashMap::default(),
        }
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    /// The number of `value` (made by `make` on first sight), held once more; and whether it
    /// was just numbered.
    pub(super) fn hold<Q>(&mut self, value: &Q, make: impl FnOnce() -> Arc<T>) -> (u32, bool)
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        if let Some(&id) = self.ids.get(value) {
            if let Some(slot) = self.slots.get_mut(id as usize) {
                slot.1 += 1;
            }
            return (id, false);
        }
        let shared = make();
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push((None, 0));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        if let Some(slot) = self.slots.get_mut(id as usize) {
            *slot = (Some(shared.clone()), 1);
        }
        self.ids.insert(shared, id);
        (id, true)
    }

    /// One pod less holds number `id`; whether none does any more.
    pub(super) fn release(&mut self, id: u32) -> bool {
        let Some(slot) = self.slots.get_mut(id as usize) else {
            return false;
        };
        slot.1 = slot.1.saturating_sub(1);
        if slot.1 == 0
            && let Some(value) = slot.0.take()
        {
            self.ids.remove(&value);
            self.free.push(id);
            return true;
        }
        false
    }

    pub(super) fn get(&self, id: u32) -> Option<&T> {
        self.slots.get(id as usize)?.0.as_deref()
    }

    /// Every number's value in number order; `None` for a free number.
    pub(super) fn by_number(&self) -> impl Iterator<Item = Option<&Arc<T>>> {
        self.slots.iter().map(|(value, _)| value.as_ref())
    }

    /// No value is held.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}
