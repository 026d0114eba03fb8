// Charts drawn here as SVG (no chart library): horizontal bars, each with its value written beside it,
// and the whole chart described in its accessible name, so the numbers are never only a picture.

import { s } from "./dom.js";

const ROW = 26;
const LABEL_W = 150;
const BAR_W = 260;
const VALUE_W = 90;

/** rows: [{label, value (number or null), max, text}] */
export function barChart(title, rows) {
  const height = rows.length * ROW + 8;
  const width = LABEL_W + BAR_W + VALUE_W;
  const summary = `${title}: ${rows.map((r) => `${r.label} ${r.text}`).join("; ")}`;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": summary, className: "chart" });
  svg.append(s("title", {}, summary));
  rows.forEach((row, i) => {
    const y = 4 + i * ROW;
    const fraction = row.value === null || row.value === undefined || !row.max ? 0 : Math.max(0, Math.min(1, row.value / row.max));
    svg.append(
      s("text", { x: LABEL_W - 8, y: y + 16, "text-anchor": "end", className: "chart-label" }, row.label),
      s("rect", { x: LABEL_W, y: y + 3, width: BAR_W, height: ROW - 8, className: "chart-track", rx: 3 }),
      s("rect", {
        x: LABEL_W,
        y: y + 3,
        width: Math.max(fraction * BAR_W, row.value ? 2 : 0),
        height: ROW - 8,
        className: `chart-bar ${row.kind || ""}`,
        rx: 3,
        dataset: { label: row.label, value: row.value ?? "" },
      }),
      s("text", { x: LABEL_W + BAR_W + 8, y: y + 16, className: "chart-value" }, row.text),
    );
  });
  return svg;
}
