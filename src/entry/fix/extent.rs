//! Where things are in the text: columns, list dashes, and where a block
//! map entry's or list item's lines end.

use super::style::{line_start, next_line};
use super::tree::{Entry, Node, NodeKind};
use super::writer::Writer;

impl Writer<'_> {
    /// Column (0-based, in bytes) of a position.
    pub(super) fn col(&self, pos: usize) -> usize {
        pos - line_start(self.text, pos)
    }

    /// Does the text before this position on its line hold only spaces?
    pub(super) fn own_line(&self, pos: usize) -> bool {
        self.text[line_start(self.text, pos)..pos]
            .chars()
            .all(|c| c == ' ')
    }

    /// The `-` of the block list item starting at `pos`, when it has its own line.
    pub(super) fn dash(&self, pos: usize) -> Option<usize> {
        let before = &self.text[line_start(self.text, pos)..pos];
        let trimmed = before.trim_end_matches(' ');
        let lead = trimmed.strip_suffix('-')?;
        lead.chars()
            .all(|c| c == ' ')
            .then(|| line_start(self.text, pos) + lead.len())
    }

    /// Where a block map entry's lines end (the start of the next line
    /// that is not part of it). Comments and blank lines just before the
    /// next key belong to that key.
    pub(super) fn entry_end(&self, entries: &[Entry], e: &Entry) -> Result<usize, String> {
        let col = self.col(e.key_start);
        let idx = entries
            .iter()
            .position(|x| std::ptr::eq(x, e))
            .ok_or_else(|| e.key.clone())?;
        if let Some(next) = entries.get(idx + 1) {
            let mut end = line_start(self.text, next.key_start);
            if !self.own_line(next.key_start) {
                return Err(next.key.clone());
            }
            end = self.back_over_trailing(end, line_start(self.text, e.key_start), col);
            return Ok(end);
        }
        let block_seq_value = matches!(e.value.kind, NodeKind::Seq { flow: false, .. });
        let end = self.extent(next_line(self.text, e.key_start), col, block_seq_value);
        Ok(self.back_over_trailing(end, line_start(self.text, e.key_start), col))
    }

    /// Where a block list item's lines end.
    pub(super) fn item_end(&self, items: &[Node], idx: usize, dash: usize) -> usize {
        let col = self.col(dash);
        if let Some(next) = items.get(idx + 1)
            && let Some(next_dash) = self.dash(next.start)
        {
            let end = line_start(self.text, next_dash);
            return self.back_over_trailing(end, line_start(self.text, dash), col);
        }
        let end = self.extent(next_line(self.text, dash), col, false);
        self.back_over_trailing(end, line_start(self.text, dash), col)
    }

    /// From `pos`, the end of the lines indented deeper than `col` (or at
    /// `col` starting with `- `, when `dashes`).
    pub(super) fn extent(&self, mut pos: usize, col: usize, dashes: bool) -> usize {
        while pos < self.text.len() {
            let next = next_line(self.text, pos);
            let line = self.text[pos..next].trim_end_matches(['\r', '\n']);
            let body = line.trim_start_matches(' ');
            let indent = line.len() - body.len();
            let deeper = indent > col
                || (dashes && indent == col && (body.starts_with("- ") || body == "-"));
            if !(body.is_empty() || deeper) {
                break;
            }
            pos = next;
        }
        pos
    }

    /// Moves `end` back over blank lines and comments at `col` or less
    /// (they belong to what follows), never before `floor`'s next line.
    pub(super) fn back_over_trailing(&self, mut end: usize, floor: usize, col: usize) -> usize {
        let floor = next_line(self.text, floor);
        while end > floor {
            let prev = line_start(self.text, end - 1);
            let line = self.text[prev..end].trim_end_matches(['\r', '\n']);
            let body = line.trim_start_matches(' ');
            let indent = line.len() - body.len();
            if body.is_empty() || (body.starts_with('#') && indent <= col) {
                end = prev;
            } else {
                break;
            }
        }
        end
    }
}
