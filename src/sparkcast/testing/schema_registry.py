"""A throwaway schema registry for tests and demos: the Confluent Schema Registry's REST API, as
far as Confluent's serializers and sparkcast use it, served on loopback from memory.

>>> with LocalSchemaRegistry(username="app", password="secret") as registry:
...     first = registry.register("rules-value", RULE_V1)        # or over HTTP, as clients do
...     Avro(RULE, confluent=True, registry=SchemaRegistry(registry.url, "app", "secret"))

It is a minimal stand-in, not Confluent's server (which is not on PyPI or Maven Central), for
Avro and Protobuf schemas (``schemaType``, ``references``):
``POST /subjects/{subject}/versions`` (register: an identical schema keeps its id, across
subjects too), ``POST /subjects/{subject}`` (look a schema up), ``GET /subjects``,
``GET /subjects/{subject}/versions``, ``GET /subjects/{subject}/versions/{version|latest}``
and ``GET /schemas/ids/{id}``, with the registry's JSON error bodies (``error_code``,
``message``) and, when given credentials, HTTP basic auth (401 otherwise); ``down = True``
answers 503 until set back. It checks no
compatibility between versions (Confluent's default, ``BACKWARD``, would refuse some
registrations this one takes), converts no schema between formats (a Protobuf schema is
answered as it was registered, whatever ``?format=`` asks: Confluent's clients register the
``serialized`` form, a base64 ``FileDescriptorProto``; ``.proto`` text is not parsed) and forgets
everything when it stops.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit


class LocalSchemaRegistry:
    """The stand-in registry on ``127.0.0.1`` at a free port (``url``), in a daemon thread;
    while ``down`` is true it answers every request 503 (an outage, for tests of a client's
    waiting)."""

    def __init__(self, username: str | None = None, password: str | None = None) -> None:
        self._auth = (None if username is None else
                      "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode())
        self._lock = threading.Lock()
        self._schemas: list[dict[str, Any]] = []  # id - 1 → schema, schemaType, references
        self._subjects: dict[str, list[int]] = {}  # subject → ids, by version
        self.down = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="sparkcast-schema-registry")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> LocalSchemaRegistry:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[dict[str, Any]] | None = None) -> int:
        """The id of ``schema`` under ``subject``, a new version if the subject lacks it
        (``references``: the registry's ``{"name", "subject", "version"}`` of its imports)."""
        entry = {"schema": schema, "schemaType": schema_type, "references": references or []}
        with self._lock:
            schema_id = self._id_of(entry)
            if schema_id is None:
                self._schemas.append(entry)
                schema_id = len(self._schemas)
            versions = self._subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def _id_of(self, entry: dict[str, Any]) -> int | None:
        return next((i + 1 for i, s in enumerate(self._schemas) if _same(s, entry)), None)

    def answer(self, method: str, path: str, body: Any, authorization: str | None
               ) -> tuple[int, Any]:
        """The status and JSON body the registry answers a request with."""
        if self.down:
            return 503, _error(50301, "Service Unavailable")
        if self._auth is not None and authorization != self._auth:
            return 401, _error(40101, "Unauthorized")
        parts = [unquote(p) for p in path.strip("/").split("/")]
        try:
            if method == "POST" and len(parts) in (2, 3) and parts[0] == "subjects":
                return self._post(parts, body)
            found = self._get(parts) if method == "GET" else None
            if found is not None:
                return found
        except (KeyError, IndexError, ValueError, TypeError):  # a body or path it cannot read
            pass
        return 404, _error(404, f"no such resource: {method} /{'/'.join(parts)}")

    def _post(self, parts: list[str], body: Any) -> tuple[int, Any]:
        subject = parts[1]
        entry = {"schema": body["schema"], "schemaType": body.get("schemaType") or "AVRO",
                 "references": body.get("references") or []}
        if entry["schemaType"] == "AVRO":
            json.loads(entry["schema"])  # a ValueError: not JSON (an Avro schema is)
        if len(parts) == 3 and parts[2] == "versions":
            return 200, {"id": self.register(subject, **_arguments(entry))}
        with self._lock:
            schema_id = self._id_of(entry)
            versions = self._subjects.get(subject)
        if versions is None:
            return 404, _error(40401, f"Subject '{subject}' not found.")
        if schema_id not in versions:
            return 404, _error(40403, "Schema not found")
        return 200, self._version(subject, versions.index(schema_id) + 1)

    def _get(self, parts: list[str]) -> tuple[int, Any] | None:
        with self._lock:
            if parts == ["subjects"]:
                return 200, sorted(self._subjects)
            if len(parts) == 3 and parts[:2] == ["schemas", "ids"]:
                schema_id = int(parts[2])
                if not 0 < schema_id <= len(self._schemas):
                    return 404, _error(40403, f"Schema {schema_id} not found")
                return 200, _shown(self._schemas[schema_id - 1])
            if parts[0] == "subjects" and len(parts) >= 3 and parts[2] == "versions":
                versions = self._subjects.get(parts[1])
                if versions is None:
                    return 404, _error(40401, f"Subject '{parts[1]}' not found.")
                if len(parts) == 3:
                    return 200, list(range(1, len(versions) + 1))
                version = len(versions) if parts[3] == "latest" else int(parts[3])
                if not 0 < version <= len(versions):
                    return 404, _error(40402, f"Version {parts[3]} not found.")
                return 200, self._version(parts[1], version)
        return None

    def _version(self, subject: str, version: int) -> dict[str, Any]:
        schema_id = self._subjects[subject][version - 1]
        return {"subject": subject, "version": version, "id": schema_id,
                **_shown(self._schemas[schema_id - 1])}


def _same(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two registrations are one schema (Avro's compared as JSON, others as text)."""
    if (one["schemaType"], one["references"]) != (other["schemaType"], other["references"]):
        return False
    if one["schemaType"] == "AVRO":
        return bool(json.loads(one["schema"]) == json.loads(other["schema"]))
    return bool(one["schema"] == other["schema"])


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    """A schema as the registry answers it: no ``schemaType`` for Avro, no empty references."""
    shown = {"schema": entry["schema"]}
    if entry["schemaType"] != "AVRO":
        shown["schemaType"] = entry["schemaType"]
    if entry["references"]:
        shown["references"] = entry["references"]
    return shown


def _arguments(entry: dict[str, Any]) -> dict[str, Any]:
    return {"schema": entry["schema"], "schema_type": entry["schemaType"],
            "references": entry["references"]}


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "message": message}


def _handler(registry: LocalSchemaRegistry) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering from ``registry``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._reply(None)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                body = None
            self._reply(body)

        def _reply(self, body: Any) -> None:
            status, answer = registry.answer(self.command, urlsplit(self.path).path, body,
                                             self.headers.get("Authorization"))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - its name
            return  # no request lines on the test's stderr

    return Handler
