// A mission's history on its page: every checkpoint (the stage runs it records), the state it holds,
// and a fork from it with an edit (time travel): a new goal, JSON merge patches on the context and
// stage outputs, and the stage to run first. The fork is a new mission; the page goes to it.

import { clear, h, notice, uid, when } from "./dom.js";

/** The edit form's fields as the fork's body; throws with a sentence when the JSON is not an object. */
export function forkBody(checkpointId, { goal, patch, resumeFrom }) {
  const body = { checkpoint_id: checkpointId };
  if (goal.trim()) body.goal = goal.trim();
  if (patch.trim()) {
    let parsed;
    try {
      parsed = JSON.parse(patch);
    } catch (error) {
      throw new Error(`The edit is not JSON: ${error.message}`);
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error('The edit must be an object, like {"context": {"max_options": 1}}');
    for (const [key, value] of Object.entries(parsed)) {
      if (!["context", "outputs"].includes(key)) throw new Error(`The edit can patch "context" and "outputs", not "${key}"`);
      body[key] = value;
    }
  }
  if (resumeFrom) body.resume_from = resumeFrom;
  return body;
}

function forkForm(app, mission, checkpoint, stages) {
  const ids = { goal: uid("fork-goal"), patch: uid("fork-patch"), stage: uid("fork-stage") };
  const goal = h("input", { id: ids.goal, type: "text", value: mission.goal, maxlength: 10000 });
  const patch = h("textarea", { id: ids.patch, rows: 4, placeholder: '{"outputs": {"stage": {"field": "value"}}}' });
  const stage = h("select", { id: ids.stage },
    h("option", { value: "" }, "the stage after this checkpoint"),
    stages.map((name) => h("option", { value: name }, name)));
  const status = h("div", { "aria-live": "polite" });
  const submit = async (event) => {
    event.preventDefault();
    let body;
    try {
      body = forkBody(checkpoint.checkpoint_id, {
        goal: goal.value === mission.goal ? "" : goal.value,
        patch: patch.value,
        resumeFrom: stage.value,
      });
    } catch (error) {
      clear(status, notice(error.message, "error"));
      return;
    }
    try {
      const forked = await app.api.call("POST", `/missions/${encodeURIComponent(mission.mission_id)}/fork`, body);
      window.location.hash = `#/missions/${encodeURIComponent(forked.mission_id)}`;
    } catch (error) {
      clear(status, notice(`Not forked: ${error.message}`, "error"));
    }
  };
  return h("form", { className: "fork-form", onsubmit: submit },
    h("p", {}, h("label", { for: ids.goal }, "Goal"), goal),
    h("p", {}, h("label", { for: ids.patch }, "Edit (JSON merge patch on context and outputs)"), patch),
    h("p", {}, h("label", { for: ids.stage }, "Run first"), stage),
    h("button", { type: "submit" }, "Fork"), status);
}

/** The history card: checkpoints oldest first, each with its state and a fork form on demand. */
export async function historyView(app, mission, stages) {
  const box = h("section", { className: "card history", "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "History"));
  let checkpoints;
  try {
    ({ checkpoints } = await app.api.get(`/missions/${encodeURIComponent(mission.mission_id)}/checkpoints`));
  } catch (error) {
    box.append(notice(`Cannot load the history: ${error.message}`, "error"));
    return box;
  }
  if (!checkpoints.length) {
    box.append(h("p", {}, "No checkpoint yet."));
    return box;
  }
  box.append(h("ol", { className: "checkpoints" }, checkpoints.map((checkpoint) => {
    const more = h("div");
    const runs = checkpoint.stages.map((run) => `${run.stage} (${run.status})`).join(", ") || checkpoint.stage;
    const showState = async () => {
      try {
        const at = await app.api.get(`/missions/${encodeURIComponent(mission.mission_id)}/checkpoints/${encodeURIComponent(checkpoint.checkpoint_id)}`);
        clear(more, h("h3", {}, `State after ${checkpoint.stage}: next ${at.next_stage || "nothing (the end)"}`),
          h("pre", { className: "state", tabindex: 0 }, JSON.stringify(at.state, null, 2)));
      } catch (error) {
        clear(more, notice(`Cannot load the state: ${error.message}`, "error"));
      }
    };
    return h("li", { dataset: { checkpointId: checkpoint.checkpoint_id } },
      h("span", {}, runs), " ", h("time", { datetime: checkpoint.created_at }, when(checkpoint.created_at)), " ",
      h("button", { type: "button", className: "link", onclick: showState, "aria-label": `State after ${checkpoint.stage}` }, "State"), " ",
      h("button", {
        type: "button",
        className: "link",
        "aria-label": `Fork from here, after ${checkpoint.stage}`,
        onclick: () => clear(more, forkForm(app, mission, checkpoint, stages)),
      }, "Fork from here"),
      more);
  })));
  if (mission.forked_from) {
    box.append(h("p", {}, "Forked from ",
      h("a", { href: `#/missions/${encodeURIComponent(mission.forked_from.mission_id)}` }, mission.forked_from.mission_id),
      ` at ${mission.forked_from.checkpoint_id}`, mission.forked_from.edit ? " with an edit" : ""));
  }
  return box;
}
