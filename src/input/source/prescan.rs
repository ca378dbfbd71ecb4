//! The first pass over a text: the cluster objects it holds (Namespaces,
//! RuntimeClasses, Windows Nodes, GMSACredentialSpecs; `kubectl get nodes
//! -o yaml` given to `lint` or `report`), learnt with the reader every
//! entry point uses ([`ClusterObjects::learn`]), and the images its workloads name.
//! They apply to every object of the input, wherever they are in it.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::BufReader;
use std::path::Path;

use crate::decision::cluster::ClusterObjects;
use crate::decision::policy::Policy;

/// Learns the cluster objects of a text (see the module docs; `List`
/// items are expanded). Nothing is learnt from a text that does not
/// parse. A JSON text is read with the JSON reader's quick pass (the
/// bodies of other objects skipped unbuilt); YAML, or JSON that reader
/// refuses, with the YAML reader. An owned text may be left with the tab
/// retry's change ([`super::for_each_document_in`]).
pub fn cluster_objects(text: &mut Cow<'_, str>, into: &mut ClusterObjects) {
    // Texts that name none of the kinds are not parsed twice.
    if !super::CLUSTER_KINDS.iter().any(|kind| text.contains(kind)) {
        return;
    }
    if super::looks_like_json(text.as_bytes()) {
        let mut found = ClusterObjects::default();
        let read = super::json::for_each_context_object(text.as_bytes(), &mut |v| {
            found.learn(&v);
            Ok(())
        });
        if read.is_ok() {
            into.absorb(found);
            return;
        }
    }
    // Document by document; kept only if the whole text parses.
    let mut found = ClusterObjects::default();
    let parsed = super::for_each_document_in(text, |part| match part {
        super::Part::Documents(docs, _) => {
            for d in docs {
                found.learn(&d.value);
            }
        }
        super::Part::Restart => found = ClusterObjects::default(),
    });
    if parsed.is_ok() {
        into.absorb(found);
    }
}

/// [`cluster_objects`] of a JSON file over the size limit, read again as
/// a stream (its objects are streamed in the second pass). What precedes
/// an error is kept: the second pass reports the error with its position.
pub fn cluster_objects_in_large_json(path: &Path, into: &mut ClusterObjects) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let reader = BufReader::with_capacity(256 * 1024, file);
    let _ = super::json::for_each_context_object(reader, &mut |v| {
        into.learn(&v);
        Ok(())
    });
}

/// Adds the images of the workloads in `text` (every container list) to
/// `into`, for the registry to look up. A text that does not parse adds
/// nothing (`lint` reports it).
pub fn images(text: &mut Cow<'_, str>, policy: &Policy, into: &mut BTreeSet<String>) {
    if !text.contains("image") {
        return;
    }
    let _ = super::for_each_document_in(text, |part| {
        if let super::Part::Documents(docs, _) = part {
            for d in docs {
                crate::decision::lookups::workload_images(policy, &d.value, into);
            }
        }
    });
}
