"""Deployment figures: layer and function package sizes, and synth wall time.

An environment's layer carries its provider's model SDK alone (layers/build.py): each is measured, and the
largest is the one the size checks read; "every" is the layer with both SDKs, measured in the same run.

Synth time is compared with synthesizing an empty CDK app in the same run (the jsii/Node
start-up every CDK app pays), so the ratio says what our stack adds on this machine.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAMBDA_UNZIPPED_LIMIT_MB = 250
LAYER_AIM_MB = 40
SYNTH_RUNS = 2
EMPTY_APP = "import aws_cdk as cdk; app = cdk.App(outdir={out!r}); cdk.Stack(app, 'Empty'); app.synth()"


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def zipped_bytes(path: Path) -> int:
    with tempfile.TemporaryFile() as handle:
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in path.rglob("*"):
                if file.is_file():
                    archive.write(file, file.relative_to(path))
        return handle.tell()


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    return time.perf_counter() - started


# a layer per model SDK an environment may carry (layers/build.py): openai's, anthropic's, none (the offline
# model, Bedrock); "every" is the layer with both, as one layer for every environment was
PROVIDER_LAYERS = {"every": None, "openai": ["openai"], "anthropic": ["anthropic"], "none": ["scripted"]}


def _layer_figures(layer: Path) -> dict[str, Any]:
    return {
        "unzipped_mb": round(folder_bytes(layer) / 1e6, 1),
        "zipped_mb": round(zipped_bytes(layer) / 1e6, 1),
        "largest_packages_mb": {
            p.name: round(folder_bytes(p) / 1e6, 1)
            for p in sorted((layer / "python").iterdir(), key=folder_bytes, reverse=True)[:4]
            if p.is_dir()
        },
    }


def run() -> dict[str, Any]:
    from layers.build import build

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        try:
            by_sdk = {
                sdk: _layer_figures(build(work / f"layer-{sdk}", arch="arm64", providers=providers))
                for sdk, providers in PROVIDER_LAYERS.items()
            }
            largest = max((sdk for sdk in by_sdk if sdk != "every"), key=lambda sdk: by_sdk[sdk]["unzipped_mb"])
            # the largest layer an environment deploys
            results["layer"] = {"model_sdk": largest, **by_sdk[largest]}
            results["layer_unzipped_mb_by_model_sdk"] = {sdk: figures["unzipped_mb"] for sdk, figures in by_sdk.items()}
            layer = work / "layer-none"
        except subprocess.CalledProcessError as exc:  # pip needs PyPI: say so rather than fail the bench
            layer = build(work / "layer", sources_only=True)
            results["layer"] = {"error": f"pip could not fetch the dependencies ({exc}); sizes exclude them"}
        functions = {p.name: folder_bytes(p) for p in (ROOT / "functions").iterdir() if (p / "handler.py").exists()}
        results["function_code_kb"] = {name: round(size / 1024, 1) for name, size in sorted(functions.items())}
        largest_function_mb = max(functions.values()) / 1e6
        results["largest_function_with_layer_mb"] = round(
            results["layer"].get("unzipped_mb", folder_bytes(layer) / 1e6) + largest_function_mb, 1
        )

        # dev's model is the offline one: its layer carries no model SDK
        synth = [sys.executable, "infra/app.py", "--env", "dev", "--layer-dir", str(layer)]
        empty = [sys.executable, "-c", EMPTY_APP.format(out=str(work / "empty.out"))]
        _timed(empty)  # warm the jsii cache so neither figure pays for filling it
        synth_s = [_timed(synth) for _ in range(SYNTH_RUNS)]
        empty_s = [_timed(empty) for _ in range(SYNTH_RUNS)]
    results["synth_dev_s"] = round(statistics.median(synth_s), 2)
    results["synth_empty_app_s"] = round(statistics.median(empty_s), 2)
    results["synth_ratio_to_empty_app"] = round(results["synth_dev_s"] / results["synth_empty_app_s"], 2)
    return results


def checks(results: dict[str, Any]) -> dict[str, bool]:
    total = results["largest_function_with_layer_mb"]
    return {
        f"function + layer < {LAMBDA_UNZIPPED_LIMIT_MB} MB unzipped (Lambda's limit)": total < LAMBDA_UNZIPPED_LIMIT_MB,
        f"function + layer < {LAYER_AIM_MB} MB unzipped (our aim)": total < LAYER_AIM_MB,
    }


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    layer = results["layer"]
    out = []
    if "unzipped_mb" in layer:
        biggest = ", ".join(f"{name} {mb}" for name, mb in layer["largest_packages_mb"].items())
        out.append(
            (
                f"layer (arm64, python3.11; the largest: {layer['model_sdk']}'s)",
                f"{layer['unzipped_mb']} MB unzipped, {layer['zipped_mb']} MB zipped",
            )
        )
        out.append(("  largest packages (MB)", biggest))
        sizes = results["layer_unzipped_mb_by_model_sdk"]
        out.append(("  by model SDK (MB unzipped)", ", ".join(f"{sdk} {mb}" for sdk, mb in sizes.items())))
    else:
        out.append(("layer", layer["error"]))
    code = results["function_code_kb"]
    out.append(("function code (each)", f"{min(code.values())}-{max(code.values())} KB over {len(code)} handlers"))
    out.append(("largest function + layer", f"{results['largest_function_with_layer_mb']} MB unzipped"))
    out.append(
        (
            "synth dev stack (nag included) / empty app",
            f"{results['synth_dev_s']} s / {results['synth_empty_app_s']} s ({results['synth_ratio_to_empty_app']}x)",
        )
    )
    return out
