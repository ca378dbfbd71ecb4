//! WIN-IMAGE-FACTS-UNKNOWN: the registry was asked about an image
//! (`--image-facts`, `--registry`) and could not say; the image is judged
//! by its name.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::images::Lookup;
use crate::decision::rules::cel::{Export, NEEDS_IMAGE_PLATFORMS};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-IMAGE-FACTS-UNKNOWN",
        title: "The registry's facts of an image could not be learnt",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Any,
        what: "Only where the registry is asked (`--registry`, or an `unknown` entry of an `--image-facts` file): an image whose lookup failed (the registry unreachable, slow past the deadline, answering 401, 404 or 429, or a malformed manifest).",
        why: "A failed lookup never denies: the image is judged by its name, as without facts, and this finding says which fact is missing and why, so a silent pass is not taken for a checked one.",
        source: "winadmit's own fail-open contract for registry lookups; the OCI distribution specification's errors (401 UNAUTHORIZED, 404 MANIFEST_UNKNOWN, 429 TOOMANYREQUESTS).",
        doc_url: "https://github.com/opencontainers/distribution-spec/blob/main/spec.md#error-codes",
        fix: "Give the registry's credentials (`--registry-config`, a Docker config.json), allow plain HTTP for it if it has no TLS (`--insecure-registry`), or resolve the images where the registry is reachable (`winadmit images resolve`) and pass the file with `--image-facts`.",
        example: "# registry.example is down\ncontainers:\n- name: api\n  image: registry.example/payments:4.2",
        since: None,
        until: None,
    },
    check: check_unknown,
    export: |_| Export::Gap(NEEDS_IMAGE_PLATFORMS),
};

fn check_unknown(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(registry) = cx.registry else { return };
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        if let Some(Lookup::Unknown(why)) = registry.get(image) {
            out.report(
                cx.container_field(&c, &["image"]),
                format!(
                    "the registry's facts of image {image} are unknown ({why}): it is judged by its name"
                ),
            );
        }
    }
}
