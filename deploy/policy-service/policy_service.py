"""A reference policy service for the gateway's ``external`` filter (docs/security.md).

Standard library only, so a team can read it in one sitting and replace the
rules with its own DLP. It answers ``POST /decide`` with the protocol's JSON:

- a payload mentioning a word from ``--deny`` is refused with a message;
- every occurrence of a word from ``--redact`` is replaced by ``[redacted]``
  (``modify``);
- anything else is allowed; allow answers carry ``Cache-Control: max-age``
  from ``--max-age`` so the gateway need not ask again.

Run: ``python policy_service.py --port 8787 --deny forbidden --redact secret``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _replace(value: Any, word: str) -> Any:
    if isinstance(value, str):
        return value.replace(word, "[redacted]")
    if isinstance(value, list):
        return [_replace(v, word) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, word) for k, v in value.items()}
    return value


def decide(request: dict[str, Any], deny: list[str], redact: list[str]) -> dict[str, Any]:
    """The decision for one request of the protocol."""
    text = json.dumps(request.get("payload"))
    for word in deny:
        if word in text:
            return {"decision": "deny", "message": f"mentions {word!r}"}
    payload = request.get("payload")
    changed = False
    for word in redact:
        if word in text:
            payload = _replace(payload, word)
            changed = True
    if changed:
        return {"decision": "modify", "message": "redacted", "payload": payload}
    return {"decision": "allow"}


def main() -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--deny", action="append", default=[])
    parser.add_argument("--redact", action="append", default=[])
    parser.add_argument("--max-age", type=int, default=0)
    parser.add_argument("--token", default="", help="require 'Authorization: Bearer TOKEN'")
    options = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if options.token and self.headers.get("authorization") != f"Bearer {options.token}":
                self.send_error(401)
                return
            length = int(self.headers.get("content-length") or 0)
            try:
                request = json.loads(self.rfile.read(length))
            except ValueError:
                self.send_error(400)
                return
            answer = json.dumps(decide(request, options.deny, options.redact)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            if options.max_age and b'"allow"' in answer:
                self.send_header("cache-control", f"max-age={options.max_age}")
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((options.host, options.port), Handler)
    print(f"listening on {options.host}:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
