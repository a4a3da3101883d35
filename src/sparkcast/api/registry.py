"""Writer schemas of Confluent-framed Avro: a Schema Registry that names them by id, and Avro's
rules for reading a record written with one schema under another (schema resolution).

``SchemaRegistry`` is where the ids live: the driver asks it once per query plan (``kafka_topic``:
every version of the topic's subject; ``sinks.kafka``: the id of the schema it writes), and a
Python worker once per id the plan did not know (``schema_by_id``, cached per process by
``spark/outputs/registry_lookup.py``), never per record, through Confluent's own client
(``confluent_kafka.schema_registry``). Its credentials are never shown: ``describe()`` gives
the URL without user info, and the registry's errors are worded without them.

``resolution_problem`` is Avro's own verdict (Apache Avro's ``ReaderWriterCompatibilityChecker``,
the Python port of the Java ``SchemaCompatibility`` that Spark's ``from_avro`` resolves with):
whether every record of the writer schema reads as the reader schema, and why not.

Both need ``pip install 'sparkcast[registry]'`` (Confluent's client with its Avro parts);
imported only when used, with an error naming the extra.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sparkcast.errors import MissingDependencyError, PipelineError

_EXTRA = "pip install 'sparkcast[registry]'"


@dataclass(frozen=True)
class SchemaRegistry:
    """A Confluent Schema Registry at ``url`` (``username``/``password``: HTTP basic auth, or in
    the URL as ``https://user:password@host``); ``options``: more of Confluent's client
    settings (``ssl.ca.location``, ``bearer.auth.*``, ...). Flink: the registry URL and config
    of ``ConfluentRegistryAvroDeserializationSchema.forGeneric``."""

    url: str = field(repr=False)
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise PipelineError("SchemaRegistry(url): an http:// or https:// URL of the "
                                "registry, such as 'https://registry:8081'")
        if (self.username is None) != (self.password is None):
            raise PipelineError("SchemaRegistry: give username and password together")

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.describe()!r})"

    def describe(self) -> str:
        """The URL without user info: what messages show."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def versions(self, subject: str) -> dict[int, str]:
        """Every version of ``subject`` as ``{schema id: schema JSON}`` (Avro ones only)."""
        return {i: s.schema_str for i, s in self.schemas(subject, "AVRO").items()}

    def schemas(self, subject: str, schema_type: str) -> dict[int, Any]:
        """Every version of ``subject`` of ``schema_type`` (``AVRO``, ``PROTOBUF``) as
        ``{schema id: Confluent's Schema}``; Protobuf ones in the registry's ``serialized``
        format (a base64 ``FileDescriptorProto``, what Confluent's deserializer asks for)."""
        client = self._client()
        fmt = "serialized" if schema_type == "PROTOBUF" else None
        found: dict[int, Any] = {}
        with _worded(self, f"reading subject {subject!r}"):
            for version in client.get_versions(subject):
                registered = client.get_version(subject, version, fmt=fmt)
                if (registered.schema.schema_type or "AVRO") == schema_type:
                    found[registered.schema_id] = registered.schema
        return found

    def schema_by_id(self, schema_id: int, schema_type: str) -> Any | None:
        """The schema registered under ``schema_id`` (Confluent's ``Schema``; Protobuf ones
        serialized), or None when the registry answers that it has no such id (404). Any other
        failure (the registry down, a timeout, a 5xx, a refused credential) is a
        ``PipelineError`` worded without credentials: the caller decides whether to wait."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        fmt = "serialized" if schema_type == "PROTOBUF" else None
        client = self._client()
        with _worded(self, f"looking schema id {schema_id} up"):
            try:
                return client.get_schema(schema_id, fmt=fmt)
            except SchemaRegistryError as error:
                if error.http_status_code == 404:
                    return None
                raise

    def referenced(self, subject: str, version: int) -> Any:
        """The schema a reference names (``subject``, ``version``), Protobuf ones serialized."""
        with _worded(self, f"reading version {version} of subject {subject!r}"):
            return self._client().get_version(subject, version, fmt="serialized").schema

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: Sequence[tuple[str, str, int]] = ()) -> int:
        """The id of ``schema`` under ``subject``, registered if new (the registry gives an
        identical schema's existing id, as Confluent's serializers rely on); ``references``:
        ``(name, subject, version)`` of the schemas it imports."""
        with _worded(self, f"registering the schema under subject {subject!r}"):
            return int(self._client().register_schema(
                subject, _schema(schema, schema_type, references)))

    def version_of(self, subject: str, schema: str, schema_type: str,
                   references: Sequence[tuple[str, str, int]] = ()) -> int:
        """The version of ``schema`` under ``subject`` (a reference to it names the version)."""
        with _worded(self, f"looking the schema up under subject {subject!r}"):
            found = self._client().lookup_schema(subject,
                                                 _schema(schema, schema_type, references))
            return int(found.version)

    def _client(self) -> Any:
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient
        except ImportError as error:
            raise MissingDependencyError(f"a schema registry needs Confluent's client: "
                                         f"{_EXTRA} ({error})") from error
        config: dict[str, Any] = {**self.options, "url": self.url}
        if self.username is not None:
            config["basic.auth.user.info"] = f"{self.username}:{self.password}"
        return SchemaRegistryClient(config)

    def _secrets(self) -> list[str]:
        """What a message must never hold: the password and user info, in any spelling."""
        parts = urlsplit(self.url)
        found = [self.password, parts.password, parts.username and parts.netloc.split("@")[0]]
        return [s for s in found if s]


def _schema(schema: str, schema_type: str, references: Sequence[tuple[str, str, int]]) -> Any:
    """Confluent's ``Schema`` of ``schema`` with its references."""
    from confluent_kafka.schema_registry import Schema, SchemaReference

    return Schema(schema, schema_type, [SchemaReference(n, s, v) for n, s, v in references])


@contextmanager
def _worded(registry: SchemaRegistry, doing: str) -> Iterator[None]:
    """The registry client's errors as a ``PipelineError`` naming the registry by
    ``describe()`` and never holding a credential."""
    try:
        yield
    except PipelineError:
        raise
    except Exception as error:  # noqa: BLE001 - the client's, httpx's: worded below
        reason = f"{type(error).__name__}: {error}"
        for secret in registry._secrets():
            reason = reason.replace(secret, "[hidden]")
        # not ``from error``: a client's error may hold the request, with its credentials
        raise PipelineError(f"schema registry {registry.describe()}, {doing}: {reason}"
                            ) from None


def resolution_problem(reader: str, writer: str) -> str | None:
    """Why a record written with ``writer`` does not read as ``reader`` by Avro's schema
    resolution (both Avro schemas as JSON text), or None when every one does."""
    try:
        from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
        from avro.schema import parse
    except ImportError as error:
        raise MissingDependencyError(f"reading Avro with writer schemas needs Apache Avro's "
                                     f"resolution rules: {_EXTRA} ({error})") from error
    try:
        reader_schema = parse(reader)
    except Exception as error:  # noqa: BLE001 - Avro's parse errors have no common base
        raise PipelineError(f"the Avro schema does not parse ({type(error).__name__}: "
                            f"{error})") from error
    try:
        writer_schema = parse(writer)
    except Exception as error:  # noqa: BLE001 - Avro's parse errors have no common base
        return f"the writer schema does not parse ({type(error).__name__}: {error})"
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader_schema, writer_schema)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return None
    kinds = ", ".join(sorted(k.value for k in result.incompatibilities))
    messages = "; ".join(sorted(str(m) for m in result.messages))
    where = ", ".join(sorted(result.locations - {"/"})) or "/"
    return f"{kinds}: {messages} (at {where})"
