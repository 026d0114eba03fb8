"""A specialist of the home_assistant team at work: the analysis script the model writes for what was gathered,
run in the sandbox (once more with its error if it fails), or, when nothing was gathered, the tool's reason."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from capabilities.home_assistant.models import AnalysisScript, Architecture, Findings, Insight, Specialist
from missions.core.capability.registry import Ctx
from missions.core.capability.tools import ToolResult


def specialist(ctx: Ctx, name: Specialist, architect: Architecture, data: dict[str, Any], question: str) -> Findings:
    """Write the analysis script for what was gathered, run it in the sandbox (once more with the error
    if it fails), and keep the insights its RESULT holds."""
    sandbox_ms, facts = 0.0, {"question": question, "specialist": name, "data_shape": _shape(data)}
    error = None
    for _ in range(2):
        script = ctx.think(AnalysisScript, **facts, **({"previous_error": error} if error else {}))
        ran = ctx.analyze(script.code, data, tier="standard")
        sandbox_ms += ran.duration_ms
        if ran.status == "ok":
            try:
                said: Any = ran.output
                insights = [Insight.model_validate({**i, "specialist": name}) for i in said["insights"]]
            except (KeyError, TypeError, ValidationError) as exc:
                error = f"RESULT is not {{'insights': [...]}} as asked: {exc}"[:500]
                continue
            chart = None
            if ran.chart_png is not None:
                chart = ctx.save_artifact(f"charts/{name}", {"png_base64": ran.to_event()["chart_png"]}).name
            return Findings(specialist=name, ran=True, insights=insights, sandbox_ms=sandbox_ms, chart=chart)
        error = ran.error
    ctx.report("analysis_failed", f"{name}: {error}")
    return Findings(specialist=name, ran=True, error=error, sandbox_ms=sandbox_ms)


def not_gathered(ctx: Ctx, name: Specialist, tool: str, result: ToolResult) -> Findings:
    """A specialist whose data did not come: the tool's own reason, not a script's failure on missing data."""
    error = f"{tool} gave nothing to analyse ({result.status}): {result.error or 'no reason given'}"[:500]
    ctx.report("analysis_failed", f"{name}: {error}")
    return Findings(specialist=name, ran=True, error=error)


def _shape(data: Any, depth: int = 0) -> Any:
    """What the script's INPUT looks like, for the model writing it (keys and one example, not the data)."""
    if isinstance(data, dict) and depth < 3:
        return {k: _shape(v, depth + 1) for k, v in list(data.items())[:12]}
    if isinstance(data, list):
        return [_shape(data[0], depth + 1)] if data else []
    return type(data).__name__ if depth >= 3 or isinstance(data, dict) else data
