//! One watched resource as the cache keeps it: the watcher's events reduced
//! to [`Change`]s of names and kept data, applied to a [`Mirror`] whose
//! relists replace the live data only once complete.

use std::collections::HashMap;

use kube::Resource;
use kube::runtime::watcher;

/// One step of a watch, reduced to names and the data kept for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<V> {
    /// A (re)list starts: what follows replaces everything once complete.
    Relist,
    /// An object of the (re)list.
    Listed(String, V),
    /// The (re)list is complete.
    ListDone,
    /// An object was added or changed.
    Applied(String, V),
    /// An object was deleted.
    Deleted(String),
}

impl<V> Change<V> {
    /// Reduces a watcher event with `extract` (name and kept data; `None`
    /// drops the object).
    pub fn from_event<K>(
        event: watcher::Event<K>,
        extract: impl Fn(&K) -> Option<(String, V)>,
    ) -> Option<Self>
    where
        K: Resource,
    {
        Some(match event {
            watcher::Event::Init => Self::Relist,
            watcher::Event::InitApply(k) => {
                let (name, v) = extract(&k)?;
                Self::Listed(name, v)
            }
            watcher::Event::InitDone => Self::ListDone,
            watcher::Event::Apply(k) => {
                let (name, v) = extract(&k)?;
                Self::Applied(name, v)
            }
            watcher::Event::Delete(k) => Self::Deleted(k.meta().name.clone()?),
        })
    }
}

/// A name-keyed mirror of one resource. A relist is buffered and replaces
/// the live data only when complete, so readers never see half a list;
/// until the first list completes the mirror is empty.
#[derive(Debug)]
pub struct Mirror<V> {
    live: HashMap<String, V>,
    relist: Option<HashMap<String, V>>,
    synced: bool,
}

impl<V> Default for Mirror<V> {
    fn default() -> Self {
        Self {
            live: HashMap::new(),
            relist: None,
            synced: false,
        }
    }
}

impl<V> Mirror<V> {
    /// Applies one change; true when the live data changed.
    pub fn apply(&mut self, change: Change<V>) -> bool {
        match change {
            Change::Relist => {
                self.relist = Some(HashMap::new());
                false
            }
            Change::Listed(name, v) => {
                match &mut self.relist {
                    Some(buffer) => {
                        buffer.insert(name, v);
                    }
                    // A listed object without a relist start: keep it.
                    None => {
                        self.live.insert(name, v);
                        return true;
                    }
                }
                false
            }
            Change::ListDone => {
                if let Some(buffer) = self.relist.take() {
                    self.live = buffer;
                }
                self.synced = true;
                true
            }
            Change::Applied(name, v) => {
                self.live.insert(name, v);
                true
            }
            Change::Deleted(name) => self.live.remove(&name).is_some(),
        }
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<&V> {
        self.live.get(name)
    }

    /// Objects in the live data.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// A first list has completed.
    #[must_use]
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.live.iter()
    }
}
