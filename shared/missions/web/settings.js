// Email notices: opt in with an address (it gets a link to confirm), see where it stands, opt out.
// The deployed stack sends the mail (GET/PUT/DELETE /me/notifications).

import { clear, h, notice, uid } from "./dom.js";

const STATUS = {
  off: "Off: you get no email.",
  pending_confirmation: "Waiting for you to confirm the address (see the link we sent).",
  on: "On: you get an email when a mission needs you or finishes.",
};

export async function settingsView(app, main) {
  const emailId = uid("email");
  const email = h("input", { id: emailId, type: "email", name: "email", required: true, autocomplete: "email" });
  const state = h("p", { className: "notification-status", role: "status" });
  const result = h("div");
  const off = h("button", { type: "button", className: "opt-out" }, "Turn email off");
  const show = (settings) => {
    state.textContent = STATUS[settings.status] || settings.status;
    state.dataset.status = settings.status;
    if (settings.email) email.value = settings.email;
    off.hidden = settings.status === "off";
  };
  const form = h("form", { className: "card", "aria-labelledby": "notify-title" },
    h("h2", { id: "notify-title" }, "Email notices"), state,
    h("label", { for: emailId }, "Email address"), email,
    h("div", { className: "actions" }, h("button", { type: "submit" }, "Send me email"), off), result);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      show(await app.api.put("/me/notifications", { email: email.value.trim() }));
      clear(result, notice("Saved. Check your inbox for the confirmation link.", "ok"));
    } catch (error) {
      clear(result, notice(error.status === 422 ? "That is not an email address we can use." : `Not saved: ${error.message}`, "error"));
    }
  });
  off.addEventListener("click", async () => {
    try {
      await app.api.del("/me/notifications");
      email.value = "";
      show({ email: null, status: "off" });
      clear(result, notice("Email notices are off.", "ok"));
    } catch (error) {
      clear(result, notice(`Not changed: ${error.message}`, "error"));
    }
  });
  clear(main, h("h1", {}, "Notifications"),
    h("p", {}, "The inbox badge above shows how many questions wait for you; it updates by itself."), form);
  try {
    show(await app.api.get("/me/notifications"));
  } catch (error) {
    clear(result, notice(`Cannot load your settings: ${error.message}`, "error"));
  }
  return () => {};
}
