// A capability's compiled state machine (GET /capabilities/{name}/graph), laid out and drawn as SVG
// here: no layout library. Layers top to bottom by longest path, after breaking the cycles a
// pipeline has on purpose (a critic sends work back to the planner; an answer resumes an earlier
// stage): an edge into a stage that comes earlier in the pipeline, or out of an await state, is
// drawn as a loop back instead of counting for the layers. In the simple view the helper states
// (counters, routers, the bound guards) are folded into the edges between the states people know.

import { s } from "./dom.js";

const SIMPLE_KINDS = new Set(["stage", "await", "parallel", "map", "end", "fail"]);
const NODE_H = 30;
const LAYER_GAP = 64;
const NODE_GAP = 18;
const MARGIN = 24;

/** The graph with only `keep(node)` nodes: an edge for each path through the others. */
export function contract(graph, keep, { quiet = false } = {}) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const out = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) out.get(e.from)?.push(e);
  const edges = [];
  const seen = new Set();
  const visible = graph.nodes.filter(keep);
  for (const node of visible) {
    const stack = out.get(node.id).map((e) => [e, e.label]);
    const walked = new Set();
    while (stack.length) {
      const [edge, label] = stack.pop();
      const target = byId.get(edge.to);
      if (!target || walked.has(edge.to)) continue;
      walked.add(edge.to);
      if (quiet && (target.kind === "guard" || label === "on error")) continue; // bounds and errors: the full view shows them
      if (keep(target)) {
        const key = `${node.id}>${target.id}`;
        if (!seen.has(key)) {
          seen.add(key);
          edges.push({ from: node.id, to: target.id, label: label || "" });
        }
      } else {
        for (const next of out.get(target.id)) stack.push([next, label || next.label]);
      }
    }
  }
  let start = graph.start;
  for (const passed = new Set(); start && !keep(byId.get(start)) && !passed.has(start); passed.add(start)) {
    // the first kept state the start leads to, through any helpers ("otherwise": where a new mission begins)
    const first = graph.edges.filter((e) => e.from === start).sort((a, b) => (b.label === "otherwise") - (a.label === "otherwise"));
    start = first.length ? first[0].to : visible[0]?.id;
  }
  if (quiet) {
    // what only errors and bounds lead to (the finalize-on-failure path) is left to the full view
    const reach = new Set([start]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const e of edges) if (reach.has(e.from) && !reach.has(e.to)) grew = reach.add(e.to);
    }
    return { ...graph, nodes: visible.filter((n) => reach.has(n.id)), edges: edges.filter((e) => reach.has(e.from)), start };
  }
  return { ...graph, nodes: visible, edges, start };
}

/** Layers and positions: { nodes: [{...node, x, y, w, layer}], edges: [{..., back}], width, height }. */
export function layout(graph, stageOrder = []) {
  const order = new Map(stageOrder.map((name, i) => [name, i]));
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const rank = (n) => (n && n.kind === "stage" && order.has(n.stage) && n.id === n.stage ? order.get(n.stage) : null);
  const edges = graph.edges.map((e) => {
    const from = byId.get(e.from);
    const to = byId.get(e.to);
    const ranked = rank(from) !== null && rank(to) !== null && rank(to) <= rank(from);
    const resume = from?.kind === "await" && to?.kind === "stage" && to.id === to.stage;
    return { ...e, back: ranked || resume || e.to === graph.start };
  });
  // longest path over the forward edges; what is left of a cycle is broken where a DFS meets it
  const out = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of edges) if (!e.back && byId.has(e.from) && byId.has(e.to)) out.get(e.from).push(e);
  const state = new Map();
  const topo = [];
  const visit = (id) => {
    state.set(id, 1);
    for (const e of out.get(id)) {
      if (state.get(e.to) === 1) e.back = true;
      else if (!state.has(e.to)) visit(e.to);
    }
    state.set(id, 2);
    topo.push(id);
  };
  if (byId.has(graph.start)) visit(graph.start);
  for (const n of graph.nodes) if (!state.has(n.id)) visit(n.id);
  topo.reverse();
  const layer = new Map(graph.nodes.map((n) => [n.id, 0]));
  for (const id of topo) {
    for (const e of out.get(id)) if (!e.back) layer.set(e.to, Math.max(layer.get(e.to), layer.get(id) + 1));
  }
  const layers = [];
  for (const n of graph.nodes) (layers[layer.get(n.id)] ||= []).push(n);
  // within a layer: by the mean position of what leads to it (one barycentre pass keeps it readable)
  const xIndex = new Map();
  const placed = [];
  let width = 0;
  layers.forEach((row = [], i) => {
    const weight = (n) => {
      const from = edges.filter((e) => e.to === n.id && xIndex.has(e.from)).map((e) => xIndex.get(e.from));
      return from.length ? from.reduce((a, b) => a + b, 0) / from.length : Number.MAX_SAFE_INTEGER;
    };
    row.sort((a, b) => weight(a) - weight(b) || (rank(a) ?? 99) - (rank(b) ?? 99));
    let x = MARGIN;
    row.forEach((n, j) => {
      xIndex.set(n.id, j);
      const w = Math.max(72, n.label.length * 7 + 20);
      placed.push({ ...n, layer: i, x, y: MARGIN + i * (NODE_H + LAYER_GAP), w });
      x += w + NODE_GAP;
    });
    width = Math.max(width, x - NODE_GAP + MARGIN);
  });
  // centre each layer
  for (let i = 0; i < layers.length; i += 1) {
    const row = placed.filter((n) => n.layer === i);
    if (!row.length) continue;
    const span = row[row.length - 1].x + row[row.length - 1].w - row[0].x;
    const shift = (width - span) / 2 - row[0].x;
    for (const n of row) n.x += shift;
  }
  return { nodes: placed, edges, width: Math.max(width, 200), height: MARGIN * 2 + layers.length * (NODE_H + LAYER_GAP) - LAYER_GAP };
}

function currentIds(graph, mission) {
  const ids = new Set();
  if (!mission) return ids;
  const at = mission.running_stage || mission.stage; // the stage running now, else the last that ran
  if (at) {
    const exact = graph.nodes.find((n) => n.id === at);
    const byStage = graph.nodes.find((n) => n.stage === at);
    if (exact || byStage) ids.add((exact || byStage).id);
  }
  // questions of parallel branches wait together in await.branches; one question in its kind's await
  const several = (mission.pending_interrupts || []).length > 1;
  const waitsIn = several ? "await.branches" : mission.pending_interrupt && `await.${mission.pending_interrupt.kind}`;
  const waiting = waitsIn && graph.nodes.find((n) => n.id === waitsIn);
  if (waiting) ids.add(waiting.id);
  return ids;
}

/** The SVG drawing; the mission's current stage (and the question it waits on) highlighted. */
export function drawGraph(graph, { mission = null, stageOrder = [], simple = true } = {}) {
  const shown = simple ? contract(graph, (n) => SIMPLE_KINDS.has(n.kind), { quiet: true }) : graph;
  const laid = layout(shown, stageOrder);
  const at = new Map(laid.nodes.map((n) => [n.id, n]));
  const current = currentIds(shown, mission);
  const currentStage = laid.nodes.find((n) => current.has(n.id) && n.kind === "stage");
  const label = `State machine of ${graph.capability}: ${laid.nodes.length} states` +
    (currentStage ? `, now at ${currentStage.label}` : "");
  const svg = s("svg", {
    viewBox: `0 0 ${laid.width} ${laid.height}`,
    width: laid.width,
    height: laid.height,
    role: "img",
    "aria-label": label,
    className: "graph",
  });
  svg.append(
    s("defs", {},
      s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", className: "arrowhead" }))),
    s("title", {}, label),
  );
  const lines = s("g", { className: "edges" });
  for (const e of laid.edges) {
    const a = at.get(e.from);
    const b = at.get(e.to);
    if (!a || !b) continue;
    let d;
    if (e.back) {
      const x1 = a.x + a.w;
      const x2 = b.x + b.w;
      const bulge = Math.max(x1, x2) + 30 + Math.abs(a.layer - b.layer) * 6;
      d = `M ${x1} ${a.y + NODE_H / 2} C ${bulge} ${a.y + NODE_H / 2}, ${bulge} ${b.y + NODE_H / 2}, ${x2} ${b.y + NODE_H / 2}`;
    } else {
      const x1 = a.x + a.w / 2;
      const y1 = a.y + NODE_H;
      const x2 = b.x + b.w / 2;
      const y2 = b.y;
      const mid = (y1 + y2) / 2;
      d = `M ${x1} ${y1} C ${x1} ${mid}, ${x2} ${mid}, ${x2} ${y2}`;
    }
    const hot = current.has(e.from);
    const path = s("path", { d, className: `edge${e.back ? " back" : ""}${hot ? " hot" : ""}`, "marker-end": "url(#arrow)" });
    if (e.label) path.append(s("title", {}, `${e.from} → ${e.to}: ${e.label}`));
    lines.append(path);
  }
  svg.append(lines);
  const boxes = s("g", { className: "nodes" });
  for (const n of laid.nodes) {
    const isCurrent = current.has(n.id);
    const done = mission && mission.status === "completed" && n.kind === "end";
    const g = s("g", {
      className: `node kind-${n.kind}${isCurrent ? " current" : ""}${done ? " reached" : ""}`,
      transform: `translate(${n.x} ${n.y})`,
      dataset: { id: n.id, kind: n.kind },
    });
    if (isCurrent) g.setAttribute("aria-current", "step");
    const rounded = n.kind === "stage" ? 6 : n.kind === "end" || n.kind === "fail" ? NODE_H / 2 : 2;
    g.append(
      s("title", {}, `${n.label} (${n.kind})${isCurrent ? ": current" : ""}`),
      s("rect", { width: n.w, height: NODE_H, rx: rounded }),
      s("text", { x: n.w / 2, y: NODE_H / 2 + 4, "text-anchor": "middle" }, n.label),
    );
    boxes.append(g);
  }
  svg.append(boxes);
  return svg;
}
