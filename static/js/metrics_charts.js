// The metrics page's time series (runs/observability/metrics/series.py), drawn with uPlot
// (static/vendor/uplot-1.6.32, loaded before this module as window.uPlot). Each chart shows its
// values at the cursor in its legend, and a click on a legend entry hides or shows that series;
// the same numbers are in a table under each chart, for screen readers and for copying.
// Colours are the theme's CSS variables, read when drawing: a change of colour scheme redraws.
// Each series also has its own dash and marker (chart_marks.js), and the axes reserve room for
// their labels as measured (chart_axes.js).
import { rightPadding, timeAxis, valueAxis } from "./chart_axes.js";
import { legendKey, markerPoints, seriesMarks } from "./chart_marks.js";

const source = document.getElementById("metrics-series");
const uPlot = window.uPlot;
const HEIGHT = 240;
const DARK = window.matchMedia("(prefers-color-scheme: dark)");

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const tiny = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 2 });
const FORMATS = {
  count: (v) => integer.format(v),
  percent: (v) => `${decimal.format(v)}%`,
  ms: (v) => `${integer.format(v)} ms`,
  seconds: (v) => `${decimal.format(v)} s`,
  // Four decimals, or two significant digits for what four decimals would show as $0.0000.
  usd: (v) => `$${v !== 0 && Math.abs(v) < 0.0001 ? tiny.format(v) : v.toFixed(4)}`,
};
const UNIT_WORDS = { hour: "Hour", day: "Day", month: "Month" };

function pointLabel(zone, unit) {
  const options = { timeZone: zone, year: "numeric", month: "short" };
  if (unit !== "month") Object.assign(options, { day: "2-digit", weekday: "short" });
  if (unit === "hour") Object.assign(options, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const format = new Intl.DateTimeFormat("en-GB", options);
  return (seconds) => format.format(new Date(seconds * 1000));
}

function colour(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

function show(value, format) {
  return value === null || value === undefined ? "—" : FORMATS[format](value);
}

function buildTable(chart, wrap, labelOf) {
  const table = document.createElement("table");
  table.id = `table-series-${chart.id}`;
  const caption = document.createElement("caption");
  caption.className = "visually-hidden";
  caption.textContent = `${chart.title}, per ${chart.unit}`;
  table.append(caption);
  const head = table.createTHead().insertRow();
  for (const [text, numeric] of [[UNIT_WORDS[chart.unit], false], ...chart.series.map((s) => [s.label, true])]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = text;
    if (numeric) th.className = "num";
    head.append(th);
  }
  const body = table.createTBody();
  chart.x.forEach((x, index) => {
    const row = body.insertRow();
    row.dataset.x = String(x);
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = labelOf(x);
    row.append(th);
    for (const series of chart.series) {
      const cell = row.insertCell();
      const value = series.values[index];
      cell.className = "num";
      cell.dataset.value = value === null ? "" : String(value);
      cell.textContent = show(value, series.format || chart.format);
    }
  });
  wrap.replaceChildren(table);
}

function options(chart, width, zone) {
  const right = chart.series.find((s) => s.axis === "right");
  const colours = { text: colour("--muted"), line: colour("--line") };
  const axes = [timeAxis(zone, colours), valueAxis(chart.format, { colours })];
  if (right) axes.push(valueAxis(right.format, { side: 1, scale: "right", grid: false, colours }));
  const labelOf = pointLabel(zone, chart.unit);
  const marks = seriesMarks(chart.series);
  return {
    width,
    height: HEIGHT,
    tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), zone),
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      right: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes,
    padding: [null, rightPadding, null, null],
    cursor: { points: { size: 7 } },
    legend: { live: true },
    series: [
      { label: UNIT_WORDS[chart.unit], value: (u, x) => (x === null ? "—" : labelOf(x)) },
      ...chart.series.map((s, n) => ({
        label: s.label,
        stroke: colour(s.colour),
        width: 2,
        dash: marks[n].dash,
        scale: s.axis === "right" ? "right" : "y",
        points: markerPoints(marks[n], n),
        value: (u, v) => show(v, s.format || chart.format),
      })),
    ],
  };
}

// The legend's keys: each series' dash and marker instead of uPlot's plain squares.
function drawKeys(instance, chart) {
  const marks = seriesMarks(chart.series);
  const rows = instance.root.querySelectorAll(".u-legend .u-series");
  chart.series.forEach((s, n) => {
    const marker = rows[n + 1]?.querySelector(".u-marker");
    if (marker) legendKey(marker, { colour: colour(s.colour), ...marks[n] });
  });
}

function draw(figure, chart, zone) {
  const plot = figure.querySelector(".series-plot");
  const labelOf = pointLabel(zone, chart.unit);
  figure.dataset.scheme = DARK.matches ? "dark" : "light"; // the colours it is drawn in
  buildTable(chart, figure.querySelector(".series-table-wrap"), labelOf);
  if (!chart.series.length || !chart.x.length) {
    const none = document.createElement("p");
    none.className = "muted";
    none.textContent = "Nothing to draw in this period.";
    plot.replaceChildren(none);
    figure.dataset.drawn = "empty";
    return null;
  }
  plot.replaceChildren();
  const data = [chart.x, ...chart.series.map((s) => s.values)];
  const instance = new uPlot(options(chart, plot.clientWidth || 300, zone), data, plot);
  instance.root.querySelector("canvas")?.setAttribute("aria-hidden", "true");  // the table says it
  drawKeys(instance, chart);
  plot.uplot = instance; // for the browser tests, which measure the labels it drew
  figure.dataset.drawn = "true";
  return instance;
}

function drawAll() {
  const { charts, zone } = JSON.parse(source.textContent);
  const drawn = [];
  for (const chart of charts) {
    const figure = document.getElementById(`series-${chart.id}`);
    if (figure) drawn.push([figure, draw(figure, chart, zone)]);
  }
  return drawn;
}

if (source && uPlot) {
  let drawn = drawAll();
  // Follow the container's width (a phone turned, a window resized).
  const resized = new ResizeObserver((entries) => {
    for (const entry of entries) {
      const found = drawn.find(([figure]) => figure.contains(entry.target));
      const width = Math.floor(entry.contentRect.width);
      if (found?.[1] && width > 0 && width !== found[1].width) found[1].setSize({ width, height: HEIGHT });
    }
  });
  const observeAll = () => drawn.forEach(([figure]) => resized.observe(figure.querySelector(".series-plot")));
  observeAll();
  // Canvas colours are fixed when drawn: redraw when the colour scheme changes.
  DARK.addEventListener("change", () => {
    resized.disconnect();
    drawn.forEach(([, instance]) => instance?.destroy());
    drawn = drawAll();
    observeAll();
  });
}
