// The missions view: the box to start one (its capability and complexity shown first), and a card per
// mission, newest first, filterable by status and capability, kept current by polling.

import { clear, h, notice, uid, when } from "./dom.js";
import { feedbackForm, lifecycleBadge, missionControls, pendingQuestions, progress, questionForm, resultSummary } from "./widgets.js";

const STATUSES = ["queued", "running", "interrupted", "paused", "completed", "failed", "cancelled"];
const LEVELS = { 1: "simple", 2: "coordinated", 3: "complex" };

function missionCard(app, mission, refresh) {
  const stages = app.stagesOf(mission.capability);
  const link = h("a", { href: `#/missions/${encodeURIComponent(mission.mission_id)}` }, mission.goal);
  const card = h("article", { className: "card mission-card", dataset: { missionId: mission.mission_id, status: mission.status } },
    h("header", {},
      h("h3", {}, link),
      h("p", { className: "meta" }, h("span", { className: "capability" }, mission.capability), " · ", lifecycleBadge(mission),
        " · ", h("time", { datetime: mission.created_at }, when(mission.created_at)))),
    progress(mission, stages));
  for (const question of pendingQuestions(mission)) card.append(questionForm(app.api, mission.mission_id, question, refresh));
  if (mission.queue) card.append(h("p", { className: "queue" }, `Queued (#${mission.queue.position}): ${mission.queue.reason}`));
  const controls = missionControls(app.api, mission, refresh);
  if (controls) card.append(controls);
  if (mission.result) card.append(resultSummary(mission.result));
  if (["completed", "failed"].includes(mission.status)) card.append(feedbackForm(app.api, mission, refresh));
  return card;
}

function startBox(app, onStarted) {
  const goalId = uid("goal");
  const capId = uid("cap");
  const ctxId = uid("ctx");
  const goal = h("textarea", { id: goalId, name: "goal", rows: 2, required: true, maxlength: 10000 });
  const capability = h("select", { id: capId, name: "capability" },
    h("option", { value: "" }, "chosen from the goal"),
    app.capabilities.map((c) => h("option", { value: c.name }, c.name)));
  const context = h("input", { id: ctxId, name: "context", type: "text", placeholder: '{"repo": "."}', autocomplete: "off" });
  const verdict = h("div", { className: "verdict", "aria-live": "polite" });
  const start = h("button", { type: "button", className: "start", disabled: true }, "Start mission");
  let checked = null;
  const readContext = () => {
    const raw = context.value.trim();
    if (!raw) return {};
    const value = JSON.parse(raw);
    if (typeof value !== "object" || Array.isArray(value) || value === null) throw new Error("the context is a JSON object");
    return value;
  };
  const form = h("form", { className: "card start-box", "aria-labelledby": "start-title" },
    h("h2", { id: "start-title" }, "Start a mission"),
    h("label", { for: goalId }, "Goal"), goal,
    h("div", { className: "row" },
      h("span", {}, h("label", { for: capId }, "Capability"), capability),
      h("span", { className: "grow" }, h("label", { for: ctxId }, "Context (JSON, optional)"), context)),
    h("div", { className: "actions" }, h("button", { type: "submit", className: "check" }, "Check"), start),
    verdict);
  const reset = () => {
    checked = null;
    start.disabled = true;
  };
  goal.addEventListener("input", reset);
  capability.addEventListener("change", reset);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!goal.value.trim()) return;
    try {
      readContext();
      const found = await app.api.post("/classify", { goal: goal.value.trim() });
      const chosen = capability.value || found.capability;
      checked = { goal: goal.value.trim(), capability: chosen };
      const level = `${found.level} (${LEVELS[found.level] || "?"})`;
      clear(verdict,
        h("dl", { className: "classification" },
          h("dt", {}, "Capability"), h("dd", { className: "chosen-capability" }, chosen || "none fits this goal"),
          h("dt", {}, "Complexity"), h("dd", { className: "complexity" }, level),
          h("dt", {}, "Plan"), h("dd", {}, `${found.analysis.subgoals} subgoal(s), ${found.analysis.external_services} external service(s), planning ${found.analysis.planning}`)));
      start.disabled = !chosen;
      if (chosen) start.focus();
    } catch (error) {
      clear(verdict, notice(`Cannot check: ${error.message}`, "error"));
    }
  });
  start.addEventListener("click", async () => {
    if (!checked) return;
    try {
      const body = { goal: checked.goal, capability: checked.capability, context: readContext() };
      const created = await app.api.post("/missions", body);
      clear(verdict, notice(`Started ${created.capability} mission ${created.mission_id} (${created.status}).`, "ok"));
      goal.value = "";
      reset();
      onStarted(created);
    } catch (error) {
      clear(verdict, notice(`Not started: ${error.message}`, "error"));
    }
  });
  return form;
}

export async function missionsView(app, main) {
  const statusId = uid("status");
  const capId = uid("capf");
  const statusFilter = h("select", { id: statusId, name: "status" }, h("option", { value: "" }, "any"), STATUSES.map((v) => h("option", { value: v }, v)));
  const capFilter = h("select", { id: capId, name: "capability-filter" }, h("option", { value: "" }, "any"), app.capabilities.map((c) => h("option", { value: c.name }, c.name)));
  const list = h("div", { className: "cards", "aria-live": "polite", "aria-busy": "true" });
  const seen = new Map(); // mission id -> "status/stage" shown
  let stopped = false;

  async function load() {
    const query = new URLSearchParams({ limit: "50" });
    if (statusFilter.value) query.set("status", statusFilter.value);
    if (capFilter.value) query.set("capability", capFilter.value);
    const page = await app.api.get(`/missions?${query}`);
    if (stopped) return;
    const ids = page.missions.map((m) => m.mission_id);
    for (const card of [...list.querySelectorAll(".mission-card")]) {
      if (!ids.includes(card.dataset.missionId)) {
        card.remove();
        seen.delete(card.dataset.missionId);
      }
    }
    let previous = null;
    for (const summary of page.missions) {
      const key = `${summary.status}/${summary.stage}/${summary.pending_interrupt || ""}`;
      let card = list.querySelector(`[data-mission-id="${CSS.escape(summary.mission_id)}"]`);
      const busy = card && card.contains(document.activeElement) && seen.get(summary.mission_id) === key;
      if (!card || (seen.get(summary.mission_id) !== key && !busy)) {
        const mission = await app.api.get(`/missions/${encodeURIComponent(summary.mission_id)}`);
        if (stopped) return;
        const fresh = missionCard(app, mission, () => setTimeout(safeLoad, 300));
        // the card shown now, not the one before the await: a stale one is detached and replaces nothing
        card = list.querySelector(`[data-mission-id="${CSS.escape(summary.mission_id)}"]`);
        if (card) card.replaceWith(fresh);
        card = fresh;
        seen.set(summary.mission_id, key);
      }
      if (previous ? previous.nextElementSibling !== card : list.firstElementChild !== card) {
        if (previous) previous.after(card);
        else list.prepend(card);
      }
      previous = card;
    }
    list.querySelector(".empty")?.remove();
    if (!page.missions.length) list.append(h("p", { className: "empty" }, "No missions yet. Start one above."));
    list.setAttribute("aria-busy", "false");
  }

  // one load at a time: a poll that comes while one runs is folded into one more load after it
  let running = null;
  let again = false;
  const safeLoad = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await load();
        } catch (error) {
          list.replaceChildren(notice(`Cannot load missions: ${error.message}`, "error"));
        }
      } while (again && !stopped);
    })();
    try {
      await running;
    } finally {
      running = null;
    }
  };
  statusFilter.addEventListener("change", () => {
    list.replaceChildren();
    seen.clear();
    safeLoad();
  });
  capFilter.addEventListener("change", () => {
    list.replaceChildren();
    seen.clear();
    safeLoad();
  });
  clear(main,
    h("h1", {}, "Missions"),
    startBox(app, () => safeLoad()),
    h("section", { "aria-labelledby": "list-title" },
      h("h2", { id: "list-title" }, "Your missions"),
      h("div", { className: "filters row" },
        h("span", {}, h("label", { for: statusId }, "Status"), statusFilter),
        h("span", {}, h("label", { for: capId }, "Capability"), capFilter)),
      list));
  await safeLoad();
  const timer = setInterval(() => { if (!stopped) safeLoad(); }, app.pollMs);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
