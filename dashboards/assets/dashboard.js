/*
 * dashboard.js — draws the tpbench dashboard from the JSON that
 * dashboards/tp_dashboard.c embeds in the page (#tp-data): the run's
 * summary, speedup and bound charts, the throughput table, a timeline per
 * traced configuration, and trends across commits. Everything is drawn here
 * as HTML and inline SVG; nothing is fetched.
 *
 * The page reports on itself for headless checks: <html data-status> is
 * "loading" until drawing finished, then "ok"; any error (caught by
 * window.onerror or here) sets it to "error" and writes the message into
 * #tp-errors. Figures carry their exact values in data-* attributes
 * (data-value, data-dist-id, ...) so a test can compare them with the
 * database without parsing rounded text.
 */
(function () {
  "use strict";

  var root = document.documentElement;

  function reportError(message) {
    root.setAttribute("data-status", "error");
    var box = document.getElementById("tp-errors");
    if (box) {
      box.hidden = false;
      box.textContent += message + "\n";
    }
  }

  window.onerror = function (message, source, line, column) {
    reportError("error: " + message + " (line " + line + ":" + column + ")");
    return false;
  };

  var SVG = "http://www.w3.org/2000/svg";
  /* Shared with dashboard.css's legend swatches. */
  var CATEGORY_COLOURS = {
    comm: "#d1495b",
    gemm: "#2f5fb3",
    attention: "#8e44ad",
    elementwise: "#edae49",
    other: "#7a8597",
    range: "#66a182"
  };

  /* ---- small helpers ------------------------------------------------------ */

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function isNum(v) {
    return typeof v === "number" && isFinite(v);
  }

  function fmt(v, digits) {
    return isNum(v) ? v.toFixed(digits) : "-";
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function byId(id) {
    return document.getElementById(id);
  }

  var tooltip = byId("tp-tooltip");

  function showTooltip(event, text) {
    tooltip.textContent = text;
    tooltip.hidden = false;
    var x = Math.min(event.clientX + 14, window.innerWidth - 540);
    tooltip.style.left = Math.max(4, x) + "px";
    tooltip.style.top = event.clientY + 14 + "px";
  }

  function hideTooltip() {
    tooltip.hidden = true;
  }

  /* Hover details for an SVG element (and a <title> for plain browsers). */
  function hover(node, text) {
    node.appendChild(svg("title", {}, text));
    node.addEventListener("mousemove", function (e) {
      showTooltip(e, text);
    });
    node.addEventListener("mouseleave", hideTooltip);
  }

  function rowLabel(row) {
    var parts = [row.model, row.layer, row.proj, "T=" + row.tokens, row.dtype, row.pass];
    if (row.schedule_requested) parts.push(row.schedule_requested);
    return parts.filter(function (p) {
      return p !== null && p !== undefined && p !== "";
    }).join(" ");
  }

  /* A labeller for a set of rows that names only what varies among them, so
   * chart labels stay short ("8b qkv T=4096 ce" rather than every axis). */
  function compactLabeller(rows) {
    var fields = ["model", "layer", "proj", "seqlen", "tokens", "dtype", "pass", "sp", "graph",
      "save_gathered", "schedule_requested", "chunks_requested"];
    var varying = fields.filter(function (f) {
      return rows.some(function (r) { return r[f] !== rows[0][f]; });
    });
    if (varying.indexOf("proj") >= 0) varying = varying.filter(function (f) { return f !== "layer"; });
    /* layers vary by sequence length; their tokens follow from it */
    if (varying.indexOf("seqlen") >= 0) varying = varying.filter(function (f) { return f !== "tokens"; });
    return function (r) {
      var parts = varying.map(function (f) {
        var v = r[f];
        if (f === "tokens") return "T=" + v;
        if (f === "seqlen") return v ? "S=" + v : "";
        /* switches read as their name when on, nothing when off */
        if (f === "graph") return v ? "graph" : "";
        if (f === "save_gathered") return v ? "saved" : "";
        if (f === "sp") return v ? "" : "sp=off";
        if (f === "chunks_requested") return v ? "x" + v : "";
        if (f === "model" && typeof v === "string") return v.replace(/^llama3-/, "");
        return v;
      });
      return parts.filter(function (p) { return p !== null && p !== undefined && p !== ""; })
        .join(" ") || rowLabel(r);
    };
  }

  /* ---- data ---------------------------------------------------------------- */

  var data = JSON.parse(byId("tp-data").textContent);
  var runs = data.runs || [];
  var traces = data.traces || [];
  var trends = data.trends || { commits: [], series: [] };

  /* ---- header and run selection ------------------------------------------------ */

  function describeRun(r) {
    var commit = r.commit ? r.commit.slice(0, 12) : "unknown commit";
    return "run " + r.id + " \u00b7 " + commit + (r.dirty ? " (dirty)" : "") + " \u00b7 " +
      (r.started_at || "?");
  }

  function runInfo(r) {
    return (r.host || "?") + ": " + (r.gpu_name || "?") + " \u00d7 " + (r.gpu_count || "?") +
      ", driver " + (r.driver_version || "?") + ", CUDA " + (r.cuda_version || "?") + ", NCCL " +
      (r.nccl_version || "?") + ", cuBLAS " + (r.cublas_version || "?") + " \u00b7 " +
      (r.warmup_iters === null ? "?" : r.warmup_iters) + " warm-up, " +
      (r.measure_iters === null ? "?" : r.measure_iters) + " measured iterations \u00b7 " +
      (r.command_line || "");
  }

  /* ---- summary cards --------------------------------------------------------- */

  function card(parent, value, what, id) {
    var c = el("div", { "class": "card", id: id });
    c.appendChild(el("div", { "class": "value" }, value));
    c.appendChild(el("div", { "class": "what" }, what));
    parent.appendChild(c);
  }

  function drawSummary(report) {
    var box = clear(byId("tp-summary"));
    var s = report.summary || {};
    var rows = report.rows || [];
    var traced = rows.filter(function (r) { return r.traced; }).length;
    card(box, fmt(s.geomean_speedup, 3) + "\u00d7", "geometric-mean speedup over " + s.rows +
      " rows", "tp-card-geomean");
    card(box, fmt(s.median_dist_over_bound, 2), "median dist_gemm / bound", "tp-card-bound");
    card(box, String(rows.length), "table rows", "tp-card-rows");
    card(box, String((report.rejected || []).length), "configurations not run", "tp-card-notrun");
    card(box, String(traced), "rows with a trace", "tp-card-traced");
  }

  /* ---- bar charts ---------------------------------------------------------------- */

  /* Horizontal bars, one group per item; series = [{name, colour, value(row)}];
   * a reference line at ref. Bars carry data-value and data-dist-id. */
  function barChart(target, items, series, ref, refLabel) {
    var label = compactLabeller(items);
    var host = clear(byId(target));
    var shown = items.filter(function (it) {
      return series.some(function (s) { return isNum(s.value(it)); });
    });
    if (!shown.length) {
      host.appendChild(el("div", { "class": "empty" }, "no rows with these figures"));
      return;
    }
    var barH = 9, gap = 5, groupH = series.length * barH + gap, left = 260, right = 40, top = 22;
    var width = 720, height = top + shown.length * groupH + 24;
    var max = ref;
    shown.forEach(function (it) {
      series.forEach(function (s) {
        var v = s.value(it);
        if (isNum(v) && v > max) max = v;
      });
    });
    max *= 1.08;
    var x = function (v) { return left + (width - left - right) * v / max; };
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "class": "bars", "data-rows": shown.length });
    for (var t = 0; t <= 4; t++) {
      var tv = max * t / 4;
      chart.appendChild(svg("line", { x1: x(tv), x2: x(tv), y1: top - 4, y2: height - 20,
        "class": "grid" }));
      chart.appendChild(svg("text", { x: x(tv), y: height - 6, "text-anchor": "middle",
        "class": "muted" }, tv.toFixed(2)));
    }
    shown.forEach(function (it, i) {
      var y0 = top + i * groupH;
      chart.appendChild(svg("text", { x: left - 6, y: y0 + groupH / 2, "text-anchor": "end",
        "dominant-baseline": "middle" }, label(it)));
      series.forEach(function (s, k) {
        var v = s.value(it);
        if (!isNum(v)) return;
        var bar = svg("rect", { x: left, y: y0 + k * barH, width: Math.max(1, x(v) - left),
          height: barH - 1, fill: s.colour, "class": "bar", "data-series": s.name,
          "data-value": String(v), "data-dist-id": String(it.dist_config_id) });
        hover(bar, rowLabel(it) + "\n" + s.name + ": " + v.toFixed(3));
        chart.appendChild(bar);
        chart.appendChild(svg("text", { x: x(v) + 3, y: y0 + k * barH + barH / 2,
          "dominant-baseline": "middle", "class": "muted" }, v.toFixed(2)));
      });
    });
    chart.appendChild(svg("line", { x1: x(ref), x2: x(ref), y1: top - 8, y2: height - 20,
      "class": "ref" }));
    chart.appendChild(svg("text", { x: x(ref), y: 12, "text-anchor": "middle" }, refLabel));
    host.appendChild(chart);
    var legend = el("div", { "class": "legend" });
    series.forEach(function (s) {
      var sw = el("span", { style: "--swatch:" + s.colour }, s.name);
      legend.appendChild(sw);
    });
    host.appendChild(legend);
  }

  function drawCharts(report) {
    var rows = report.rows || [];
    barChart("tp-speedup", rows, [
      { name: "speedup", colour: "#2f5fb3", value: function (r) { return r.speedup; } }
    ], 1.0, "1 = stock");
    barChart("tp-bound", rows, [
      { name: "dist_gemm / bound", colour: "#2f5fb3",
        value: function (r) { return r.dist_over_bound; } },
      { name: "stock / bound", colour: "#9aa5b8", value: function (r) {
        return isNum(r.stock_ms) && isNum(r.bound_ms) && r.bound_ms > 0 ? r.stock_ms / r.bound_ms
          : null;
      } }
    ], 1.0, "1 = bound");
  }

  /* ---- the table ------------------------------------------------------------------ */

  var COLUMNS = [
    { title: "model", get: function (r) { return r.model; } },
    { title: "op", get: function (r) { return r.layer; } },
    { title: "proj", get: function (r) { return r.proj; } },
    { title: "tp", get: function (r) { return r.tp; } },
    { title: "tokens", get: function (r) { return r.tokens; } },
    { title: "dtype", get: function (r) { return r.dtype; } },
    { title: "pass", get: function (r) { return r.pass; } },
    { title: "schedule", get: function (r) { return r.schedule || r.schedule_requested; } },
    { title: "stock ms", key: "stock_ms", digits: 3 },
    { title: "dist_gemm ms", key: "dist_ms", digits: 3 },
    { title: "speedup", key: "speedup", digits: 2, judge: true },
    { title: "GEMM ms", key: "gemm_ms", digits: 3 },
    { title: "comm ms", key: "comm_ms", digits: 3 },
    { title: "bound ms", key: "bound_ms", digits: 3 },
    { title: "dist/bound", key: "dist_over_bound", digits: 2 },
    { title: "dist tok/s", key: "dist_tokens_per_s", digits: 0 },
    { title: "dist TFLOP/s", key: "dist_tflops", digits: 1 },
    { title: "workspace MiB", key: "workspace_mib", digits: 1 },
    { title: "dist cv %", key: "dist_cv_pct", digits: 1 },
    { title: "overlap %", key: "overlap_pct", digits: 1 },
    { title: "exposed comm ms", key: "exposed_comm_ms", digits: 3 },
    { title: "trace overhead %", key: "trace_overhead_pct", digits: 1 },
    { title: "evidence", get: function (r) { return r.evidence || "-"; } },
    { title: "status", get: function (r) { return r.status + (r.reason ? ": " + r.reason : ""); } }
  ];

  function drawTable(report) {
    var table = clear(byId("tp-table"));
    var head = el("tr");
    COLUMNS.forEach(function (c) { head.appendChild(el("th", {}, c.title)); });
    table.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    (report.rows || []).forEach(function (r) {
      var tr = el("tr", { "data-dist-id": String(r.dist_config_id),
        "data-stock-id": String(r.stock_config_id), "data-key": r.config_key || "" });
      COLUMNS.forEach(function (c) {
        if (c.key) {
          var v = r[c.key];
          var cls = "num";
          if (c.judge && isNum(v)) cls += v >= 1 ? " good" : " bad";
          tr.appendChild(el("td", { "class": cls, "data-col": c.key,
            "data-value": isNum(v) ? String(v) : "" }, fmt(v, c.digits)));
        } else {
          var text = c.get(r);
          var attrs = {};
          if (c.title === "status" && r.status !== "ok") attrs["class"] = "status-other";
          tr.appendChild(el("td", attrs, text === null || text === undefined ? "-" : String(text)));
        }
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    var notRun = clear(byId("tp-not-run"));
    var rejected = report.rejected || [];
    if (rejected.length) {
      notRun.appendChild(el("div", {}, "Not run (" + rejected.length + "):"));
      var list = el("ul");
      rejected.forEach(function (c) {
        list.appendChild(el("li", {}, c.kind + " " + c.backend + " " + rowLabel(c) + ": " +
          c.status + ": " + (c.reason || "no reason recorded")));
      });
      notRun.appendChild(list);
    }
  }

  /* ---- timelines ------------------------------------------------------------------ */

  /* Lanes from the Chrome trace's metadata: per rank its NVTX track first,
   * then streams in their sort order. */
  function traceLanes(events) {
    var names = {}, procs = {}, sorts = {}, lanes = {};
    events.forEach(function (e) {
      var id = e.pid + ":" + e.tid;
      if (e.ph === "M" && e.name === "thread_name") names[id] = e.args.name;
      if (e.ph === "M" && e.name === "process_name") procs[e.pid] = e.args.name;
      if (e.ph === "M" && e.name === "thread_sort_index") sorts[id] = e.args.sort_index;
      if (e.ph === "X") lanes[id] = { pid: e.pid, tid: e.tid, id: id };
    });
    var list = Object.keys(lanes).map(function (k) { return lanes[k]; });
    list.sort(function (a, b) {
      if (a.pid !== b.pid) return a.pid - b.pid;
      var sa = sorts[a.id] !== undefined ? sorts[a.id] : a.tid;
      var sb = sorts[b.id] !== undefined ? sorts[b.id] : b.tid;
      return sa - sb;
    });
    list.forEach(function (l, i) {
      l.index = i;
      l.label = (procs[l.pid] || "rank " + l.pid) + " \u00b7 " + (names[l.id] || "tid " + l.tid);
    });
    return list;
  }

  function eventText(e) {
    var a = e.args || {};
    var lines = [e.name, "category: " + e.cat + ", kind: " + a.kind,
      "start: " + e.ts.toFixed(3) + " \u00b5s, duration: " + e.dur.toFixed(3) + " \u00b5s"];
    if (a.bytes) lines.push("bytes: " + a.bytes + (a.copy_kind ? " (" + a.copy_kind + ")" : ""));
    if (a.peer_device !== null && a.peer_device !== undefined) lines.push("peer device: " +
      a.peer_device);
    lines.push("correlation: " + a.correlation + ", schedule: " + (a.schedule || "-"));
    return lines.join("\n");
  }

  function drawTimeline(entry) {
    var host = clear(byId("tp-timeline"));
    var info = clear(byId("tp-trace-info"));
    if (!entry) {
      host.appendChild(el("div", { "class": "empty" }, "no configuration of this database was " +
        "traced"));
      return;
    }
    var other = entry.trace.otherData || {};
    info.textContent = entry.label + " \u00b7 schedule " + (other.schedule || "-") + " \u00b7 " +
      other.traced_iters + " traced iterations \u00b7 overlap " + fmt(other.overlap_pct_median, 1) +
      "% \u00b7 exposed comm " + fmt(other.exposed_comm_us_median, 1) + " \u00b5s \u00b7 trace " +
      "overhead " + fmt(isNum(other.trace_overhead) ? other.trace_overhead * 100 : null, 1) +
      "% \u00b7 evidence " + (other.evidence_ok ? "ok" : other.evidence_message) +
      (entry.truncated ? " \u00b7 first " + entry.shown_events + " events shown" : "");
    var events = entry.trace.traceEvents || [];
    var lanes = traceLanes(events);
    var laneOf = {};
    lanes.forEach(function (l) { laneOf[l.id] = l; });
    var complete = events.filter(function (e) { return e.ph === "X"; });
    var end = 0;
    complete.forEach(function (e) { end = Math.max(end, e.ts + e.dur); });
    var left = 230, right = 20, top = 20, laneH = 18, width = 1320;
    var height = top + lanes.length * laneH + 30;
    var x = function (t) { return left + (width - left - right) * (end > 0 ? t / end : 0); };
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "class": "timeline", "data-config-id": String(entry.config_id),
      "data-events": String(complete.length) });
    for (var t = 0; t <= 8; t++) {
      var tv = end * t / 8;
      chart.appendChild(svg("line", { x1: x(tv), x2: x(tv), y1: top - 4, y2: height - 24,
        "class": "grid" }));
      chart.appendChild(svg("text", { x: x(tv), y: height - 8, "text-anchor": "middle",
        "class": "muted" }, tv.toFixed(0) + " \u00b5s"));
    }
    lanes.forEach(function (l) {
      chart.appendChild(svg("text", { x: left - 6, y: top + l.index * laneH + laneH / 2,
        "text-anchor": "end", "dominant-baseline": "middle" }, l.label));
    });
    complete.forEach(function (e) {
      var lane = laneOf[e.pid + ":" + e.tid];
      var rect = svg("rect", { x: x(e.ts), y: top + lane.index * laneH + 2,
        width: Math.max(0.75, x(e.ts + e.dur) - x(e.ts)), height: laneH - 4,
        fill: CATEGORY_COLOURS[e.cat] || "#999", "class": "ev", "data-cat": e.cat,
        "fill-opacity": e.cat === "range" ? 0.45 : 0.9 });
      hover(rect, eventText(e));
      chart.appendChild(rect);
    });
    host.appendChild(chart);
    var legend = el("div", { "class": "legend" });
    Object.keys(CATEGORY_COLOURS).forEach(function (c) {
      legend.appendChild(el("span", { style: "--swatch:" + CATEGORY_COLOURS[c] }, c));
    });
    host.appendChild(legend);
  }

  /* ---- trends ---------------------------------------------------------------------- */

  /* Axes for a value per commit: x spreads the commits, y runs yMin..yMax. */
  function lineFrame(host, width, height, left, top, yMin, yMax, yLabel, commits) {
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height });
    var plotW = width - left - 70, plotH = height - top - 40;
    var x = function (i) {
      return left + (commits.length > 1 ? plotW * i / (commits.length - 1) : plotW / 2);
    };
    var y = function (v) { return top + plotH - plotH * (v - yMin) / (yMax - yMin); };
    for (var t = 0; t <= 4; t++) {
      var tv = yMin + (yMax - yMin) * t / 4;
      chart.appendChild(svg("line", { x1: left, x2: left + plotW, y1: y(tv), y2: y(tv),
        "class": "grid" }));
      chart.appendChild(svg("text", { x: left - 6, y: y(tv), "text-anchor": "end",
        "dominant-baseline": "middle", "class": "muted" }, tv.toFixed(yMax - yMin < 2 ? 2 : 1)));
    }
    commits.forEach(function (c, i) {
      chart.appendChild(svg("text", { x: x(i), y: height - 22, "text-anchor": "middle" },
        c.label));
      chart.appendChild(svg("text", { x: x(i), y: height - 8, "text-anchor": "middle",
        "class": "muted" }, (c.started_at || "").slice(0, 10)));
    });
    chart.appendChild(svg("text", { x: 4, y: 12, "class": "muted" }, yLabel));
    host.appendChild(chart);
    return { chart: chart, x: x, y: y };
  }

  function drawTrend(series) {
    var host = clear(byId("tp-trend"));
    var commits = trends.commits || [];
    if (!series || !series.points.length) {
      host.appendChild(el("div", { "class": "empty" }, "no measurements"));
      return;
    }
    var yMax = 0;
    series.points.forEach(function (p) {
      yMax = Math.max(yMax, isNum(p.p90_us) ? p.p90_us : 0, isNum(p.median_us) ? p.median_us : 0);
    });
    yMax = yMax / 1000 * 1.1 || 1;
    var f = lineFrame(host, 900, 260, 60, 20, 0, yMax, "ms", commits);
    var band = [], line = [];
    series.points.forEach(function (p) {
      if (isNum(p.p10_us) && isNum(p.p90_us))
        band.push([f.x(p.commit), f.y(p.p90_us / 1000), f.y(p.p10_us / 1000)]);
      line.push(f.x(p.commit) + "," + f.y(p.median_us / 1000));
    });
    if (band.length > 1) {
      var upper = band.map(function (b) { return b[0] + "," + b[1]; });
      var lower = band.slice().reverse().map(function (b) { return b[0] + "," + b[2]; });
      f.chart.appendChild(svg("polygon", { points: upper.concat(lower).join(" "),
        fill: "#2f5fb3", "fill-opacity": 0.15 }));
    }
    f.chart.appendChild(svg("polyline", { points: line.join(" "), fill: "none",
      stroke: "#2f5fb3", "stroke-width": 2 }));
    series.points.forEach(function (p) {
      var dot = svg("circle", { cx: f.x(p.commit), cy: f.y(p.median_us / 1000), r: 4,
        fill: "#2f5fb3", "class": "point", "data-key": series.key,
        "data-commit": String(p.commit), "data-config-id": String(p.config_id),
        "data-value": String(p.median_us) });
      hover(dot, series.label + "\n" + commits[p.commit].label + " (run " + p.run_id + ")\nmedian " +
        (p.median_us / 1000).toFixed(3) + " ms, p10 " + fmt(p.p10_us / 1000, 3) + ", p90 " +
        fmt(p.p90_us / 1000, 3));
      f.chart.appendChild(dot);
    });
  }

  /* Every op configuration's median over its first commit's: a shift
   * affecting many configurations shows as a bundle moving together. */
  function drawTrendAll() {
    var host = clear(byId("tp-trend-all"));
    var commits = trends.commits || [];
    var series = (trends.series || []).filter(function (s) {
      return s.kind === "op" && s.points.length > 0;
    });
    if (!series.length || commits.length < 2) {
      host.appendChild(el("div", { "class": "empty" }, commits.length < 2
        ? "one commit so far: trends need two" : "no op configurations"));
      return;
    }
    /* Zoomed on the ratios (around 1), not from 0: a few percent must show. */
    var lo = 1, hi = 1;
    series.forEach(function (s) {
      var base = s.points[0].median_us;
      s.points.forEach(function (p) {
        lo = Math.min(lo, p.median_us / base);
        hi = Math.max(hi, p.median_us / base);
      });
    });
    var pad = Math.max(0.02, (hi - lo) * 0.1);
    var f = lineFrame(host, 900, 260, 60, 20, lo - pad, hi + pad, "median / first", commits);
    f.chart.appendChild(svg("line", { x1: f.x(0), x2: f.x(commits.length - 1), y1: f.y(1),
      y2: f.y(1), "class": "ref" }));
    series.forEach(function (s) {
      var base = s.points[0].median_us;
      var pts = s.points.map(function (p) { return f.x(p.commit) + "," + f.y(p.median_us / base); });
      var colour = s.backend === "stock" ? "#9aa5b8" : "#2f5fb3";
      var line = svg("polyline", { points: pts.join(" "), fill: "none", stroke: colour,
        "stroke-width": 1.2, "stroke-opacity": 0.7, "class": "trend-line", "data-key": s.key });
      hover(line, s.label);
      f.chart.appendChild(line);
    });
    var legend = el("div", { "class": "legend" });
    legend.appendChild(el("span", { style: "--swatch:#2f5fb3" }, "dist_gemm"));
    legend.appendChild(el("span", { style: "--swatch:#9aa5b8" }, "stock"));
    host.appendChild(legend);
  }

  /* ---- wiring ------------------------------------------------------------------------ */

  function fillSelect(select, items, label) {
    clear(select);
    items.forEach(function (it, i) { select.appendChild(el("option", { value: String(i) },
      label(it))); });
  }

  function showRun(index) {
    var report = runs[index];
    byId("tp-run-info").textContent = runInfo(report.run);
    drawSummary(report);
    drawCharts(report);
    drawTable(report);
  }

  function main() {
    byId("tp-source").textContent = (data.database || "") + " \u00b7 generated " +
      (data.generated_at || "") + " by " + (data.generator || "tpbench");
    if (!runs.length) {
      byId("tp-summary").appendChild(el("div", { "class": "empty" }, "the database has no run " +
        "with op configurations"));
    } else {
      var runSelect = byId("tp-run");
      fillSelect(runSelect, runs, function (r) { return describeRun(r.run); });
      runSelect.value = String(runs.length - 1);
      runSelect.addEventListener("change", function () { showRun(Number(runSelect.value)); });
      showRun(runs.length - 1);
    }
    var traceSelect = byId("tp-trace");
    fillSelect(traceSelect, traces, function (t) {
      return "config " + t.config_id + " (run " + t.run_id + "): " + t.label;
    });
    traceSelect.addEventListener("change", function () {
      drawTimeline(traces[Number(traceSelect.value)]);
    });
    drawTimeline(traces[0]);
    var seriesList = (trends.series || []).filter(function (s) { return s.kind === "op"; });
    var seriesSelect = byId("tp-series");
    fillSelect(seriesSelect, seriesList, function (s) { return s.label; });
    seriesSelect.addEventListener("change", function () {
      drawTrend(seriesList[Number(seriesSelect.value)]);
    });
    drawTrend(seriesList[0]);
    drawTrendAll();
  }

  try {
    main();
    if (root.getAttribute("data-status") === "loading") root.setAttribute("data-status", "ok");
  } catch (e) {
    reportError("error: " + (e && e.stack ? e.stack : e));
  }
})();
