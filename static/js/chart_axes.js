// The metrics charts' axes (metrics_charts.js): tick labels with the digits that tell the ticks
// apart, and room reserved for them from their measured text, so no label is cut at any width.
//
// uPlot draws a left axis's labels right-aligned, a tick and a gap left of the plot, so a label
// is whole when the axis is at least as wide as the label + tick + gap; it asks each axis's
// `size` with the labels it is about to draw and lays the chart out again until the sizes settle.

export const AXIS_FONT_PX = 12;
export const AXIS_FONT = `${AXIS_FONT_PX}px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif`;
const LINE_GAP = 1.5; // uPlot's line height of a two-line label, in font sizes
const TICK_PX = 5;
const GAP_PX = 4;
const SLACK_PX = 3; // the canvas draws at the screen's pixel ratio: its text may be a pixel wider
const MIN_Y_AXIS_PX = 36; // the x axis's first label is centred on the plot's left edge

const measureContext = document.createElement("canvas").getContext("2d");

export function textWidth(text) {
  measureContext.font = AXIS_FONT;
  return Math.max(0, ...String(text ?? "").split("\n").map((line) => measureContext.measureText(line).width));
}

const widest = (values) => Math.max(0, ...(values || []).map(textWidth));

// How many decimals tell ticks `step` apart: 0.0005 → 4, 0.25 → 2, 5 → 0.
export function decimalsFor(step) {
  if (!(step > 0)) return 0;
  for (let decimals = 0; decimals < 10; decimals++) {
    const scaled = step * 10 ** decimals;
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) return decimals;
  }
  return 10;
}

const fixed = new Map();
function numberWith(decimals) {
  if (!fixed.has(decimals)) {
    fixed.set(decimals, new Intl.NumberFormat("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals }));
  }
  return fixed.get(decimals);
}

// A tick's label in the chart's unit, with as many decimals as the step between ticks needs.
export function tickLabel(format, value, step) {
  const text = numberWith(format === "count" ? 0 : decimalsFor(step)).format(value);
  return { count: text, percent: `${text}%`, ms: `${text} ms`, seconds: `${text} s`, usd: `$${text}` }[format] ?? text;
}

// Counts step by whole numbers (no "0.5 runs"); the rest use uPlot's own steps, decimals included.
const COUNT_STEPS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9].map((p) => m * p)).sort((a, b) => a - b);

export function valueAxis(format, { side = 3, scale = "y", grid = true, colours }) {
  return {
    scale,
    side,
    font: AXIS_FONT,
    gap: GAP_PX,
    stroke: colours.text,
    grid: { show: grid, stroke: colours.line, width: 1 },
    ticks: { stroke: colours.line, width: 1, size: TICK_PX },
    ...(format === "count" ? { incrs: COUNT_STEPS } : {}),
    values: (u, ticks, axisIdx, space, step) => ticks.map((v) => (v === null ? "" : tickLabel(format, v, step))),
    // Before the first layout uPlot has no labels yet: room for a short one.
    size: (u, values) => Math.max(MIN_Y_AXIS_PX, Math.ceil(widest(values)) + TICK_PX + GAP_PX + SLACK_PX),
  };
}

// The time axis: "14:00" (with the day under the first hour and each midnight's), "7 Dec", or
// "Dec" (with the year under January and the first month), in the page's time zone.
export function timeAxis(zone, colours) {
  const part = (options) => new Intl.DateTimeFormat("en-GB", { timeZone: zone, ...options });
  const hour = part({ hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const day = part({ day: "numeric", month: "short" });
  const month = part({ month: "short" });
  const year = part({ year: "numeric" });
  const DAY = 86400;
  return {
    font: AXIS_FONT,
    gap: GAP_PX,
    stroke: colours.text,
    grid: { stroke: colours.line, width: 1 },
    ticks: { stroke: colours.line, width: 1, size: TICK_PX },
    space: (u) => Math.max(48, Math.ceil(textWidth("30 Sep")) + 14),
    values: (u, ticks, axisIdx, space, step) => ticks.map((seconds, n) => {
      const at = new Date(seconds * 1000);
      const before = n > 0 ? new Date(ticks[n - 1] * 1000) : null;
      if (step >= 28 * DAY) {
        const newYear = !before || year.format(before) !== year.format(at);
        return newYear ? `${month.format(at)}\n${year.format(at)}` : month.format(at);
      }
      if (step >= DAY) return day.format(at);
      const newDay = !before || day.format(before) !== day.format(at);
      return newDay ? `${hour.format(at)}\n${day.format(at)}` : hour.format(at);
    }),
    size: (u, values) => {
      const lines = Math.max(1, ...(values || []).map((v) => String(v ?? "").split("\n").length));
      return TICK_PX + GAP_PX + Math.ceil((lines - 1) * AXIS_FONT_PX * LINE_GAP + AXIS_FONT_PX * 1.25) + SLACK_PX;
    },
  };
}

// Room right of the plot when no axis is there: half the widest time label, whose centre may sit
// on the plot's right edge. With an axis there, the axis is room enough.
export function rightPadding(u, side, sidesWithAxes) {
  if (sidesWithAxes[1]) return 0;
  return Math.ceil(widest(u.axes[0]._values) / 2) + SLACK_PX;
}
