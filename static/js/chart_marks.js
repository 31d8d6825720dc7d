// How the metrics charts (metrics_charts.js) tell their lines apart without colour: each series
// of a chart has its own dash pattern and its own point marker, drawn on the canvas by uPlot and
// repeated in the legend's key, so two lines on top of each other, or a reader who cannot tell
// orange from red, still see which is which.

// A line's dash pattern (px on, px off); [] is solid. Seven, so with eight markers the pairs stay
// distinct for 56 series (7 and 8 share no factor).
export const DASHES = [[], [8, 4], [2, 3], [10, 3, 2, 3], [16, 5], [10, 3, 2, 3, 2, 3], [4, 6]];
export const MARKERS = ["circle", "square", "triangle", "diamond", "triangle-down", "plus", "cross", "hexagon"];
// The higher percentile of a pair (p95 beside p50), "dashed" as the charts' notes say, with a
// bigger marker: where the two are equal, the dashed line hides in the solid one of the same
// colour, but the two markers, one inside the other, show that both are there.
const PAIRED_DASH = [8, 4];
const MARKER_SIZE = 9; // px across
const PAIRED_MARKER_SIZE = 15;
const MARKER_GAP = 26; // px at least between two markers of one line
const KEY_WIDTH = 34; // px: the legend's key, long enough to show a whole dash pattern

// uPlot draws at the screen's pixel ratio (a property of uPlot itself, not of each chart).
const pixelRatio = () => window.uPlot?.pxRatio ?? window.devicePixelRatio ?? 1;
const f = (n) => Math.round(n * 100) / 100;

// The outline of a marker centred on (x, y), `r` from its centre to its edge, as SVG path data:
// the canvas draws it as a Path2D and the legend's key as an SVG path, so both are the same shape.
export function markerPath(kind, x, y, r) {
  if (kind === "square") {
    const s = r * 0.82;
    return `M${f(x - s)},${f(y - s)}h${f(2 * s)}v${f(2 * s)}h${f(-2 * s)}Z`;
  }
  if (kind === "triangle" || kind === "triangle-down") {
    const d = kind === "triangle" ? 1 : -1;
    return `M${f(x)},${f(y - d * r)}L${f(x + r)},${f(y + d * r * 0.75)}L${f(x - r)},${f(y + d * r * 0.75)}Z`;
  }
  if (kind === "diamond") return `M${f(x)},${f(y - r)}L${f(x + r)},${f(y)}L${f(x)},${f(y + r)}L${f(x - r)},${f(y)}Z`;
  if (kind === "plus") return `M${f(x - r)},${f(y)}H${f(x + r)}M${f(x)},${f(y - r)}V${f(y + r)}`;
  if (kind === "cross") {
    const k = r * 0.78;
    return `M${f(x - k)},${f(y - k)}L${f(x + k)},${f(y + k)}M${f(x - k)},${f(y + k)}L${f(x + k)},${f(y - k)}`;
  }
  if (kind === "hexagon") {
    const corners = [0, 1, 2, 3, 4, 5].map((n) => [x + r * Math.cos((Math.PI / 3) * n), y + r * Math.sin((Math.PI / 3) * n)]);
    return `M${corners.map(([cx, cy]) => `${f(cx)},${f(cy)}`).join("L")}Z`;
  }
  return `M${f(x + r)},${f(y)}A${f(r)},${f(r)} 0 1 0 ${f(x - r)},${f(y)}A${f(r)},${f(r)} 0 1 0 ${f(x + r)},${f(y)}Z`;
}

// Each series' {dash, marker, size}. Where the server pairs percentiles (a `dash` flag on each series,
// one colour per model), the dash says the percentile and the marker the model, as the note reads;
// otherwise the nth series takes the nth dash and the nth marker.
export function seriesMarks(series) {
  if (series.some((s) => "dash" in s)) {
    const colours = [...new Set(series.map((s) => s.colour))];
    return series.map((s) => ({
      dash: s.dash ? PAIRED_DASH : [], marker: MARKERS[colours.indexOf(s.colour) % MARKERS.length],
      size: s.dash ? PAIRED_MARKER_SIZE : MARKER_SIZE,
    }));
  }
  return series.map((s, n) => ({ dash: DASHES[n % DASHES.length], marker: MARKERS[n % MARKERS.length], size: MARKER_SIZE }));
}

// uPlot's `points` of a series: hollow markers (an outline over another outline leaves both
// visible), on every point when they fit, else on every kth point, each series starting at its
// own offset so the markers of lines on top of each other alternate. A point with no neighbour
// (no line through it) always has its marker.
export function markerPoints({ marker: kind, size }, order) {
  return {
    show: false,
    size,
    width: 1.5,
    fill: null,
    filter: (u, seriesIdx) => {
      const values = u.data[seriesIdx];
      const n = values.length;
      const across = u.bbox.width / pixelRatio() / Math.max(1, n - 1);
      const every = Math.max(1, Math.ceil(MARKER_GAP / across));
      const shown = [];
      for (let i = 0; i < n; i++) {
        if (values[i] === null || values[i] === undefined) continue;
        const alone = (values[i - 1] ?? null) === null && (values[i + 1] ?? null) === null;
        if (alone || i % every === order % every) shown.push(i);
      }
      return shown;
    },
    paths: (u, seriesIdx, idx0, idx1, shown) => {
      const series = u.series[seriesIdx];
      const r = ((size - 1.5) / 2) * pixelRatio();
      let d = "";
      for (const i of shown || []) {
        const value = u.data[seriesIdx][i];
        if (value === null || value === undefined) continue;
        d += markerPath(kind, u.valToPos(u.data[0][i], "x", true), u.valToPos(value, series.scale, true), r);
      }
      return { stroke: new Path2D(d), fill: null, clip: null, flags: 0 };
    },
  };
}

// The legend's key of a series: a short stretch of its line, in its dash, with its marker on it.
export function legendKey(key, { colour, dash, marker: kind, size }) {
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  const h = PAIRED_MARKER_SIZE;
  svg.setAttribute("width", String(KEY_WIDTH));
  svg.setAttribute("height", String(h));
  svg.setAttribute("viewBox", `0 0 ${KEY_WIDTH} ${h}`);
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const line = document.createElementNS(svgNs, "line");
  Object.entries({ x1: 0, y1: h / 2, x2: KEY_WIDTH, y2: h / 2, stroke: colour, "stroke-width": 2 })
    .forEach(([name, value]) => line.setAttribute(name, String(value)));
  if (dash.length) line.setAttribute("stroke-dasharray", dash.join(" "));
  const shape = document.createElementNS(svgNs, "path");
  shape.setAttribute("d", markerPath(kind, KEY_WIDTH / 2, h / 2, (size - 1.5) / 2));
  shape.setAttribute("fill", "none"); // hollow, as on the chart
  shape.setAttribute("stroke", colour);
  shape.setAttribute("stroke-width", "1.5");
  svg.append(line, shape);
  key.replaceChildren(svg);
  key.classList.add("series-key");
  key.dataset.dash = dash.join(",");
  key.dataset.marker = kind;
  key.dataset.markerSize = String(size);
  // uPlot paints its own square key inline; the SVG replaces it.
  key.style.border = "0";
  key.style.background = "none";
}
