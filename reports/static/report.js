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

  function makeChart(canvas, spec) {
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
    var config = {
      type: "bar",
      data: { labels: spec.labels, datasets: datasets },
      options: {
        indexAxis: horizontal ? "y" : "x",
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "index", intersect: false },
        scales: horizontal ? { x: valueAxis, y: categoryAxis } : { x: categoryAxis, y: valueAxis },
        plugins: {
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
        }
      }
    };
    return new window.Chart(canvas, config);
  }

  function drawCharts() {
    if (typeof window.Chart !== "function") return;
    var specs = DATA.charts || {};
    var canvases = document.querySelectorAll("canvas[data-chart]");
    Array.prototype.forEach.call(canvases, function (c) {
      var spec = specs[c.getAttribute("data-chart")];
      if (spec) charts.push(makeChart(c, spec));
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

  /* ------------------------------------------------ metrics: sort and filter */

  var table = document.getElementById("metrics-table");
  if (table) {
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var filterInput = document.getElementById("metric-filter");
    var scopeSelect = document.getElementById("metric-scope");
    var countEl = document.getElementById("metric-count");
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

  /* ------------------------------------------------------------------ print */

  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details.finding"), function (d) { d.open = true; });
    charts.forEach(function (c) { c.resize(); });
  });

  drawCharts();
  document.documentElement.setAttribute("data-advisor-ready", "1");
})();
