// The console's charts: polls GET /console/series (one sample of counters, from the same API
// routes the pages read), keeps the last minutes of samples in this tab's session storage so
// moving between pages keeps the history, and draws them with uPlot (vendor/uplot, served
// with the console). A rate is the difference of two samples over the time between them; a
// poll that failed, or a counter that went back (an offset reset), leaves a gap.
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
    return { names: names, data: [xs].concat(ys) };
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
      return;
    }
    if (plot) { plot.uplot.destroy(); }
    var series = [{}].concat(built.names.map(function (n, j) {
      return { label: n, stroke: PALETTE[j % PALETTE.length], width: 2, spanGaps: false,
               points: { show: true, size: 4 },
               value: function (u, v) { return v === null ? "–" : fmt(v) + " " + kind.unit; } };
    }));
    var options = {
      width: width, height: 220, series: series,
      scales: { x: { time: true, range: function (u, lo, hi) {
        // the kept window, not one instant stretched over years while history is short
        var end = hi || Date.now() / 1000;
        return [Math.min(lo || end, end - 60), end];
      } }, y: { range: function (u, lo, hi) {
        return [0, Math.max(1, hi || 0) * 1.1]; } } },
      axes: [{}, { label: kind.unit, size: 60 }]
    };
    plots[el.id] = { signature: signature, uplot: new uPlot(options, built.data, holder) };
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
