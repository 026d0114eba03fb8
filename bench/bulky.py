"""A small capability whose one tool returns ~2 MB, to measure the envelope under load."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel

from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.tools import ToolCatalog, ToolResult
from missions.core.pipeline.config import AgentConfig, PipelineConfig, ToolAccess

CATALOG = ToolCatalog()


class DumpParams(BaseModel):
    megabytes: float = 2.0


@CATALOG.register("bulk.dump", "Returns a large, poorly compressible document.", DumpParams)
def dump(params: DumpParams) -> ToolResult:
    size = int(params.megabytes * 1_000_000)
    chunks, seed, length = [], b"bulky", 0
    while length < size:
        seed = hashlib.sha256(seed).digest()
        chunks.append(seed.hex())
        length += 64
    return ToolResult.ok({"document": "".join(chunks)[:size]})


class Fetched(BaseModel):
    document: str


class Reported(BaseModel):
    answer: str
    bytes: int


@stage
def fetch(ctx: Ctx) -> Fetched:
    return Fetched(document=ctx.tools.execute("bulk.dump", {"megabytes": 2.0}).data["document"])


@stage
def report(fetch: Fetched) -> Reported:
    return Reported(answer=f"fetched {len(fetch.document)} characters", bytes=len(fetch.document))


CAPABILITY = Capability(
    name="bench_bulky",
    description="benchmark: a 2 MB tool output",
    pipeline=PipelineConfig(
        name="bench_bulky",
        agents=[
            AgentConfig(
                name="fetch",
                has_tools=True,
                tool_access=ToolAccess.READ,
                allowed_tools=["bulk.dump"],
                default_next="report",
            ),
            AgentConfig(name="report"),
        ],
    ),
    stages={"fetch": fetch, "report": report},
    offline_policy=lambda request: {},
    catalog=CATALOG,
)
