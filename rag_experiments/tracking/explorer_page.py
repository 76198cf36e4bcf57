"""The case explorer's page: one self-contained HTML file (inline CSS and JS, nothing fetched)
that MLflow's artifact view shows and a browser opens from disk.

MLflow 3.17 previews an ``.html`` artifact in an ``<iframe sandbox="allow-scripts">`` loaded from
a blob URL: scripts run, but the frame has no origin of its own, so the page must not touch
``localStorage``, cookies or the parent window, and it must not load anything from the network.

Every text shown comes from untrusted input (questions, passages, run names): the data travels
as one JSON blob inside ``<script type="application/json">`` with ``<``, ``>``, ``&`` and the two
JavaScript line separators written as ``\\uXXXX`` escapes (so no ``</script>`` in a passage can
end the blob), and the script builds the page with ``textContent`` only, never ``innerHTML``.
The few strings written into the HTML itself (the title) go through :func:`html.escape`.
Cases are drawn a page at a time (:data:`PAGE_SIZE`), so 10,000 cases cost one page of DOM.
"""

from __future__ import annotations

import html
import json

#: cases drawn per page (the page keeps every case as data and draws only these)
PAGE_SIZE = 25

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(data) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: no character sequence of a
    string in it can close the element or start a comment (``</script>``, ``<!--``)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, escaped in _JSON_ESCAPES.items():  # str.replace: a 40 MB page in well under a second
        text = text.replace(ch, escaped)
    return text


CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#fff}
header{position:sticky;top:0;background:#f6f8fa;border-bottom:1px solid #d0d7de;padding:8px 14px;z-index:2}
h1{font-size:16px;margin:0 0 4px}
.sub{color:#57606a;font-size:12px}
.bar{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin-top:6px}
.bar label{font-size:12px;color:#57606a}
select,button{font:inherit;font-size:12px;padding:2px 6px}
main{padding:8px 14px}
.case{border:1px solid #d0d7de;border-radius:6px;margin:10px 0;padding:8px 10px}
.case.lost{border-left:6px solid #cf222e}.case.won{border-left:6px solid #1a7f37}.case.tied{border-left:6px solid #8c959f}
.head{display:flex;gap:8px;align-items:baseline;flex-wrap:wrap}
.q{font-weight:600;font-size:15px}
.tag{font-size:11px;border-radius:10px;padding:1px 7px;background:#eaeef2;color:#24292f;white-space:nowrap}
.tag.lost{background:#ffebe9;color:#a40e26}.tag.won{background:#dafbe1;color:#116329}
.ev{background:#f6f8fa;border-radius:4px;padding:6px 8px;margin:6px 0;font-size:13px}
.ev mark{background:#fff8c5;border-bottom:2px solid #d4a72c}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:10px}
.side h3{font-size:13px;margin:4px 0}
.hit{border-top:1px solid #eaeef2;padding:4px 0;font-size:12.5px}
.hit .meta{display:flex;gap:6px;flex-wrap:wrap;align-items:baseline}
.rank{font-weight:700;min-width:1.6em}
.v-relevant{background:#dafbe1;color:#116329}.v-partial{background:#fff8c5;color:#7d4e00}
.v-not{background:#ffebe9;color:#a40e26}.v-unjudged{background:#eaeef2;color:#57606a}
.doc{color:#0969da}
.txt{color:#24292f;margin-top:2px}
.prov,.other{color:#57606a;font-size:11.5px}
.none{color:#57606a;font-style:italic}
nav{display:flex;gap:8px;align-items:center;margin:8px 0}
"""

JS = r"""
(function(){
  var D = JSON.parse(document.getElementById('explorer-data').textContent);
  var PAGE = D.page_size, P = D.passages, PROV = D.provenance, cases = D.cases, shown = cases, page = 0;
  var VERDICT = {'2':'relevant','1':'partial','0':'not'};
  function el(tag, cls, text){ var e = document.createElement(tag); if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text); return e; }
  function opts(sel, values, all){ sel.appendChild(el('option', null, all)).value = '';
    values.forEach(function(v){ var o = el('option', null, v); o.value = v; sel.appendChild(o); }); }
  var fKind = document.getElementById('f-kind'), fSeg = document.getElementById('f-seg'),
      fOut = document.getElementById('f-outcome'), fUnj = document.getElementById('f-unjudged');
  opts(fKind, D.kinds, 'every kind'); opts(fSeg, D.segments, 'every segment');
  function fmt(x){ return x === null || x === undefined ? '-' : Number(x).toFixed(3); }
  function hitRow(h){
    var p = P[h[0]], v = h[1] === null ? 'unjudged' : VERDICT[String(h[1])];
    var row = el('div', 'hit'), meta = el('div', 'meta');
    meta.appendChild(el('span', 'rank', '#' + h[4]));
    meta.appendChild(el('span', 'tag v-' + v, v));
    meta.appendChild(el('span', 'doc', p[0] + ':' + p[1] + '-' + p[2]));
    meta.appendChild(el('span', 'other', h[2] === null ? 'not in ' + D.other_depth_label + ' of the other list'
                                                      : 'rank ' + h[2] + ' in the other list'));
    row.appendChild(meta);
    if (h[3] !== null) row.appendChild(el('div', 'prov', 'label: ' + PROV[h[3]]));
    row.appendChild(el('div', 'txt', p[3] === null ? '(text not available: the corpus document is not here)' : p[3]));
    return row;
  }
  function side(name, hits, first){
    var s = el('div', 'side');
    s.appendChild(el('h3', null, name + ' — first relevant at ' + (first === null ? 'none' : 'rank ' + first)));
    if (hits === null) s.appendChild(el('div', 'none', 'no stored ranked list for this run'));
    else if (!hits.length) s.appendChild(el('div', 'none', 'no hits'));
    else hits.forEach(function(h){ s.appendChild(hitRow(h)); });
    return s;
  }
  function caseBox(c){
    var box = el('section', 'case ' + c.o), head = el('div', 'head');
    head.appendChild(el('span', 'tag ' + c.o, c.o + ' ' + (c.d > 0 ? '+' : '') + fmt(c.d)));
    head.appendChild(el('span', 'q', c.q));
    box.appendChild(head);
    var info = el('div', 'sub', c.id + ' · kind ' + c.kind + ' · segment ' + c.seg + ' · ' + D.metric + ': '
                  + D.labels[0] + ' ' + fmt(c.a) + ', ' + D.labels[1] + ' ' + fmt(c.b)
                  + (c.u ? ' · unjudged hits in the top ' + D.k : ''));
    box.appendChild(info);
    c.ev.forEach(function(e){
      var ev = el('div', 'ev');
      ev.appendChild(el('div', 'prov', 'evidence (' + (VERDICT[String(e[3])] || 'grade ' + e[3]) + ') '
                        + e[0] + ':' + e[1] + '-' + e[2] + (e[7] === null ? '' : ' · label: ' + PROV[e[7]])));
      ev.appendChild(document.createTextNode(e[4]));
      ev.appendChild(el('mark', null, e[5]));
      ev.appendChild(document.createTextNode(e[6]));
      box.appendChild(ev);
    });
    var cols = el('div', 'cols');
    cols.appendChild(side(D.labels[0] + ' (baseline)', c.A, c.fa));
    cols.appendChild(side(D.labels[1], c.B, c.fb));
    box.appendChild(cols);
    return box;
  }
  var list = document.getElementById('cases'), status = document.getElementById('status');
  function draw(){
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.min(page, pages - 1);
    list.textContent = '';
    var frag = document.createDocumentFragment();
    shown.slice(page * PAGE, (page + 1) * PAGE).forEach(function(c){ frag.appendChild(caseBox(c)); });
    list.appendChild(frag);
    status.textContent = shown.length + ' of ' + cases.length + ' cases · page ' + (page + 1) + ' of ' + pages;
    document.body.setAttribute('data-drawn', String(Date.now()));
  }
  function filter(){
    var k = fKind.value, s = fSeg.value, o = fOut.value, u = fUnj.checked;
    shown = cases.filter(function(c){ return (!k || c.kind === k) && (!s || c.seg === s) && (!o || c.o === o)
                                             && (!u || c.u); });
    page = 0; draw();
  }
  [fKind, fSeg, fOut, fUnj].forEach(function(x){ x.addEventListener('change', filter); });
  document.getElementById('prev').addEventListener('click', function(){ if (page > 0) { page--; draw(); } });
  document.getElementById('next').addEventListener('click', function(){ page++; draw(); });
  draw();
})();
"""


def page_html(data: dict, title: str, subtitle: str) -> str:
    """The whole page: ``data`` (see :func:`rag_experiments.tracking.explorer.explorer_data`) as
    the JSON blob, ``title`` and ``subtitle`` escaped into the header."""
    data = {**data, "page_size": PAGE_SIZE}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{CSS}</style></head>
<body>
<header><h1>{html.escape(title)}</h1><div class="sub">{html.escape(subtitle)}</div>
<div class="bar">
<label>kind <select id="f-kind"></select></label>
<label>segment <select id="f-seg"></select></label>
<label>outcome <select id="f-outcome"><option value="">lost, won and tied</option><option value="lost">lost</option>
<option value="won">won</option><option value="tied">tied</option></select></label>
<label><input type="checkbox" id="f-unjudged"> only cases with unjudged hits</label>
<span id="status" class="sub"></span>
<button id="prev">previous page</button><button id="next">next page</button>
</div></header>
<main id="cases"></main>
<script type="application/json" id="explorer-data">{script_json(data)}</script>
<script>{JS}</script>
</body></html>
"""
