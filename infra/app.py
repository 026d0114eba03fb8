"""The CDK app: one stack per environment of cdk.json, checked by cdk-nag at every synth.

python infra/app.py --env dev            # synth one environment into cdk.out (make synth ENV=dev)
npx cdk deploy missions-dev               # the pinned aws-cdk 2.x CLI runs this file (make deploy)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script by the CDK CLI: the repository root holds `infra`
    sys.path.insert(0, str(ROOT))

from aws_cdk import App, Environment, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.config import ConfigError, load_environments  # noqa: E402
from infra.stack import MissionsStack  # noqa: E402


def default_layer_dir(env: str, arch: str) -> Path:
    """Where `layers/build.py --env ENV --arch ARCH` (make layer) builds an environment's layer."""
    return ROOT / "build" / f"layer-{env}-{arch}"


def build_app(
    *,
    environments: list[str] | None = None,
    layer_dir: Path | None = None,
    outdir: str | None = None,
    context: dict[str, Any] | None = None,
) -> App:
    """Stacks for the named environments (all of cdk.json's when None)."""
    app = App(outdir=outdir, context=context)
    configured = (
        app.node.try_get_context("environments")
        or json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]
    )
    configs = load_environments(configured)
    names = environments or list(configs)
    unknown = [name for name in names if name not in configs]
    if unknown:
        raise ConfigError(f"unknown environment(s) {unknown}; cdk.json defines {sorted(configs)}")
    for name in names:
        config = configs[name]
        MissionsStack(
            app,
            f"missions-{name}",
            config=config,
            layer_dir=layer_dir or default_layer_dir(name, config.architecture),
            env=Environment(
                account=config.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
                region=config.region or os.environ.get("CDK_DEFAULT_REGION"),
            ),
        )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Synthesize the missions runtime's stacks.")
    parser.add_argument("--env", action="append", help="environment from cdk.json (repeatable; default: all)")
    parser.add_argument("--layer-dir", type=Path, help="built runtime layer (default: build/layer-<env>-<arch>)")
    args = parser.parse_args(argv)
    probe = App()  # the CDK CLI passes `-c env=...` through its context
    environments = args.env or ([probe.node.try_get_context("env")] if probe.node.try_get_context("env") else None)
    layer_dir = args.layer_dir or (
        Path(probe.node.try_get_context("layer_dir")) if probe.node.try_get_context("layer_dir") else None
    )
    try:
        # the CDK CLI says where to write through CDK_OUTDIR; run by hand, write cdk.out as it would
        outdir = None if os.environ.get("CDK_OUTDIR") else str(ROOT / "cdk.out")
        app = build_app(environments=environments, layer_dir=layer_dir, outdir=outdir)
    except (ConfigError, FileNotFoundError) as exc:
        raise SystemExit(f"synth failed: {exc}") from None
    assembly = app.synth()
    for stack in assembly.stacks:
        print(f"{stack.stack_name}: {Path(assembly.directory) / stack.template_file}")


if __name__ == "__main__":
    main()
