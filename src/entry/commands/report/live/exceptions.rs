//! The live report's `PolicyException`s: listed once, before the report.

use super::Live;

impl Live {
    /// Every namespace's `PolicyException`s (none when the CRD is not
    /// installed).
    ///
    /// # Errors
    /// The list call fails (refused, unreachable).
    pub(crate) fn exception_objects(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        self.runtime
            .block_on(crate::entry::exceptions::list(self.client.clone()))
    }
}
