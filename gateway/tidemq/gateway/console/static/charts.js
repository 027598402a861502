// The console's charts: polls GET /console/series (one sample of counters, from the same API
// routes the pages read), keeps the last minutes of samples in this tab's session storage so
// moving between pages keeps the history, and draws them with uPlot (vendor/uplot, served
// with the console). A rate is the difference of two samples over the time between them; a
// poll that failed, or a counter that went back (an offset reset, a restarted broker), leaves a
// gap. The x axis always spans the kept window; only series with a value are drawn and named.
(function () {
  "use strict";
  var charts = Array.prototype.slice.call(document.querySelectorAll("[data-chart]"));
  if (!charts.length || typeof uPlot === "undefined") { return; }
  var body = document.body;
  var URL_ = body.dataset.seriesUrl;
  var EVERY_MS = Number(body.dataset.seriesEveryS || 5) * 1000;
  var WINDOW_MS = Number(body.dataset.seriesWindowS || 900) * 1000;
  var KEY = "tidemq.console.series";
  var PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#59a1a0", "#59a14f", "#d4a514",
                 "#b07aa1", "#ef7f95", "#9c755f", "#7f7f9a"];
  var plots = {};
  var history = load();

  function load() {
    try { return JSON.parse(sessionStorage.getItem(KEY)) || []; } catch (e) { return []; }
  }
  function save() {
    try { sessionStorage.setItem(KEY, JSON.stringify(history)); } catch (e) { /* full */ }
  }
  function add(into, name, value) { into[name] = (into[name] || 0) + value; }
  function each(table, fn) {
    Object.keys(table || {}).forEach(function (k) { fn(k, table[k]); });
  }
  // Messages of `field` ("produced" / "consumed") per topic, or per broker group on the page
  // of one topic (data-topic).
  function perTopic(field) {
    return function (s, el) {
      var out = {};
      each(s[field], function (t, byBroker) {
        if (el.dataset.topic && el.dataset.topic !== t) { return; }
        each(byBroker, function (b, v) { add(out, el.dataset.topic ? b : t, v); }); });
      return out;
    };
  }

  // What each chart counts in one sample: {series name: counter}; `rate` turns counters
  // into per-second rates between samples.
  var KINDS = {
    "broker-throughput": { rate: true, unit: "msg/s", pick: function (s) {
      var out = {};
      each(s.produced, function (_, byBroker) {
        each(byBroker, function (b, v) { add(out, b + " in", v); }); });
      each(s.consumed, function (_, byBroker) {
        each(byBroker, function (b, v) { add(out, b + " out", v); }); });
      return out; } },
    "topics-in": { rate: true, unit: "msg/s", pick: perTopic("produced") },
    "topics-out": { rate: true, unit: "msg/s", pick: perTopic("consumed") },
    "group-lag": { rate: false, unit: "messages", pick: function (s, el) {
      var out = {};
      each(s.group_lag, function (g, v) {
        if (!el.dataset.group || el.dataset.group === g) { out[g] = v; } });
      return out; } },
    "replica-lag": { rate: false, unit: "bytes", pick: function (s) {
      var out = {};
      each(s.replica_lag, function (r, v) { out[r] = v.lag_bytes; });
      return out; } }
  };

  function columns(kind, el) {
    var picked = history.map(function (s) { return kind.pick(s, el); });
    var names = {};
    picked.forEach(function (p) { each(p, function (n) { names[n] = true; }); });
    names = Object.keys(names).sort();
    var xs = [], ys = names.map(function () { return []; });
    var built = { names: names, data: [xs].concat(ys) };
    // every sample is an x (a rate's first one is empty): the time axis spans the history
    for (var i = 0; i < history.length; i++) {
      var dt = i ? (history[i].time_ms - history[i - 1].time_ms) / 1000 : 0;
      xs.push(history[i].time_ms / 1000);
      names.forEach(function (n, j) {
        var now = picked[i][n];
        if (!kind.rate) { ys[j].push(now === undefined ? null : now); return; }
        if (!i) { ys[j].push(null); return; }
        var before = picked[i - 1][n];
        var ok = now !== undefined && before !== undefined && dt > 0 && now >= before &&
                 !history[i].gap;
        ys[j].push(ok ? (now - before) / dt : null);
      });
    }
    // only a series with a value is drawn, and so named in the legend (a rate needs two
    // samples: a name seen once has none yet)
    var kept = names.map(function (n, j) { return j; }).filter(function (j) {
      return ys[j].some(function (y) { return y !== null; });
    });
    built.names = kept.map(function (j) { return names[j]; });
    built.data = [xs].concat(kept.map(function (j) { return ys[j]; }));
    return built;
  }

  // The x axis always spans the kept window ending at the latest sample (or now): the first
  // view shows the last WINDOW_MS with what was collected so far, never a span uPlot guessed
  // from one sample (or none).
  function xWindow() {
    var last = history[history.length - 1];
    var end = (last ? last.time_ms : Date.now()) / 1000;
    return [end - WINDOW_MS / 1000, end];
  }

  function draw(el) {
    var kind = KINDS[el.dataset.chart];
    var built = columns(kind, el);
    // what is drawn, for people reading the page's source and for the browser tests
    var points = 0, max = 0, maxBySeries = {};
    built.data.slice(1).forEach(function (ys, j) {
      maxBySeries[built.names[j]] = null;
      ys.forEach(function (y) {
        if (y === null) { return; }
        points++;
        max = Math.max(max, y);
        maxBySeries[built.names[j]] = Math.max(maxBySeries[built.names[j]] || 0, y);
      });
    });
    el.dataset.points = String(points);
    el.dataset.max = String(max);
    el.dataset.maxBySeries = JSON.stringify(maxBySeries);
    el.dataset.series = built.names.join("|");
    var span = xWindow();
    var note = el.querySelector(".chart-note");
    if (note) {
      note.textContent = points ? "" : (built.names.length || history.length < 2
        ? "collecting: a rate needs two polls " + EVERY_MS / 1000 + " s apart"
        : "nothing to draw yet");
    }
    var holder = el.querySelector(".chart-plot");
    var signature = built.names.join("|");
    var plot = plots[el.id];
    var width = Math.max(320, el.clientWidth - 24);
    if (plot && plot.signature === signature) {
      if (plot.uplot.width !== width) { plot.uplot.setSize({ width: width, height: 220 }); }
      plot.uplot.setData(built.data);
      plot.uplot.setScale("x", { min: span[0], max: span[1] });
      return;
    }
    if (plot) { plot.uplot.destroy(); }
    var series = [{}].concat(built.names.map(function (n, j) {
      return { label: n, stroke: colour(n), width: 2, spanGaps: false,
               points: { show: true, size: 4 },
               value: function (u, v) { return v === null ? "–" : fmt(v) + " " + kind.unit; } };
    }));
    var options = {
      width: width, height: 220, series: series,
      scales: { x: { time: true, range: function () { return xWindow(); } },
                y: { range: function (u, lo, hi) {
        return [0, Math.max(1, hi || 0) * 1.1]; } } },
      axes: [{}, { label: kind.unit, size: 60 }],
      hooks: { setScale: [function (u, key) { if (key === "x") { shown(el, u); } }] }
    };
    plots[el.id] = { signature: signature, uplot: new uPlot(options, built.data, holder) };
    plots[el.id].uplot.setScale("x", { min: span[0], max: span[1] });
  }

  // the x span the plot shows and its legend's names, as drawn (for the browser tests)
  function shown(el, u) {
    el.dataset.xMin = String(u.scales.x.min);
    el.dataset.xMax = String(u.scales.x.max);
    el.dataset.legend = u.series.slice(1).map(function (s) { return s.label; }).join("|");
  }

  // a series keeps its colour when others appear or go
  function colour(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) { h = (h * 31 + name.charCodeAt(i)) >>> 0; }
    return PALETTE[h % PALETTE.length];
  }

  function fmt(v) {
    if (Math.abs(v) >= 100 || v === 0) { return String(Math.round(v)); }
    return v.toPrecision(3);
  }

  function status(text) {
    var line = document.getElementById("series-status");
    if (line) { line.textContent = text; }
  }

  function poll() {
    fetch(URL_, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) { throw new Error("GET " + URL_ + " answered " + r.status); }
        return r.json();
      })
      .then(function (sample) {
        var last = history[history.length - 1];
        // a missed poll is a gap, not a rate averaged over it
        if (last && sample.time_ms - last.time_ms > 3 * EVERY_MS) { sample.gap = true; }
        history.push(sample);
        history = history.filter(function (s) { return s.time_ms >= sample.time_ms - WINDOW_MS; });
        save();
        charts.forEach(draw);
        status("updated " + new Date(sample.time_ms).toISOString().replace("T", " ")
               .replace(/\.\d+Z$/, "Z") + " · every " + EVERY_MS / 1000 + " s · last " +
               WINDOW_MS / 60000 + " min kept in this tab" +
               (sample.problems.length ? " · not read: " + sample.problems.join("; ") : ""));
      })
      .catch(function (e) { status("poll failed: " + e.message); })
      .then(function () { setTimeout(poll, EVERY_MS); });
  }

  charts.forEach(draw);
  window.addEventListener("resize", function () { charts.forEach(draw); });
  poll();
})();
