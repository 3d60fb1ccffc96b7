//! Pods this replica decided: their heats at decision time, and whether the watch reported them.

use super::{HeardMix, Ledger};

impl Ledger {
    /// Marks `id` as decided by this replica, with the heat its landing nodes had then.
    pub(crate) fn remember_decision(&mut self, id: &str, heats: Vec<(String, f32)>) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let names = &self.node_names;
        // `heats` usually lists the landing nodes in `shares` order: look there first.
        let heat_of = |at: usize, node: &str| {
            heats
                .get(at)
                .filter(|(h, _)| h == node)
                .or_else(|| heats.iter().find(|(h, _)| h == node))
                .map_or(f32::NAN, |(_, heat)| *heat)
        };
        if !entry.unheard {
            entry.unheard = true;
            self.unheard += 1;
        }
        entry.decided_here = Some(
            entry
                .shares
                .iter()
                .enumerate()
                .map(|(at, s)| heat_of(at, &names[s.parts().0 as usize]))
                .collect(),
        );
    }

    /// Once per pod this replica decided: the heats remembered at decision time, by node.
    /// `None` for pods another replica decided, or whose landing was counted already.
    pub(crate) fn take_decision(&mut self, id: &str) -> Option<Box<[(String, f32)]>> {
        let entry = self.entries.get_mut(id)?;
        let heats = entry.decided_here.take()?;
        Some(
            entry
                .shares
                .iter()
                .zip(heats.iter())
                .filter(|(_, heat)| !heat.is_nan())
                .map(|(s, heat)| (self.node_names[s.parts().0 as usize].to_string(), *heat))
                .collect(),
        )
    }

    /// The pod watch reported the pod `id` (created or bound).
    pub(crate) fn heard(&mut self, id: &str) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.listed = self.relists;
        }
        if let Some(entry) = self.entries.get_mut(id)
            && entry.unheard
        {
            entry.unheard = false;
            self.unheard -= 1;
            self.heard.add(true);
        }
    }

    /// The pod watch reported a pod another replica decided, for the first time.
    pub(crate) fn heard_from_another(&mut self) {
        self.heard.add(false);
    }

    /// Whose decisions the pod watch reported lately.
    pub(crate) fn heard_mix(&self) -> HeardMix {
        self.heard
    }

    /// Pods this replica decided that the pod watch has not reported yet: how far behind the
    /// watch runs, in this replica's own pods.
    pub(crate) fn unheard(&self) -> usize {
        self.unheard
    }
}
