// Embeds the report's Bokeh charts (JSON items in #clustersim-charts) into their <div>s.
// document.body.dataset.charts counts the charts embedded; a failure is written into the chart's
// place and logged as a console error.
(function () {
  "use strict";
  var items = JSON.parse(document.getElementById("clustersim-charts").textContent);
  var ids = Object.keys(items);
  var done = 0;
  // Two animation frames after the last chart is built, its canvas has been painted: the time
  // since navigation start is what benchmarks/bench_html.py reports as the time to open.
  function ready() {
    requestAnimationFrame(function () {
      requestAnimationFrame(function () {
        document.body.dataset.readyMs = String(Math.round(performance.now()));
        document.body.dataset.chartsReady = "true";
      });
    });
  }
  document.body.dataset.charts = "0";
  ids.forEach(function (id) {
    Bokeh.embed.embed_item(items[id], id).then(function () {
      done += 1;
      document.body.dataset.charts = String(done);
      if (done === ids.length) { ready(); }
    }).catch(function (err) {
      var el = document.getElementById(id);
      el.className += " chart-error";
      el.textContent = "chart failed: " + err;
      console.error("clustersim: chart " + id + " failed: " + err);
    });
  });
  if (ids.length === 0) { ready(); }
})();
