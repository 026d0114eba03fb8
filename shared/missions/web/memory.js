// The user's long-term memory: what feedback taught the runtime (learned preferences, in the
// namespace GET /me names) and any namespace they keep, each item viewable, editable
// and deletable through the /memory routes.

import { clear, h, notice, uid, when } from "./dom.js";

const SEGMENT = /^[A-Za-z0-9_.-]{1,64}$/;

/** A namespace in a URL: its segments joined by ':' (kept as is: the API splits on it). */
function nsPath(namespace) {
  return namespace.split(":").map(encodeURIComponent).join(":");
}

function itemRow(app, namespace, item, reload) {
  const id = uid("val");
  const value = h("textarea", { id, rows: 2, name: `value-${item.key}`, spellcheck: "false" }, JSON.stringify(item.value, null, 1));
  const status = h("span", { className: "item-status", role: "status" });
  const path = `/memory/${nsPath(namespace)}/${encodeURIComponent(item.key)}`;
  return h("li", { className: "memory-item", dataset: { key: item.key } },
    h("label", { for: id }, h("code", {}, item.key), ` (updated ${when(item.updated_at)})`),
    value,
    h("div", { className: "actions" },
      h("button", { type: "button", className: "save", onclick: async () => {
        let parsed;
        try {
          parsed = JSON.parse(value.value);
        } catch {
          status.textContent = "not JSON: nothing saved";
          return;
        }
        try {
          await app.api.put(path, { value: parsed });
          status.textContent = "saved";
        } catch (error) {
          status.textContent = `not saved: ${error.message}`;
        }
      } }, `Save ${item.key}`),
      h("button", { type: "button", className: "delete", onclick: async () => {
        try {
          await app.api.del(path);
          reload();
        } catch (error) {
          status.textContent = `not deleted: ${error.message}`;
        }
      } }, `Delete ${item.key}`),
      status));
}

function namespaceSection(app, title, namespace, { editable = false } = {}) {
  const section = h("section", { className: "card memory-namespace", dataset: { namespace } });
  const list = h("ul", { className: "memory-items" });
  const load = async () => {
    try {
      const { items } = await app.api.get(`/memory/${nsPath(namespace)}?limit=100`);
      clear(list, items.length ? items.map((i) => itemRow(app, namespace, i, load)) : h("li", { className: "empty" }, "Nothing here yet."));
    } catch (error) {
      clear(list, h("li", {}, notice(`Cannot load ${namespace}: ${error.message}`, "error")));
    }
  };
  const keyId = uid("key");
  const valId = uid("newval");
  const status = h("span", { role: "status" });
  const add = h("form", { className: "memory-add row" },
    h("span", {}, h("label", { for: keyId }, "Key"), h("input", { id: keyId, name: "key", required: true, pattern: "[A-Za-z0-9_.\\-]{1,64}" })),
    h("span", { className: "grow" }, h("label", { for: valId }, "Value (JSON)"), h("input", { id: valId, name: "value", required: true })),
    h("button", { type: "submit" }, "Add"), status);
  add.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = add.querySelector("[name=key]").value.trim();
    let value;
    try {
      value = JSON.parse(add.querySelector("[name=value]").value);
    } catch {
      value = add.querySelector("[name=value]").value;
    }
    try {
      await app.api.put(`/memory/${nsPath(namespace)}/${encodeURIComponent(key)}`, { value });
      add.reset();
      status.textContent = "";
      await load();
    } catch (error) {
      status.textContent = `not added: ${error.message}`;
    }
  });
  section.append(h("h2", {}, title), h("p", { className: "meta" }, "Namespace ", h("code", {}, namespace)), list, editable ? add : null);
  load();
  return section;
}

export async function memoryView(app, main) {
  const { preferences_namespace: preferences } = await app.api.get("/me");
  const nsId = uid("ns");
  const nsInput = h("input", { id: nsId, name: "namespace", value: "notes", required: true });
  const other = h("div");
  const pick = h("form", { className: "row" }, h("span", {}, h("label", { for: nsId }, "Namespace (segments joined by :)"), nsInput), h("button", { type: "submit" }, "Open"));
  pick.addEventListener("submit", (event) => {
    event.preventDefault();
    const ns = nsInput.value.trim();
    if (!ns.split(":").every((seg) => SEGMENT.test(seg))) {
      clear(other, notice("A namespace is 1 to 4 segments of letters, digits, . _ -, joined by :", "error"));
      return;
    }
    clear(other, namespaceSection(app, `Memory: ${ns}`, ns, { editable: true }));
  });
  clear(main,
    h("h1", {}, "Memory"),
    h("p", {}, "What missions remember for you. Preferences are learned from your feedback; later missions read them."),
    namespaceSection(app, "Learned preferences", preferences),
    h("section", { className: "card" }, h("h2", {}, "Your memory"), pick, other));
  clear(other, namespaceSection(app, "Memory: notes", "notes", { editable: true }));
  return () => {};
}
