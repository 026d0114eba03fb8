// A mission's page: its live timeline (the SSE stream, resumed with Last-Event-ID), its state
// machine with the current stage highlighted, the question waiting (answerable here), the result
// with each citation linked to its evidence, its artifacts and their versions, counters and cost.

import { followMission } from "./api.js";
import { clear, h, money, notice, uid, when } from "./dom.js";
import { drawGraph } from "./graph.js";
import { historyView } from "./history.js";
import { feedbackForm, lifecycleBadge, pendingQuestions, progress, questionForm } from "./widgets.js";

function describe(event) {
  const p = event.payload || {};
  switch (event.type) {
    case "orchestrator.stage_transition":
      return `${p.from_stage} → ${p.to_stage} (${p.rule})`;
    case "executor.tool_started":
      return `${p.tool} (${p.risk})`;
    case "executor.tool_completed":
      return `${p.tool}: ${p.status}${p.citations ? `, ${p.citations} citation(s)` : ""}`;
    case "interrupt.raised":
      return p.question || p.kind || "";
    case "delegation.started":
      return `${p.capability}: ${p.child} (${p.status})`;
    case "delegation.ended":
      return `${p.capability} ${p.child || ""}: ${p.status}${p.status === "completed" ? "" : ` (${p.reason})`}`;
    case "critic.decision":
      return `${p.decision}: ${p.reason || ""}`;
    case "orchestrator.completed":
    case "orchestrator.failed":
      return p.terminal_reason || p.reason || "";
    default: {
      const text = JSON.stringify(p);
      return text === "{}" ? "" : text.length > 140 ? `${text.slice(0, 140)}…` : text;
    }
  }
}

function evidenceKey(entry) {
  return `${entry.file}:${entry.line}`;
}

/** The index of the evidence entry a citation ("file:line" or "file:a-b") points at, or -1. */
export function evidenceFor(citation, evidence) {
  const [file, lines] = [citation.slice(0, citation.lastIndexOf(":")), citation.slice(citation.lastIndexOf(":") + 1)];
  const start = Number(String(lines).split("-")[0]);
  let found = evidence.findIndex((e) => evidenceKey(e) === citation);
  if (found < 0) found = evidence.findIndex((e) => e.file === file && e.line <= start && start <= (e.end_line || e.line));
  return found;
}

function resultView(mission) {
  const result = mission.result;
  if (!result) return null;
  const base = `#/missions/${encodeURIComponent(mission.mission_id)}/evidence/`;
  const evidence = Array.isArray(result.evidence) ? result.evidence : [];
  const cite = (c) => {
    const at = evidenceFor(c, evidence);
    return at < 0 ? h("span", { className: "citation" }, c) : h("a", { className: "citation", href: `${base}${at}` }, c);
  };
  const findings = result.output?.findings || [];
  return h("section", { className: "card result", "aria-labelledby": "result-title" },
    h("h2", { id: "result-title" }, "Result"),
    result.terminal_reason && result.terminal_reason !== "completed" ? h("p", {}, `Ended: ${result.terminal_reason}`) : null,
    h("pre", { className: "answer" }, typeof result.answer === "string" ? result.answer : JSON.stringify(result.answer ?? result.output, null, 2)),
    findings.length ? h("ul", { className: "findings" }, findings.map((f) => h("li", {}, f.claim, " ", (f.citations || []).map((c) => [cite(c), " "])))) : null,
    (result.citations || []).length ? h("p", { className: "citations" }, "Citations: ", result.citations.map((c) => [cite(c), " "])) : null,
    evidence.length ? h("div", {},
      h("h3", {}, "Evidence"),
      h("ol", { className: "evidence" }, evidence.map((e, i) => h("li", { id: `evidence-${i}`, tabindex: -1 },
        h("code", {}, e.end_line ? `${e.file}:${e.line}-${e.end_line}` : evidenceKey(e)),
        e.text || e.snippet ? h("pre", {}, e.text || e.snippet) : null)))) : null);
}

const missionLink = (id) => h("a", { href: `#/missions/${encodeURIComponent(id)}` }, id);

/** Where a sub-mission came from, and the sub-missions this one started (ctx.delegate). */
function linksView(mission) {
  const children = mission.children || [];
  if (!mission.parent && !children.length) return null;
  return h("p", { className: "links" },
    mission.parent ? ["Sub-mission of ", missionLink(mission.parent.mission_id), children.length ? " · " : ""] : null,
    children.length ? ["Sub-missions: ", children.map((id, i) => [i ? ", " : "", missionLink(id)])] : null);
}

function countersView(mission) {
  const c = mission.counters || {};
  const rows = Object.entries(c).filter(([k]) => k !== "cost_usd");
  return h("section", { className: "card counters", "aria-labelledby": "counters-title" },
    h("h2", { id: "counters-title" }, "Counters and cost"),
    h("dl", {}, rows.map(([k, v]) => [h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, String(v))]),
      h("dt", {}, "cost"), h("dd", { className: "cost" }, money(mission.cost_usd))));
}

async function artifactsView(app, missionId) {
  const box = h("section", { className: "card artifacts", "aria-labelledby": "artifacts-title" }, h("h2", { id: "artifacts-title" }, "Artifacts"));
  const shown = h("div", { className: "artifact-content", "aria-live": "polite" });
  try {
    const { artifacts } = await app.api.get(`/missions/${encodeURIComponent(missionId)}/artifacts`);
    if (!artifacts.length) {
      box.append(h("p", {}, "No documents yet."));
      return box;
    }
    const byPath = new Map();
    for (const a of artifacts) (byPath.get(a.path) || byPath.set(a.path, []).get(a.path)).push(a);
    box.append(h("ul", {}, [...byPath.entries()].map(([path, versions]) => h("li", {},
      h("code", {}, path), " ",
      versions.sort((a, b) => a.version - b.version).map((a) => h("button", {
        type: "button",
        className: "version",
        onclick: async () => {
          const doc = await app.api.get(`/missions/${encodeURIComponent(missionId)}/artifact?${new URLSearchParams({ path: a.path, version: String(a.version) })}`);
          clear(shown, h("h3", {}, `${doc.path} v${doc.version} (${doc.stage}, ${when(doc.created_at)})`),
            h("pre", {}, typeof doc.content === "string" ? doc.content : JSON.stringify(doc.content, null, 2)));
        },
      }, `v${a.version}`))))), shown);
  } catch (error) {
    box.append(notice(`Cannot load artifacts: ${error.message}`, "error"));
  }
  return box;
}

export async function missionView(app, main, missionId) {
  let mission;
  try {
    mission = await app.api.get(`/missions/${encodeURIComponent(missionId)}`);
  } catch (error) {
    clear(main, h("h1", {}, error.status === 404 ? "Mission not found" : "Cannot load the mission"),
      notice(error.status === 404 ? `There is no mission ${missionId} of yours.` : error.message, "error"),
      h("p", {}, h("a", { href: "#/missions" }, "Back to your missions")));
    return () => {};
  }
  let graph = null;
  try {
    graph = await app.api.get(`/capabilities/${encodeURIComponent(mission.capability)}/graph`);
  } catch {
    graph = null;
  }
  const header = h("div");
  const question = h("div");
  const graphBox = h("div", { className: "graph-box", tabindex: 0, role: "region", "aria-label": "State machine drawing (scrolls)" });
  const result = h("div");
  const counters = h("div");
  const feedback = h("div");
  const artifacts = h("div");
  const history = h("div");
  const liveState = h("span", { className: "live-state", role: "status" }, "connecting");
  const timeline = h("ol", { className: "timeline", tabindex: 0, "aria-label": "Events, oldest first (scrolls)" });
  const everyId = uid("every");
  const every = h("input", { type: "checkbox", id: everyId });
  let stopped = false;

  const paint = async () => {
    const focused = main.contains(document.activeElement) ? document.activeElement.id : "";
    clear(header,
      h("h1", {}, mission.goal),
      h("p", { className: "meta" }, h("span", { className: "capability" }, mission.capability), " · ", lifecycleBadge(mission),
        " · started ", when(mission.created_at), mission.completed_at ? [" · ended ", when(mission.completed_at)] : null),
      progress(mission, app.stagesOf(mission.capability)),
      mission.queue ? h("p", {}, `Queued (#${mission.queue.position}): ${mission.queue.reason}`) : null,
      linksView(mission));
    clear(question, pendingQuestions(mission).map((asked) => questionForm(app.api, mission.mission_id, asked, () => later(300))));
    if (graph) {
      clear(graphBox, drawGraph(graph, { mission, stageOrder: app.stagesOf(mission.capability), simple: !every.checked }));
    }
    clear(result, resultView(mission));
    clear(counters, countersView(mission));
    clear(feedback, ["completed", "failed"].includes(mission.status)
      ? h("section", { className: "card", "aria-labelledby": "fb-title" }, h("h2", { id: "fb-title" }, "Your feedback"), feedbackForm(app.api, mission, () => later(0)))
      : null);
    clear(artifacts, await artifactsView(app, mission.mission_id));
    // kept while the user reads a state or edits a fork: the next paint after that shows new checkpoints
    if (!history.querySelector(".fork-form, pre.state")) clear(history, await historyView(app, mission, app.stagesOf(mission.capability)));
    if (focused && !main.contains(document.activeElement)) main.querySelector(`#${CSS.escape(focused)}`)?.focus();
  };
  let timer = null;
  const refresh = async () => {
    if (stopped) return;
    try {
      const fresh = await app.api.get(`/missions/${encodeURIComponent(missionId)}`);
      const changed = JSON.stringify(fresh) !== JSON.stringify(mission);
      mission = fresh;
      const focusedInQuestion = question.contains(document.activeElement) && pendingQuestions(mission).length > 0;
      if (changed && !focusedInQuestion) await paint();
    } catch {
      /* the next event or poll tries again */
    }
  };
  const later = (ms) => {
    clearTimeout(timer);
    timer = setTimeout(refresh, ms);
  };
  every.addEventListener("change", () => {
    if (graph) clear(graphBox, drawGraph(graph, { mission, stageOrder: app.stagesOf(mission.capability), simple: !every.checked }));
  });

  clear(main,
    header,
    question,
    h("div", { className: "columns" },
      h("section", { className: "card", "aria-labelledby": "timeline-title" },
        h("h2", { id: "timeline-title" }, "Timeline ", liveState),
        timeline),
      h("section", { className: "card", "aria-labelledby": "graph-title" },
        h("h2", { id: "graph-title" }, "State machine"),
        h("p", { className: "check-row" }, every, h("label", { for: everyId }, " Show every state (counters, routers, guards, error paths)")),
        graph ? graphBox : notice("The state machine is not available."))),
    result, counters, artifacts, history, feedback);
  await paint();

  const follow = followMission(app.api, missionId, {
    onEvent: (event, id) => {
      timeline.append(h("li", { className: `event type-${event.type.replace(/[^a-z0-9_-]/gi, "-")}`, dataset: { id: id || "" } },
        h("time", { datetime: event.at }, new Date(event.at).toLocaleTimeString()), " ",
        h("strong", {}, event.type), event.stage ? h("span", { className: "stage" }, ` [${event.stage}]`) : null, " ",
        h("span", {}, describe(event))));
      later(250);
    },
    onEnd: (end) => {
      liveState.textContent = `ended: ${end.status}`;
      later(0);
    },
    onError: (error) => {
      liveState.textContent = `stream closed: ${error.message}`;
    },
    onState: (state) => {
      liveState.textContent = state;
    },
  });
  const poll = setInterval(refresh, app.pollMs * 2); // a question appears without an event of its own
  return {
    cleanup() {
      stopped = true;
      follow.stop();
      clearTimeout(timer);
      clearInterval(poll);
    },
    focusEvidence(index) {
      const target = main.querySelector(`#evidence-${index}`);
      if (target) {
        target.scrollIntoView({ block: "center" });
        target.focus();
        target.classList.add("flash");
      }
    },
  };
}
