// The page's entry: read /config.json, sign in (dev token or Cognito), then route by the address's
// hash (#/missions, #/missions/<id>, #/inbox, #/chat, #/memory, #/analytics, #/notifications) and
// keep the inbox badge current. Everything goes through the public API (api.js).

import { analyticsView } from "./analytics.js";
import { Api } from "./api.js";
import { Session } from "./auth.js";
import { chatView } from "./chat.js";
import { clear, h, notice, uid } from "./dom.js";
import { inboxView } from "./inbox.js";
import { memoryView } from "./memory.js";
import { missionView } from "./mission.js";
import { missionsView } from "./missions.js";
import { settingsView } from "./settings.js";

const POLL_MS = 3000;
const ROUTES = [
  [/^#\/inbox$/, (app, main) => inboxView(app, main)],
  [/^#\/chat$/, (app, main) => chatView(app, main)],
  [/^#\/memory$/, (app, main) => memoryView(app, main)],
  [/^#\/analytics$/, (app, main) => analyticsView(app, main)],
  [/^#\/notifications$/, (app, main) => settingsView(app, main)],
  [/^#\/missions\/([^/]+)(?:\/evidence\/\d+)?$/, (app, main, id) => missionView(app, main, decodeURIComponent(id))],
  [/^(#\/?(missions)?)?$/, (app, main) => missionsView(app, main)],
];

class App {
  constructor(config, session) {
    this.config = config;
    this.session = session;
    this.api = new Api(config, session);
    this.pollMs = POLL_MS;
    this.capabilities = [];
    this.chat = { messages: [], conversationId: null, model: "missions", context: "" };
    this.main = document.getElementById("main");
    this.view = null;
    this.viewKey = null;
  }

  stagesOf(name) {
    return this.capabilities.find((c) => c.name === name)?.stages || [];
  }

  setInboxCount(count) {
    const badge = document.getElementById("inbox-count");
    badge.textContent = String(count);
    badge.hidden = count === 0;
    document.getElementById("inbox-link").setAttribute("aria-label", `Inbox, ${count} waiting`);
    document.title = count ? `(${count}) Missions` : "Missions";
  }

  async pollInbox() {
    try {
      this.setInboxCount((await this.api.get("/inbox")).items.length);
      this.showBudget((await this.api.get("/me")).budget);
    } catch {
      /* the next poll tries again */
    }
  }

  // Today's spend against the user's daily budget (GET /me); hidden when they have none.
  showBudget(budget) {
    const shown = document.getElementById("budget");
    if (!budget || budget.daily_budget_usd === null) {
      shown.hidden = true;
      return;
    }
    const dollars = (usd) => `$${usd.toFixed(usd < 1 ? 4 : 2)}`;
    shown.textContent = budget.reached
      ? `Daily budget spent: ${dollars(budget.spent_usd)} of ${dollars(budget.daily_budget_usd)}`
      : `Today ${dollars(budget.spent_usd)} of ${dollars(budget.daily_budget_usd)}`;
    shown.title = budget.reached
      ? `New missions wait until ${budget.resets_at} (UTC midnight) or an operator raises your budget`
      : `${dollars(budget.remaining_usd)} left today (UTC)`;
    shown.dataset.reached = String(budget.reached);
    shown.hidden = false;
  }

  async route() {
    const hash = window.location.hash || "#/missions";
    if (!hash.startsWith("#/") && this.viewKey) return; // an in-page anchor (the skip link), not a route
    for (const [pattern, render] of ROUTES) {
      const found = hash.match(pattern);
      if (!found) continue;
      const key = `${pattern}:${found[1] || ""}`;
      const evidence = hash.match(/\/evidence\/(\d+)$/);
      if (key === this.viewKey && this.view?.focusEvidence) {
        if (evidence) this.view.focusEvidence(Number(evidence[1]));
        return;
      }
      this.leave();
      this.viewKey = key;
      for (const link of document.querySelectorAll("nav a")) {
        const here = hash.startsWith(link.getAttribute("href")) || (link.getAttribute("href") === "#/missions" && hash === "#/");
        if (here) link.setAttribute("aria-current", "page");
        else link.removeAttribute("aria-current");
      }
      const focused = document.activeElement;
      clear(this.main, notice("Loading…"));
      const done = await render(this, this.main, found[1]);
      if (this.viewKey !== key) {
        (done?.cleanup || done)?.call?.(done);
        return;
      }
      this.view = done;
      // the new view takes focus, unless the user moved it elsewhere while the view loaded (a Tab to
      // the next link): taking it back would send their next key press to the wrong place
      const moved = document.activeElement !== focused && document.activeElement !== document.body
        && !this.main.contains(document.activeElement);
      if (!moved) this.main.focus({ preventScroll: true });
      if (evidence && done?.focusEvidence) done.focusEvidence(Number(evidence[1]));
      return;
    }
    this.leave();
    this.viewKey = null;
    clear(this.main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/missions" }, "Your missions")));
  }

  leave() {
    const view = this.view;
    this.view = null;
    if (typeof view === "function") view();
    else view?.cleanup?.();
  }

  async start() {
    this.capabilities = (await this.api.get("/capabilities")).capabilities;
    document.getElementById("who").textContent = this.session.user || "";
    document.getElementById("signed-in").hidden = false;
    window.addEventListener("hashchange", () => this.route());
    this.pollInbox();
    setInterval(() => this.pollInbox(), POLL_MS);
    await this.route();
  }
}

function devSignIn(session, main) {
  const id = uid("user");
  const input = h("input", { id, name: "user", required: true, autocomplete: "username", pattern: "[A-Za-z0-9_.@\\-]{1,64}" });
  const status = h("div");
  const form = h("form", { className: "card sign-in", "aria-labelledby": "sign-in-title" },
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h("p", {}, "On the dev server a name is enough: the page sends ", h("code", {}, "Authorization: Bearer dev:<name>"), "."),
    h("label", { for: id }, "User name"), input,
    h("button", { type: "submit" }, "Sign in"), status);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      session.signInDev(input.value);
      window.location.reload();
    } catch (error) {
      status.replaceChildren(notice(error.message, "error"));
    }
  });
  clear(main, form);
  input.focus();
}

function cognitoSignIn(session, main) {
  clear(main, h("section", { className: "card sign-in" },
    h("h1", {}, "Sign in"),
    h("p", {}, "You sign in on the service's sign-in page and come back here."),
    h("button", { type: "button", onclick: () => session.signInCognito() }, "Sign in")));
}

async function boot() {
  const main = document.getElementById("main");
  let config;
  try {
    const response = await fetch("/config.json", { headers: { Accept: "application/json" } });
    config = await response.json();
  } catch (error) {
    clear(main, notice(`Cannot read /config.json: ${error.message}`, "error"));
    return;
  }
  const session = new Session(config);
  document.getElementById("sign-out").addEventListener("click", () => {
    session.signOut();
    if (session.isDev) window.location.reload();
  });
  try {
    await session.completeSignIn();
  } catch (error) {
    clear(main, notice(error.message, "error"));
    return;
  }
  if (!session.token) {
    if (session.isDev) devSignIn(session, main);
    else cognitoSignIn(session, main);
    return;
  }
  const app = new App(config, session);
  window.missionsApp = app; // for the curious in the console
  try {
    await app.start();
  } catch (error) {
    if (error.status === 401) {
      session.signOut();
      if (session.isDev) devSignIn(session, main);
      return;
    }
    clear(main, notice(`Cannot start: ${error.message}`, "error"));
  }
}

boot();
