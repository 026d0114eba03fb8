// How each capability's missions are doing for this user (GET /metrics/missions): completion and
// error rates, average rating, time to complete by complexity, cost, drawn as bar charts.

import { barChart } from "./charts.js";
import { clear, h, money, notice, percent, uid } from "./dom.js";

const LEVELS = { 1: "simple", 2: "coordinated", 3: "complex" };

function capabilitySection(name, m) {
  const times = Object.entries(m.time_to_completion || {});
  const longest = Math.max(1, ...times.map(([, t]) => t.average_seconds || 0));
  const failed = (m.by_status.failed || 0) + (m.by_status.cancelled || 0);
  return h("section", { className: "card analytics-capability", dataset: { capability: name }, "aria-labelledby": `an-${name}` },
    h("h2", { id: `an-${name}` }, name),
    h("p", { className: "meta" }, `${m.count} mission(s) in the last ${m.window.days} days, ${m.finished} finished, ${m.rating_count} rated`),
    h("div", { className: "charts" },
      barChart(`${name}: outcomes`, [
        { label: "completion rate", value: m.completion_rate, max: 1, text: percent(m.completion_rate), kind: "good" },
        { label: "error rate", value: m.error_rate, max: 1, text: percent(m.error_rate), kind: "bad" },
        { label: "feedback rate", value: m.feedback_rate, max: 1, text: percent(m.feedback_rate) },
        { label: "errors (failed)", value: failed, max: Math.max(m.count, 1), text: String(failed), kind: "bad" },
      ]),
      barChart(`${name}: average rating`, [
        { label: "average rating", value: m.average_rating, max: 5, text: m.average_rating === null ? "–" : `${m.average_rating.toFixed(1)} / 5`, kind: "rating" },
      ]),
      barChart(`${name}: time to complete`, times.map(([level, t]) => ({
        label: `${LEVELS[level] || level} (${t.count})`,
        value: t.average_seconds,
        max: longest,
        text: t.average_seconds === null ? "–" : `${t.average_seconds.toFixed(1)} s`,
      }))),
      barChart(`${name}: cost`, [
        { label: "average cost", value: m.average_cost_usd, max: Math.max(m.total_cost_usd, m.average_cost_usd || 0, 1e-9), text: money(m.average_cost_usd) },
        { label: "total cost", value: m.total_cost_usd, max: Math.max(m.total_cost_usd, 1e-9), text: money(m.total_cost_usd) },
      ])));
}

export async function analyticsView(app, main) {
  const daysId = uid("days");
  const days = h("select", { id: daysId, name: "days" }, [7, 30, 90, 365].map((d) => h("option", { value: d }, `${d} days`)));
  days.value = "30";
  const body = h("div", { "aria-live": "polite" });
  const load = async () => {
    const all = await Promise.all(app.capabilities.map(async (c) => {
      try {
        return [c.name, await app.api.get(`/metrics/missions?${new URLSearchParams({ capability: c.name, days: days.value })}`)];
      } catch {
        return [c.name, null];
      }
    }));
    const used = all.filter(([, m]) => m && m.count > 0);
    clear(body,
      used.length ? barChart("Completion rate by capability", used.map(([name, m]) => ({
        label: name, value: m.completion_rate, max: 1, text: percent(m.completion_rate), kind: "good",
      }))) : notice("No missions in this window yet."),
      used.map(([name, m]) => capabilitySection(name, m)));
  };
  days.addEventListener("change", () => load().catch((e) => clear(body, notice(e.message, "error"))));
  clear(main, h("h1", {}, "Analytics"), h("p", { className: "row" }, h("label", { for: daysId }, "Window"), days), body);
  await load().catch((e) => clear(body, notice(e.message, "error")));
  return () => {};
}
