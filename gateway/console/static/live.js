// Live figures: one EventSource on /admin/events; each event updates the backends table.
(function () {
  var script = document.currentScript;
  var status = document.getElementById("live-status");
  if (!script || !window.EventSource) { return; }
  var ms = function (v) { return v === null ? "–" : v < 100 ? v.toFixed(1) + " ms" : Math.round(v) + " ms"; };
  var pct = function (v) { return v === null ? "–" : (v * 100).toFixed(1) + " %"; };
  var format = { in_flight: String, calls: String, p50_ms: ms, p99_ms: ms, error_rate: pct };
  var source = new EventSource(script.dataset.events);
  source.addEventListener("figures", function (event) {
    var backends = JSON.parse(event.data).backends;
    document.querySelectorAll("#backends tr[data-backend]").forEach(function (row) {
      var figures = backends[row.dataset.backend];
      if (!figures) { return; }
      row.querySelectorAll("[data-field]").forEach(function (cell) {
        var key = cell.dataset.field;
        if (key === "state") {
          cell.textContent = figures.state;
          cell.className = "state state-" + figures.state;
        } else if (key in format) {
          cell.textContent = format[key](figures[key]);
        }
      });
    });
    if (status) { status.classList.add("on"); status.title = "Updated " + new Date().toLocaleTimeString(); }
  });
  source.addEventListener("error", function () { if (status) { status.classList.remove("on"); } });
})();
