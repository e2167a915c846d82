/*
 * dashboard.js — draws the tpbench dashboard from the JSON that
 * dashboards/tp_dashboard.c embeds in the page (#tp-data): the run's
 * summary, speedup and bound charts, the throughput table, a compare view of
 * two runs, the timeline of one traced configuration, trends across commits
 * and the link probes. Everything is drawn here as HTML and inline SVG.
 *
 * Traces are not in the page: each is a file beside it, traces/<id>-<crc>.js,
 * holding tpTraceLoaded(id, "<base64 of the zlib-compressed trace JSON>").
 * The page adds a <script src> for the one shown (fetch() of file:// URLs is
 * refused by browsers; a script loads) and inflates it with the browser's
 * DecompressionStream; loaded traces are kept.
 *
 * The location's hash picks what is shown, so a view can be linked:
 * #trace=<config id>&base=<run id>&head=<run id>&trends=<mode>&filter=<text>
 * &link=<run id> (any subset; trends modes: dist_gemm, stock, both, configs).
 *
 * The page reports on itself for headless checks: <html data-status> is
 * "loading" until drawing finished (the first timeline's trace loaded and
 * drawn included), then "ok"; any error (caught by window.onerror or here)
 * sets it to "error" and writes the message into #tp-errors. Figures carry
 * their exact values in data-* attributes (data-value, data-dist-id, ...) so
 * a test can compare them with the database without parsing rounded text.
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
    sync: "#c3c8d1",
    range: "#66a182",
    range_gpu: "#66a182"
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

  /* Work the page waits for before it calls itself done (trace loads). */
  var pending = 1; /* main() itself */

  function finished() {
    if (--pending === 0 && root.getAttribute("data-status") === "loading")
      root.setAttribute("data-status", "ok");
  }

  /* Axis ticks at round steps (1, 2 or 5 times a power of ten) covering
   * lo..hi with at most about count ticks: {lo, hi, step, ticks, digits}, lo
   * and hi widened to the outer ticks so the frame ends on a labelled line. */
  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) hi = lo + 1;
    var rough = (hi - lo) / Math.max(1, count);
    var power = Math.pow(10, Math.floor(Math.log10(rough)));
    var step = [1, 2, 5, 10].map(function (m) { return m * power; })
      .filter(function (s) { return s >= rough * (1 - 1e-9); })[0];
    var first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
    var ticks = [];
    for (var i = first; i <= last; i++) ticks.push(Number((i * step).toPrecision(12)));
    var digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    return { lo: first * step, hi: last * step, step: step, ticks: ticks, digits: digits };
  }

  /* A tick's label; data-tick carries its exact value for tests. */
  function tickText(attrs, value, digits, unit) {
    attrs["class"] = (attrs["class"] ? attrs["class"] + " " : "") + "tick";
    attrs["data-tick"] = String(value);
    return svg("text", attrs, value.toFixed(digits) + (unit || ""));
  }

  var PALETTE = ["#2f5fb3", "#d1495b", "#1a7f37", "#edae49", "#8e44ad", "#00798c", "#e07a1f",
    "#5d6678", "#b5179e", "#6a994e", "#3d5a80", "#9c6644"];

  /* End labels beside the last point of each line, pushed apart so they do
   * not overlap: items [{y, text, colour}] at x. */
  function endLabels(chart, x, items, minY, maxY) {
    items.sort(function (a, b) { return a.y - b.y; });
    var gap = 12, prev = -Infinity;
    items.forEach(function (it) {
      it.at = Math.max(it.y, prev + gap);
      prev = it.at;
    });
    var over = items.length ? items[items.length - 1].at - maxY : 0;
    for (var i = items.length - 1; over > 0 && i >= 0; i--) {
      var next = i + 1 < items.length ? items[i + 1].at - gap : maxY;
      items[i].at = Math.max(minY, Math.min(items[i].at, next));
    }
    items.forEach(function (it) {
      chart.appendChild(svg("text", { x: x, y: it.at, "dominant-baseline": "middle",
        "class": "end-label", fill: it.colour, style: "fill:" + it.colour }, it.text));
    });
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
  var links = data.links || [];

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

  /* The headline is report's summary as it stands (one rule: report/tp_report.h,
   * tp_report_headline): fused rows of models that are not toys, the geometric mean of the
   * speedup and the median of dist/bound; each toy model apart. */
  function drawSummary(report) {
    var box = clear(byId("tp-summary"));
    var s = report.summary || {};
    var rows = report.rows || [];
    var traced = rows.filter(function (r) { return r.traced; }).length;
    var whose = s.toy_only ? " (toy models only)" : " (toy models apart)";
    // a run with no stock-and-dist_gemm row (one GPU: nothing fuses) says so, not "-x"
    if (s.rows > 0)
      card(box, fmt(s.geomean_speedup, 3) + "\u00d7", "geometric-mean speedup over " + s.rows +
        " rows" + whose, "tp-card-geomean");
    else
      card(box, "-", "no row with stock and dist_gemm results: no speedup (at TP 1 nothing " +
        "fuses)", "tp-card-geomean");
    card(box, fmt(s.median_dist_over_bound, 2), "median dist_gemm / bound over " +
      s.bound_rows + " rows" + whose, "tp-card-bound");
    var toys = s.toy_only ? [] : (s.models || []).filter(function (m) { return m.toy; });
    if (toys.length)
      card(box, toys.map(function (m) { return fmt(m.geomean_speedup, 3) + "\u00d7"; }).join(", "),
        "toy model" + (toys.length > 1 ? "s" : "") + " apart: " + toys.map(function (m) {
          return m.model + " (median dist_gemm / bound " + fmt(m.median_dist_over_bound, 2) + ")";
        }).join(", "), "tp-card-toys");
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
    var scale = niceTicks(0, max * 1.04, 5);
    max = scale.hi;
    var x = function (v) { return left + (width - left - right) * v / max; };
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "class": "bars", "data-rows": shown.length });
    scale.ticks.forEach(function (tv) {
      chart.appendChild(svg("line", { x1: x(tv), x2: x(tv), y1: top - 4, y2: height - 20,
        "class": "grid" }));
      chart.appendChild(tickText({ x: x(tv), y: height - 6, "text-anchor": "middle",
        "class": "muted" }, tv, scale.digits));
    });
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

  /* The stock a row's speedup divides by: the faster of plain stock and its
   * variant on NCCL symmetric windows (best_stock_ms; a report from before
   * the variant has stock_ms alone). */
  function bestStockMs(r) {
    return isNum(r.best_stock_ms) ? r.best_stock_ms : r.stock_ms;
  }

  function drawCharts(report) {
    var rows = report.rows || [];
    barChart("tp-speedup", rows, [
      { name: "speedup", colour: "#2f5fb3", value: function (r) { return r.speedup; } }
    ], 1.0, "1 = the faster stock");
    barChart("tp-bound", rows, [
      { name: "dist_gemm / bound", colour: "#2f5fb3",
        value: function (r) { return r.dist_over_bound; } },
      { name: "stock / bound", colour: "#9aa5b8", value: function (r) {
        var stock = bestStockMs(r);
        return isNum(stock) && isNum(r.bound_ms) && r.bound_ms > 0 ? stock / r.bound_ms : null;
      } }
    ], 1.0, "1 = bound");
  }

  /* ---- the table ------------------------------------------------------------------ */

  /* The switches away from their defaults, as the report's options column says them, so rows
   * that differ only there (graph=on beside graph=mixed, ac modes, quiet beside FSDP traffic,
   * the fp8 gather's comm_dtype, dist_gemm's symm) can be told apart. */
  function rowOptions(r) {
    var words = [r.sp === false ? "no-sp" : "sp"];
    if (r.dp > 1) words.push("dp" + r.dp);
    if (r.ac && r.ac !== "none") words.push("ac-" + r.ac);
    if (r.graph) words.push("graph");
    if (r.save_gathered) words.push("save-gathered");
    if (r.graph_sizes) words.push("among " + r.graph_sizes);
    if (r.comm_dtype) words.push("comm-" + r.comm_dtype);
    if (r.fsdp_traffic) words.push("fsdp-traffic");
    if (r.symm === "nccl") words.push("symm-nccl");
    return words.join(" ");
  }

  var COLUMNS = [
    { title: "model", get: function (r) { return r.model; } },
    { title: "op", get: function (r) { return r.layer; } },
    { title: "proj", get: function (r) { return r.proj; } },
    { title: "tp", get: function (r) { return r.tp; } },
    { title: "tokens", get: function (r) { return r.tokens; } },
    { title: "dtype", get: function (r) { return r.dtype; } },
    { title: "pass", get: function (r) { return r.pass; } },
    { title: "options", get: rowOptions },
    { title: "schedule", get: function (r) { return r.schedule || r.schedule_requested; } },
    { title: "stock ms", key: "stock_ms", digits: 3 },
    { title: "stock window ms", key: "stock_window_ms", digits: 3 },
    { title: "best stock", get: function (r) { return r.best_stock || "-"; } },
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

  /* ---- loading traces ------------------------------------------------------------- */

  var traceCache = {};   /* config id -> parsed trace */
  var traceWaiters = {}; /* config id -> [callback(error, trace)] */

  function base64Bytes(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  function settle(id, error, trace) {
    if (trace) traceCache[id] = trace;
    var waiting = traceWaiters[id] || [];
    delete traceWaiters[id];
    waiting.forEach(function (cb) { cb(error, trace); });
  }

  /* Called by a trace file (traces/<id>-<crc>.js) once it is loaded. */
  window.tpTraceLoaded = function (id, b64) {
    if (typeof DecompressionStream === "undefined") {
      settle(id, "this browser has no DecompressionStream, which the page needs to read its " +
        "trace files; open the page in a current browser, or export the trace with `tpbench " +
        "trace --config " + id + "` and open it in Perfetto");
      return;
    }
    var stream = new Blob([base64Bytes(b64)]).stream()
      .pipeThrough(new DecompressionStream("deflate"));
    new Response(stream).text().then(function (text) {
      settle(id, null, JSON.parse(text));
    }).catch(function (e) {
      settle(id, "trace of configuration " + id + ": " + e);
    });
  };

  /* Calls back with (error, trace) once entry's trace file is loaded. */
  function loadTrace(entry, callback) {
    var id = entry.config_id;
    if (traceCache[id]) return callback(null, traceCache[id]);
    if (traceWaiters[id]) return traceWaiters[id].push(callback);
    traceWaiters[id] = [callback];
    var script = el("script", { src: entry.file, "data-config-id": String(id) });
    script.onerror = function () {
      settle(id, entry.file + ": the trace file could not be loaded (it must stay beside " +
        "index.html, in traces/)");
    };
    document.body.appendChild(script);
  }

  /* ---- the timeline ---------------------------------------------------------------- */

  var shownTrace = null; /* the entry the timeline should show: a late load of another is dropped */

  function showTrace(entry) {
    var host = clear(byId("tp-timeline"));
    clear(byId("tp-trace-info"));
    shownTrace = entry;
    if (!entry) {
      host.appendChild(el("div", { "class": "empty" }, "no configuration of this database was " +
        "traced"));
      return;
    }
    host.appendChild(el("div", { "class": "empty" }, "loading " + entry.file + "\u2026"));
    pending++;
    loadTrace(entry, function (error, trace) {
      try {
        if (shownTrace !== entry) return;
        if (error) {
          clear(byId("tp-timeline")).appendChild(el("div", { "class": "empty trace-error" }, error));
          reportError("error: " + error);
        } else {
          drawTimeline(entry, trace);
        }
      } catch (e) {
        reportError("error: " + (e && e.stack ? e.stack : e));
      } finally {
        finished();
      }
    });
  }

  function drawTimeline(entry, trace) {
    var host = clear(byId("tp-timeline"));
    var info = clear(byId("tp-trace-info"));
    var other = trace.otherData || {};
    info.textContent = entry.label + " \u00b7 " + (entry.kind || "?") + " " + (entry.backend || "?") +
      (entry.fused === false ? " (not fused)" : "") + " \u00b7 schedule " +
      (other.schedule || "-") + " \u00b7 " +
      other.traced_iters + " traced iterations \u00b7 overlap " + fmt(other.overlap_pct_median, 1) +
      "% \u00b7 exposed comm " + fmt(other.exposed_comm_us_median, 1) + " \u00b5s \u00b7 trace " +
      "overhead " + fmt(isNum(other.trace_overhead) ? other.trace_overhead * 100 : null, 1) +
      "% \u00b7 evidence " + (other.evidence_ok ? "ok" : other.evidence_message) +
      (entry.truncated ? " \u00b7 first " + entry.shown_events + " events shown" : "");
    var events = trace.traceEvents || [];
    var lanes = traceLanes(events);
    var laneOf = {};
    lanes.forEach(function (l) { laneOf[l.id] = l; });
    var complete = events.filter(function (e) { return e.ph === "X"; });
    var end = 0;
    complete.forEach(function (e) { end = Math.max(end, e.ts + e.dur); });
    var scale = niceTicks(0, end, 10);
    end = scale.hi;
    var left = 230, right = 40, top = 20, laneH = 18, width = 1320;
    var height = top + lanes.length * laneH + 30;
    var x = function (t) { return left + (width - left - right) * (end > 0 ? t / end : 0); };
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "class": "timeline", "data-config-id": String(entry.config_id),
      "data-events": String(complete.length) });
    scale.ticks.forEach(function (tv) {
      chart.appendChild(svg("line", { x1: x(tv), x2: x(tv), y1: top - 4, y2: height - 24,
        "class": "grid" }));
      chart.appendChild(tickText({ x: x(tv), y: height - 8, "text-anchor": "middle",
        "class": "muted" }, tv, scale.digits, " \u00b5s"));
    });
    lanes.forEach(function (l) {
      chart.appendChild(svg("text", { x: left - 6, y: top + l.index * laneH + laneH / 2,
        "text-anchor": "end", "dominant-baseline": "middle" }, l.label));
    });
    complete.forEach(function (e) {
      var lane = laneOf[e.pid + ":" + e.tid];
      var rect = svg("rect", { x: x(e.ts), y: top + lane.index * laneH + 2,
        width: Math.max(0.75, x(e.ts + e.dur) - x(e.ts)), height: laneH - 4,
        fill: CATEGORY_COLOURS[e.cat] || "#999", "class": "ev", "data-cat": e.cat,
        "fill-opacity": e.cat === "range" || e.cat === "range_gpu" ? 0.45 : 0.9 });
      hover(rect, eventText(e));
      chart.appendChild(rect);
    });
    host.appendChild(chart);
    var legend = el("div", { "class": "legend" });
    var cats = Object.keys(CATEGORY_COLOURS);
    complete.forEach(function (e) { if (cats.indexOf(e.cat) < 0) cats.push(e.cat); });
    cats.forEach(function (c) {
      legend.appendChild(el("span", { style: "--swatch:" + (CATEGORY_COLOURS[c] || "#999") }, c));
    });
    host.appendChild(legend);
  }

  /* ---- trends ---------------------------------------------------------------------- */

  /* Axes for a value per commit: x spreads the commits, y covers yMin..yMax
   * (widened to round ticks); right: room for end labels. */
  function lineFrame(host, width, height, left, top, yMin, yMax, yLabel, commits, right) {
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height });
    var plotW = width - left - (right || 70), plotH = height - top - 40;
    var scale = niceTicks(yMin, yMax, 5);
    var x = function (i) {
      return left + (commits.length > 1 ? plotW * i / (commits.length - 1) : plotW / 2);
    };
    var y = function (v) { return top + plotH - plotH * (v - scale.lo) / (scale.hi - scale.lo); };
    scale.ticks.forEach(function (tv) {
      chart.appendChild(svg("line", { x1: left, x2: left + plotW, y1: y(tv), y2: y(tv),
        "class": "grid" }));
      chart.appendChild(tickText({ x: left - 6, y: y(tv), "text-anchor": "end",
        "dominant-baseline": "middle", "class": "muted" }, tv, scale.digits));
    });
    commits.forEach(function (c, i) {
      chart.appendChild(svg("text", { x: x(i), y: height - 22, "text-anchor": "middle" },
        c.label));
      chart.appendChild(svg("text", { x: x(i), y: height - 8, "text-anchor": "middle",
        "class": "muted" }, (c.started_at || "").slice(0, 10)));
    });
    chart.appendChild(svg("text", { x: 4, y: 12, "class": "muted" }, yLabel));
    host.appendChild(chart);
    return { chart: chart, x: x, y: y, top: top, bottom: top + plotH, right: left + plotW };
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
    yMax = yMax / 1000 * 1.05 || 1;
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

  /* ---- trends relative to the first commit ----------------------------------------------- */

  var TREND_MODES = [
    { id: "dist_gemm", label: "geometric mean per model: dist_gemm" },
    { id: "stock", label: "geometric mean per model: stock" },
    { id: "both", label: "geometric mean per model: dist_gemm and stock" },
    { id: "configs", label: "configurations matching the filter" }
  ];
  var MAX_TREND_LINES = 12;

  /* Whether a series matches every word of the filter (label or key). */
  function matches(series, filter) {
    var text = (series.label + " " + series.key).toLowerCase();
    return filter.toLowerCase().split(/\s+/).every(function (w) {
      return !w || text.indexOf(w) >= 0;
    });
  }

  /* One line per group of series (a model, a kind, a backend): at each
   * commit the geometric mean of median / median at the group's first
   * commit, over the group's series measured at both. */
  function geomeanLines(series, backends) {
    var groups = {}, order = [];
    series.forEach(function (s) {
      if (backends.indexOf(s.backend) < 0) return;
      /* the stock variant on NCCL windows is a line of its own */
      var key = (s.model || "?") + " " + (s.kind === "layer" ? "layers" : "ops") + ", " + s.backend +
        (s.schedule === "nccl-window" ? " nccl-window" : "");
      if (!groups[key]) {
        groups[key] = [];
        order.push(key);
      }
      groups[key].push(s);
    });
    var lines = [];
    order.sort().forEach(function (key) {
      var members = groups[key];
      var first = Math.min.apply(null, members.map(function (s) { return s.points[0].commit; }));
      var based = members.filter(function (s) { return s.points[0].commit === first; });
      var logs = {}, counts = {};
      based.forEach(function (s) {
        var base = s.points[0].median_us;
        s.points.forEach(function (p) {
          if (!isNum(p.median_us) || !(base > 0)) return;
          logs[p.commit] = (logs[p.commit] || 0) + Math.log(p.median_us / base);
          counts[p.commit] = (counts[p.commit] || 0) + 1;
        });
      });
      var points = Object.keys(counts).map(Number).sort(function (a, b) { return a - b; })
        .map(function (c) { return { commit: c, value: Math.exp(logs[c] / counts[c]),
          n: counts[c] }; });
      if (points.length < 2) return; /* one commit: nothing to compare yet */
      lines.push({ key: "geomean:" + key, label: key + " (" + based.length + ")",
        backend: members[0].backend, points: points });
    });
    return lines;
  }

  /* The matching configurations themselves (those measured at two commits
   * or more first), at most MAX_TREND_LINES. */
  function configLines(series) {
    var label = compactLabeller(series);
    var multi = series.filter(function (s) { return s.points.length > 1; });
    return { total: multi.length, lines: multi.slice(0, MAX_TREND_LINES).map(function (s) {
      var base = s.points[0].median_us;
      return { key: s.key, label: label(s) + " " + s.backend, backend: s.backend,
        points: s.points.map(function (p) { return { commit: p.commit, value: p.median_us / base,
          n: 1 }; }) };
    }) };
  }

  function drawTrendAll(mode, filter) {
    var host = clear(byId("tp-trend-all"));
    var commits = trends.commits || [];
    var series = (trends.series || []).filter(function (s) {
      return (s.kind === "op" || s.kind === "layer") && s.points.length > 0 && matches(s, filter);
    });
    if (commits.length < 2) {
      host.appendChild(el("div", { "class": "empty" }, "one commit so far: trends need two"));
      return;
    }
    var picked = mode === "configs" ? configLines(series)
      : { lines: geomeanLines(series, mode === "both" ? ["dist_gemm", "stock"] : [mode]) };
    var lines = picked.lines;
    var note = el("div", { "class": "muted", id: "tp-trend-note" });
    if (!lines.length) {
      host.appendChild(el("div", { "class": "empty" }, "no configuration measured at two commits " +
        "or more matches"));
      return;
    }
    /* Zoomed on the ratios (around 1), not from 0: a few percent must show. */
    var lo = 1, hi = 1;
    lines.forEach(function (l) {
      l.points.forEach(function (p) {
        lo = Math.min(lo, p.value);
        hi = Math.max(hi, p.value);
      });
    });
    var pad = Math.max(0.01, (hi - lo) * 0.05);
    var f = lineFrame(host, 1100, 300, 60, 20, lo - pad, hi + pad, "median / first commit's",
      commits, 300);
    f.chart.setAttribute("class", "trend-all");
    f.chart.appendChild(svg("line", { x1: f.x(0), x2: f.x(commits.length - 1), y1: f.y(1),
      y2: f.y(1), "class": "ref" }));
    var labels = [];
    var legend = el("div", { "class": "legend", id: "tp-trend-legend" });
    lines.forEach(function (l, i) {
      var colour = PALETTE[i % PALETTE.length];
      var pts = l.points.map(function (p) { return f.x(p.commit) + "," + f.y(p.value); });
      var line = svg("polyline", { points: pts.join(" "), fill: "none", stroke: colour,
        "stroke-width": 2, "stroke-dasharray": mode === "both" && l.backend === "stock" ? "5 3"
          : "none", "class": "trend-line", "data-key": l.key, "data-label": l.label });
      hover(line, l.label);
      f.chart.appendChild(line);
      l.points.forEach(function (p) {
        var dot = svg("circle", { cx: f.x(p.commit), cy: f.y(p.value), r: 3, fill: colour,
          "class": "trend-point", "data-key": l.key, "data-commit": String(p.commit),
          "data-value": String(p.value) });
        hover(dot, l.label + "\n" + commits[p.commit].label + ": " + p.value.toFixed(4) +
          " of the first commit's" + (p.n > 1 ? " (geometric mean of " + p.n + ")" : ""));
        f.chart.appendChild(dot);
      });
      var last = l.points[l.points.length - 1];
      labels.push({ y: f.y(last.value), text: l.label + " " + last.value.toFixed(3),
        colour: colour });
      legend.appendChild(el("span", { style: "--swatch:" + colour, "data-key": l.key }, l.label));
    });
    endLabels(f.chart, f.right + 8, labels, f.top, f.bottom);
    host.appendChild(legend);
    if (picked.total > lines.length)
      note.textContent = "showing " + lines.length + " of " + picked.total + " matching " +
        "configurations: narrow the filter";
    else if (mode !== "configs")
      note.textContent = "each line: a model's configurations of that kind and backend, the " +
        "count in brackets, relative to the group's first commit";
    host.appendChild(note);
  }

  /* ---- compare two runs --------------------------------------------------------------- */

  /* dist_gemm over the faster stock, as the report's speedup divides. */
  function distOverStock(r) {
    var stock = bestStockMs(r);
    return isNum(r.dist_ms) && isNum(stock) && stock > 0 ? r.dist_ms / stock : null;
  }

  function change(base, head) {
    return isNum(base) && isNum(head) && base > 0 ? head / base - 1 : null;
  }

  function keysOf(report) {
    var keys = {};
    (report.rows || []).forEach(function (r) { if (r.config_key) keys[r.config_key] = r; });
    return keys;
  }

  /* The latest run and the latest earlier one sharing configurations with
   * it, walking back until a pair shares some: [base, head] indexes. */
  function defaultPair() {
    for (var h = runs.length - 1; h > 0; h--) {
      var keys = keysOf(runs[h]);
      for (var b = h - 1; b >= 0; b--)
        if ((runs[b].rows || []).some(function (r) { return keys[r.config_key]; })) return [b, h];
    }
    return [Math.max(0, runs.length - 2), runs.length - 1];
  }

  function pctCell(v, attrs) {
    attrs["class"] = "num" + (isNum(v) && Math.abs(v) >= 0.02 ? v > 0 ? " bad" : " good" : "");
    attrs["data-value"] = isNum(v) ? String(v) : "";
    return el("td", attrs, isNum(v) ? (v > 0 ? "+" : "") + (v * 100).toFixed(1) + "%" : "-");
  }

  function drawCompare(baseIndex, headIndex, sortBy) {
    var table = clear(byId("tp-compare-table"));
    var summary = clear(byId("tp-compare-summary"));
    var base = runs[baseIndex], head = runs[headIndex];
    if (!base || !head) return;
    var baseKeys = keysOf(base), headKeys = keysOf(head);
    var pairs = [];
    (head.rows || []).forEach(function (h) {
      var b = baseKeys[h.config_key];
      if (!b) return;
      pairs.push({ base: b, head: h, stock: change(distOverStock(b), distOverStock(h)),
        bound: change(b.dist_over_bound, h.dist_over_bound) });
    });
    var onlyBase = (base.rows || []).filter(function (r) { return !headKeys[r.config_key]; });
    var onlyHead = (head.rows || []).filter(function (r) { return !baseKeys[r.config_key]; });
    var by = sortBy === "bound" ? "bound" : "stock";
    /* Worst first: the largest increase (slower against stock or the bound). */
    pairs.sort(function (p, q) {
      var a = isNum(p[by]) ? p[by] : -Infinity, b = isNum(q[by]) ? q[by] : -Infinity;
      return b - a;
    });
    /* toy models' rows stay out of the mean, as out of every headline */
    var logs = 0, n = 0, worse = 0, better = 0, toyRows = 0;
    pairs.forEach(function (p) {
      if (!isNum(p.stock)) return;
      if (p.head.toy) { toyRows++; return; }
      logs += Math.log(1 + p.stock);
      n++;
      if (p.stock >= 0.02) worse++;
      if (p.stock <= -0.02) better++;
    });
    summary.textContent = "run " + base.run.id + " \u2192 run " + head.run.id + ": " +
      pairs.length + " configurations in both" +
      (n ? "; dist/stock geometric-mean change " + ((Math.exp(logs / n) - 1) * 100).toFixed(1) +
        "% over " + n + " rows of models that are not toys, " + worse + " worse and " + better +
        " better by 2% or more" : "") +
      (toyRows ? " (" + toyRows + " toy-model rows apart)" : "") +
      "; only in run " + base.run.id + ": " + onlyBase.length + ", only in run " + head.run.id +
      ": " + onlyHead.length + ". Dist/stock is dist_gemm's time over the faster stock's " +
      "(plain or on NCCL windows; lower is better).";
    if (!pairs.length) {
      table.appendChild(el("caption", { "class": "empty" }, "the two runs share no configuration"));
      return;
    }
    var label = compactLabeller(pairs.map(function (p) { return p.head; }));
    var titles = ["configuration", "base dist/stock", "head dist/stock", "change",
      "base dist/bound", "head dist/bound", "change"];
    var tr = el("tr");
    titles.forEach(function (t) { tr.appendChild(el("th", {}, t)); });
    table.appendChild(el("thead")).appendChild(tr);
    var body = el("tbody");
    pairs.forEach(function (p) {
      var row = el("tr", { "data-key": p.head.config_key,
        "data-base-id": String(p.base.dist_config_id),
        "data-head-id": String(p.head.dist_config_id) });
      row.appendChild(el("td", { title: rowLabel(p.head) }, label(p.head)));
      row.appendChild(el("td", { "class": "num" }, fmt(distOverStock(p.base), 3)));
      row.appendChild(el("td", { "class": "num" }, fmt(distOverStock(p.head), 3)));
      row.appendChild(pctCell(p.stock, { "data-col": "stock_change" }));
      row.appendChild(el("td", { "class": "num" }, fmt(p.base.dist_over_bound, 3)));
      row.appendChild(el("td", { "class": "num" }, fmt(p.head.dist_over_bound, 3)));
      row.appendChild(pctCell(p.bound, { "data-col": "bound_change" }));
      body.appendChild(row);
    });
    table.appendChild(body);
  }

  /* ---- link probes ----------------------------------------------------------------------- */

  function mib(bytes) {
    var v = bytes / 1048576;
    return (v >= 1 ? String(Number(v.toPrecision(6))) : v.toPrecision(3)) + " MiB";
  }

  function drawLinks(entry) {
    var host = clear(byId("tp-link-chart"));
    var table = clear(byId("tp-link-table"));
    var info = clear(byId("tp-link-info"));
    if (!entry) {
      // GEMMs between gaps and the per-call latencies move no bytes: `tpbench report` shows them
      host.appendChild(el("div", { "class": "empty" },
        "no transfer of a `tpbench link` run in this database (its GEMMs between gaps and " +
        "latencies are not charted: `tpbench report` shows them)"));
      return;
    }
    var r = entry.run;
    info.textContent = "run " + r.id + " \u00b7 " + (r.commit || "?").slice(0, 12) + " \u00b7 " +
      (r.started_at || "?") + " \u00b7 " + (r.host || "?") + ": " + (r.gpu_name || "?") +
      " \u00d7 " + (r.gpu_count || "?") + " \u00b7 " + (r.command_line || "");
    var points = entry.points || [];
    var kinds = [], byKind = {}, sizes = [];
    points.forEach(function (p) {
      if (!byKind[p.transfer]) {
        byKind[p.transfer] = [];
        kinds.push(p.transfer);
      }
      byKind[p.transfer].push(p);
      if (sizes.indexOf(p.bytes) < 0) sizes.push(p.bytes);
    });
    sizes.sort(function (a, b) { return a - b; });
    var max = 0;
    points.forEach(function (p) { if (isNum(p.busbw_gbps)) max = Math.max(max, p.busbw_gbps); });
    var scale = niceTicks(0, max * 1.05, 5);
    var width = 900, height = 280, left = 60, right = 200, top = 20, plotH = height - top - 40;
    var plotW = width - left - right;
    var lo = Math.log2(sizes[0]), hi = Math.log2(sizes[sizes.length - 1]);
    var x = function (b) {
      return left + (hi > lo ? plotW * (Math.log2(b) - lo) / (hi - lo) : plotW / 2);
    };
    var y = function (v) { return top + plotH - plotH * v / scale.hi; };
    var chart = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "class": "links", "data-run-id": String(r.id) });
    scale.ticks.forEach(function (tv) {
      chart.appendChild(svg("line", { x1: left, x2: left + plotW, y1: y(tv), y2: y(tv),
        "class": "grid" }));
      chart.appendChild(tickText({ x: left - 6, y: y(tv), "text-anchor": "end",
        "dominant-baseline": "middle", "class": "muted" }, tv, scale.digits));
    });
    sizes.forEach(function (b) {
      chart.appendChild(svg("text", { x: x(b), y: height - 20, "text-anchor": "middle" },
        mib(b)));
    });
    chart.appendChild(svg("text", { x: left + plotW / 2, y: height - 4, "text-anchor": "middle",
      "class": "muted" }, "bytes per rank (log scale)"));
    chart.appendChild(svg("text", { x: 4, y: 12, "class": "muted" }, "bus bandwidth, GB/s"));
    var labels = [];
    var legend = el("div", { "class": "legend" });
    kinds.forEach(function (k, i) {
      var colour = PALETTE[i % PALETTE.length];
      var list = byKind[k].filter(function (p) { return isNum(p.busbw_gbps); });
      chart.appendChild(svg("polyline", { points: list.map(function (p) {
        return x(p.bytes) + "," + y(p.busbw_gbps); }).join(" "), fill: "none", stroke: colour,
        "stroke-width": 2, "class": "link-line", "data-transfer": k }));
      list.forEach(function (p) {
        var dot = svg("circle", { cx: x(p.bytes), cy: y(p.busbw_gbps), r: 3.5, fill: colour,
          "class": "link-point", "data-config-id": String(p.config_id), "data-transfer": k,
          "data-value": String(p.busbw_gbps) });
        hover(dot, k + " (" + p.engine + "), " + mib(p.bytes) + " per rank\n" +
          p.median_us.toFixed(1) + " \u00b5s, algbw " + p.algbw_gbps.toFixed(1) +
          " GB/s, busbw " + p.busbw_gbps.toFixed(1) + " GB/s");
        chart.appendChild(dot);
      });
      if (list.length) {
        var last = list[list.length - 1];
        labels.push({ y: y(last.busbw_gbps), text: k + " " + last.busbw_gbps.toFixed(0) + " GB/s",
          colour: colour });
      }
      legend.appendChild(el("span", { style: "--swatch:" + colour }, k + " (" + byKind[k][0].engine +
        ")"));
    });
    endLabels(chart, left + plotW + 8, labels, top, top + plotH);
    host.appendChild(chart);
    host.appendChild(legend);
    var titles = ["transfer", "engine", "size (B)", "count (bf16)", "time (\u00b5s)",
      "algbw (GB/s)", "busbw (GB/s)"];
    var tr = el("tr");
    titles.forEach(function (t) { tr.appendChild(el("th", {}, t)); });
    table.appendChild(el("thead")).appendChild(tr);
    var body = el("tbody");
    points.forEach(function (p) {
      var row = el("tr", { "data-config-id": String(p.config_id) });
      row.appendChild(el("td", {}, p.transfer));
      row.appendChild(el("td", {}, p.engine));
      row.appendChild(el("td", { "class": "num" }, String(p.size)));
      row.appendChild(el("td", { "class": "num" }, String(p.count)));
      row.appendChild(el("td", { "class": "num" }, fmt(p.median_us, 1)));
      row.appendChild(el("td", { "class": "num", "data-col": "algbw",
        "data-value": String(p.algbw_gbps) }, fmt(p.algbw_gbps, 1)));
      row.appendChild(el("td", { "class": "num", "data-col": "busbw",
        "data-value": String(p.busbw_gbps) }, fmt(p.busbw_gbps, 1)));
      body.appendChild(row);
    });
    table.appendChild(body);
  }

  /* ---- wiring ------------------------------------------------------------------------ */

  /* #name=value&... of the location, decoded. */
  function hashParams() {
    var out = {};
    (window.location.hash || "").replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) out[decodeURIComponent(part.slice(0, at))] =
        decodeURIComponent(part.slice(at + 1).replace(/\+/g, " "));
    });
    return out;
  }

  function fillSelect(select, items, label) {
    clear(select);
    items.forEach(function (it, i) { select.appendChild(el("option", { value: String(i) },
      label(it))); });
  }

  /* The index of the item whose id(item) is want, or fallback. */
  function indexWhere(items, id, want, fallback) {
    for (var i = 0; i < items.length; i++) if (String(id(items[i])) === String(want)) return i;
    return fallback;
  }

  function showRun(index) {
    var report = runs[index];
    byId("tp-run-info").textContent = runInfo(report.run);
    drawSummary(report);
    drawCharts(report);
    drawTable(report);
  }

  /* The trace picker, one group per run (newest first), opened on the
   * configuration the generator chose (a fused one of the latest run). */
  function setupTraces(params) {
    var select = clear(byId("tp-trace"));
    var groups = {};
    traces.forEach(function (t, i) {
      if (!groups[t.run_id]) {
        groups[t.run_id] = el("optgroup", { label: "run " + t.run_id });
        select.appendChild(groups[t.run_id]);
      }
      groups[t.run_id].appendChild(el("option", { value: String(i) }, "config " + t.config_id +
        " \u00b7 " + t.label + (t.backend === "dist_gemm" && t.fused === false ? " (not fused)"
          : "")));
    });
    var byConfig = function (t) { return t.config_id; };
    var first = indexWhere(traces, byConfig, params.trace,
      indexWhere(traces, byConfig, data.default_trace, 0));
    select.value = String(first);
    select.addEventListener("change", function () { showTrace(traces[Number(select.value)]); });
    showTrace(traces[first]);
  }

  function setupCompare(params) {
    var base = byId("tp-base"), head = byId("tp-head"), sort = byId("tp-compare-sort");
    if (runs.length < 2) {
      byId("tp-compare-summary").textContent = "one run with a table: nothing to compare";
      return;
    }
    var label = function (r) { return describeRun(r.run) + " \u00b7 " + (r.run.command_line || ""); };
    fillSelect(base, runs, label);
    fillSelect(head, runs, label);
    var pair = defaultPair();
    var byRun = function (r) { return r.run.id; };
    base.value = String(indexWhere(runs, byRun, params.base, pair[0]));
    head.value = String(indexWhere(runs, byRun, params.head, pair[1]));
    var redraw = function () { drawCompare(Number(base.value), Number(head.value), sort.value); };
    [base, head, sort].forEach(function (s) { s.addEventListener("change", redraw); });
    redraw();
  }

  function setupTrends(params) {
    var seriesList = (trends.series || []).filter(function (s) {
      return s.kind === "op" || s.kind === "layer";
    });
    var seriesSelect = byId("tp-series");
    fillSelect(seriesSelect, seriesList, function (s) { return s.label; });
    seriesSelect.addEventListener("change", function () {
      drawTrend(seriesList[Number(seriesSelect.value)]);
    });
    /* Opened on a dist_gemm configuration measured at the most commits. */
    var first = 0;
    seriesList.forEach(function (s, i) {
      var best = seriesList[first];
      if ((s.backend === "dist_gemm") > (best.backend === "dist_gemm") ||
          ((s.backend === "dist_gemm") === (best.backend === "dist_gemm") &&
           s.points.length > best.points.length)) first = i;
    });
    seriesSelect.value = String(first);
    drawTrend(seriesList[first]);
    var mode = byId("tp-trend-mode"), filter = byId("tp-trend-filter");
    clear(mode);
    TREND_MODES.forEach(function (m) { mode.appendChild(el("option", { value: m.id }, m.label)); });
    mode.value = TREND_MODES.some(function (m) { return m.id === params.trends; }) ? params.trends
      : params.filter ? "configs" : "dist_gemm";
    filter.value = params.filter || "";
    var redraw = function () { drawTrendAll(mode.value, filter.value); };
    mode.addEventListener("change", redraw);
    filter.addEventListener("input", redraw);
    redraw();
  }

  function setupLinks(params) {
    var select = byId("tp-link-run");
    fillSelect(select, links, function (l) {
      return "run " + l.run.id + " \u00b7 " + (l.run.started_at || "?") + " \u00b7 " + (l.run.host || "?");
    });
    select.value = String(indexWhere(links, function (l) { return l.run.id; }, params.link,
      links.length - 1));
    select.addEventListener("change", function () { drawLinks(links[Number(select.value)]); });
    drawLinks(links[Number(select.value)]);
  }

  function main() {
    var params = hashParams();
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
    setupCompare(params);
    setupTraces(params);
    setupTrends(params);
    setupLinks(params);
  }

  try {
    main();
  } catch (e) {
    reportError("error: " + (e && e.stack ? e.stack : e));
  } finally {
    finished();
  }
})();
