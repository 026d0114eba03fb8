"""The MCP endpoint (missions.app.mcp): what a call costs against the API it wraps, and what it costs to load.

Measured in one run, on the dev server over HTTP (the emulation: moto behind the api function, not AWS):
- `api_read_ms`: `GET /missions/{id}` with a plain HTTP client (a keep-alive connection);
- `mcp_read_ms`: the same read as the MCP tool `get_mission`, through the official SDK's client in one
  session: a POST of JSON-RPC, the SDK's stateless session manager in the api function, the API operation
  called in the process, the answer as SSE. `mcp_read_ratio` is the protocol's added cost per call. The two
  reads alternate, sample by sample (the medians of each): a stretch of a slow machine (these are shared)
  slowed only the reads taken second, by up to half (ratios of 2.8 and 4.4 in two runs, 2.9 to 3.2 interleaved).
- `api_import_ms` / `mcp_import_ms`: fresh processes importing the api handler, and the api handler plus the
  MCP SDK's server side (what the first MCP request of a cold function adds); `api_import_ratio` shows that
  the API's cold start does not pay for the SDK (it is imported by the first MCP request).
"""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SAMPLES = 60
IMPORT_RUNS = 7
TARGET_READ_RATIO = 4.0  # a guard, not a goal of the issue: JSON-RPC, SSE and the SDK's session per request
ROOT = Path(__file__).resolve().parents[1]


def run() -> dict[str, Any]:
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from missions.local.devserver import DevServer
    from missions.local.emulation import LocalCloud

    headers = {"Authorization": "Bearer dev:bench", "content-type": "application/json"}
    with LocalCloud(["shopping"]) as cloud, DevServer(cloud, port=0) as dev:
        parts = urlsplit(dev.url)
        connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        body = json.dumps({"capability": "shopping", "goal": "a desk lamp under 40 dollars"})
        connection.request("POST", "/missions", body=body, headers=headers)
        mission_id = json.loads(connection.getresponse().read())["mission_id"]
        cloud.wait(mission_id, timeout=60, until_interrupt=True)

        def api_read() -> None:
            connection.request("GET", f"/missions/{mission_id}", headers=headers)
            response = connection.getresponse()
            assert response.status == 200
            response.read()

        api_read()

        async def interleaved() -> tuple[list[float], list[float]]:
            """An API read, then the same read over MCP, SAMPLES times: what slows the machine for a while
            slows both alike."""
            import time

            http = create_mcp_http_client(headers={"Authorization": headers["Authorization"]})
            async with (
                http,
                streamable_http_client(f"{dev.url}/mcp", http_client=http) as (read, write, _),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                await client.call_tool("get_mission", {"mission_id": mission_id})  # warm: the SDK's first import
                api_times, mcp_times = [], []
                for _ in range(SAMPLES):
                    started = time.perf_counter()
                    api_read()  # blocking: nothing else of this client runs meanwhile
                    api_times.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    result = await client.call_tool("get_mission", {"mission_id": mission_id})
                    mcp_times.append((time.perf_counter() - started) * 1000)
                    assert not result.isError, result.content
                return api_times, mcp_times

        api_times, mcp_times = anyio.run(interleaved)
        api_ms, mcp_ms = statistics.median(api_times), statistics.median(mcp_times)
        connection.close()
    api_import, mcp_import = (
        _import_ms("import functions.api.handler"),
        _import_ms("import functions.api.handler\nimport missions.app.mcp.transport"),
    )
    return {
        "api_read_ms": round(api_ms, 3),
        "mcp_read_ms": round(mcp_ms, 3),
        "mcp_read_ratio": round(mcp_ms / api_ms, 3),
        "api_import_ms": round(api_import, 1),
        "mcp_import_ms": round(mcp_import, 1),
        "mcp_import_ratio": round(mcp_import / api_import, 3),
    }


def _import_ms(statements: str) -> float:
    """The median of fresh processes importing `statements` (this venv, bytecode as it is)."""
    code = f"import time\nt = time.perf_counter()\n{statements}\nprint((time.perf_counter() - t) * 1000)"
    times = []
    for _ in range(IMPORT_RUNS):
        ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        times.append(float(ran.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def checks(results: dict[str, Any]) -> dict[str, bool]:
    return {f"an MCP read costs <= {TARGET_READ_RATIO}x the API's": results["mcp_read_ratio"] <= TARGET_READ_RATIO}


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    r = results
    return [
        (
            "MCP get_mission vs GET /missions/{id} (dev server, HTTP)",
            f"{r['mcp_read_ms']:.2f} ms = {r['mcp_read_ratio']:.2f}x the API's {r['api_read_ms']:.2f} ms",
        ),
        (
            "api handler import, and with the MCP SDK (first MCP request)",
            f"{r['api_import_ms']:.0f} ms; {r['mcp_import_ms']:.0f} ms ({r['mcp_import_ratio']:.2f}x)",
        ),
    ]


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
