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
  var COMP = D.comp || { lanes: [], marks: [], spans: [] };
  var compLane = new Map();
  COMP.lanes.forEach(function (n, k) { compLane.set(n, k); });
  // comp marks: [t µs, lane#, kind, label, op, title, has-log]
  function laneOf(o) {
    var t = oY(o), p = oP(o);
    if (t === "event") { var src = eventSource(o); return src ? "broker ← " + src : "broker (events)"; }
    if (t === "state") return "observer (final state)";
    if (p.indexOf("component/") === 0) return p.slice(10);
    return p;
  }
  function laneRank(name) {
    if (name.indexOf("client-") === 0) return 0;
    if (compLane.has(name)) return 1;
    if (name.indexOf("broker") === 0) return 3;
    if (name.indexOf("world/") === 0) return 4;
    if (name.indexOf("observer") === 0) return 5;
    if (name.indexOf("nemesis") === 0) return 6;
    return 2; // anything else
  }
  function laneCmp(a, b) {
    var ra = laneRank(a), rb = laneRank(b);
    if (ra !== rb) return ra - rb;
    if (ra === 1) return compLane.get(a) - compLane.get(b);
    return a < b ? -1 : a > b ? 1 : 0;
  }
  // The fault kinds that act on one component: the component's own lane
  // tells them (marks and spans), so they get no nemesis lane.
  var COMPFAULT = { kill: 1, pause: 1, crash: 1, restart: 1, rewind: 1 };

  // ---- text measurement and label layout
  var meas = null, measCache = new Map();
  function textW(cls, s) {
    var key = cls + "\u0000" + s;
    if (measCache.has(key)) return measCache.get(key);
    if (!meas) {
      meas = sv("svg", { "class": "swim measure", width: "10", height: "10", "aria-hidden": "true" });
      meas.appendChild(sv("text", {}));
      document.body.appendChild(meas);
    }
    var t = meas.firstChild;
    t.setAttribute("class", cls);
    t.textContent = s;
    var w = 0;
    try { w = t.getComputedTextLength(); } catch (e) { w = 0; }
    if (!(w > 0)) w = s.length * 6.4; // not rendered: a generous estimate
    measCache.set(key, w);
    return w;
  }
  function elideTo(cls, s, w) {
    if (textW(cls, s) <= w) return s;
    for (var n = s.length - 1; n >= 3; n--) { var t = s.slice(0, n) + "…"; if (textW(cls, t) <= w) return t; }
    return "";
  }
  // layoutRows: items {x, text, cls, limit} → item.row (-1: left out) and
  // item.x0 / item.shown; first row where the label clears the previous one.
  function layoutRows(items, rows, left, right, gap) {
    var end = [];
    for (var r = 0; r < rows; r++) end.push(left - gap - 1);
    items.slice().sort(function (a, b) { return a.x - b.x; }).forEach(function (it) {
      it.row = -1;
      var text = it.text, x0 = Math.max(left, it.x), lim = it.limit ? Math.min(right, it.limit) : right;
      var w = textW(it.cls, text);
      // Off the right edge: to the left of its mark (or slid in).
      if (x0 + w > right) x0 = it.mx !== undefined ? Math.max(left, it.mx - 7 - w) : (it.limit ? x0 : Math.max(left, right - w));
      if (x0 + w > lim && it.short && x0 + textW(it.cls, it.short) <= lim) { text = it.short; w = textW(it.cls, text); }
      if (x0 + w > lim) { text = elideTo(it.cls, text, lim - x0); if (!text) return; w = textW(it.cls, text); }
      for (var r = 0; r < rows; r++) {
        if (end[r] + gap <= x0) { end[r] = x0 + w; it.row = r; it.x0 = x0; it.shown = text; return; }
      }
    });
  }
  // noOverlap: the last word on labels. Measures every drawn label of svg in
  // the page and hides one that intersects a label drawn before it (its text
  // stays in its tooltip). Returns how many it hid.
  function noOverlap(svg) {
    var kept = [], hid = 0;
    Array.prototype.forEach.call(svg.querySelectorAll("text"), function (t) {
      if (t.getAttribute("display") === "none") return;
      var r = t.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) return;
      for (var k = 0; k < kept.length; k++) {
        var q = kept[k];
        if (r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom) {
          t.setAttribute("display", "none"); hid++; return;
        }
      }
      kept.push(r);
    });
    svg.setAttribute("data-labels-hidden", String(hid));
    return hid;
  }
  function markPath(kind, x, y, s) {
    function p(dx, dy) { return (x + dx * s).toFixed(1) + "," + (y + dy * s).toFixed(1); }
    switch (kind) {
      case "start": return "M" + p(-3, -4) + "L" + p(4, 0) + "L" + p(-3, 4) + "Z";
      case "healthy": return "M" + p(0, -4) + "L" + p(0, 4);
      case "crash": case "exit": return "M" + p(-3.5, -3.5) + "L" + p(3.5, 3.5) + "M" + p(-3.5, 3.5) + "L" + p(3.5, -3.5);
      case "fired": return "M" + p(0, -4.5) + "L" + p(4.5, 0) + "L" + p(0, 4.5) + "L" + p(-4.5, 0) + "Z";
    }
    return "M" + p(-2, 0) + "a" + 2 * s + "," + 2 * s + " 0 1,0 " + 4 * s + ",0a" + 2 * s + "," + 2 * s + " 0 1,0 " + (-4 * s) + ",0";
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
    // What the components did while this order's ops happened.
    var cmarks = COMP.marks.filter(function (m) { return m[0] >= t0 && m[0] <= t1; });
    var cspans = COMP.spans.filter(function (s) { return s[3] >= t0 && s[2] <= t1; });
    var laneNames = [], laneSet = new Set();
    function addLane(n) { if (!laneSet.has(n)) { laneSet.add(n); laneNames.push(n); } }
    ops.forEach(function (o) { addLane(laneOf(o)); });
    // A component gets a lane for what changed it here (a start, an exit,
    // a fired failpoint, a down or paused window); first-time failpoint
    // hits and health checks are drawn only on a lane it already has.
    cmarks.forEach(function (m) { if (m[2] !== "reached" && m[2] !== "healthy") addLane(COMP.lanes[m[1]]); });
    cspans.forEach(function (s) { if (s[1] === "down" || s[1] === "paused") addLane(COMP.lanes[s[0]]); });
    // Failpoint records of the nemesis name a failpoint, not a process: the
    // component's lane shows them.
    faults.forEach(function (f) { if (f.target && f.kind !== "failpoint" && !(COMPFAULT[f.kind] && compLane.has(f.target))) addLane("nemesis → " + f.target); });
    laneNames.sort(laneCmp);
    // ROWH clears a label's box (about 1.17 em of 9.5–10 px text).
    var L = 190, W = 1100, R = 16, LH = 28, ROWH = 13, MAXROWS = 3;
    // x axis. In op-sequence mode the component events that matter take
    // slots of their own between the order's ops.
    var times = ops.map(oT);
    if (mode === "seq") {
      cmarks.forEach(function (m) { if (m[2] !== "reached" && m[2] !== "healthy") times.push(m[0]); });
      times.sort(function (a, b) { return a - b; });
    }
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

    // Labels: fault windows in rows on top; op and component labels in rows
    // above their lane's marks. Lanes grow to hold their rows.
    var flabels = faults.map(function (f) {
      var label = f.kind + (f.target ? " " + f.target : "") + (f.open ? " (never healed)" : "");
      // A crash or restart on a component's own lane needs no second label.
      var onLane = f.instant && COMPFAULT[f.kind] && compLane.has(f.target) && laneSet.has(f.target);
      return { f: f, x: x(f.s / 1000) + 2, text: onLane ? "" : clip(label, 40), full: label, cls: "flabel" };
    }).filter(function (it) { return it.text; });
    layoutRows(flabels, MAXROWS, L, W - 4, 6);
    var frows = 0;
    flabels.forEach(function (it) { frows = Math.max(frows, it.row + 1); });
    var TOP = 8 + frows * ROWH + 6;

    var label = ops.length <= 60;
    var perLane = new Map();
    laneNames.forEach(function (n) { perLane.set(n, []); });
    ops.forEach(function (o) {
      if (!label) return;
      perLane.get(laneOf(o)).push({ x: x(oT(o)) + 7, mx: x(oT(o)), text: clip(oF(o), 18), cls: "mlabel", op: o });
    });
    cmarks.forEach(function (m) {
      var lane = COMP.lanes[m[1]];
      var at = m[3].indexOf(" at ");
      if (m[3] && perLane.has(lane) && m[2] !== "reached" && m[2] !== "healthy") perLane.get(lane).push({ x: x(m[0]) + 7, mx: x(m[0]), text: clip(m[3], 36), short: at > 0 ? m[3].slice(0, at) : "", cls: "mlabel clabel", mark: m });
    });
    var laneTop = new Map(), laneY = new Map(), laneH = new Map(), y = TOP;
    laneNames.forEach(function (n) {
      var items = perLane.get(n);
      layoutRows(items, MAXROWS, L, W - 4, 5);
      var rows = 0;
      items.forEach(function (it) { rows = Math.max(rows, it.row + 1); });
      var h = Math.max(LH, rows * ROWH + 22);
      laneTop.set(n, y); laneH.set(n, h); laneY.set(n, y + h - 12);
      y += h;
    });
    var H = y + 24;

    var svg = sv("svg", { "class": "swim", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "timeline of order " + (orderId || "") });
    laneNames.forEach(function (n, k) {
      svg.appendChild(sv("rect", { "class": k % 2 ? "lane2" : "lane", x: 0, y: laneTop.get(n), width: W, height: laneH.get(n) }));
      var nm = sv("text", { "class": "lname", x: 6, y: laneY.get(n) + 4 }, elideTo("lname", n, L - 14) || clip(n, 4));
      if (nm.textContent !== n) nm.appendChild(sv("title", {}, n));
      svg.appendChild(nm);
    });
    faults.forEach(function (f) {
      var xs = x(f.s / 1000), xe = x(f.e / 1000);
      var title = f.kind + (f.target ? " " + f.target : "") + (f.open ? " (never healed)" : "") + "  " + ms(f.s / 1000) + "–" + ms(f.e / 1000) + " ms" + (f.err ? "  error: " + f.err : "");
      if (f.instant) {
        var ln = sv("line", { "class": "fault-instant", x1: xs, x2: xs, y1: TOP - 6, y2: H - 24 });
        ln.appendChild(sv("title", {}, title)); svg.appendChild(ln);
      } else {
        var rc = sv("rect", { "class": "fault", x: xs, y: TOP - 6, width: Math.max(2, xe - xs), height: H - 24 - TOP + 6 });
        rc.appendChild(sv("title", {}, title)); svg.appendChild(rc);
      }
      if (f.target && laneY.has("nemesis → " + f.target)) {
        var yy = laneY.get("nemesis → " + f.target);
        var bar = sv("rect", { x: xs, y: yy - 6, width: Math.max(3, xe - xs), height: 12, fill: "#cf222e", opacity: 0.7 });
        bar.appendChild(sv("title", {}, title)); svg.appendChild(bar);
      }
    });
    var hiddenF = [];
    flabels.forEach(function (it) {
      if (it.row < 0) { hiddenF.push(it.full + " at " + ms(it.f.s / 1000) + " ms"); return; }
      var t = sv("text", { "class": "flabel", x: it.x0, y: 8 + it.row * ROWH + 10 }, it.shown);
      if (it.shown !== it.full) t.appendChild(sv("title", {}, it.full));
      svg.appendChild(t);
    });
    // component spans: up (healthy), boot (starting), down (exited), paused
    cspans.forEach(function (s) {
      var lane = COMP.lanes[s[0]];
      if (!laneY.has(lane)) return;
      var yy = laneY.get(lane), xs = x(s[2]), xe = Math.max(x(s[3]), xs + 1);
      if (s[1] === "paused") {
        var pr = sv("rect", { "class": "cs cs-paused", x: xs, y: yy - 6, width: Math.max(2, xe - xs), height: 12, "data-i": s[4] });
        pr.appendChild(sv("title", {}, lane + " paused " + ms(s[2]) + "–" + ms(s[3]) + " ms (op #" + s[4] + ")"));
        svg.appendChild(pr);
      } else {
        svg.appendChild(sv("line", { "class": "cs cs-" + s[1], x1: xs, x2: xe, y1: yy, y2: yy }));
      }
    });
    // client request spans: invoke → its completion on the same proc
    var pending = {};
    ops.forEach(function (o) {
      var p = oP(o), t = oY(o);
      if (p.indexOf("client-") !== 0) return;
      if (t === "invoke") pending[p] = o;
      else if ((t === "ok" || t === "fail" || t === "info") && pending[p]) {
        var yy = laneY.get(laneOf(o));
        svg.appendChild(sv("line", { "class": "span", x1: x(oT(pending[p])), x2: x(oT(o)), y1: yy, y2: yy }));
        delete pending[p];
      }
    });
    cmarks.forEach(function (m) {
      var lane = COMP.lanes[m[1]];
      if (!laneY.has(lane)) return;
      var cx = x(m[0]), cy = laneY.get(lane);
      var g = sv("path", { "class": "cm cm-" + m[2], d: markPath(m[2], cx, cy, 1.4), "data-i": m[4], "data-comp": "1" });
      g.appendChild(sv("title", {}, m[5] + (m[6] ? "\nclick: the log lines around it" : "")));
      svg.appendChild(g);
      if (hl.has(m[4])) svg.appendChild(sv("circle", { "class": "hlm", cx: cx, cy: cy, r: 9 }));
    });
    ops.forEach(function (o) {
      var cx = x(oT(o)), cy = laneY.get(laneOf(o)), t = oY(o), g;
      if (t === "effect") g = sv("rect", { "class": "m m-effect", x: cx - 5, y: cy - 5, width: 10, height: 10 });
      else if (t === "event") g = sv("rect", { "class": "m m-event", x: cx - 5, y: cy - 5, width: 10, height: 10, transform: "rotate(45 " + cx + " " + cy + ")" });
      else g = sv("circle", { "class": "m m-" + t, cx: cx, cy: cy, r: 5 });
      g.appendChild(sv("title", {}, "#" + oI(o) + "  " + ms(oT(o)) + " ms  " + oP(o) + " " + t + " " + oF(o) + (oV(o) ? "\n" + clip(oV(o), 400) : "")));
      g.setAttribute("data-i", oI(o));
      svg.appendChild(g);
      if (hl.has(oI(o))) svg.appendChild(sv("circle", { "class": "hlm", cx: cx, cy: cy, r: 9 }));
    });
    laneNames.forEach(function (n) {
      perLane.get(n).forEach(function (it) {
        if (it.row < 0) return; // left out for room: the mark's tooltip has it
        var lt = sv("text", { "class": it.cls, x: it.x0, y: laneY.get(n) - 8 - it.row * ROWH }, it.shown);
        if (it.mark) lt.setAttribute("data-i", it.mark[4]);
        svg.appendChild(lt);
      });
    });
    for (var k = 0; k <= 4; k++) {
      var tt = t0 + (t1 - t0) * k / 4, xx = L + (W - L - R) * k / 4;
      if (mode === "seq") tt = times[Math.round((times.length - 1) * k / 4)];
      var tick = ms(tt) + " ms";
      if (k === 4) xx = W - R - textW("tick", tick);
      svg.appendChild(sv("text", { "class": "tick", x: xx, y: H - 8 }, tick));
    }
    var bar = el("div", { "class": "tlbar" }, [
      (mode === "seq" ? "x axis: op sequence (equal spacing" + (auto ? "; chosen because one quiet gap covers most of the time span" : "") + ") " : "x axis: time "),
    ]);
    var sw = el("button", { type: "button" }, [mode === "seq" ? "show time axis" : "show op sequence"]);
    sw.addEventListener("click", function () { drawTimeline(box, orderId, hl, mode === "seq" ? "time" : "seq"); });
    bar.appendChild(sw);
    bar.appendChild(el("span", {}, ["○ invoke ● ok/fail/info ■ world effect ◆ broker event · components: ▶ start ┃ healthy ✕ crash (red) / stop ◆ failpoint fired · reached — up ┅ down ▮ paused · red ring: cited by the violation · shaded: fault window"]));
    if (od && od.capped) bar.appendChild(el("b", { "class": "warnt" }, [od.capped + " more ops of this order were left out (per-order cap)"]));
    box.appendChild(bar);
    box.appendChild(svg);
    if (hiddenF.length) box.appendChild(el("p", { "class": "legend hidden-labels" }, ["fault labels left out for room (hover the windows): " + hiddenF.join(" · ")]));
    noOverlap(svg);
    svg.addEventListener("click", function (ev) {
      var i = ev.target.getAttribute && ev.target.getAttribute("data-i");
      if (!i) return;
      var row = box.parentNode.querySelector('tr[data-i="' + i + '"]');
      if (row) { row.scrollIntoView({ block: "center" }); row.classList.add("flash"); return; }
      openOp(Number(i));
    });
  }

  // openOp shows a component event in the Components list (its log lines
  // open) or, for an op of an order, that order's op table.
  function openOp(i) {
    var row = document.getElementById("op-" + i);
    if (row) {
      for (var p = row.parentNode; p; p = p.parentNode) if (p.tagName === "DETAILS") p.open = true;
      var lx = row.querySelector("details.logx");
      if (lx) lx.open = true;
      row.scrollIntoView({ block: "center" });
      row.classList.add("flash");
      return true;
    }
    return false;
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
    if (h.indexOf("#op-") === 0) { openOp(Number(h.slice(4))); return; }
    if (h.indexOf("#order-") !== 0) return;
    var id;
    try { id = decodeURIComponent(h.slice(7)); } catch (e) { return; }
    openOrder(id);
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
  // ---- narrative clauses: ring the op in the violation's timeline, then go
  // to its row (evidence table, component list or the order's op table).
  Array.prototype.forEach.call(document.querySelectorAll("a.clause"), function (a) {
    a.addEventListener("click", function (ev) {
      var ops = parseOps(a.getAttribute("data-ops"));
      var d = a.closest("details.violation");
      if (d) Array.prototype.forEach.call(d.querySelectorAll(".tl [data-i]"), function (e) {
        if (ops.has(Number(e.getAttribute("data-i")))) e.classList.add("flash"); else e.classList.remove("flash");
      });
      var href = a.getAttribute("href") || "";
      if (href.indexOf("#op-") === 0) { ev.preventDefault(); openOp(Number(href.slice(4))); return; }
      if (href.indexOf("#order-") === 0) {
        ev.preventDefault();
        var id;
        try { id = decodeURIComponent(href.slice(7)); } catch (e) { return; }
        openOrder(id);
        var first = Array.from(ops)[0];
        setTimeout(function () {
          var row = document.querySelector('#order-list tr[data-i="' + first + '"]');
          if (row) { row.scrollIntoView({ block: "center" }); row.classList.add("flash"); }
        }, 0);
      }
    });
  });
  // The whole-run chart is drawn in Go with estimated label widths; measure.
  var ovs = document.getElementById("overall-svg");
  if (ovs) noOverlap(ovs);

  // Tests (and curious readers) can tell the script ran to the end.
  document.documentElement.setAttribute("data-report-ready", "1");
})();
