//! `--format html`: one self-contained file (no external assets) with a
//! chart of findings per namespace and per rule (inline SVG drawn by inline
//! JavaScript) and a sortable, filterable findings table.
//!
//! Streams: the findings are written as they come into a JSON data block;
//! the summary block follows; the script reads both when the page loads.
//! Data is escaped for its context: text in HTML with [`escape_html`], JSON
//! inside `<script>` with [`script_json`] (no `<`, `>`, `&`, U+2028/9
//! survive), and the script only ever sets `textContent`, never HTML.

use std::io::{self, Write};

use super::ReportSink;
use crate::output::InputProblem;
use crate::report::{ObjectReport, Summary};

/// Escapes text for HTML element content and attribute values.
#[must_use]
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON safe to embed in a `<script>` element.
///
/// # Errors
/// The value does not serialize (never, for report data).
pub fn script_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let s = serde_json::to_string(value)?;
    Ok(s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029"))
}

/// Streams an HTML report to `out`.
pub struct HtmlSink<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> HtmlSink<W> {
    /// Writes the page head and opens the data block.
    ///
    /// # Errors
    /// Writing fails.
    pub fn new(mut out: W, title: &str) -> io::Result<Self> {
        let title = escape_html(title);
        write!(out, "{HEAD}",)?;
        write!(
            out,
            "<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
        )?;
        out.write_all(BODY.as_bytes())?;
        out.write_all(b"<script type=\"application/json\" id=\"winadmit-findings\">[")?;
        Ok(Self { out, first: true })
    }
}

const HEAD: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";

const CSS: &str = r"
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5rem;color:#1b1f23}
h1{font-size:1.4rem} h2{font-size:1.1rem;margin-top:1.5rem}
#totals span{display:inline-block;margin-right:1.2rem}
.charts{display:flex;flex-wrap:wrap;gap:2rem}
.chart svg{background:#fafbfc;border:1px solid #e1e4e8}
.controls{margin:.5rem 0;display:flex;gap:.6rem;flex-wrap:wrap}
table{border-collapse:collapse;width:100%;font-size:.85rem}
th,td{border-bottom:1px solid #e1e4e8;padding:.3rem .4rem;text-align:left;vertical-align:top}
th{cursor:pointer;background:#f6f8fa;user-select:none;position:sticky;top:0}
th[aria-sort=ascending]::after{content:' \25B2'} th[aria-sort=descending]::after{content:' \25BC'}
td.sev-error{color:#b31d28;font-weight:600} td.sev-warning{color:#b08800;font-weight:600}
td.v-deny{color:#b31d28} td.v-warn{color:#b08800}
code{font-size:.8rem}
";

const BODY: &str = r#"<p id="totals">Loading report&hellip;</p>
<div class="charts">
<div class="chart"><h2>Findings per namespace</h2><div id="chart-namespaces"></div></div>
<div class="chart"><h2>Findings per rule</h2><div id="chart-rules"></div></div>
</div>
<h2>Findings</h2>
<div class="controls">
<input id="filter" type="search" placeholder="Filter (namespace, name, rule, field, message)" size="48">
<select id="filter-severity"><option value="">any severity</option><option>error</option><option>warning</option></select>
<select id="filter-verdict"><option value="">any verdict</option><option>deny</option><option>warn</option><option>allow</option></select>
<span id="shown"></span>
</div>
<table id="findings">
<thead><tr><th data-col="0">Namespace</th><th data-col="1">Kind</th><th data-col="2">Name</th><th data-col="3">Verdict</th><th data-col="4">Severity</th><th data-col="5">Rule</th><th data-col="6">Field</th><th data-col="7">Message</th></tr></thead>
<tbody></tbody>
</table>
<div id="input-errors"></div>
<noscript><p>This report draws its charts and table with JavaScript; the data is in the page source.</p></noscript>
"#;

const SCRIPT: &str = r#"
(function () {
  'use strict';
  var rows = JSON.parse(document.getElementById('winadmit-findings').textContent);
  var summary = JSON.parse(document.getElementById('winadmit-summary').textContent);
  var inputErrors = JSON.parse(document.getElementById('winadmit-input-errors').textContent);
  var SVG = 'http://www.w3.org/2000/svg';
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function svgEl(tag, attrs) { var e = document.createElementNS(SVG, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); return e; }

  var totals = document.getElementById('totals');
  totals.textContent = '';
  [['Workloads', summary.objects], ['Reported', summary.reported], ['Folded into owners', summary.folded],
   ['Windows', summary.windowsWorkloads], ['Deny', summary.verdicts.deny], ['Warn', summary.verdicts.warn],
   ['Allow', summary.verdicts.allow], ['Errors', summary.errors], ['Warnings', summary.warnings],
   ['Input errors', summary.inputErrors]].forEach(function (t) { totals.appendChild(el('span', t[0] + ': ' + t[1])); });
  if (summary.mode) totals.appendChild(el('span', 'Previewing mode: ' + summary.mode));

  // Bar chart: one row per item, errors (red) and warnings (amber) stacked.
  function chart(id, items) {
    var host = document.getElementById(id);
    if (!items.length) { host.appendChild(el('p', 'No findings.')); return; }
    var max = 1; items.forEach(function (i) { max = Math.max(max, i.errors + i.warnings); });
    var rowH = 22, labelW = 220, barW = 320, h = items.length * rowH + 10;
    var svg = svgEl('svg', { width: labelW + barW + 70, height: h, role: 'img', 'class': 'bars', 'aria-label': id });
    items.forEach(function (i, n) {
      var y = 5 + n * rowH;
      var label = svgEl('text', { x: labelW - 6, y: y + 14, 'text-anchor': 'end', 'font-size': 12 });
      label.textContent = i.label.length > 32 ? i.label.slice(0, 31) + '\u2026' : i.label;
      svg.appendChild(label);
      var we = Math.round(barW * i.errors / max), ww = Math.round(barW * i.warnings / max);
      var total = i.errors + i.warnings;
      var g = svgEl('g', { 'class': 'bar', 'data-label': i.label, 'data-count': total });
      var title = svgEl('title', {}); title.textContent = i.label + ': ' + i.errors + ' error(s), ' + i.warnings + ' warning(s)';
      g.appendChild(title);
      if (we > 0) g.appendChild(svgEl('rect', { x: labelW, y: y + 2, width: we, height: rowH - 6, fill: '#d73a49', 'class': 'errors' }));
      if (ww > 0) g.appendChild(svgEl('rect', { x: labelW + we, y: y + 2, width: ww, height: rowH - 6, fill: '#dbab09', 'class': 'warnings' }));
      svg.appendChild(g);
      var count = svgEl('text', { x: labelW + we + ww + 6, y: y + 14, 'font-size': 12 });
      count.textContent = String(total);
      svg.appendChild(count);
    });
    host.appendChild(svg);
  }
  chart('chart-namespaces', summary.namespaces.filter(function (n) { return n.errors + n.warnings > 0; })
    .map(function (n) { return { label: n.namespace === null ? '(no namespace)' : n.namespace, errors: n.errors, warnings: n.warnings }; })
    .sort(function (a, b) { return (b.errors + b.warnings) - (a.errors + a.warnings); }));
  chart('chart-rules', summary.rules.map(function (r) {
    return { label: r.rule, errors: r.severity === 'error' ? r.findings : 0, warnings: r.severity === 'error' ? 0 : r.findings };
  }));

  var LIMIT = 2000, sortCol = 0, sortDir = 1;
  var tbody = document.querySelector('#findings tbody');
  var filter = document.getElementById('filter');
  var sev = document.getElementById('filter-severity');
  var verdict = document.getElementById('filter-verdict');
  function render() {
    var q = filter.value.toLowerCase(), s = sev.value, v = verdict.value;
    var shown = rows.filter(function (r) {
      if (s && r[4] !== s) return false;
      if (v && r[3] !== v) return false;
      if (!q) return true;
      for (var i = 0; i < r.length; i++) if (String(r[i]).toLowerCase().indexOf(q) >= 0) return true;
      return false;
    });
    shown.sort(function (a, b) { var x = String(a[sortCol]), y = String(b[sortCol]); return x < y ? -sortDir : x > y ? sortDir : 0; });
    tbody.textContent = '';
    var frag = document.createDocumentFragment();
    shown.slice(0, LIMIT).forEach(function (r) {
      var tr = el('tr');
      tr.setAttribute('data-rule', r[5]);
      r.forEach(function (c, i) {
        var td = el('td', c);
        if (i === 4) td.className = 'sev-' + c;
        if (i === 3) td.className = 'v-' + c;
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    });
    tbody.appendChild(frag);
    document.getElementById('shown').textContent = 'showing ' + Math.min(shown.length, LIMIT) + ' of ' + shown.length + ' matching (' + rows.length + ' findings)';
  }
  document.querySelectorAll('#findings th').forEach(function (th) {
    th.addEventListener('click', function () {
      var col = Number(th.getAttribute('data-col'));
      sortDir = col === sortCol ? -sortDir : 1; sortCol = col;
      document.querySelectorAll('#findings th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', sortDir > 0 ? 'ascending' : 'descending');
      render();
    });
  });
  [filter, sev, verdict].forEach(function (c) { c.addEventListener('input', render); c.addEventListener('change', render); });
  render();
  if (inputErrors.length) {
    var box = document.getElementById('input-errors');
    box.appendChild(el('h2', 'Input errors'));
    var ul = el('ul');
    inputErrors.forEach(function (p) { ul.appendChild(el('li', p.file + (p.line ? ':' + p.line : '') + ': ' + p.message)); });
    box.appendChild(ul);
  }
})();
"#;

impl<W: Write> ReportSink for HtmlSink<W> {
    fn object(&mut self, r: &ObjectReport) -> io::Result<()> {
        for f in &r.findings {
            let row = (
                r.namespace.as_deref().unwrap_or(""),
                &r.kind,
                &r.name,
                r.verdict.as_str(),
                f.severity.as_str(),
                f.rule,
                &f.field,
                &f.message,
            );
            if !self.first {
                self.out.write_all(b",\n")?;
            }
            self.first = false;
            self.out
                .write_all(script_json(&row).map_err(io::Error::other)?.as_bytes())?;
        }
        Ok(())
    }

    fn finish(
        mut self: Box<Self>,
        summary: &Summary,
        input_errors: &[InputProblem],
    ) -> io::Result<()> {
        self.out
            .write_all(b"]</script>\n<script type=\"application/json\" id=\"winadmit-summary\">")?;
        self.out
            .write_all(script_json(summary).map_err(io::Error::other)?.as_bytes())?;
        self.out.write_all(
            b"</script>\n<script type=\"application/json\" id=\"winadmit-input-errors\">",
        )?;
        self.out.write_all(
            script_json(input_errors)
                .map_err(io::Error::other)?
                .as_bytes(),
        )?;
        self.out.write_all(b"</script>\n<script>")?;
        self.out.write_all(SCRIPT.as_bytes())?;
        self.out.write_all(b"</script>\n</body>\n</html>\n")?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_for_html_and_script() {
        assert_eq!(
            escape_html("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let s = script_json(&["</script><b>&\u{2028}"]).unwrap();
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&') && !s.contains('\u{2028}')
        );
        let back: Vec<String> = serde_json::from_str(&s).unwrap();
        assert_eq!(back[0], "</script><b>&\u{2028}");
    }
}
