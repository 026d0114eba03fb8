"""Onboards a fresh Home Assistant and prints a long-lived access token: run by the HA venv's python.

`.ha/venv/bin/python tests/support/ha_onboard.py http://127.0.0.1:PORT` -> one JSON line
{"token": ..., "version": ...}. HA's own onboarding, as its frontend does it: POST /api/onboarding/users
(the owner; answers an auth code), POST /auth/token (the code for an access token), then the websocket
command `auth/long_lived_access_token` (HA has no REST endpoint for it). It runs in the HA venv because
that has aiohttp, so the project's venv needs no websocket client. Standard library and aiohttp only.
"""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp

USER = {"name": "Test Owner", "username": "owner", "password": "owner-password-1", "language": "en"}


async def onboard(url: str) -> dict[str, str]:
    client_id = f"{url}/"
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/api/onboarding/users", json={**USER, "client_id": client_id}) as answer:
            if answer.status != 200:
                raise SystemExit(f"POST /api/onboarding/users: HTTP {answer.status}: {await answer.text()}")
            code = (await answer.json())["auth_code"]
        form = {"grant_type": "authorization_code", "code": code, "client_id": client_id}
        async with session.post(f"{url}/auth/token", data=form) as answer:
            if answer.status != 200:
                raise SystemExit(f"POST /auth/token: HTTP {answer.status}: {await answer.text()}")
            access_token = (await answer.json())["access_token"]
        async with session.ws_connect(f"{url}/api/websocket") as ws:
            hello = await ws.receive_json()
            if hello.get("type") != "auth_required":
                raise SystemExit(f"websocket: expected auth_required, got {hello}")
            await ws.send_json({"type": "auth", "access_token": access_token})
            authed = await ws.receive_json()
            if authed.get("type") != "auth_ok":
                raise SystemExit(f"websocket: expected auth_ok, got {authed}")
            await ws.send_json(
                {"id": 1, "type": "auth/long_lived_access_token", "client_name": "missions tests", "lifespan": 1}
            )
            result = await ws.receive_json()
            if not result.get("success"):
                raise SystemExit(f"websocket auth/long_lived_access_token: {result}")
            return {"token": result["result"], "version": str(authed.get("ha_version", ""))}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(onboard(sys.argv[1].rstrip("/")))))
