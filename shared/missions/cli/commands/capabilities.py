"""`missions capabilities`, `classify` and `asl`: what is installed, which capability takes a goal, and
a capability's compiled state machine."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

import typer
from rich.table import Table

from missions.core.capability import registry as registry
from missions.core.pipeline.compiler import compile_json

from .._console import err, fail, out
from .._inputs import capability as load_capability
from .._inputs import llm_settings

if TYPE_CHECKING:
    from missions.core.llm.provider import LLMProvider

app = typer.Typer()


@app.command("capabilities")
def capabilities(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the installed capabilities."""
    found = [c.describe() for c in registry.load_all()]
    if as_json:
        out.print_json(data=found)
        return
    table = Table("capability", "stages", "LLM stages", "tools", "description")
    for c in found:
        table.add_row(
            c["name"], " → ".join(c["stages"]), str(len(c["llm_stages"])), str(len(c["tools"])), c["description"]
        )
    out.print(table)


@app.command("classify")
def classify(
    goal: str = typer.Argument(..., help="The goal to classify."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Which capability would take a goal, and its complexity (1 simple, 2 coordinated, 3 complex)."""
    from missions.adapters.llm.scripted import ScriptedProvider
    from missions.core.capability.classification import classify_complexity, offline_goal_analysis, select_by_keywords

    if not goal.strip():
        fail("the goal is empty")
    settings = llm_settings()
    llm: LLMProvider
    source: Literal["llm", "offline"]
    if settings.get("llm_provider") == "openai":
        from missions.adapters.llm.openai_provider import OpenAIProvider

        key = settings.get("openai_api_key")
        llm = OpenAIProvider(
            api_key=key or "not-needed",
            base_url=settings.get("openai_base_url"),
            default_model=settings.get("openai_default_model", "gpt-4o-mini"),
        )
        source = "llm"
    elif settings.get("llm_provider") == "anthropic":
        from missions.adapters.llm.anthropic_provider import AnthropicProvider

        llm = AnthropicProvider(
            api_key=settings.get("anthropic_api_key") or "not-needed",
            base_url=settings.get("anthropic_base_url"),
            default_model=settings.get("anthropic_default_model", "claude-haiku-4-5"),
        )
        source = "llm"
    else:
        llm, source = ScriptedProvider(offline_goal_analysis), "offline"
    result = classify_complexity(goal, llm, source=source)
    capability = select_by_keywords(goal, [(c.name, [*c.keywords, *c.triggers.keywords]) for c in registry.load_all()])
    found = {"capability": capability, **result.model_dump(mode="json")}
    if as_json:
        out.print_json(data=found)
        return
    names = {1: "simple", 2: "coordinated", 3: "complex"}
    out.print(f"level {result.level} ({names[result.level]}), capability: {capability or 'none matched'}")
    out.print(f"[dim]{result.analysis.model_dump()} ({result.source})[/]")


@app.command("asl")
def asl(
    capability: str = typer.Argument(..., help="Capability name."),
    output: str | None = typer.Option(None, "--out", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Print a capability's compiled Amazon States Language definition."""
    text = compile_json(load_capability(capability).pipeline)
    if output:
        with open(output, "w") as handle:
            handle.write(text + "\n")
        err.print(f"wrote {output}")
    else:
        sys.stdout.write(text + "\n")


@app.command("cost")
def cost(
    capability: str = typer.Argument(..., help="Capability name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """What one mission of a capability will cost in AWS infrastructure, predicted before it runs: per
    billing line at list prices, per mission and per 1,000, and what the prediction assumes."""
    from missions.core.cost.prediction import predict

    found = predict(load_capability(capability).pipeline).as_dict()
    if as_json:
        out.print_json(data=found)
        return
    table = Table(
        "line",
        "quantity",
        "dollars",
        title=f"{capability}: one typical mission, us-east-1 list prices as of {found['prices_as_of']}",
    )
    for line, figures in found["lines"].items():
        table.add_row(line, f"{figures['quantity']:g}", f"${figures['dollars']:.7f}")
    table.add_row("total per mission", "", f"${found['dollars_per_mission']:.6f}")
    table.add_row("total per 1,000 missions", "", f"${found['dollars_per_1000_missions']:.4f}")
    out.print(table)
    spread = ", ".join(
        f"{name} ${r['dollars_per_mission']:.6f} ({r['stages']} stages)" for name, r in found["range"].items()
    )
    out.print(f"range per mission: {spread}")
    out.print("assumptions:")
    for said in found["assumptions"]:
        out.print(f"  - {said}", markup=False)
