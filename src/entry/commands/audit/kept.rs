//! How the audit keeps an object between passes: its JSON text, or, for a
//! pod with a controller, the JSON Patch (RFC 6902, `json_patch::diff`)
//! from the first pod of that controller the store saw, whose text the
//! siblings share ([`Kept::Sibling`]); applying it gives the pod's tree
//! back exactly.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// An object as kept.
#[derive(Debug, Clone)]
pub enum Kept {
    /// Its JSON text.
    Whole(Arc<str>),
    /// A pod with a controller: the JSON text of the first pod of that
    /// controller the store saw (shared by the siblings), and the JSON
    /// Patch from it to this pod.
    Sibling { base: Arc<str>, patch: Box<str> },
}

/// The JSON Patch of a pod that is its base.
const NO_PATCH: &str = "[]";

impl Kept {
    /// (base text, patch text): a whole object is its own base.
    pub(super) fn parts(&self) -> (&Arc<str>, &str) {
        match self {
            Self::Whole(text) => (text, NO_PATCH),
            Self::Sibling { base, patch } => (base, patch),
        }
    }

    /// The object as a JSON tree; `bases` keeps the trees of the bases
    /// parsed so far (a namespace's pods share a few).
    ///
    /// # Errors
    /// The text or the patch does not parse, or the patch does not apply
    /// (the store wrote both from a parsed object, so neither happens).
    pub fn value(&self, bases: &mut HashMap<usize, Value>) -> Result<Value, String> {
        let (base, patch) = self.parts();
        if patch == NO_PATCH {
            return serde_json::from_str(base).map_err(|e| e.to_string());
        }
        let key = Arc::as_ptr(base).cast::<u8>() as usize;
        let mut value = match bases.get(&key) {
            Some(v) => v.clone(),
            None => {
                let v: Value = serde_json::from_str(base).map_err(|e| e.to_string())?;
                bases.insert(key, v.clone());
                v
            }
        };
        let ops: json_patch::Patch = serde_json::from_str(patch).map_err(|e| e.to_string())?;
        json_patch::patch(&mut value, &ops).map_err(|e| e.to_string())?;
        Ok(value)
    }
}

impl PartialEq for Kept {
    /// The same object: the same patch from the same base text.
    fn eq(&self, other: &Self) -> bool {
        let ((a, pa), (b, pb)) = (self.parts(), other.parts());
        pa == pb && (Arc::ptr_eq(a, b) || a == b)
    }
}

/// The bases of the pods with a controller: controller uid -> the text the
/// siblings share (alive while a pod refers to it), and the tree of the
/// base used last (a list gives a controller's pods one after the other).
#[derive(Debug, Default)]
pub(super) struct Bases {
    texts: HashMap<String, std::sync::Weak<str>>,
    last: Option<(Arc<str>, Value)>,
    /// Bases added since the map was last swept of dead ones.
    added: usize,
}

impl Bases {
    /// A pod with controller `uid`, normalized, as kept.
    pub(super) fn keep(&mut self, uid: &str, pod: Value) -> Option<Kept> {
        let base = self.texts.get(uid).and_then(std::sync::Weak::upgrade);
        let Some(base) = base else {
            let text: Arc<str> = serde_json::to_string(&pod).ok()?.into();
            self.texts.insert(uid.to_owned(), Arc::downgrade(&text));
            self.last = Some((Arc::clone(&text), pod));
            self.added += 1;
            if self.added > 4096 {
                self.texts.retain(|_, w| w.strong_count() > 0);
                self.added = 0;
            }
            return Some(Kept::Whole(text));
        };
        if !self
            .last
            .as_ref()
            .is_some_and(|(t, _)| Arc::ptr_eq(t, &base))
        {
            let tree = serde_json::from_str(&base).ok()?;
            self.last = Some((Arc::clone(&base), tree));
        }
        let tree = &self.last.as_ref()?.1;
        let patch = serde_json::to_string(&json_patch::diff(tree, &pod)).ok()?;
        if patch == NO_PATCH {
            return Some(Kept::Whole(base));
        }
        Some(Kept::Sibling {
            base,
            patch: patch.into(),
        })
    }
}
