// Charts from JSON embedded in the page (<script type="application/json">), drawn with the
// plotly.js that the app serves itself: no CDN, no inline script.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  if (!window.Plotly) return;
  document.querySelectorAll("[data-chart]").forEach((target) => {
    const data = JSON.parse(document.getElementById(target.dataset.chart).textContent);
    const trace = {
      type: "bar",
      x: data.x,
      y: data.y,
      marker: { color: "#3b6fd4" },
      hovertemplate: "%{x}: %{y} new finding(s)<extra></extra>",
    };
    const layout = {
      margin: { l: 40, r: 10, t: 10, b: 40 },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      font: { family: getComputedStyle(document.body).fontFamily, size: 12, color: "#475467" },
      xaxis: { type: "date", tickformat: "%m-%d", gridcolor: "#eef1f5" },
      // Whole numbers only: a count of findings has no fractions.
      yaxis: { rangemode: "tozero", gridcolor: "#eef1f5", dtick: Math.max(1, Math.ceil(Math.max(...data.y, 1) / 5)) },
      bargap: 0.25,
    };
    window.Plotly.newPlot(target, [trace], layout, { displayModeBar: false, responsive: true })
      .then(() => target.classList.add("chart-ready"));
  });
});
