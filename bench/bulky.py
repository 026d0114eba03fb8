"""A small capability whose one tool returns ~2 MB, to measure the envelope under load."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel

from missions.core.capability import Capability, StageContext, StageHooks
from missions.core.pipeline import AgentConfig, PipelineConfig, ToolAccess
from missions.core.tools import ToolCatalog, ToolResult

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


class Fetch(StageHooks):
    def act(self, ctx: StageContext) -> None:
        assert ctx.tools is not None
        ctx.scratch["result"] = ctx.tools.execute("bulk.dump", {"megabytes": 2.0})

    def post(self, ctx: StageContext) -> dict:
        return {"document": ctx.scratch["result"].data["document"]}


class Report(StageHooks):
    def post(self, ctx: StageContext) -> dict:
        document = ctx.output_of("fetch").get("document", "")
        return {"answer": f"fetched {len(document)} characters", "bytes": len(document)}


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
    hooks={"fetch": Fetch(), "report": Report()},
    offline_policy=lambda request: {},
    catalog=CATALOG,
)
