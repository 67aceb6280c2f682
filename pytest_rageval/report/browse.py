"""Finding cases in a big report.html: the filter bar, the case cards' data attributes, the page's one script.

The script (a few KB of vanilla JS, no network) filters the case cards by outcome, category, tag and a text
search (question, answer, id) (and the index of failed cases with them), sorts them by id or any metric, and keeps that state in the URL hash
(``#o=failed&t=smoke&s=mrr&d=asc``) so a link shares a view. It reads only the cards' ``data-*`` attributes
and ``[data-s]`` texts and builds the dropdowns with DOM calls and ``textContent``, never ``innerHTML``.
The page's Content-Security-Policy allows this script alone, by the sha256 of :data:`SCRIPT` (:data:`CSP`),
so no other script can run even if a value were ever left unescaped. Without JavaScript the filter bar
stays hidden and every card is shown.
"""

from __future__ import annotations

import base64
import hashlib
import math
from typing import Any
from urllib.parse import quote

from .markup import Html, is_number

__all__ = ["CSP", "CSS", "SCRIPT", "card_data", "render_filter_bar", "render_script"]

SCRIPT = r"""
(function () {
  "use strict";
  var bar = document.getElementById("rv-filters");
  if (!bar || !window.URLSearchParams || !window.Map) return;
  function $(id) { return document.getElementById(id); }
  function words(text) {
    return (text || "").split(" ").filter(Boolean).map(function (w) {
      try { return decodeURIComponent(w); } catch (e) { return w; }
    });
  }
  function metrics(text) {
    var m = new Map();
    words(text).forEach(function (w) {
      var at = w.lastIndexOf("="), v = Number(w.slice(at + 1));
      if (at > 0 && w.slice(at + 1) !== "" && isFinite(v)) m.set(w.slice(0, at), v);
    });
    return m;
  }
  var ctl = {o: $("rv-o"), c: $("rv-c"), t: $("rv-t"), q: $("rv-q"), s: $("rv-s"), d: $("rv-d")};
  var nodes = document.querySelectorAll(".case[data-outcome]");
  var cards = [], runs = [];
  for (var i = 0; i < nodes.length; i++) {
    var el = nodes[i], prev = el.previousElementSibling, run = runs[runs.length - 1];
    if (!run || prev !== run.last) {
      run = {parent: el.parentNode, last: null, end: null, shown: 0};
      runs.push(run);
    }
    run.last = el;
    cards.push({el: el, i: i, run: run, o: el.getAttribute("data-outcome") || "",
                c: el.getAttribute("data-cat") || "", id: el.getAttribute("data-id") || "",
                tags: words(el.getAttribute("data-tags")), m: metrics(el.getAttribute("data-m")), text: null, label: null});
  }
  runs.forEach(function (r) {
    r.end = document.createElement("p");  // where sorted cards go back; says so when none here is shown
    r.end.className = "muted";
    r.end.hidden = true;
    r.end.textContent = "No case here matches the filters.";
    r.parent.insertBefore(r.end, r.last.nextSibling);
  });
  var byId = new Map(), links = [];
  cards.forEach(function (c) { if (c.el.id) byId.set(c.el.id, c); });
  document.querySelectorAll("ul.index li").forEach(function (li) {
    var a = li.querySelector("a[href^='#']"), c = a && byId.get(a.getAttribute("href").slice(1));
    if (c) links.push([li, c]);
  });

  function fill(select, get) {
    var counts = new Map();
    cards.forEach(function (c) {
      [].concat(get(c)).forEach(function (v) { if (v !== "") counts.set(v, (counts.get(v) || 0) + 1); });
    });
    Array.from(counts.keys()).sort().forEach(function (v) {
      var opt = document.createElement("option");
      opt.value = v;
      opt.textContent = v + " (" + counts.get(v) + ")";
      select.appendChild(opt);
    });
  }
  fill(ctl.o, function (c) { return c.o; });
  fill(ctl.c, function (c) { return c.c; });
  fill(ctl.t, function (c) { return c.tags; });
  var names = new Map();
  cards.forEach(function (c) { c.m.forEach(function (v, k) { names.set(k, true); }); });
  Array.from(names.keys()).sort().forEach(function (k) {
    var opt = document.createElement("option");
    opt.value = "m:" + k;
    opt.textContent = k;
    ctl.s.appendChild(opt);
  });

  var collator = new Intl.Collator("en", {numeric: true});
  function key(c, s) {
    if (s === "id") return c.id;
    var v = c.m.get(s.slice(2));
    return typeof v === "number" ? v : null;
  }
  function sort(s, desc) {
    var list = cards.slice();
    if (s) {
      list.sort(function (a, b) {
        var x = key(a, s), y = key(b, s);
        if (x === null || y === null) return x === y ? a.i - b.i : (x === null ? 1 : -1);
        var r = s === "id" ? collator.compare(x, y) : x - y;
        return (desc ? -r : r) || a.i - b.i;
      });
    }
    var metric = s.indexOf("m:") === 0;
    cards.forEach(function (c) {  // the sorted-by value, beside the case's name
      if (!c.label) {
        if (!metric) return;
        c.label = document.createElement("span");
        c.label.className = "sortval";
        var summary = c.el.querySelector("summary");
        if (summary) summary.appendChild(c.label);
      }
      var v = metric ? key(c, s) : null;
      c.label.hidden = !metric;
      c.label.textContent = metric ? s.slice(2) + " " + (v === null ? "\u2014" : String(Math.round(v * 1000) / 1000)) : "";
    });
    runs.forEach(function (r) {
      var frag = document.createDocumentFragment();
      list.forEach(function (c) { if (c.run === r) frag.appendChild(c.el); });
      r.parent.insertBefore(frag, r.end);
    });
  }
  function text(c) {
    if (c.text === null) {
      var parts = [c.id], found = c.el.querySelectorAll("[data-s]");
      for (var j = 0; j < found.length; j++) parts.push(found[j].textContent);
      c.text = parts.join("\n").toLowerCase();
    }
    return c.text;
  }
  var sorted = "";
  function apply() {
    var o = ctl.o.value, cat = ctl.c.value, t = ctl.t.value, q = ctl.q.value.trim().toLowerCase(), shown = 0;
    runs.forEach(function (r) { r.shown = 0; });
    cards.forEach(function (c) {
      var ok = (!o || c.o === o) && (!cat || c.c === cat) && (!t || c.tags.indexOf(t) >= 0) &&
               (!q || text(c).indexOf(q) >= 0);
      if (c.el.hidden === ok) c.el.hidden = !ok;
      if (ok) { shown++; c.run.shown++; }
    });
    runs.forEach(function (r) { r.end.hidden = r.shown > 0; });
    links.forEach(function (l) { if (l[0].hidden !== l[1].el.hidden) l[0].hidden = l[1].el.hidden; });
    var order = ctl.s.value + "/" + ctl.d.value;
    if (order !== sorted) { sort(ctl.s.value, ctl.d.value === "desc"); sorted = order; }
    $("rv-n").textContent = shown + " of " + cards.length + " cases shown";
    save();
  }
  function save() {
    var p = new URLSearchParams();
    Object.keys(ctl).forEach(function (k) { if (ctl[k].value && !(k === "d" && ctl[k].value === "asc")) p.set(k, ctl[k].value); });
    var hash = p.toString();
    if (hash === location.hash.slice(1) || (!hash && location.hash.indexOf("=") < 0)) return;
    try { history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search); } catch (e) { /* file: in some browsers */ }
  }
  function load() {
    if (location.hash.indexOf("=") < 0) return;
    var p = new URLSearchParams(location.hash.slice(1));
    Object.keys(ctl).forEach(function (k) { if (p.has(k)) ctl[k].value = p.get(k); });
  }
  var timer = 0;
  ctl.q.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 150); });
  ["o", "c", "t", "s", "d"].forEach(function (k) { ctl[k].addEventListener("change", apply); });
  bar.addEventListener("submit", function (e) { e.preventDefault(); apply(); });
  $("rv-x").addEventListener("click", function () {
    Object.keys(ctl).forEach(function (k) { ctl[k].value = k === "d" ? "asc" : ""; });
    apply();
  });
  window.addEventListener("hashchange", function () { load(); apply(); });
  load();
  bar.hidden = false;
  apply();
})();
"""

#: The page's policy: nothing from anywhere, inline styles, and only :data:`SCRIPT` (by its hash).
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{}'".format(
    base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
)

CSS = """
[hidden]{display:none!important}
details.case{content-visibility:auto;contain-intrinsic-size:auto 34px}
details.case,h2,h3{scroll-margin-top:6em}
.filters{position:sticky;top:0;z-index:2;display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;
background:#f6f8fa;border-bottom:1px solid #d0d7de;padding:8px 0;margin:12px 0 4px}
.filters label{white-space:nowrap}.filters select,.filters input{font:inherit;max-width:14em}
.filters input{width:14em}
.sortval{margin-left:8px;padding:0 6px;border-radius:4px;background:#eef1f4;font-size:12px;font-variant-numeric:tabular-nums}
"""


def render_filter_bar() -> Html:
    """The filter bar, hidden until the script fills it (so a page without JavaScript shows no dead controls)."""
    return Html(
        '<form id="rv-filters" class="filters" role="search" hidden>'
        '<label>outcome <select id="rv-o"><option value="">all</option></select></label>'
        '<label>category <select id="rv-c"><option value="">all</option></select></label>'
        '<label>tag <select id="rv-t"><option value="">all</option></select></label>'
        '<label>search <input id="rv-q" type="search" placeholder="question, answer, id"></label>'
        '<label>sort <select id="rv-s"><option value="">page order</option><option value="id">id</option></select></label>'
        '<select id="rv-d" aria-label="direction"><option value="asc">ascending</option>'
        '<option value="desc">descending</option></select>'
        '<button type="button" id="rv-x">clear</button> <span id="rv-n" class="muted"></span></form>'
    )


def render_script() -> Html:
    """The one ``<script>`` of the page (its text is exactly :data:`SCRIPT`, which the CSP's hash names)."""
    return Html("<script>{}</script>").format(Html(SCRIPT))  # our own text, constant


def _metric_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if is_number(value) and math.isfinite(value):
        return format(round(value, 4), "g") if isinstance(value, float) else value
    return None


def _word(text: Any) -> str:
    """``text`` as one space-free word (percent-encoded, UTF-8; the script decodes it with decodeURIComponent)."""
    return quote(str(text), safe="")


def card_data(record: dict[str, Any], label: str) -> Html:
    """A card's ``data-*`` attributes the script filters and sorts on: outcome, category, tags (percent-encoded
    words), metric values (``name=value`` words, numbers only), id. Escaped like any attribute."""
    outcome = record.get("outcome")
    since = record.get("since_baseline")
    if outcome == "xfailed" and isinstance(since, dict) and since.get("kind") == "known":
        outcome = "known failure"  # its own choice in the outcome filter
    tags = record.get("tags")
    metrics = record.get("metrics")
    values = {}
    if isinstance(metrics, dict):
        for name, value in metrics.items():
            number = _metric_value(value)
            if number is not None:
                values[str(name)] = number
    category = record.get("category")
    return Html(' data-outcome="{}" data-cat="{}" data-tags="{}" data-m="{}" data-id="{}"').format(
        outcome if isinstance(outcome, str) else "",
        category if isinstance(category, str) else "",
        " ".join(_word(t) for t in tags) if isinstance(tags, list) else "",
        " ".join(f"{_word(name)}={value}" for name, value in values.items()),
        label,
    )
