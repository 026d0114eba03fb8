// Pieces several views share: a mission's lifecycle and progress, the question waiting for the user
// (answerable where it is shown), the feedback form, and how a result reads.

import { h, notice, uid } from "./dom.js";

export function lifecycleBadge(mission) {
  const state = mission.lifecycle || mission.status;
  return h("span", { className: `badge lifecycle-${state}` }, state);
}

/** How far through its pipeline's stages a mission is. */
export function progress(mission, stages) {
  const ended = ["completed", "failed", "cancelled"].includes(mission.status);
  const total = Math.max(stages.length, 1);
  const current = mission.running_stage || mission.stage; // the stage running now, else the last that ran
  const at = ended ? total : Math.max(0, stages.indexOf(current)) + (current ? 1 : 0);
  const text = ended
    ? `${mission.status}`
    : mission.running_stage
      ? `stage ${at} of ${total}: ${current} (running)`
      : current ? `stage ${at} of ${total}: ${current}${mission.status === "paused" ? " (paused)" : ""}` : "not started";
  return h("div", { className: "progress" },
    h("progress", { max: total, value: at, "aria-label": `Progress: ${text}` }),
    h("span", { className: "progress-text" }, text));
}

/** A unified diff as lines marked added / removed. */
export function diffView(diff) {
  const pre = h("pre", { className: "diff", "aria-label": "What will change" });
  for (const line of String(diff).split("\n")) {
    const kind = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "ctx";
    const mark = kind === "add" ? h("ins", {}, line) : kind === "del" ? h("del", {}, line) : h("span", {}, line);
    pre.append(h("span", { className: `line ${kind}` }, mark), "\n");
  }
  return pre;
}

function preview(value) {
  return h("pre", { className: "preview" }, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

/**
 * The question a mission waits on, answerable in place: a confirmation shows what will change and
 * asks approve or reject (with a reason); a choice shows its options as buttons; a clarification (or
 * anything else) takes free text. onAnswered() after the API took the answer.
 */
/** Every question a mission waits on, in the order asked (several when its parallel branches asked). */
export function pendingQuestions(mission) {
  if (mission.pending_interrupts && mission.pending_interrupts.length) return mission.pending_interrupts;
  return mission.pending_interrupt ? [mission.pending_interrupt] : [];
}

export function questionForm(api, missionId, question, onAnswered) {
  const box = h("section", { className: `question kind-${question.kind}`, "aria-label": `Question: ${question.question}` });
  const status = h("div", { className: "question-status" });
  const send = async (body, button) => {
    for (const b of box.querySelectorAll("button, textarea, input")) b.disabled = true;
    status.replaceChildren(notice("Sending your answer…"));
    try {
      const sent = await api.post(`/missions/${encodeURIComponent(missionId)}/interrupts/${encodeURIComponent(question.interrupt_id)}`, body);
      const next = sent && sent.status === "waiting" ? "The mission goes on once its other questions are answered." : "The mission carries on.";
      status.replaceChildren(notice(`Answered${button ? `: ${button}` : ""}. ${next}`, "ok"));
      onAnswered?.();
    } catch (error) {
      for (const b of box.querySelectorAll("button, textarea, input")) b.disabled = false;
      status.replaceChildren(notice(`Not sent: ${error.message}`, "error"));
    }
  };
  box.append(h("p", { className: "question-text" }, h("strong", {}, `${question.kind}: `), question.question));
  const data = question.data || {};
  if (data.diff) box.append(diffView(data.diff));
  if (data.change !== undefined) box.append(h("p", {}, "Change:"), preview(data.change));
  if (data.preview !== undefined) box.append(h("p", {}, "Preview:"), preview(data.preview));
  const options = question.options || [];
  if (question.kind === "confirmation" || question.kind === "agent_review") {
    const reasonId = uid("reason");
    const reason = h("input", { id: reasonId, type: "text", name: "reason", autocomplete: "off" });
    box.append(
      h("div", { className: "actions" },
        h("button", { type: "button", className: "approve", onclick: () => send({ approved: true }, "approved") }, "Approve"),
        h("label", { for: reasonId }, "Reason to reject (optional)"),
        reason,
        h("button", {
          type: "button",
          className: "reject",
          onclick: () => send({ approved: false, ...(reason.value.trim() ? { text: reason.value.trim() } : {}) }, "rejected"),
        }, "Reject")),
    );
    if (options.length && question.kind === "agent_review") {
      box.append(h("div", { className: "actions options", role: "group", "aria-label": "Decisions" },
        options.map((o) => h("button", { type: "button", onclick: () => send({ decision: o }, o) }, o))));
    }
  } else if (options.length) {
    box.append(h("div", { className: "actions options", role: "group", "aria-label": "Options" },
      options.map((o) => h("button", { type: "button", className: "option", onclick: () => send({ decision: o }, o) }, o))));
  }
  if (question.kind === "clarification" || (!options.length && question.kind !== "confirmation" && question.kind !== "agent_review")) {
    const id = uid("answer");
    const text = h("textarea", { id, name: "answer", rows: 2, required: true });
    const form = h("form", { className: "answer-form" },
      h("label", { for: id }, "Your answer"), text, h("button", { type: "submit" }, "Send answer"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (text.value.trim()) send({ text: text.value.trim() }, null);
    });
    box.append(form);
  }
  box.append(status);
  return box;
}

/** Feedback on a mission that ended: completed? quality 1-5, useful? and a comment. */
export function feedbackForm(api, mission, onSent) {
  if (mission.feedback) {
    const f = mission.feedback;
    return h("p", { className: "feedback-given" },
      `Your feedback: ${f.completed ? "completed" : "not completed"}` +
      (f.quality ? `, quality ${f.quality}/5` : "") + (f.useful !== undefined && f.useful !== null ? `, ${f.useful ? "useful" : "not useful"}` : "") +
      (f.text ? ` — “${f.text}”` : ""));
  }
  const name = uid("fb");
  const choice = (legend, field, values) => h("fieldset", { className: "choices" },
    h("legend", {}, legend),
    values.map(([value, label]) => {
      const id = uid("fb");
      return h("span", { className: "choice" },
        h("input", { type: "radio", id, name: `${name}-${field}`, value }),
        h("label", { for: id }, label));
    }));
  const commentId = uid("comment");
  const status = h("div");
  const form = h("form", { className: "feedback", "aria-label": "Feedback" },
    choice("Completed?", "completed", [["true", "Yes"], ["false", "No"]]),
    choice("Quality", "quality", [1, 2, 3, 4, 5].map((n) => [String(n), String(n)])),
    choice("Useful?", "useful", [["true", "Yes"], ["false", "No"]]),
    h("label", { for: commentId }, "Comment (optional)"),
    h("textarea", { id: commentId, name: "comment", rows: 2, maxlength: 5000 }),
    h("button", { type: "submit" }, "Send feedback"),
    status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const picked = (field) => form.querySelector(`input[name="${name}-${field}"]:checked`)?.value;
    if (!picked("completed")) {
      status.replaceChildren(notice("Say whether it completed what you asked.", "error"));
      return;
    }
    const body = { completed: picked("completed") === "true" };
    if (picked("quality")) body.quality = Number(picked("quality"));
    if (picked("useful")) body.useful = picked("useful") === "true";
    const comment = form.querySelector("textarea").value.trim();
    if (comment) body.text = comment;
    try {
      const taken = await api.post(`/missions/${encodeURIComponent(mission.mission_id)}/feedback`, body);
      const learned = taken.preferences_written.length ? ` Learned: ${taken.preferences_written.join(", ")}.` : "";
      form.replaceWith(notice(`Thanks for your feedback.${learned}`, "ok"));
      onSent?.(taken);
    } catch (error) {
      status.replaceChildren(notice(`Not sent: ${error.message}`, "error"));
    }
  });
  return form;
}

/** The first lines of a result's answer. */
export function resultSummary(result) {
  if (!result) return null;
  const answer = result.answer ?? result.output?.answer ?? result.summary;
  const text = typeof answer === "string" ? answer : JSON.stringify(result.output ?? result).slice(0, 400);
  return h("div", { className: "result-summary" }, h("p", {}, text.split("\n").slice(0, 4).join("\n")));
}

const STEERABLE = ["queued", "running", "interrupted", "pausing", "paused"];

/**
 * What the user can do to a mission that has not ended: pause a running one ("Pause for now"), resume a
 * paused one, and send a note its next stage receives ("skip the museums"); the notes sent so far.
 */
export function missionControls(api, mission, onChanged) {
  if (!STEERABLE.includes(mission.status)) return null;
  const path = `/missions/${encodeURIComponent(mission.mission_id)}`;
  const status = h("div", { className: "control-status", "aria-live": "polite" });
  const act = async (button, call, done) => {
    button.disabled = true;
    try {
      await call();
      status.replaceChildren(notice(done, "ok"));
      onChanged();
    } catch (error) {
      status.replaceChildren(notice(error.message, "error"));
      button.disabled = false;
    }
  };
  const buttons = [];
  if (mission.status === "running") {
    const pause = h("button", { type: "button", className: "pause" }, "Pause for now");
    pause.onclick = () => act(pause, () => api.post(`${path}/pause`, {}), "Pausing: its stage in flight ends first.");
    buttons.push(pause);
  }
  if (mission.status === "paused") {
    const resume = h("button", { type: "button", className: "resume" }, "Resume");
    resume.onclick = () => act(resume, () => api.post(`${path}/resume`, {}), "Resumed.");
    buttons.push(resume);
  }
  const id = uid("note");
  const text = h("input", { id, type: "text", name: "note", maxlength: 2000, required: true, autocomplete: "off",
    placeholder: "skip the museums" });
  const send = h("button", { type: "submit" }, "Send note");
  const form = h("form", { className: "note-form row", "aria-label": "Steer this mission" },
    h("label", { for: id }, "Tell the mission"), text, send);
  // the notes sent so far; one sent here is listed once the API took it (a note changes no status to reload on)
  const notes = h("ul", { className: "notes", "aria-label": "Your notes" },
    (mission.notes || []).map((n) => h("li", {}, n.text)));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const said = text.value;
    act(send, async () => {
      await api.post(`${path}/notes`, { text: said });
      notes.append(h("li", {}, said));
      text.value = "";
      send.disabled = false;
    }, "Noted: its next stage receives it.");
  });
  return h("div", { className: "controls" },
    buttons.length ? h("div", { className: "actions" }, buttons) : null,
    form,
    notes,
    status);
}
