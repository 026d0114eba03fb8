"""Cold start (issue 14): the layer ships bytecode compiled for the runtime's Python, valid whatever the
mtimes of its files, and a stage's import pulls in nothing it does not use. (How long it takes is the
bench's business: `make bench`, import times.)"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from layers.build import PYTHON, WrongPython, build

ROOT = Path(__file__).resolve().parents[2]
UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, source not checked


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the runtime's own code only: no network
    return build(tmp_path_factory.mktemp("layer") / "layer", sources_only=True) / "python"


def _flags(pyc: Path) -> tuple[bytes, int]:
    header = pyc.read_bytes()[:8]
    return header[:4], int.from_bytes(header[4:8], "little")


def test_every_module_of_the_layer_ships_its_bytecode_for_the_runtime_python(layer: Path):
    # Given a layer built by layers/build.py
    sources = sorted(layer.rglob("*.py"))
    assert any(p.parts[-3:] == ("missions", "app", "runtime.py") for p in sources)
    assert any(p.parts[-2:] == ("code_analysis", "stages.py") for p in sources)
    for source in sources:
        # When its pyc is looked for where CPython 3.11 looks for it
        pyc = Path(importlib.util.cache_from_source(str(source)))
        # Then it is there, under __pycache__ with the runtime's tag, next to its source (tracebacks need it)
        assert pyc.is_file(), source
        assert pyc.parent.name == "__pycache__" and pyc.name.endswith(f".cpython-{PYTHON.replace('.', '')}.pyc")
        # And it is this version's bytecode, checked by nobody: the zip's 2-second mtimes cannot make it stale
        assert _flags(pyc) == (importlib.util.MAGIC_NUMBER, UNCHECKED_HASH), pyc
    # And no other optimisation level or stray cache from the checkout came along
    assert not [p for p in layer.rglob("*.pyc") if ".opt-" in p.name]
    assert not list(layer.rglob("web"))


def test_the_shipped_bytecode_runs_whatever_the_sources_dates_say(layer: Path, tmp_path: Path):
    # Given a module of the layer whose source is touched after the build (a zip keeps 2-second mtimes)
    source = layer / "missions" / "core" / "errors.py"  # the standard library only
    original = source.read_text()
    try:
        source.write_text(original + "\nraise RuntimeError('compiled from source at import')\n")
        # When a process that may write no bytecode imports it from the layer alone
        code = f"import sys; sys.path[:0] = [{str(layer)!r}]; import missions.core.errors; print('imported')"
        result = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    finally:
        source.write_text(original)
    # Then the shipped bytecode ran: the source was not compiled again
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported"


def test_the_same_sources_give_the_same_layer_wherever_it_is_built(layer: Path, tmp_path: Path):
    # Given the layer built elsewhere from the same sources
    again = build(tmp_path / "elsewhere" / "layer", sources_only=True) / "python"
    files = sorted(p.relative_to(layer) for p in layer.rglob("*") if p.is_file())
    # When both are compared file by file
    # Then they are identical, bytecode included (CDK's asset hash, hence the deployed layer, changes with
    # the sources only)
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert [f for f in files if (layer / f).read_bytes() != (again / f).read_bytes()] == []


def test_the_build_refuses_an_interpreter_of_another_version(tmp_path: Path):
    # Given a layer asked for a Python other than the one running the build
    other = "3.12" if PYTHON != "3.12" else "3.13"
    # When it is built
    with pytest.raises(WrongPython, match=rf"bytecode is for Python {other}.* this is Python {PYTHON}"):
        build(tmp_path / "layer", python=other, sources_only=True)
    # Then nothing was built (nor removed)
    assert not (tmp_path / "layer").exists()


def test_the_build_command_says_which_python_to_run_it_with(tmp_path: Path):
    # Given the build script asked for another Python than the one it runs on
    command = [sys.executable, "layers/build.py", "--python", "3.99", "--sources-only", "--out", str(tmp_path / "l")]
    # When it runs
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    # Then it fails with a clear message and a usage error's status, having built nothing
    assert result.returncode == 2
    assert "run layers/build.py with python3.99" in result.stderr
    assert not (tmp_path / "l").exists()


# what only other functions use: the API's, the chat's, the triggers' and the interrupts' services, the model
# SDK and its JSON repair (an LLM stage's), and boto3 (made with the first client, at the first invocation)
NOT_FOR_A_STAGE_IMPORT = (
    "openai",
    "json_repair",
    "boto3",
    "missions.service.chat",
    "missions.service.control",
    "missions.service.evaluation",
    "missions.service.interrupts",
    "missions.service.launcher",
    "missions.service.missions",
    "missions.service.notifications",
    "missions.service.repositories.service",
)


def test_importing_a_non_llm_stage_pulls_in_only_what_a_stage_uses():
    # Given a fresh process
    code = (
        "import sys\n"
        "import functions.stage.handler, capabilities.code_analysis\n"
        f"print(sorted(m for m in {NOT_FOR_A_STAGE_IMPORT!r} if m in sys.modules))\n"
    )
    # When the stage handler and its capability are imported (what a stage function's cold start imports)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # Then none of the modules only other functions (or a stage's first invocation) need came with them
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# what an LLM stage's first model call imports, and its cold start must not: the model SDKs and their HTTP client
MODEL_SDKS = ("openai", "anthropic", "httpx2")


def test_importing_an_llm_stage_imports_no_model_sdk_until_its_first_model_call_makes_the_client():
    # Given a fresh process
    code = (
        "import sys\n"
        "import functions.stage.handler, capabilities.code_analysis\n"
        "import missions.adapters.llm.openai_provider as provider\n"
        f"print(sorted(m for m in {MODEL_SDKS!r} if m in sys.modules))\n"
        "provider.OpenAIProvider(api_key='sk-test', base_url='http://127.0.0.1:9/v1')\n"
        f"print(sorted(m for m in {MODEL_SDKS!r} if m in sys.modules))\n"
    )
    # When an LLM stage's cold start is imported (the stage handler, its capability and the OpenAI provider,
    # as bench/run.py measures it), then the provider's client is made (what its first model call does)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # Then no model SDK came with the import; the client brought the SDK (the check is not vacuous)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "['httpx2', 'openai']"]


def test_the_llm_adapter_repairs_json_without_importing_the_repairer_up_front():
    # Given a fresh process importing the providers' shared code (an LLM stage)
    code = (
        "import sys\n"
        "from pydantic import BaseModel\n"
        "from missions.adapters.llm import resilient\n"
        "print('json_repair' in sys.modules)\n"
        "class Answer(BaseModel):\n"
        "    x: int\n"
        "print(resilient.parse_output('Sure! ```json\\n{\"x\": 1,}\\n```', Answer, 'm', 's'))\n"
    )
    # When an answer that is not valid JSON as it is comes back
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # Then the repairer is imported for it, and repairs it
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "(Answer(x=1),", "True)"]
