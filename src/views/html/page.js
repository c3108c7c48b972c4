// memtrack report page: draws the heap and resident charts from the embedded timeline
// (script#memtrack-data). Every string from the recording reaches the page through
// textContent or setAttribute, never as markup.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("memtrack-data").textContent);
  var t = data.timeline;
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
    "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363"];

  // The same units as the text report (src/units.rs format_bytes, format_duration_ns).
  function fmtBytes(b) {
    var units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if (b < 1024) return b + " B";
    var v = b / 1024, u = 0;
    while (v >= 1023.95 && u + 1 < units.length) { v /= 1024; u++; }
    return v.toFixed(1) + " " + units[u];
  }
  function fmtTime(ns) {
    if (ns < 1e3) return ns + " ns";
    if (ns < 1e6 - 50) return (ns / 1e3).toFixed(1) + " µs";
    if (ns < 1e9 - 5e4) return (ns / 1e6).toFixed(1) + " ms";
    return (ns / 1e9).toFixed(3) + " s";
  }
  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function title(parent, text) {
    var e = el("title", {}, parent);
    e.textContent = text;
    return e;
  }
  function color(i, s) {
    // The first series is the scope's: the run's, or the --pid process's or --tree tree's.
    if (i === 0) return "#000";
    if (s.name === "others") return "#999";
    return COLORS[(i - 1) % COLORS.length];
  }
  function niceStep(range, count) {
    var raw = range / count, p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= raw) return steps[i] * p;
    return 10 * p;
  }
  function niceBytes(max) {
    var unit = 1;
    while (max / unit >= 4096) unit *= 1024;
    return niceStep(max / unit, 5) * unit;
  }

  function draw(div) {
    var key = div.getAttribute("data-key");
    if (key === "resident" && !t.resident_recorded) {
      div.textContent = "No resident memory in this recording (recorded with --no-rss).";
      return;
    }
    var W = 1100, H = 340, L = 80, R = 20, T = 24, B = 70;
    var end = Math.max(t.end_ns, 1);
    var ymax = 1;
    t.series.forEach(function (s) {
      s.points.forEach(function (p) { ymax = Math.max(ymax, p[key + "_max"]); });
      var pk = s[key + "_peak"];
      if (pk) ymax = Math.max(ymax, pk.bytes);
    });
    ymax *= 1.12;
    var X = function (ns) { return L + (W - L - R) * Math.min(ns, end) / end; };
    var Y = function (b) { return T + (H - T - B) * (1 - b / ymax); };
    // The plot's geometry as data, so a test (tests/views_html.rs) can map a time or a value
    // to where it must be drawn.
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, id: key + "-svg",
      role: "img", "aria-label": key + " over time", "data-plot-left": L, "data-plot-right": W - R,
      "data-plot-top": T, "data-plot-bottom": H - B, "data-end-ns": end, "data-y-max": ymax });
    div.appendChild(svg);

    var grid = el("g", { "class": "grid" }, svg);
    var axis = el("g", { "class": "axis" }, svg);
    var ys = niceBytes(ymax / 1.12 || 1);
    for (var y = 0; y <= ymax; y += ys) {
      el("line", { x1: L, x2: W - R, y1: Y(y), y2: Y(y) }, grid);
      var label = el("text", { x: L - 6, y: Y(y) + 4, "text-anchor": "end" }, axis);
      label.textContent = fmtBytes(Math.round(y));
    }
    var xs = niceStep(end, 8);
    for (var x = 0; x <= end; x += xs) {
      el("line", { x1: X(x), x2: X(x), y1: H - B, y2: H - B + 4 }, axis);
      var tx = el("text", { x: X(x), y: H - B + 16, "text-anchor": "middle" }, axis);
      tx.textContent = fmtTime(Math.round(x));
    }
    el("line", { x1: L, x2: W - R, y1: H - B, y2: H - B }, axis);
    el("line", { x1: L, x2: L, y1: T, y2: H - B }, axis);

    // Benchmark windows, then markers, under the curves.
    t.windows.forEach(function (w) {
      var r = el("rect", { "class": "window", x: X(w.start_ns), y: T,
        width: Math.max(1, X(w.end_ns) - X(w.start_ns)), height: H - T - B }, svg);
      title(r, "benchmark " + w.uri + ": " + fmtTime(w.start_ns) + " to " + fmtTime(w.end_ns));
    });
    t.markers.forEach(function (m) {
      var l = el("line", { "class": "marker", x1: X(m.at_ns), x2: X(m.at_ns), y1: T, y2: T + 8 }, svg);
      title(l, "marker " + m.kind + " at " + fmtTime(m.at_ns) + (m.uri ? " (" + m.uri + ")" : ""));
    });

    // Each series as its decimated step: in every bucket a vertical stroke from its minimum to
    // its maximum, then its last value until the next bucket, so no peak is drawn lower.
    t.series.forEach(function (s, i) {
      var prev = 0, d = "M" + X(0) + "," + Y(0);
      s.points.forEach(function (p) {
        var px = X(p.at_ns);
        d += "L" + px + "," + Y(prev) + "L" + px + "," + Y(p[key + "_max"]) +
          "L" + px + "," + Y(p[key + "_min"]) + "L" + px + "," + Y(p[key + "_last"]);
        prev = p[key + "_last"];
      });
      d += "L" + X(end) + "," + Y(prev);
      var path = el("path", { d: d, fill: "none", stroke: color(i, s),
        "stroke-width": i === 0 ? 2 : 1.2, "class": "series",
        "data-series": s.name }, svg);
      if (s.name === "others") path.setAttribute("stroke-dasharray", "4 3");
      title(path, s.name + (s.command ? ": " + s.command : ""));
    });

    // Peaks: every series' as a dot with its value and moment, the scope's labelled.
    t.series.forEach(function (s, i) {
      var pk = s[key + "_peak"];
      if (!pk || pk.at_ns === null || pk.at_ns === undefined) return;
      var c = el("circle", { cx: X(pk.at_ns), cy: Y(pk.bytes), r: i === 0 ? 4.5 : 3,
        fill: color(i, s), stroke: "#fff", "class": "peak", "data-series": s.name,
        "data-bytes": pk.bytes, "data-at-ns": pk.at_ns }, svg);
      var text = "peak " + fmtBytes(pk.bytes) + " at " + fmtTime(pk.at_ns);
      title(c, s.name + (s.command ? " (" + s.command + ")" : "") + ": " + text);
      if (i === 0) {
        var right = X(pk.at_ns) > W * 0.7;
        var lab = el("text", { x: X(pk.at_ns) + (right ? -8 : 8), y: Math.max(T + 12, Y(pk.bytes) - 6),
          "text-anchor": right ? "end" : "start", "class": "peak-label",
          id: key + "-peak-label", "data-bytes": pk.bytes, "data-at-ns": pk.at_ns }, svg);
        lab.textContent = text;
      }
    });

    // Fork, exec and exit on a lane under the axis.
    var lane = el("g", { "class": "lane" }, svg);
    var laneY = H - B + 34;
    var name = el("text", { x: L - 6, y: laneY + 4, "text-anchor": "end" }, lane);
    name.textContent = "processes";
    var glyph = { fork: ["▲", "#2ca02c"], exec: ["◆", "#1f77b4"], exit: ["▼", "#d62728"] };
    t.events.forEach(function (e) {
      var g = glyph[e.kind] || ["•", "#555"];
      var m = el("text", { x: X(e.at_ns), y: laneY + 4, "text-anchor": "middle", fill: g[1],
        "class": "event", "data-kind": e.kind }, lane);
      m.textContent = g[0];
      var what = e.kind === "fork" ? "pid " + e.pid + " forked " + e.child
        : e.kind === "exec" ? "pid " + e.pid + " executed " + e.command
        : "pid " + e.pid + " exited with " + e.exit_code;
      title(m, fmtTime(e.at_ns) + ": " + what);
    });
    var more = t.events_omitted + t.windows_omitted + t.markers_omitted;
    if (more > 0) {
      var o = el("text", { x: W - R, y: laneY + 20, "text-anchor": "end" }, lane);
      o.textContent = more + " more events, windows or markers not drawn";
    }

    // Hover: a cursor with each series' range in the bucket under it.
    var cursor = el("line", { "class": "cursor", y1: T, y2: H - B, visibility: "hidden" }, svg);
    var tip = el("g", { "class": "tip", visibility: "hidden" }, svg);
    var tipBox = el("rect", { rx: 3 }, tip);
    var tipText = el("text", {}, tip);
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var sx = (ev.clientX - box.left) * W / box.width;
      if (sx < L || sx > W - R) { cursor.setAttribute("visibility", "hidden"); tip.setAttribute("visibility", "hidden"); return; }
      var ns = (sx - L) / (W - L - R) * end;
      cursor.setAttribute("x1", sx); cursor.setAttribute("x2", sx);
      cursor.setAttribute("visibility", "visible");
      while (tipText.firstChild) tipText.removeChild(tipText.firstChild);
      var lines = [fmtTime(Math.round(ns))];
      t.series.forEach(function (s) {
        var lo = 0, hi = s.points.length - 1, found = -1;
        while (lo <= hi) { var mid = (lo + hi) >> 1; if (s.points[mid].at_ns <= ns) { found = mid; lo = mid + 1; } else hi = mid - 1; }
        if (found < 0) return;
        var p = s.points[found];
        var inside = ns < p.at_ns + s.bucket_ns;
        var v = inside ? fmtBytes(p[key + "_min"]) + " – " + fmtBytes(p[key + "_max"]) : fmtBytes(p[key + "_last"]);
        lines.push(s.name + ": " + v);
      });
      lines.slice(0, 14).forEach(function (line, k) {
        var span = el("tspan", { x: 6, dy: k === 0 ? 14 : 13 }, tipText);
        span.textContent = line;
      });
      var bb = tipText.getBBox();
      tipBox.setAttribute("width", bb.width + 12); tipBox.setAttribute("height", bb.height + 8);
      var tx = sx + 12 + bb.width + 12 > W ? sx - bb.width - 24 : sx + 12;
      tip.setAttribute("transform", "translate(" + tx + "," + (T + 4) + ")");
      tip.setAttribute("visibility", "visible");
    });
    svg.addEventListener("mouseleave", function () {
      cursor.setAttribute("visibility", "hidden"); tip.setAttribute("visibility", "hidden");
    });
  }

  function legend() {
    var ul = document.getElementById("legend");
    t.series.forEach(function (s, i) {
      var li = document.createElement("li");
      var sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = color(i, s);
      li.appendChild(sw);
      // The process's name, as the table names it; its whole command on hover.
      var name = s.pid !== null && s.pid !== undefined ? data.names[s.pid] : undefined;
      var text = s.name, whole = s.name;
      if (s.command) {
        text += ": " + (name || s.command);
        whole += ": " + s.command;
      }
      if (s.name === "others") {
        text += " (" + s.processes + " processes summed)";
        whole = text;
      }
      li.appendChild(document.createTextNode(text));
      li.title = whole;
      ul.appendChild(li);
    });
  }

  var charts = document.querySelectorAll(".chart");
  for (var i = 0; i < charts.length; i++) draw(charts[i]);
  legend();
  document.documentElement.setAttribute("data-drawn", "true");
})();
