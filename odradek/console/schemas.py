"""What the console's Schemas pages read from a schema registry, through Confluent Schema Registry's REST API only
(ours, odradek.registry, or any other): the subjects with their latest version and level, a subject's versions,
the diff between two of them and a compatibility test of a schema against the subject; and messages framed as
Confluent's serializers frame them decoded with their writer's schema (odradek.registry.framing; without the
registry extra's libraries, or for an id the registry does not know, a message is shown as text).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import urllib.error
import urllib.parse
import urllib.request

from odradek.registry.framing import Decoders, Undecodable, framed_id

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SUBJECTS_SHOWN = 200


class RegistryRefused(LookupError):
    """The registry's error answer (its message), or no answer."""


@dataclasses.dataclass
class SubjectRow:
    subject: str
    version: int
    schema_id: int
    schema_type: str


@dataclasses.dataclass
class VersionInfo:
    version: int
    schema_id: int
    schema_type: str
    schema: str  # pretty-printed (AVRO and JSON indented)
    references: list


@dataclasses.dataclass
class SubjectDetail:
    subject: str
    compatibility: str
    versions: list[VersionInfo]
    diff: list[str]  # unified diff lines between the two versions compared (empty: fewer than two)
    compared: tuple[int, int] | None


def pretty(schema_type: str, text: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            return text
    return text


class SchemaView:
    def __init__(self, url: str, timeout: float = 15.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._decoders = Decoders(self._call)

    def _call(self, path: str, body: dict | None = None):
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("message", exc.reason)
            except ValueError:
                message = exc.reason
            raise RegistryRefused(f"{exc.code}: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryRefused(f"no answer from the schema registry at {self.url}: {exc}") from None

    @staticmethod
    def _quoted(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def subjects(self) -> list[SubjectRow]:
        rows = []
        for subject in self._call("/subjects")[:SUBJECTS_SHOWN]:
            latest = self._call(f"/subjects/{self._quoted(subject)}/versions/latest")
            rows.append(SubjectRow(subject, latest["version"], latest["id"], latest.get("schemaType", "AVRO")))
        return rows

    def subject(self, subject: str, compared: tuple[int, int] | None = None) -> SubjectDetail:
        name = self._quoted(subject)
        versions = []
        for number in self._call(f"/subjects/{name}/versions"):
            found = self._call(f"/subjects/{name}/versions/{number}")
            schema_type = found.get("schemaType", "AVRO")
            versions.append(VersionInfo(number, found["id"], schema_type, pretty(schema_type, found["schema"]),
                                        found.get("references", [])))
        level = self._call(f"/config/{name}?defaultToGlobal=true").get("compatibilityLevel", "")
        by_number = {v.version: v for v in versions}
        if compared is None and len(versions) >= 2:
            compared = (versions[-2].version, versions[-1].version)
        diff = []
        if compared is not None and compared[0] in by_number and compared[1] in by_number:
            old, new = by_number[compared[0]], by_number[compared[1]]
            diff = list(difflib.unified_diff(old.schema.splitlines(), new.schema.splitlines(),
                                             f"version {old.version}", f"version {new.version}", lineterm=""))
        else:
            compared = None
        return SubjectDetail(subject, level, versions, diff, compared)

    def check(self, subject: str, schema_type: str, schema: str) -> tuple[bool, list[str]]:
        """Is `schema` compatible with the subject under its level: (answer, the registry's messages)."""
        answer = self._call(f"/compatibility/subjects/{self._quoted(subject)}/versions?verbose=true",
                            {"schema": schema, "schemaType": schema_type})
        return bool(answer.get("is_compatible")), list(answer.get("messages") or [])

    # ---- decoding messages ----

    def prefetch(self, values) -> None:
        """Looks up the writers' schemas of these framed keys and values, so that decode() answers from memory."""
        for schema_id in {framed_id(value) for value in values} - {None}:
            self._decoders.decoder(schema_id)

    def decode(self, data: bytes | None) -> str | None:
        """The framed value decoded with its writer's schema, as indented JSON; None if it cannot be."""
        if framed_id(data) is None:
            return None
        try:
            return json.dumps(self._decoders.decode(data), indent=2, ensure_ascii=False, default=str)
        except (Undecodable, ImportError):
            return None
