"""docs/adding-a-capability.md, followed: the files it shows make a capability that loads and runs."""

from __future__ import annotations

import re
from pathlib import Path

from missions.core.capability import registry as registry
from missions.core.pipeline.compiler import compile_pipeline
from tests.support.driver import DirectDriver

ROOT = Path(__file__).resolve().parents[3]
TUTORIAL = ROOT / "docs" / "adding-a-capability.md"
FILE_BLOCK = re.compile(r"<!-- file: (?P<name>[\w.]+) -->\n```\w*\n(?P<body>.*?)\n```", re.S)


def test_the_tutorial_builds_a_capability_that_runs(tmp_path, monkeypatch):
    # Given the files the tutorial shows, written where it says (capabilities/pantry/)
    files = {match["name"]: match["body"] + "\n" for match in FILE_BLOCK.finditer(TUTORIAL.read_text())}
    assert set(files) == {"__init__.py", "capability.toml"}
    package = tmp_path / "tutorial_capabilities"
    (package / "pantry").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, body in files.items():
        (package / "pantry" / name).write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))

    # When it is loaded and run offline, and the user picks the omelette
    capability = registry.Registry(package="tutorial_capabilities").load("pantry")
    assert compile_pipeline(capability.pipeline)["States"]
    asked: list[dict] = []

    def user(interrupt: dict) -> dict:
        asked.append(interrupt)
        return {"decision": "Spinach omelette"}

    envelope = DirectDriver(capability).run(capability.example_goal, answer_with=user)

    # Then it asked once, with the canned recipes, and planned the one picked
    assert [(q["kind"], q["options"]) for q in asked] == [("choice", ["Spinach fried rice", "Spinach omelette"])]
    assert envelope.terminal_reason == "completed" and not envelope.errors
    assert envelope.outputs["answer"] == {
        "answer": "Spinach omelette for 2, in 10 minutes, with eggs, spinach.",
        "recipe": "Spinach omelette",
    }
    assert envelope.counters.llm_calls == 2  # inventory and recipes, each asked once despite the resume
