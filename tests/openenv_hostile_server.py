"""A hostile OpenEnv server for the client's bounds: it speaks OpenEnv's WebSocket protocol
(``/ws``: reset, step, close; ``/health``, ``/schema``, ``/metadata``) and answers what the
action asks for, raw, so a test sends what no well-behaved server would:

- ``reward <json>``: a final step whose reward is that JSON text as is (``1e308``, an integer
  of 400 digits, ``"1"``);
- ``observation <n>``: a final step whose observation carries ``n`` bytes of text;
- anything else: reward 0.5.

A reset with seed 2 (a train seed) answers a prompt of ``BIG_PROMPT`` bytes; ``big_metadata=True`` makes
``/metadata`` that large too. Served by uvicorn in a thread on a free loopback port.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.openenv_serve_helpers import serve_app

#: 50 MB: the issue's hostile observation and prompt.
BIG_PROMPT = 50 << 20
SCHEMA = {
    "action": {"type": "object", "properties": {"message": {"type": "string"}},
               "required": ["message"]},
    "observation": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    "state": {"type": "object"},
}


def _frame(observation_json: str, reward_json: str, done: bool) -> str:
    return ('{"type": "observation", "data": {"observation": ' + observation_json +
            ', "reward": ' + reward_json + ', "done": ' + json.dumps(done) + "}}")


def app(big_metadata: bool = False) -> Starlette:
    async def health(request):
        return JSONResponse({"status": "healthy"})

    async def schema(request):
        return JSONResponse(SCHEMA)

    async def metadata(request):
        if big_metadata:
            return Response(json.dumps({"name": "hostile", "readme_content": "x" * BIG_PROMPT}),
                            media_type="application/json")
        return JSONResponse({"name": "hostile", "version": "1"})

    async def ws(socket: WebSocket):
        await socket.accept()
        try:
            while True:
                message = json.loads(await socket.receive_text())
                data = message.get("data") or {}
                if message.get("type") == "reset":
                    size = BIG_PROMPT if data.get("seed") == 2 else 20
                    text = json.dumps({"prompt": "p" * size})
                    await socket.send_text(_frame(text, "null", False))
                elif message.get("type") == "step":
                    kind, _, arg = str(data.get("message", "")).partition(" ")
                    if kind == "reward":
                        await socket.send_text(_frame('{"prompt": ""}', arg, True))
                    elif kind == "observation":
                        text = json.dumps({"prompt": "o" * int(arg)})
                        await socket.send_text(_frame(text, "0.5", True))
                    else:
                        await socket.send_text(_frame('{"prompt": ""}', "0.5", True))
                else:
                    break
        except WebSocketDisconnect:
            pass

    return Starlette(routes=[Route("/health", health), Route("/schema", schema),
                             Route("/metadata", metadata), WebSocketRoute("/ws", ws)])


@contextlib.contextmanager
def hostile(big_metadata: bool = False) -> Iterator[str]:
    """Serve the hostile app; yields its base URL."""
    with serve_app(app(big_metadata), "the hostile server", ws_max_size=1 << 20) as url:
        yield url
