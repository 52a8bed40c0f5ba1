// sagachaos report: draws per-order timelines and the order index lazily
// from the JSON embedded in #sc-data. Data from the target is only ever
// placed with textContent / setAttribute, never parsed as HTML.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("sc-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var PAGE = 100, ROWCHUNK = 1000;
  // op arrays: [i, t(µs), proc#, type#, f#, value]
  function oI(o) { return o[0]; }
  function oT(o) { return o[1]; }
  function oP(o) { return D.procs[o[2]]; }
  function oY(o) { return D.types[o[3]]; }
  function oF(o) { return D.fs[o[4]]; }
  function oV(o) { return o[5]; }

  var byId = new Map();
  D.orders.forEach(function (od) { byId.set(od.id, od); });
  var looseByI = new Map();
  D.loose.forEach(function (o) { looseByI.set(oI(o), o); });

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    (kids || []).forEach(function (c) { e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function ms(us) { return (us / 1000).toFixed(3); }
  function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }
  function pretty(v) {
    if (!v) return "";
    return v;
  }

  // ---- copy repro
  var cp = document.getElementById("copy-repro");
  if (cp) cp.addEventListener("click", function () {
    var txt = document.getElementById("repro").textContent;
    var done = function () { cp.textContent = "copied"; };
    try {
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(txt).then(done, function () { selectRepro(); });
      } else { selectRepro(); }
    } catch (e) { selectRepro(); }
  });
  function selectRepro() {
    var r = document.createRange(); r.selectNodeContents(document.getElementById("repro"));
    var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
    cp.textContent = "selected: press Ctrl-C";
  }

  // ---- lanes
  var srcCache = new Map();
  function eventSource(o) {
    if (srcCache.has(oI(o))) return srcCache.get(oI(o));
    var src = "";
    try { var v = JSON.parse(oV(o)); if (v && typeof v.source === "string") src = v.source; } catch (e) { /* not JSON: no source */ }
    srcCache.set(oI(o), src);
    return src;
  }
  function laneOf(o) {
    var t = oY(o), p = oP(o);
    if (t === "event") { var src = eventSource(o); return src ? "broker ← " + src : "broker (events)"; }
    if (t === "state") return "observer (final state)";
    return p;
  }
  function laneRank(name) {
    if (name.indexOf("client-") === 0) return 0;
    if (name.indexOf("broker") === 0) return 2;
    if (name.indexOf("world/") === 0) return 3;
    if (name.indexOf("observer") === 0) return 4;
    if (name.indexOf("nemesis") === 0) return 5;
    return 1; // components and anything else
  }

  // ---- per-order timeline
  // pickMode: a time axis unless one quiet gap takes most of it (e.g. broker
  // events read by the observer after quiescence), which would squash every
  // other op into a corner; then op sequence, which the bar says.
  function pickMode(ops) {
    if (ops.length < 3) return "time";
    var span = oT(ops[ops.length - 1]) - oT(ops[0]), gap = 0;
    for (var k = 1; k < ops.length; k++) gap = Math.max(gap, oT(ops[k]) - oT(ops[k - 1]));
    return span > 0 && gap > 0.6 * span ? "seq" : "time";
  }
  function drawTimeline(box, orderId, hl, mode) {
    var od = orderId ? byId.get(orderId) : null;
    var ops = od ? od.ops.slice() : [];
    var have = new Set(ops.map(oI));
    hl.forEach(function (i) { if (!have.has(i) && looseByI.has(i)) { ops.push(looseByI.get(i)); have.add(i); } });
    ops.sort(function (a, b) { return oT(a) - oT(b) || oI(a) - oI(b); });
    var auto = !mode;
    if (auto) mode = pickMode(ops);
    box.textContent = "";
    if (!ops.length) { box.appendChild(el("p", { "class": "dim" }, ["no ops recorded for this order"])); return; }
    var t0 = oT(ops[0]), t1 = oT(ops[ops.length - 1]);
    if (t1 === t0) t1 = t0 + 1;
    var faults = D.faults.filter(function (f) { return f.e / 1000 >= t0 && f.s / 1000 <= t1; });
    var laneNames = [], laneSet = new Set();
    function addLane(n) { if (!laneSet.has(n)) { laneSet.add(n); laneNames.push(n); } }
    ops.forEach(function (o) { addLane(laneOf(o)); });
    faults.forEach(function (f) { if (f.target) addLane("nemesis → " + f.target); });
    laneNames.sort(function (a, b) { return laneRank(a) - laneRank(b) || (a < b ? -1 : a > b ? 1 : 0); });
    var laneY = new Map();
    var L = 190, W = 1100, R = 16, TOP = 22, LH = 28;
    laneNames.forEach(function (n, k) { laneY.set(n, TOP + k * LH + LH / 2); });
    var H = TOP + laneNames.length * LH + 24;
    var times = ops.map(oT);
    function x(tus) {
      if (mode === "seq") {
        // rank of t among the ops (fractional between neighbours)
        var lo = 0, hi = times.length;
        while (lo < hi) { var mid = (lo + hi) >> 1; if (times[mid] < tus) lo = mid + 1; else hi = mid; }
        var r = lo;
        if (lo > 0 && lo < times.length && times[lo] !== tus) r = lo - 1 + (tus - times[lo - 1]) / (times[lo] - times[lo - 1]);
        r = Math.max(0, Math.min(times.length - 1, r));
        return L + (times.length === 1 ? 0.5 : r / (times.length - 1)) * (W - L - R);
      }
      var c = Math.max(t0, Math.min(t1, tus));
      return L + (c - t0) / (t1 - t0) * (W - L - R);
    }
    var svg = sv("svg", { "class": "swim", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "timeline of order " + (orderId || "") });
    laneNames.forEach(function (n, k) {
      var y = TOP + k * LH;
      svg.appendChild(sv("rect", { "class": k % 2 ? "lane2" : "lane", x: 0, y: y, width: W, height: LH }));
      svg.appendChild(sv("text", { "class": "lname", x: 6, y: y + LH / 2 + 4 }, clip(n, 26)));
    });
    faults.forEach(function (f) {
      var xs = x(f.s / 1000), xe = x(f.e / 1000);
      var label = f.kind + (f.target ? " " + f.target : "") + (f.open ? " (never healed)" : "");
      var title = label + "  " + ms(f.s / 1000) + "–" + ms(f.e / 1000) + " ms" + (f.err ? "  error: " + f.err : "");
      if (f.instant) {
        var ln = sv("line", { "class": "fault-instant", x1: xs, x2: xs, y1: TOP - 6, y2: H - 24 });
        ln.appendChild(sv("title", {}, title)); svg.appendChild(ln);
      } else {
        var rc = sv("rect", { "class": "fault", x: xs, y: TOP - 6, width: Math.max(2, xe - xs), height: H - 24 - TOP + 6 });
        rc.appendChild(sv("title", {}, title)); svg.appendChild(rc);
      }
      svg.appendChild(sv("text", { "class": "flabel", x: xs + 2, y: 12 }, clip(label, 30)));
      if (f.target && laneY.has("nemesis → " + f.target)) {
        var yy = laneY.get("nemesis → " + f.target);
        var bar = sv("rect", { x: xs, y: yy - 6, width: Math.max(3, xe - xs), height: 12, fill: "#cf222e", opacity: 0.7 });
        bar.appendChild(sv("title", {}, title)); svg.appendChild(bar);
      }
    });
    // client request spans: invoke → its completion on the same proc
    var pending = {};
    ops.forEach(function (o) {
      var p = oP(o), t = oY(o);
      if (p.indexOf("client-") !== 0) return;
      if (t === "invoke") pending[p] = o;
      else if ((t === "ok" || t === "fail" || t === "info") && pending[p]) {
        var y = laneY.get(laneOf(o));
        svg.appendChild(sv("line", { "class": "span", x1: x(oT(pending[p])), x2: x(oT(o)), y1: y, y2: y }));
        delete pending[p];
      }
    });
    var label = ops.length <= 60;
    ops.forEach(function (o) {
      var cx = x(oT(o)), cy = laneY.get(laneOf(o)), t = oY(o), g;
      if (t === "effect") g = sv("rect", { "class": "m m-effect", x: cx - 5, y: cy - 5, width: 10, height: 10 });
      else if (t === "event") g = sv("rect", { "class": "m m-event", x: cx - 5, y: cy - 5, width: 10, height: 10, transform: "rotate(45 " + cx + " " + cy + ")" });
      else g = sv("circle", { "class": "m m-" + t, cx: cx, cy: cy, r: 5 });
      g.appendChild(sv("title", {}, "#" + oI(o) + "  " + ms(oT(o)) + " ms  " + oP(o) + " " + t + " " + oF(o) + (oV(o) ? "\n" + clip(oV(o), 400) : "")));
      g.setAttribute("data-i", oI(o));
      svg.appendChild(g);
      if (hl.has(oI(o))) svg.appendChild(sv("circle", { "class": "hlm", cx: cx, cy: cy, r: 9 }));
      if (label) {
        var lt = sv("text", { "class": "mlabel", x: cx > W - 120 ? cx - 7 : cx + 7, y: cy - 6 }, clip(oF(o), 18));
        if (cx > W - 120) lt.setAttribute("text-anchor", "end");
        svg.appendChild(lt);
      }
    });
    for (var k = 0; k <= 4; k++) {
      var tt = t0 + (t1 - t0) * k / 4, xx = L + (W - L - R) * k / 4;
      if (mode === "seq") tt = times[Math.round((times.length - 1) * k / 4)];
      svg.appendChild(sv("text", { "class": "tick", x: xx - (k === 4 ? 50 : 0), y: H - 8 }, ms(tt) + " ms"));
    }
    var bar = el("div", { "class": "tlbar" }, [
      (mode === "seq" ? "x axis: op sequence (equal spacing" + (auto ? "; chosen because one quiet gap covers most of the time span" : "") + ") " : "x axis: time "),
    ]);
    var sw = el("button", { type: "button" }, [mode === "seq" ? "show time axis" : "show op sequence"]);
    sw.addEventListener("click", function () { drawTimeline(box, orderId, hl, mode === "seq" ? "time" : "seq"); });
    bar.appendChild(sw);
    bar.appendChild(el("span", {}, ["○ invoke ● ok/fail/info ■ world effect ◆ broker event · red ring: cited by the violation · shaded: fault window"]));
    if (od && od.capped) bar.appendChild(el("b", { "class": "warnt" }, [od.capped + " more ops of this order were left out (per-order cap)"]));
    box.appendChild(bar);
    box.appendChild(svg);
    svg.addEventListener("click", function (ev) {
      var i = ev.target.getAttribute && ev.target.getAttribute("data-i");
      if (!i) return;
      var row = box.parentNode.querySelector('tr[data-i="' + i + '"]');
      if (row) { row.scrollIntoView({ block: "center" }); row.classList.add("flash"); }
    });
  }

  function parseOps(s) {
    var set = new Set();
    if (s) s.split(",").forEach(function (x) { if (x !== "") set.add(Number(x)); });
    return set;
  }

  // ---- violations: draw when opened
  function wireViolation(d) {
    var box = d.querySelector(".tl");
    var draw = function () {
      if (box.getAttribute("data-drawn")) return;
      box.setAttribute("data-drawn", "1");
      drawTimeline(box, d.getAttribute("data-order"), parseOps(d.getAttribute("data-ops")), "");
    };
    if (d.open) draw();
    d.addEventListener("toggle", function () { if (d.open) draw(); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("details.violation"), wireViolation);

  // ---- order index
  var violating = Object.keys(D.viol).filter(function (k) { return k !== ""; });
  var vset = new Set(violating);
  var ordered = violating.filter(function (k) { return byId.has(k); }).map(function (k) { return byId.get(k); });
  violating.forEach(function (k) { if (!byId.has(k)) ordered.push({ id: k, ops: [], n: 0, missing: true }); });
  D.orders.forEach(function (od) { if (!vset.has(od.id)) ordered.push(od); });
  var list = document.getElementById("order-list"), pager = document.getElementById("order-pager");
  var filt = document.getElementById("order-filter"), count = document.getElementById("order-count");
  var page = 0, shown = ordered;

  function hlFor(id) {
    var s = new Set();
    (D.viol[id] || []).forEach(function (a) { a.forEach(function (i) { s.add(i); }); });
    return s;
  }
  function opsTable(od, hl) {
    var wrap = el("div");
    var tb = el("tbody");
    var tbl = el("table", { "class": "ops" }, [el("thead", {}, [el("tr", {}, ["#", "t (ms)", "proc", "type", "f", "value"].map(function (h) { return el("th", {}, [h]); }))]), tb]);
    wrap.appendChild(tbl);
    var at = 0;
    function more() {
      var end = Math.min(od.ops.length, at + ROWCHUNK);
      for (; at < end; at++) {
        var o = od.ops[at];
        tb.appendChild(el("tr", { "class": "t-" + oY(o) + (hl.has(oI(o)) ? " hl" : ""), "data-i": oI(o) }, [
          el("td", { "class": "num" }, [String(oI(o))]), el("td", { "class": "num" }, [ms(oT(o))]),
          el("td", { "class": "mono" }, [oP(o)]), el("td", {}, [oY(o)]), el("td", { "class": "mono" }, [oF(o)]),
          el("td", { "class": "val" }, [pretty(oV(o))])]));
      }
      btn.style.display = at < od.ops.length ? "" : "none";
      btn.textContent = "show " + Math.min(ROWCHUNK, od.ops.length - at) + " more of " + (od.ops.length - at) + " remaining ops";
    }
    var btn = el("button", { type: "button" });
    btn.addEventListener("click", more);
    wrap.appendChild(btn);
    more();
    if (od.capped) wrap.appendChild(el("p", { "class": "warn" }, [od.capped + " further ops of this order are not embedded (per-order cap); see history.jsonl"]));
    return wrap;
  }
  function orderRow(od) {
    var bad = vset.has(od.id);
    var sum = el("summary", {}, [od.id + "  ", el("span", { "class": "st" }, [od.status || "(no final state)"]), el("span", { "class": "dim" }, [od.n + " ops"])]);
    if (bad) sum.appendChild(el("span", { "class": "sig" }, [Array.from(new Set(D.violsig[od.id] || [])).join(", ")]));
    var d = el("details", { "class": "orow" + (bad ? " bad" : ""), id: "order-" + od.id, "data-order": od.id }, [sum]);
    d.addEventListener("toggle", function () {
      if (!d.open || d.getAttribute("data-drawn")) return;
      d.setAttribute("data-drawn", "1");
      var body = el("div", { "class": "obody" });
      var tl = el("div", { "class": "tl" });
      body.appendChild(tl);
      d.appendChild(body);
      var hl = hlFor(od.id);
      if (od.missing) { tl.appendChild(el("p", { "class": "warn" }, ["a violation names this order but the history has no op for it"])); return; }
      drawTimeline(tl, od.id, hl, "");
      body.appendChild(opsTable(od, hl));
    });
    return d;
  }
  function render() {
    list.textContent = "";
    pager.textContent = "";
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.max(0, Math.min(page, pages - 1));
    shown.slice(page * PAGE, page * PAGE + PAGE).forEach(function (od) { list.appendChild(orderRow(od)); });
    count.textContent = shown.length + " of " + ordered.length + " orders" + (pages > 1 ? ", page " + (page + 1) + " of " + pages : "");
    if (pages > 1) {
      var prev = el("button", { type: "button" }, ["← previous"]), next = el("button", { type: "button" }, ["next →"]);
      prev.disabled = page === 0; next.disabled = page === pages - 1;
      prev.addEventListener("click", function () { page--; render(); });
      next.addEventListener("click", function () { page++; render(); });
      pager.appendChild(prev); pager.appendChild(el("span", { "class": "dim" }, [(page + 1) + " / " + pages])); pager.appendChild(next);
    }
  }
  function applyFilter() {
    var q = filt.value.trim().toLowerCase();
    shown = !q ? ordered : ordered.filter(function (od) {
      return od.id.toLowerCase().indexOf(q) >= 0 || (od.status || "").toLowerCase().indexOf(q) >= 0 ||
        (D.violsig[od.id] || []).join(" ").toLowerCase().indexOf(q) >= 0;
    });
    page = 0;
    render();
  }
  filt.addEventListener("input", applyFilter);
  render();

  function openOrder(id) {
    var idx = ordered.findIndex(function (od) { return od.id === id; });
    if (idx < 0) return;
    filt.value = ""; shown = ordered; page = Math.floor(idx / PAGE); render();
    var rows = list.querySelectorAll("details.orow");
    for (var k = 0; k < rows.length; k++) if (rows[k].getAttribute("data-order") === id) {
      rows[k].open = true; rows[k].scrollIntoView({ block: "start" }); return;
    }
  }
  Array.prototype.forEach.call(document.querySelectorAll("a[data-order]"), function (a) {
    a.addEventListener("click", function (ev) {
      ev.preventDefault();
      openOrder(a.getAttribute("data-order"));
      try { history.replaceState(null, "", "#order-" + encodeURIComponent(a.getAttribute("data-order"))); } catch (e) { /* file:// may refuse */ }
    });
  });
  // A link to report.html#order-<id> opens that order (shareable pointer to a failing order).
  function fromHash() {
    var h = location.hash;
    if (h.indexOf("#order-") !== 0) return;
    var id;
    try { id = decodeURIComponent(h.slice(7)); } catch (e) { return; }
    openOrder(id);
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
  // Tests (and curious readers) can tell the script ran to the end.
  document.documentElement.setAttribute("data-report-ready", "1");
})();
