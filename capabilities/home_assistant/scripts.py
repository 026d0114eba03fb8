"""The analysis scripts the offline model writes for each specialist (a real model writes its own).

Each is standard-library Python run in the sandbox: it reads INPUT (what its specialist gathered
from HA) and sets RESULT = {"insights": [...]}, each insight with its figures, the entities and the
period it rests on, and its evidence (home-assistant.log:<line> for log lines).
"""

from __future__ import annotations

ENERGY = r"""
import statistics
series, tariff, currency = INPUT["series"], INPUT["tariff"], INPUT["currency"]
start, end = INPUT["start"], INPUT["end"]
from datetime import datetime
days = max((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() / 86400, 1 / 24)
insights = []

def used(entity):
    hourly = series[entity].get("hourly", [])  # a meter with no numbers in the period (unavailable) used nothing known
    values = [h["min"] for h in hourly[:1]] + [h["last"] for h in hourly]
    if len(values) < 2:
        return 0.0
    total = 0.0
    for a, b in zip(values, values[1:]):
        total += b - a if b >= a else b  # a meter that restarted counts from zero
    return round(total, 3)

meters = {e: s for e, s in series.items() if s.get("unit") == "kWh" and s.get("hourly")}
whole = INPUT.get("whole_home")
if whole in meters:
    kwh = used(whole)
    insights.append({
        "specialist": "energy", "title": "Energy used",
        "summary": f"The home used {kwh:.1f} kWh from {start[:10]} to {end[:10]}, "
                   f"{kwh / days:.1f} kWh a day, about {kwh * tariff:.2f} {currency} at {tariff} {currency}/kWh.",
        "figures": {"kwh_period": kwh, "kwh_per_day": round(kwh / days, 2), "cost_period": round(kwh * tariff, 2)},
        "entities": [whole], "period_start": start, "period_end": end, "evidence": [],
    })
    parts = []
    for entity, meter in meters.items():
        if entity == whole:
            continue
        share = used(entity)
        gap = meter.get("unavailable_since")
        note = f" (no data since {gap[:16].replace('T', ' ')}: its sensor is unavailable)" if gap else ""
        parts.append((share, entity, note))
    for share, entity, note in sorted(parts, reverse=True):
        insights.append({
            "specialist": "energy", "title": f"{series[entity].get('name') or entity}",
            "summary": f"{series[entity].get('name') or entity}: {share:.1f} kWh, "
                       f"{100 * share / kwh if kwh else 0:.0f}% of the home's use{note}.",
            "figures": {"kwh_period": share, "share_pct": round(100 * share / kwh, 1) if kwh else 0.0},
            "entities": [entity], "period_start": start, "period_end": end, "evidence": [],
        })
power = INPUT.get("whole_home_power")
if power in series and series[power].get("hourly"):
    means = sorted(h["min"] for h in series[power]["hourly"])
    low = means[: max(1, len(means) // 10)]
    standby = statistics.median(low)
    yearly = standby / 1000 * 8760
    insights.append({
        "specialist": "energy", "title": "Standby load",
        "summary": f"The home never draws less than about {standby:.0f} W (the quietest hours): "
                   f"{yearly:.0f} kWh a year, about {yearly * tariff:.0f} {currency}.",
        "figures": {"standby_w": round(standby, 1), "standby_kwh_year": round(yearly, 1),
                    "standby_cost_year": round(yearly * tariff, 2)},
        "entities": [power], "period_start": start, "period_end": end, "evidence": [],
    })
RESULT = {"insights": insights}
"""

DIAGNOSTIC = r"""
insights = []
lines = INPUT["error_lines"]
for item in INPUT["unavailable"]:
    entity, integration = item["entity_id"], item.get("integration")
    marks = (f".{integration}", f"{integration} integration") if integration else ()
    related = [l for l in lines if any(m in l["text"] for m in marks)]
    since = item.get("since") or "an unknown time"
    if related:
        summary = (f"{item['name']} ({entity}) has been unavailable since {since[:16].replace('T', ' ')}: its "
                   f"integration '{integration}' started failing then; the log says: {related[0]['text'][24:180]}")
        if len(related) > 1:
            summary += f" and {related[-1]['text'][24:160]}"
    else:
        summary = (f"{item['name']} ({entity}) has been unavailable since {since[:16].replace('T', ' ')}; "
                   "the log names no cause.")
    insights.append({
        "specialist": "diagnostic", "title": f"{item['name']} unavailable",
        "summary": summary, "figures": {"error_lines": float(len(related))},
        "entities": [entity], "period_start": item.get("since"), "period_end": INPUT["now"],
        "evidence": [f"home-assistant.log:{l['line']}" for l in related[:5]],
    })
for automation in INPUT["automations"]:
    missing = automation["unavailable_targets"]
    if missing:
        cited = [l for l in lines if any(m in l["text"] for m in missing)]
        insights.append({
            "specialist": "diagnostic", "title": f"{automation['alias']} acts on nothing",
            "summary": f"Automation '{automation['alias']}' fired {automation['fired']} time(s) but its target "
                       f"{', '.join(missing)} is unavailable, so it did nothing.",
            "figures": {"fired": float(automation["fired"]), "warnings": float(len(cited))},
            "entities": [automation["entity_id"], *missing], "period_start": INPUT["start"], "period_end": INPUT["now"],
            "evidence": [f"home-assistant.log:{l['line']}" for l in cited[:3]],
        })
RESULT = {"insights": insights}
"""

BEHAVIORAL = r"""
from datetime import datetime
insights = []
start, end = INPUT["start"], INPUT["end"]
def t(s):
    return datetime.fromisoformat(s)
for entity, s in INPUT["series"].items():
    changes = s.get("changes", [])
    domain = entity.split(".")[0]
    if domain == "light":
        on, hours = None, 0.0
        for c in changes:
            if c["state"] == "on" and on is None:
                on = t(c["at"])
            elif c["state"] != "on" and on is not None:
                hours += (t(c["at"]) - on).total_seconds() / 3600
                on = None
        if on is not None:
            hours += (t(end) - on).total_seconds() / 3600
        insights.append({"specialist": "behavioral", "title": f"{s.get('name') or entity} on",
                         "summary": f"{s.get('name') or entity} was on {hours:.1f} h over the period.",
                         "figures": {"hours_on": round(hours, 2)}, "entities": [entity],
                         "period_start": start, "period_end": end, "evidence": []})
    elif domain == "button":
        presses = len([c for c in changes[1:] if c["state"] not in ("unknown", "unavailable")])
        summary = (f"{s.get('name') or entity} was never pressed over the period." if presses == 0
                   else f"{s.get('name') or entity} was pressed {presses} time(s).")
        insights.append({"specialist": "behavioral", "title": f"{s.get('name') or entity}",
                         "summary": summary, "figures": {"presses": float(presses)}, "entities": [entity],
                         "period_start": start, "period_end": end, "evidence": []})
for automation in INPUT.get("automations", []):
    insights.append({"specialist": "behavioral", "title": f"{automation['alias']} runs",
                     "summary": f"Automation '{automation['alias']}' fired {automation['fired']} time(s).",
                     "figures": {"fired": float(automation["fired"])}, "entities": [automation["entity_id"]],
                     "period_start": start, "period_end": end, "evidence": []})
RESULT = {"insights": insights}
"""

SCRIPTS = {"energy": ENERGY, "diagnostic": DIAGNOSTIC, "behavioral": BEHAVIORAL}
