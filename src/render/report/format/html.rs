//! `--format html`: one self-contained file (no external assets), the page
//! an operator sends their team before switching enforcement on: what was
//! judged and against what (input, Kubernetes version, policy, mode), the
//! verdicts and top rules first, a colour legend, then every finding
//! (errors first) with its fix, documentation link and `file:line`, then
//! the patch per object (collapsible, opened for printing). Charts are
//! inline SVG drawn by inline JavaScript; print CSS drops the controls.
//!
//! Streams: the findings are written as they come into a JSON data block;
//! the summary block follows; the script reads both when the page loads.
//! Data is escaped for its context: text in HTML with
//! [`crate::render::escape::Markup`], JSON inside `<script>` with
//! [`script_json`] (no `<`, `>`, `&`, U+2028/9
//! survive), and the script only ever sets `textContent`, never HTML.

use std::io::{self, Write};

use super::ReportSink;
use crate::render::InputProblem;
use crate::render::escape::{markup, script_json};
use crate::render::report::{ObjectReport, ReportSummary};

/// Streams an HTML report to `out`.
pub struct HtmlSink<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> HtmlSink<W> {
    /// Writes the page head and opens the data block. `facts` are what the
    /// report judged against (input, Kubernetes version, policy, mode),
    /// shown in the summary.
    ///
    /// # Errors
    /// Writing fails.
    pub fn new(mut out: W, title: &str, facts: &[(&str, String)]) -> io::Result<Self> {
        let title = markup(title);
        write!(out, "{HEAD}",)?;
        write!(
            out,
            "<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<header><h1>{title}</h1>\n<dl class=\"facts\">"
        )?;
        for (k, v) in facts {
            write!(
                out,
                "<div><dt>{}</dt><dd>{}</dd></div>",
                markup(k),
                markup(v)
            )?;
        }
        out.write_all(b"</dl></header>\n")?;
        out.write_all(BODY.as_bytes())?;
        out.write_all(b"<script type=\"application/json\" id=\"winadmit-objects\">[")?;
        Ok(Self { out, first: true })
    }
}

const HEAD: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";

const CSS: &str = r"
:root{--err:#b31d28;--err-bg:#ffeef0;--warn:#8a6d00;--warn-bg:#fff8db;--ok:#22863a;--ok-bg:#e6ffed;--line:#d8dee4;--muted:#57606a}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;padding:1.2rem 1.5rem;max-width:1600px;color:#1b1f23;line-height:1.4}
h1{font-size:1.35rem;margin:0 0 .4rem} h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
.facts{display:flex;flex-wrap:wrap;gap:.3rem 1.6rem;margin:0;color:var(--muted);font-size:.9rem}
.facts div{display:flex;gap:.35rem} .facts dt{font-weight:600} .facts dd{margin:0}
.cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:.8rem 0}
.card{border:1px solid var(--line);border-radius:6px;padding:.5rem .9rem;min-width:7.5rem}
.card b{display:block;font-size:1.5rem}
.card.deny{border-color:var(--err);background:var(--err-bg);color:var(--err)}
.card.warn{border-color:var(--warn);background:var(--warn-bg);color:var(--warn)}
.card.allow{border-color:var(--ok);background:var(--ok-bg);color:var(--ok)}
.summary-grid{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:1.5rem;align-items:start}
.legend{font-size:.85rem;color:var(--muted);display:flex;flex-wrap:wrap;gap:.4rem 1.1rem;margin:.3rem 0}
.sw{display:inline-block;width:.8rem;height:.8rem;border-radius:2px;vertical-align:-1px;margin-right:.3rem}
.sw.e{background:#d73a49}.sw.w{background:#dbab09}.sw.i{background:#0366d6}.sw.d{background:var(--err)}.sw.a{background:var(--ok)}
.problems{border:1px solid var(--err);background:var(--err-bg);border-radius:6px;padding:.3rem 1rem;margin:.8rem 0}
.charts{display:flex;flex-wrap:wrap;gap:2rem}
.chart svg{background:#fafbfc;border:1px solid #e1e4e8;max-width:100%;height:auto}
.controls{margin:.5rem 0;display:flex;gap:.6rem;flex-wrap:wrap;align-items:center}
.controls input{width:26rem;max-width:100%}
table{border-collapse:collapse;width:100%;font-size:.85rem;table-layout:fixed}
th,td{border-bottom:1px solid #e1e4e8;padding:.35rem .45rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
td.field,.src{overflow-wrap:normal;word-break:normal}
.why{display:block;font-size:.78rem;color:#24292f;margin-top:.2rem;overflow-wrap:normal} .why .nw{white-space:nowrap}
.why::before{content:'Why: ';font-weight:600}
th{cursor:pointer;background:#f6f8fa;user-select:none;position:sticky;top:0}
th[aria-sort=ascending]::after{content:' \25B2'} th[aria-sort=descending]::after{content:' \25BC'}
#findings col.c-sev{width:6.5rem} #findings col.c-rule{width:11rem} #findings col.c-obj{width:22%} #findings col.c-field{width:22%}
#top-rules col.c-n{width:5.5rem}
td.sev-error{color:var(--err);font-weight:600} td.sev-warning{color:var(--warn);font-weight:600} td.sev-info{color:#0366d6}
tr.row-error td:first-child{border-left:4px solid #d73a49} tr.row-warning td:first-child{border-left:4px solid #dbab09} tr.row-info td:first-child{border-left:4px solid #0366d6}
.v{display:inline-block;border-radius:3px;padding:0 .35rem;font-size:.75rem;font-weight:600}
.v-deny{color:var(--err);background:var(--err-bg)} .v-warn{color:var(--warn);background:var(--warn-bg)} .v-allow{color:var(--ok);background:var(--ok-bg)}
.src{color:var(--muted);font-size:.78rem;display:block}
.fix{margin-top:.25rem;color:#24292f} .fix::before{content:'Fix: ';font-weight:600}
a{color:#0969da}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:.5rem;white-space:pre-wrap;overflow-wrap:anywhere;margin:.4rem 0}
details{border:1px solid var(--line);border-radius:6px;padding:.3rem .7rem;margin:.35rem 0}
summary{cursor:pointer}
.muted{color:var(--muted)}
@media (max-width:1000px){.summary-grid{grid-template-columns:minmax(0,1fr)}}
@media print{
 body{max-width:none;padding:0;font-size:10pt}
 .controls,noscript{display:none}
 th{position:static}
 tr,details,.card,.chart{break-inside:avoid}
 a{color:inherit;text-decoration:none}
 .card,.v,.sw,.problems,tr.row-error td:first-child,tr.row-warning td:first-child{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
";

const BODY: &str = r#"<noscript><p>This report draws its summary, charts and tables with JavaScript; the data is in the page source.</p></noscript>
<section id="summary">
<h2>Summary</h2>
<div class="cards" id="verdicts"></div>
<p id="totals" class="muted">Loading report&hellip;</p>
<div class="legend" id="legend">
<span><span class="sw e"></span>error: denied in enforce mode, unless the object is exempt, outside the webhook, patched or in warn or audit mode; its row then says why</span>
<span><span class="sw w"></span>warning: admitted, with an admission warning</span>
<span><span class="sw i"></span>info: advice; never changes the verdict</span>
<span><span class="v v-deny">deny</span> the API server refuses the object</span>
<span><span class="v v-warn">warn</span> admitted, with admission warnings (a warning, an error in warn mode, or a change the mutating webhook makes)</span>
<span><span class="v v-allow">allow</span> admitted without a warning (no error or warning, exempt, outside the webhook, or audit mode)</span>
</div>
<div id="input-errors"></div>
<div class="summary-grid">
<div><h2>Top rules</h2><table id="top-rules"><colgroup><col><col class="c-n"><col class="c-n"></colgroup><thead><tr><th>Rule</th><th>Findings</th><th>Objects</th></tr></thead><tbody></tbody></table></div>
<div class="charts">
<div class="chart"><h2>Findings per namespace</h2><div id="chart-namespaces"></div></div>
<div class="chart"><h2>Findings per rule</h2><div id="chart-rules"></div></div>
</div>
</div>
</section>
<h2>Findings, errors first</h2>
<div class="controls">
<input id="filter" type="search" placeholder="Filter (namespace, name, rule, field, message, file)">
<select id="filter-severity"><option value="">any severity</option><option>error</option><option>warning</option><option>info</option></select>
<select id="filter-verdict"><option value="">any verdict</option><option>deny</option><option>warn</option><option>allow</option></select>
<span id="shown"></span>
</div>
<table id="findings">
<colgroup><col class="c-sev"><col class="c-rule"><col class="c-obj"><col class="c-field"><col></colgroup>
<thead><tr><th data-col="0">Severity</th><th data-col="1">Rule</th><th data-col="2">Object</th><th data-col="3">Field</th><th data-col="4">Problem and fix</th></tr></thead>
<tbody></tbody>
</table>
<section id="patches"></section>
"#;

const SCRIPT: &str = r#"
(function () {
  'use strict';
  var objects = JSON.parse(document.getElementById('winadmit-objects').textContent);
  var summary = JSON.parse(document.getElementById('winadmit-summary').textContent);
  var inputErrors = JSON.parse(document.getElementById('winadmit-input-errors').textContent);
  var SVG = 'http://www.w3.org/2000/svg';
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
  function svgEl(tag, attrs) { var e = document.createElementNS(SVG, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); return e; }
  function objName(o) { return o.kind + ' ' + (o.namespace ? o.namespace + '/' : '') + o.name; }
  // File names relative to the folder all inputs share (shown in the facts).
  var files = [];
  objects.forEach(function (o) { o.findings.forEach(function (f) { if (f.file && f.file.charAt(0) !== '<') files.push(f.file); }); });
  var common = files.length ? files[0].slice(0, files[0].lastIndexOf('/') + 1) : '';
  files.forEach(function (f) { while (common && f.indexOf(common) !== 0) common = common.slice(0, common.slice(0, -1).lastIndexOf('/') + 1); });
  if (common === '/') common = '';
  function source(f) {
    if (!f.file || f.file.charAt(0) === '<') return '';
    return f.file.slice(common.length) + (f.line ? ':' + f.line + (f.column ? ':' + f.column : '') : '');
  }
  // A path that breaks only between its parts (never inside a name).
  function breakable(host, text, at) {
    text.split(at).forEach(function (part, i) { if (i) host.appendChild(document.createElement('wbr')); host.appendChild(document.createTextNode(part)); });
    return host;
  }
  function fieldPath(text) { return breakable(el('code'), text, /(?=[.\[])/); }
  // A reason: words, with paths and pointers breakable only between parts.
  function reasons(text) {
    var span = el('span', null, 'why');
    text.split(' ').forEach(function (word, i) {
      if (i) span.appendChild(document.createTextNode(' '));
      if (/[\/.\[]/.test(word)) breakable(span, word, /(?<=\/)|(?=[.\[])/);
      else if (word.indexOf('-') >= 0) span.appendChild(el('span', word, 'nw')); // a rule id stays whole
      else span.appendChild(document.createTextNode(word));
    });
    return span;
  }
  // Text with `code` spans.
  function prose(text, cls) {
    var div = el('div', null, cls);
    text.split('`').forEach(function (part, i) { if (part) div.appendChild(i % 2 ? el('code', part) : document.createTextNode(part)); });
    return div;
  }

  // Objects carry their findings; the table has one row per finding.
  var rows = [];
  objects.forEach(function (o) {
    o.findings.forEach(function (f) { rows.push({ o: o, f: f }); });
  });

  // Summary: verdicts first, then the counts.
  var cards = document.getElementById('verdicts');
  [['deny', 'Denied'], ['warn', 'Warned'], ['allow', 'Allowed']].forEach(function (v) {
    var c = el('div', null, 'card ' + v[0]);
    c.appendChild(el('b', String(summary.verdicts[v[0]])));
    c.appendChild(el('span', v[1] + (summary.mode ? ' (' + summary.mode + ' mode)' : '')));
    cards.appendChild(c);
  });
  var totals = document.getElementById('totals');
  function plural(count, one, many) { return count + ' ' + (count === 1 ? one : many); }
  totals.textContent = plural(summary.errors, 'error', 'errors') + ', ' + plural(summary.warnings, 'warning', 'warnings') + ' and ' +
    plural(summary.infos, 'info finding', 'info findings') + ' in ' + plural(summary.reported, 'reported workload', 'reported workloads') +
    ' (' + summary.windowsWorkloads + ' targeting Windows; ' + summary.objects + ' evaluated, ' +
    summary.folded + ' folded into their owners; ' + plural(summary.otherObjects, 'other object', 'other objects') + '); ' +
    plural(summary.inputErrors, 'input error', 'input errors') + '.';

  if (inputErrors.length || summary.inputErrors) {
    var box = document.getElementById('input-errors');
    box.className = 'problems';
    box.appendChild(el('h2', 'Input errors (' + summary.inputErrors + '): these inputs were not checked'));
    var ul = el('ul');
    inputErrors.forEach(function (p) { ul.appendChild(el('li', p.file + (p.line ? ':' + p.line : '') + ': ' + p.message)); });
    box.appendChild(ul);
  }

  var top = document.querySelector('#top-rules tbody');
  if (!summary.rules.length) { var tr0 = el('tr'); var td0 = el('td', 'No findings.'); td0.colSpan = 3; tr0.appendChild(td0); top.appendChild(tr0); }
  summary.rules.slice().sort(function (a, b) {
    return (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1) || b.findings - a.findings;
  }).slice(0, 10).forEach(function (r) {
    var tr = el('tr', null, 'row-' + r.severity);
    var td = el('td');
    td.appendChild(el('b', r.rule + ' '));
    td.appendChild(el('span', r.title));
    tr.appendChild(td);
    tr.appendChild(el('td', String(r.findings), 'sev-' + r.severity));
    tr.appendChild(el('td', String(r.objects)));
    top.appendChild(tr);
  });

  // Bar chart: one row per item, errors (red) and warnings (amber) stacked.
  function chart(id, items) {
    var host = document.getElementById(id);
    if (!items.length) { host.appendChild(el('p', 'No findings.')); return; }
    var max = 1; items.forEach(function (i) { max = Math.max(max, i.errors + i.warnings); });
    var rowH = 22, labelW = 200, barW = 220, h = items.length * rowH + 10, w = labelW + barW + 50;
    var svg = svgEl('svg', { width: w, height: h, viewBox: '0 0 ' + w + ' ' + h, role: 'img', 'class': 'bars', 'aria-label': id });
    items.forEach(function (i, n) {
      var y = 5 + n * rowH;
      var label = svgEl('text', { x: labelW - 6, y: y + 14, 'text-anchor': 'end', 'font-size': 12 });
      label.textContent = i.label.length > 30 ? i.label.slice(0, 29) + '\u2026' : i.label;
      svg.appendChild(label);
      var we = Math.round(barW * i.errors / max), ww = Math.round(barW * i.warnings / max);
      var total = i.errors + i.warnings;
      var g = svgEl('g', { 'class': 'bar', 'data-label': i.label, 'data-count': total });
      var title = svgEl('title', {}); title.textContent = i.label + ': ' + plural(i.errors, 'error', 'errors') + ', ' + plural(i.warnings, 'warning', 'warnings');
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
    .sort(function (a, b) { return (b.errors + b.warnings) - (a.errors + a.warnings); }).slice(0, 15));
  chart('chart-rules', summary.rules.map(function (r) {
    return { label: r.rule, errors: r.severity === 'error' ? r.findings : 0, warnings: r.severity === 'error' ? 0 : r.findings };
  }).slice(0, 15));

  // Findings table: errors first, then by object and field.
  var LIMIT = 2000, sortCol = 0, sortDir = 1;
  var keys = [
    function (r) { return (r.f.severity === 'error' ? '0' : r.f.severity === 'warning' ? '1' : '2') + objName(r.o) + r.f.field; },
    function (r) { return r.f.rule + objName(r.o); },
    function (r) { return objName(r.o) + r.f.field; },
    function (r) { return r.f.field; },
    function (r) { return r.f.message; }
  ];
  var tbody = document.querySelector('#findings tbody');
  var filter = document.getElementById('filter');
  var sev = document.getElementById('filter-severity');
  var verdict = document.getElementById('filter-verdict');
  function cell(tr, cls) { var td = el('td', null, cls); tr.appendChild(td); return td; }
  function render() {
    var q = filter.value.toLowerCase(), s = sev.value, v = verdict.value;
    var shown = rows.filter(function (r) {
      if (s && r.f.severity !== s) return false;
      if (v && r.o.verdict !== v) return false;
      if (!q) return true;
      return [objName(r.o), r.f.rule, r.f.field, r.f.message, r.f.file, r.f.title].join('\n').toLowerCase().indexOf(q) >= 0;
    });
    var key = keys[sortCol];
    shown.sort(function (a, b) { var x = key(a), y = key(b); return x < y ? -sortDir : x > y ? sortDir : 0; });
    tbody.textContent = '';
    var frag = document.createDocumentFragment();
    shown.slice(0, LIMIT).forEach(function (r) {
      var tr = el('tr');
      tr.setAttribute('data-rule', r.f.rule);
      tr.className = 'row-' + r.f.severity;
      cell(tr, 'sev-' + r.f.severity).textContent = r.f.severity;
      var rule = cell(tr);
      if (r.f.docUrl) {
        var a = el('a', r.f.rule); a.href = r.f.docUrl; a.rel = 'noopener noreferrer'; a.title = 'Documentation: ' + r.f.title;
        rule.appendChild(a);
      } else { rule.textContent = r.f.rule; }
      var obj = cell(tr);
      obj.appendChild(el('span', objName(r.o) + ' '));
      obj.appendChild(el('span', r.o.verdict, 'v v-' + r.o.verdict));
      // The object's reasons; of the patch's, the one for this row's field.
      r.o.why.filter(function (w) { return w.indexOf('patched: ') !== 0 || w.slice(-(r.f.field.length + 4)) === ' at ' + r.f.field; })
        .forEach(function (w) { obj.appendChild(reasons(w)); });
      var src = source(r.f);
      if (src) { var sp = breakable(el('span', null, 'src'), src, /(?<=\/)/); sp.title = r.f.file; obj.appendChild(sp); }
      cell(tr, 'field').appendChild(fieldPath(r.f.field));
      var msg = cell(tr);
      msg.appendChild(prose(r.f.message));
      if (r.f.fix) msg.appendChild(prose(r.f.fix, 'fix'));
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

  // The patch per object, collapsed; opened for printing.
  var patched = objects.filter(function (o) { return o.patch.length; });
  var host = document.getElementById('patches');
  host.appendChild(el('h2', 'Patches the mutating webhook would apply (' + plural(patched.length, 'object', 'objects') + ')'));
  if (!patched.length) host.appendChild(el('p', 'None.', 'muted'));
  patched.forEach(function (o) {
    var d = el('details');
    var s = el('summary');
    s.appendChild(el('b', objName(o)));
    s.appendChild(el('span', ' \u2014 ' + plural(o.patch.length, 'operation', 'operations') + (o.file ? ' \u2014 ' + o.file : ''), 'muted'));
    d.appendChild(s);
    if (o.patchReasons.length) {
      var ul = el('ul');
      o.patch.forEach(function (op, i) {
        var li = el('li');
        li.appendChild(el('code', op.op + ' ' + op.path));
        li.appendChild(document.createTextNode(': ' + (o.patchReasons[i] || '').replace(/^winadmit: /, '')));
        ul.appendChild(li);
      });
      d.appendChild(ul);
    }
    d.appendChild(el('pre', JSON.stringify(o.patch, null, 2)));
    host.appendChild(d);
  });
  window.addEventListener('beforeprint', function () {
    document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  });
})();
"#;

/// One object as the page's script reads it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PageObject<'a> {
    namespace: Option<&'a str>,
    kind: &'a str,
    name: &'a str,
    verdict: &'a str,
    /// Why the verdict differs from the findings ([`ObjectReport::why`]).
    why: &'a [String],
    /// The file the object came from (for the patch list).
    file: Option<&'a str>,
    findings: Vec<PageFinding<'a>>,
    patch: &'a [crate::decision::finding::PatchOperation],
    patch_reasons: &'a [String],
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PageFinding<'a> {
    severity: &'a str,
    rule: &'a str,
    title: &'a str,
    field: &'a str,
    message: &'a str,
    fix: &'a str,
    doc_url: &'a str,
    file: &'a str,
    line: u64,
    column: u64,
}

impl<W: Write> ReportSink for HtmlSink<W> {
    fn object(&mut self, r: &ObjectReport) -> io::Result<()> {
        if r.findings.is_empty() && r.patch.is_empty() {
            return Ok(());
        }
        let findings = r
            .findings
            .iter()
            .map(|f| PageFinding {
                severity: f.severity.as_str(),
                rule: f.rule,
                title: f.title,
                field: &f.field,
                message: &f.message,
                fix: f.fix,
                doc_url: f.doc_url,
                file: &f.file,
                line: f.line,
                column: f.column,
            })
            .collect();
        let file = r
            .findings
            .first()
            .map(|f| f.file.as_str())
            .filter(|f| !f.starts_with('<'));
        let page = PageObject {
            namespace: r.namespace.as_deref(),
            kind: &r.kind,
            name: &r.name,
            verdict: r.verdict.as_str(),
            why: &r.why,
            file,
            findings,
            patch: &r.patch,
            patch_reasons: &r.patch_reasons,
        };
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.out
            .write_all(script_json(&page).map_err(io::Error::other)?.as_bytes())
    }

    fn finish(
        mut self: Box<Self>,
        summary: &ReportSummary,
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
            markup("<a href=\"x\">&'"),
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
