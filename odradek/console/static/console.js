// The console's charts: every element with data-chart-url becomes a uPlot line chart of the JSON series
// {"time": [unix seconds], name: [values], ...} at that URL, redrawn every 5 seconds.
// data-series="name:label,name:label" says which series to draw and how to label them.
(function () {
  "use strict";
  const COLOURS = ["#2f6fdf", "#d9822b", "#1b7f3b", "#b3261e"];
  const REFRESH_MS = 5000;
  const MIN_SPAN_S = 60;  // a chart's time axis spans at least a minute, so one or two points don't stretch it to years

  function keepMinimumSpan(chart, times) {
    const last = times[times.length - 1];
    if (times.length > 0 && last - times[0] < MIN_SPAN_S) {
      chart.setScale("x", {min: last - MIN_SPAN_S, max: last});
    }
  }

  function startChart(element) {
    const wanted = element.dataset.series.split(",").map(function (pair) {
      const [name, label] = pair.split(":");
      return {name: name, label: label};
    });
    const options = {
      width: Math.max(element.clientWidth - 16, 300),
      height: 220,
      series: [{}].concat(wanted.map(function (series, index) {
        return {label: series.label, stroke: COLOURS[index % COLOURS.length], width: 2};
      })),
      axes: [{}, {size: 70}],
    };
    let chart = null;
    function draw() {
      fetch(element.dataset.chartUrl, {headers: {"Accept": "application/json"}})
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (data) {
          if (!data || !document.body.contains(element)) { return; }
          const columns = [data.time || []].concat(wanted.map(function (series) { return data[series.name] || []; }));
          if (chart === null) {
            chart = new uPlot(options, columns, element);
          } else {
            chart.setData(columns);
          }
          keepMinimumSpan(chart, columns[0]);
          element.dataset.points = String(columns[0].length);
        })
        .catch(function () { /* the next refresh tries again */ });
    }
    draw();
    const timer = setInterval(function () {
      if (!document.body.contains(element)) { clearInterval(timer); return; }
      draw();
    }, REFRESH_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-chart-url]").forEach(startChart);
  });
})();
