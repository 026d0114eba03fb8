// A conversation over the chat API (POST /v1/chat/completions, stream: true): what the mission does
// streams in as progress (reasoning_content), then the answer (content). The conversation is the one
// the first reply named (X-Conversation-Id); a mission's question is the reply, and the next message
// answers it.

import { chatTurn } from "./api.js";
import { clear, h, notice, uid } from "./dom.js";

export async function chatView(app, main) {
  const state = app.chat; // kept while the page lives: leaving the view does not end the conversation
  const modelId = uid("model");
  const msgId = uid("msg");
  const ctxId = uid("chatctx");
  const model = h("select", { id: modelId, name: "model" },
    h("option", { value: "missions" }, "missions (chosen by the goal)"),
    app.capabilities.map((c) => h("option", { value: c.name }, c.name)));
  model.value = state.model;
  const context = h("input", { id: ctxId, type: "text", name: "chat-context", placeholder: '{"repo": "."}', autocomplete: "off" });
  context.value = state.context;
  const log = h("ol", { className: "chat-log", "aria-live": "polite", "aria-label": "Conversation" });
  const input = h("textarea", { id: msgId, name: "message", rows: 2, required: true });
  const send = h("button", { type: "submit" }, "Send");
  const about = h("p", { className: "conversation-id" });
  const status = h("div");

  const bubble = (message) => {
    const item = h("li", { className: `msg ${message.role}` }, h("span", { className: "who" }, message.role === "user" ? "You" : "Missions"));
    if (message.progress) item.append(h("details", { className: "progress-log", open: !message.content },
      h("summary", {}, "What it did"), h("pre", {}, message.progress)));
    item.append(h("div", { className: "content" }, message.content || ""));
    return item;
  };
  const paintAll = () => {
    clear(log, state.messages.map(bubble));
    about.textContent = state.conversationId ? `Conversation ${state.conversationId}` : "A new conversation";
  };

  const form = h("form", { className: "card chat-form", "aria-label": "Send a message" },
    h("div", { className: "row" },
      h("span", {}, h("label", { for: modelId }, "Model"), model),
      h("span", { className: "grow" }, h("label", { for: ctxId }, "Context (JSON, optional)"), context)),
    h("label", { for: msgId }, "Message"), input,
    h("div", { className: "actions" }, send,
      h("button", { type: "button", onclick: () => {
        state.messages = [];
        state.conversationId = null;
        paintAll();
      } }, "New conversation")),
    status);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || send.disabled) return;
    let ctx = null;
    try {
      ctx = context.value.trim() ? JSON.parse(context.value) : null;
    } catch {
      status.replaceChildren(notice("The context is not JSON.", "error"));
      return;
    }
    state.model = model.value;
    state.context = context.value;
    status.replaceChildren();
    input.value = "";
    send.disabled = true;
    state.messages.push({ role: "user", content: text });
    const reply = { role: "assistant", content: "", progress: "" };
    state.messages.push(reply);
    log.append(bubble(state.messages.at(-2)));
    const shown = bubble(reply);
    shown.setAttribute("aria-busy", "true");
    log.append(shown);
    const progressPre = h("pre", {});
    const details = h("details", { className: "progress-log", open: true }, h("summary", {}, "What it did"), progressPre);
    shown.querySelector(".content").before(details);
    try {
      const history = state.messages.slice(0, -1).map((m) => ({ role: m.role, content: m.content }));
      const done = await chatTurn(app.api, {
        model: state.model,
        messages: history,
        conversationId: state.conversationId,
        context: ctx,
        onProgress: (piece) => {
          reply.progress += piece;
          progressPre.textContent = reply.progress;
        },
        onContent: (piece) => {
          reply.content += piece;
          shown.querySelector(".content").textContent = reply.content;
        },
      });
      state.conversationId = done.conversationId || state.conversationId;
      details.open = false;
      about.textContent = `Conversation ${state.conversationId}`;
      shown.dataset.status = done.status || "";
      shown.dataset.missionId = done.missionId || "";
    } catch (error) {
      state.messages.pop();
      shown.remove();
      status.replaceChildren(notice(`Not sent: ${error.message}`, "error"));
    } finally {
      shown.setAttribute("aria-busy", "false");
      send.disabled = false;
      input.focus();
    }
  });
  clear(main, h("h1", {}, "Chat"), about, log, form);
  paintAll();
  return () => {};
}
