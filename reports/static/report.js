(function () {
  "use strict";

  var dataEl = document.getElementById("advisor-data");
  var DATA = {};
  try {
    DATA = JSON.parse(dataEl ? dataEl.textContent : "{}");
  } catch (e) {
    DATA = {};
  }
  var I18N = DATA.i18n || {};
  function tr(key, vars) {
    var s = I18N[key] || key;
    if (vars) {
      Object.keys(vars).forEach(function (k) {
        s = s.split("{" + k + "}").join(String(vars[k]));
      });
    }
    return s;
  }

  /* ---------------------------------------------------------------- charts */

  var COLORS = {
    computing: "#2563eb",
    overlapped: "#14b8a6",
    exposed_comm: "#f97316",
    data_wait: "#dc2626",
    free: "#cbd5e1",
    duration: "#2563eb",
    interval: "#94a3b8",
    fp_bp: "#2563eb",
    tail: "#a855f7",
    total: "#6366f1",
    bandwidth: "#0ea5e9"
  };
  var charts = [];

  function fmt(v) {
    if (v === null || v === undefined || isNaN(v)) return "-";
    var a = Math.abs(v);
    if (a >= 1000) return v.toLocaleString(undefined, { maximumFractionDigits: 0 });
    if (a >= 100) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    return v.toPrecision(3);
  }

  function shorten(s, n) {
    s = String(s);
    return s.length > n ? s.slice(0, n - 1) + "\u2026" : s;
  }

  function zoomOptions(id) {
    // drag a range to zoom (ctrl + wheel too); "Reset zoom" undoes it
    var reset = document.querySelector('button.zoom-reset[data-reset="' + id + '"]');
    return {
      zoom: {
        drag: { enabled: true, backgroundColor: "rgba(37, 99, 235, .12)", borderColor: "#2563eb", borderWidth: 1 },
        wheel: { enabled: true, modifierKey: "ctrl" },
        mode: "x",
        onZoomComplete: function () { if (reset) reset.hidden = false; }
      },
      limits: { x: { minRange: 2 } }
    };
  }

  function barChart(canvas, spec, id) {
    var horizontal = !!spec.horizontal;
    var msLabel = spec.unit || (DATA.axis && DATA.axis.ms) || "ms";
    var datasets = spec.series.map(function (s) {
      return {
        label: s.label,
        data: s.data,
        backgroundColor: COLORS[s.key] || "#64748b",
        borderWidth: 0,
        borderRadius: horizontal ? 3 : 0,
        maxBarThickness: horizontal ? 22 : 48
      };
    });
    var valueAxis = {
      stacked: !!spec.stacked,
      beginAtZero: true,
      title: { display: true, text: msLabel },
      grid: { color: "#eef0f3" },
      ticks: { color: "#6b7280" }
    };
    var categoryAxis = {
      stacked: !!spec.stacked,
      title: { display: !!spec.axis, text: spec.axis || "" },
      grid: { display: false },
      ticks: {
        color: "#374151",
        autoSkip: !horizontal,
        maxRotation: 0,
        callback: function (value) {
          return shorten(this.getLabelForValue(value), horizontal ? 38 : 16);
        }
      }
    };
    var plugins = {
      legend: { display: spec.series.length > 1, position: "bottom", labels: { boxWidth: 12, boxHeight: 12, color: "#374151" } },
      tooltip: {
        callbacks: {
          title: function (items) {
            if (!items.length) return "";
            return (spec.axis ? spec.axis + " " : "") + String(items[0].label);
          },
          label: function (item) {
            return " " + item.dataset.label + ": " + fmt(item.raw) + " " + msLabel;
          },
          afterBody: function (items) {
            if (!items.length) return "";
            if (spec.details && spec.details[items[0].dataIndex]) return spec.details[items[0].dataIndex];
            if (spec.stacked && items.length > 1) {
              var sum = 0;
              items.forEach(function (it) { sum += it.raw || 0; });
              return "\u03a3 " + fmt(sum) + " " + msLabel;
            }
            return "";
          }
        }
      }
    };
    if (spec.zoom) plugins.zoom = zoomOptions(id);
    return new window.Chart(canvas, {
      type: "bar",
      data: { labels: spec.labels, datasets: datasets },
      options: {
        indexAxis: horizontal ? "y" : "x",
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "index", intersect: false },
        scales: horizontal ? { x: valueAxis, y: categoryAxis } : { x: categoryAxis, y: valueAxis },
        plugins: plugins
      }
    });
  }

  function lineChart(canvas, spec, id) {
    var msLabel = (DATA.axis && DATA.axis.ms) || "ms";
    var byKey = {};
    spec.series.forEach(function (s) { byKey[s.key] = s; });
    var datasets = [];
    var main = byKey.duration;
    datasets.push({
      label: main.label, data: main.data, borderColor: "#2563eb", backgroundColor: "#2563eb",
      borderWidth: 2, pointRadius: spec.labels.length > 80 ? 0 : 2, tension: 0.15, order: 1
    });
    if (byKey.max && byKey.min) {
      datasets.push({
        label: byKey.max.label, data: byKey.max.data, borderColor: "rgba(249, 115, 22, .7)",
        backgroundColor: "rgba(249, 115, 22, .10)", borderWidth: 1, borderDash: [4, 3], pointRadius: 0,
        fill: "+1", order: 2
      });
      datasets.push({
        label: byKey.min.label, data: byKey.min.data, borderColor: "rgba(20, 184, 166, .8)",
        borderWidth: 1, borderDash: [4, 3], pointRadius: 0, fill: false, order: 3
      });
    }
    if (spec.outliers && spec.outliers.length) {
      var marks = main.data.map(function () { return null; });
      spec.outliers.forEach(function (i) { marks[i] = main.data[i]; });
      datasets.push({
        label: spec.outlier_label, data: marks, showLine: false, pointStyle: "triangle",
        pointRadius: 8, pointHoverRadius: 10, borderColor: "#b91c1c", backgroundColor: "#dc2626", order: 0
      });
    }
    var plugins = {
      legend: { display: datasets.length > 1, position: "bottom", labels: { boxWidth: 12, boxHeight: 12, color: "#374151" } },
      tooltip: {
        filter: function (item) { return item.raw !== null && item.raw !== undefined; },
        callbacks: {
          title: function (items) { return items.length ? (spec.axis + " " + items[0].label) : ""; },
          label: function (item) { return " " + item.dataset.label + ": " + fmt(item.raw) + " " + msLabel; }
        }
      }
    };
    if (spec.zoom) plugins.zoom = zoomOptions(id);
    return new window.Chart(canvas, {
      type: "line",
      data: { labels: spec.labels, datasets: datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        spanGaps: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: { title: { display: true, text: spec.axis }, grid: { display: false }, ticks: { color: "#374151", maxRotation: 0, autoSkip: true } },
          y: { beginAtZero: false, title: { display: true, text: msLabel }, grid: { color: "#eef0f3" }, ticks: { color: "#6b7280" } }
        },
        plugins: plugins
      }
    });
  }

  // deviation from the median rank, t in [-1, 1]: blue (less time) -> white -> dark red (more);
  // the stops match .heat-scale in report.css
  var HEAT_LOW = [37, 99, 235], HEAT_MID = [248, 250, 252], HEAT_HIGH = [185, 28, 28];
  function heat(t) {
    t = Math.max(-1, Math.min(1, t || 0));
    var b = t < 0 ? HEAT_LOW : HEAT_HIGH, u = Math.abs(t);
    var c = [0, 1, 2].map(function (k) { return Math.round(HEAT_MID[k] + (b[k] - HEAT_MID[k]) * u); });
    return "rgb(" + c.join(",") + ")";
  }

  function heatmapChart(canvas, spec) {
    var msLabel = (DATA.axis && DATA.axis.ms) || "ms";
    var nx = spec.x.length, ny = spec.y.length;
    // one band per component: size the box before Chart.js measures it
    canvas.parentNode.style.height = (78 + 36 * ny) + "px";
    var data = spec.cells.map(function (c) {
      return { x: spec.x[c[0]], y: spec.y[c[1]], v: c[2], n: c[3], d: c[4], p: c[5] };
    });
    return new window.Chart(canvas, {
      type: "matrix",
      data: {
        datasets: [{
          label: spec.axis,
          data: data,
          backgroundColor: function (ctx) { var r = ctx.raw; return r ? heat(r.n) : "#f3f4f6"; },
          borderColor: "rgba(255, 255, 255, .9)",
          borderWidth: nx > 64 ? 0 : 1,
          width: function (ctx) { var a = ctx.chart.chartArea; return a ? Math.max(1, a.width / nx - (nx > 64 ? 0 : 1)) : 8; },
          height: function (ctx) { var a = ctx.chart.chartArea; return a ? Math.max(1, a.height / ny - 1) : 8; }
        }]
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        plugins: {
          legend: { display: false },
          tooltip: {
            callbacks: {
              title: function (items) { return items.length ? spec.axis + " " + items[0].raw.x : ""; },
              label: function (item) {
                var r = item.raw;
                var d = (r.d >= 0 ? "+" : "") + fmt(r.d);
                var p = (r.p >= 0 ? "+" : "") + fmt(r.p) + "%";
                return " " + r.y + ": " + fmt(r.v) + " " + msLabel + " (" + d + " " + msLabel + ", " + p + " " + (spec.delta_label || "") + ")";
              }
            }
          }
        },
        scales: {
          x: { type: "category", labels: spec.x, offset: true, title: { display: true, text: spec.axis },
               grid: { display: false }, ticks: { color: "#374151", maxRotation: 0, autoSkip: true } },
          y: { type: "category", labels: spec.y, offset: true, reverse: false, grid: { display: false }, ticks: { color: "#374151" } }
        }
      }
    });
  }

  function makeChart(canvas, spec, id) {
    if (spec.kind === "heatmap") return heatmapChart(canvas, spec);
    if (spec.kind === "line") return lineChart(canvas, spec, id);
    return barChart(canvas, spec, id);
  }

  function drawCharts() {
    if (typeof window.Chart !== "function") return;
    var specs = DATA.charts || {};
    var canvases = document.querySelectorAll("canvas[data-chart]");
    Array.prototype.forEach.call(canvases, function (c) {
      var id = c.getAttribute("data-chart");
      var spec = specs[id];
      if (!spec) return;
      try {
        charts.push(makeChart(c, spec, id));
      } catch (e) {
        if (window.console) window.console.error("advisor: chart " + id + ": " + e);
      }
    });
    Array.prototype.forEach.call(document.querySelectorAll("button.zoom-reset"), function (b) {
      b.addEventListener("click", function () {
        var chart = window.Chart.getChart(document.getElementById("chart-" + b.getAttribute("data-reset")));
        if (chart && chart.resetZoom) chart.resetZoom();
        b.hidden = true;
      });
    });
  }

  /* ---------------------------------------------------------- copy buttons */

  function copyText(text, button) {
    function done(ok) {
      button.textContent = ok ? tr("copied") : tr("copy_failed");
      button.classList.toggle("done", ok);
      setTimeout(function () {
        button.textContent = tr("copy");
        button.classList.remove("done");
      }, 1600);
    }
    function fallback() {
      var ta = document.createElement("textarea");
      ta.value = text;
      ta.setAttribute("readonly", "");
      ta.className = "sr-only";
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(ta);
      done(ok);
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else {
      fallback();
    }
  }

  Array.prototype.forEach.call(document.querySelectorAll("button.copy"), function (b) {
    b.addEventListener("click", function (ev) {
      ev.preventDefault();
      var code = b.parentNode.querySelector("pre code");
      if (code) copyText(code.textContent, b);
    });
  });

  /* ------------------------------------- tables (metrics, operators): sort and filter */

  function sortableTable(tableId, filterId, scopeId, countId) {
    var table = document.getElementById(tableId);
    if (!table) return;
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var filterInput = document.getElementById(filterId);
    var scopeSelect = scopeId ? document.getElementById(scopeId) : null;
    var countEl = document.getElementById(countId);
    var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });

    var applyFilter = function () {
      var q = (filterInput.value || "").trim().toLowerCase();
      var scope = scopeSelect ? scopeSelect.value : "";
      var shown = 0;
      rows.forEach(function (r, i) {
        var ok = (!q || texts[i].indexOf(q) !== -1) && (!scope || r.getAttribute("data-scope") === scope);
        r.classList.toggle("hidden", !ok);
        if (ok) shown++;
      });
      if (countEl) countEl.textContent = tr("showing", { shown: shown, total: rows.length });
    };
    filterInput.addEventListener("input", applyFilter);
    if (scopeSelect) scopeSelect.addEventListener("change", applyFilter);

    var cellKey = function (row, col, type) {
      var cell = row.cells[col];
      if (type === "num") {
        var s = cell.getAttribute("data-sort");
        return s === null || s === "" ? null : parseFloat(s);
      }
      return cell.textContent.trim().toLowerCase();
    };

    Array.prototype.forEach.call(table.querySelectorAll("button.sort"), function (btn) {
      btn.addEventListener("click", function () {
        var th = btn.parentNode;
        var col = parseInt(btn.getAttribute("data-col"), 10);
        var type = btn.getAttribute("data-type");
        var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir);
        var sign = dir === "ascending" ? 1 : -1;
        var keyed = rows.map(function (r, i) { return { r: r, k: cellKey(r, col, type), i: i }; });
        keyed.sort(function (a, b) {
          // values without a number sort last in both directions
          if (a.k === null && b.k === null) return a.i - b.i;
          if (a.k === null) return 1;
          if (b.k === null) return -1;
          if (a.k < b.k) return -sign;
          if (a.k > b.k) return sign;
          return a.i - b.i;
        });
        var frag = document.createDocumentFragment();
        keyed.forEach(function (x) { frag.appendChild(x.r); });
        tbody.appendChild(frag);
        rows = keyed.map(function (x) { return x.r; });
        texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
      });
    });
  }

  sortableTable("metrics-table", "metric-filter", "metric-scope", "metric-count");
  sortableTable("ops-table", "op-filter", null, "op-count");

  /* ------------------------------------------------------------------ print */

  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details.finding"), function (d) { d.open = true; });
    charts.forEach(function (c) { c.resize(); });
  });

  drawCharts();
  document.documentElement.setAttribute("data-advisor-ready", "1");
})();
