// Everything waiting for this user, across missions (GET /inbox), each answerable where it is shown, and the
// missions flow control holds back (the daily budget, or a conversation's last mission), with why.

import { clear, h, notice, when } from "./dom.js";
import { questionForm } from "./widgets.js";

export async function inboxView(app, main) {
  const list = h("div", { className: "cards" });
  const heldList = h("div", { className: "cards held" });
  let shown = "";
  let shownHeld = "";
  let stopped = false;
  const showHeld = (held) => {
    const key = held.map((m) => `${m.mission_id}:${m.reason}`).join(",");
    if (key === shownHeld) return;
    shownHeld = key;
    clear(heldList, held.length ? h("h2", {}, "Held back") : null,
      held.map((mission) => h("article", { className: "card held-item", dataset: { missionId: mission.mission_id, held: mission.held } },
        h("h3", {}, h("a", { href: `#/missions/${encodeURIComponent(mission.mission_id)}` }, mission.goal)),
        h("p", { className: "meta" }, mission.capability, " · ", when(mission.created_at)),
        h("p", { className: "reason" }, mission.reason))));
  };
  const load = async () => {
    const inbox = await app.api.get("/inbox");
    app.setInboxCount(inbox.items.length);
    if (!stopped) showHeld(inbox.held || []);
    const key = inbox.items.map((i) => i.question.interrupt_id).join(",");
    if (stopped || key === shown || list.contains(document.activeElement)) return;
    shown = key;
    clear(list, inbox.items.length ? null : h("p", { className: "empty" }, "Nothing is waiting for you."),
      inbox.items.map((item) => h("article", { className: "card inbox-item", dataset: { missionId: item.mission_id, interruptId: item.question.interrupt_id } },
        h("h2", {}, h("a", { href: `#/missions/${encodeURIComponent(item.mission_id)}` }, item.goal)),
        h("p", { className: "meta" }, item.capability, " · ", when(item.created_at), " · stage ", item.question.stage),
        questionForm(app.api, item.mission_id, item.question, () => setTimeout(() => load().catch(() => {}), 500)))));
  };
  clear(main, h("h1", {}, "Inbox"), h("p", {}, "Questions your missions are waiting on, newest first."), list, heldList);
  try {
    await load();
  } catch (error) {
    list.replaceChildren(notice(`Cannot load the inbox: ${error.message}`, "error"));
  }
  const timer = setInterval(() => load().catch(() => {}), app.pollMs);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
