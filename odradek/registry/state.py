"""The registry's state and the `_schemas` record format it is made of: Confluent Schema Registry's key and value
JSON, applied in log order into memory (plain code: no I/O; odradek.registry.store feeds it the topic's records).

Keys (UTF-8 JSON, fields in Confluent's order, so that compaction folds our records and a Confluent registry's):
  {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}   value: {"subject","version","id","schema",
      "schemaType" (absent: AVRO),"references" [{"name","subject","version"}],"deleted","metadata","ruleSet"}
      a null value (tombstone): the version is deleted permanently
  {"keytype":"CONFIG","subject":S|null,"magic":0}          value: {"compatibilityLevel",...} or null (removed)
  {"keytype":"MODE","subject":S|null,"magic":0}            value: {"mode"} or null (removed)
  {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}       value: {"subject","version"}: versions <= version
      are soft-deleted
  {"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}        value: {"subject"}: the soft-deleted versions go
  {"keytype":"NOOP","magic":0}                             value: null (a writer's mark of the log's end)

Contexts, as Confluent has them: a subject named ":.ctx:name" is in context ".ctx" (others are in the default
context "."), and the key's and value's subject field carry that qualified name. Each context is its own id space:
a version's id is looked up in its subject's context, so the same number may name different schemas in two
contexts. A config or mode whose subject is ":.ctx:" (the context's qualifier alone) is the context's own, between
the subject's and the global one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = ("SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT",
                                                            "CLEAR_SUBJECT", "NOOP")
CONTEXT_PREFIX = ":."  # ":.ctx:subject" names a subject in context .ctx


@dataclasses.dataclass
class Version:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list = dataclasses.field(default_factory=list)
    deleted: bool = False
    metadata: dict | None = None
    rule_set: dict | None = None

    @classmethod
    def of(cls, value: dict) -> "Version":
        return cls(value["subject"], int(value["version"]), int(value["id"]), value["schema"],
                   value.get("schemaType") or "AVRO", list(value.get("references") or []),
                   bool(value.get("deleted", False)), value.get("metadata"), value.get("ruleSet"))

    def value(self) -> dict:
        value: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id,
                                 "schema": self.schema}
        if self.schema_type != "AVRO":
            value["schemaType"] = self.schema_type
        if self.references:
            value["references"] = self.references
        if self.metadata:
            value["metadata"] = self.metadata
        if self.rule_set:
            value["ruleSet"] = self.rule_set
        value["deleted"] = self.deleted
        return value

    def content(self) -> tuple:
        """What makes two versions the same schema (and so the same id)."""
        return self.schema_type, self.schema, json.dumps(self.references, sort_keys=True)


def encode(document: dict | None) -> bytes | None:
    return None if document is None else json.dumps(document, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> dict:
    return {"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1}


def subject_key(keytype: str, subject: str | None) -> dict:
    return {"keytype": keytype, "subject": subject, "magic": 0}


NOOP_KEY = {"keytype": NOOP, "magic": 0}


def context_of(subject: str | None) -> str:
    """The context of a subject name: "." (the default) or ".ctx" for ":.ctx:name"."""
    if subject and subject.startswith(CONTEXT_PREFIX) and subject.count(":") >= 2:
        return subject[1:subject.index(":", 2)]
    return "."


def qualifier(context: str) -> str:
    """What names a subject in the context: ":.ctx:" ("" for the default context); "ctx" is ".ctx"."""
    context = context if context.startswith(".") else "." + context
    return "" if context == "." else f":{context}:"


def unqualified(subject: str) -> str:
    """The subject's name without its context's qualifier."""
    return subject[len(qualifier(context_of(subject))):]


class State:
    """Every subject's versions, the schemas by id, configs and modes, as the applied records left them."""

    def __init__(self):
        self.versions: dict[str, dict[int, Version]] = {}
        self.context_ids: dict[str, dict[int, Version]] = {".": {}}  # each context's ids: the schema, as first
        self.max_ids: dict[str, int] = {}  # registered, and the highest id given
        self.configs: dict[str | None, dict] = {}
        self.modes: dict[str | None, str] = {}

    @property
    def ids(self) -> dict[int, Version]:
        """The default context's ids."""
        return self.context_ids["."]

    def ids_in(self, context: str) -> dict[int, Version]:
        return self.context_ids.get(context, {})

    def max_id(self, context: str = ".") -> int:
        return self.max_ids.get(context, 0)

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        """One `_schemas` record; one that is not Confluent's JSON is skipped (the topic is shared with others)."""
        try:
            key = json.loads(key_bytes) if key_bytes else None
            value = json.loads(value_bytes) if value_bytes else None
            if not isinstance(key, dict):
                return
            self._apply(key.get("keytype"), key, value)
        except (ValueError, KeyError, TypeError, AttributeError):
            return

    def _apply(self, keytype: str, key: dict, value: dict | None) -> None:
        subject = key.get("subject")
        if keytype == SCHEMA:
            versions = self.versions.setdefault(subject, {})
            if value is None:
                versions.pop(int(key["version"]), None)
                if not versions:
                    del self.versions[subject]
                return
            version = Version.of(value)
            versions[version.version] = version
            context = context_of(subject)
            self.context_ids.setdefault(context, {}).setdefault(version.id, version)
            self.max_ids[context] = max(self.max_id(context), version.id)
        elif keytype == CONFIG:
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = value
        elif keytype == MODE:
            if value is None:
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = value["mode"]
        elif keytype == DELETE_SUBJECT and value is not None:
            for number, version in self.versions.get(subject, {}).items():
                if number <= int(value.get("version", number)):
                    version.deleted = True
        elif keytype == CLEAR_SUBJECT and value is not None:
            versions = self.versions.get(subject, {})
            for number in [n for n, v in versions.items() if v.deleted]:
                del versions[number]
            if subject in self.versions and not versions:
                del self.versions[subject]

    # ---- reads ----

    def live(self, subject: str, deleted: bool = False) -> list[Version]:
        """A subject's versions, oldest first (the soft-deleted too when `deleted`)."""
        return [v for _, v in sorted(self.versions.get(subject, {}).items()) if deleted or not v.deleted]

    def subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.versions if self.live(s, deleted))

    def uses_of(self, schema_id: int, context: str = ".") -> list[Version]:
        """The versions registered with this id in the context."""
        target = self.ids_in(context).get(schema_id)
        if target is None:
            return []
        content = target.content()
        return [v for subject, versions in self.versions.items() if context_of(subject) == context
                for v in versions.values() if v.content() == content]

    def id_of(self, content: tuple, context: str) -> int | None:
        """The id of a schema already registered under any subject of the context, None if it is new there."""
        for schema_id, version in self.ids_in(context).items():
            if version.content() == content:
                return schema_id
        return None

    def context_of_id(self, schema_id: int, subject: str | None) -> str:
        """The context `GET /schemas/ids/{id}?subject=` looks the id up in, as Confluent does: the subject's; for a
        subject of the default context that does not have the id there, the first context in which the same name
        qualified has it."""
        context = context_of(subject)
        if context != "." or not subject or self.uses_of(schema_id):
            return context
        for other in self.contexts():
            if any(v.id == schema_id for v in self.live(qualifier(other) + subject, deleted=True)):
                return other
        return context

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that reference this subject version."""
        return sorted({v.id for versions in self.versions.values() for v in versions.values() if not v.deleted
                       and any(r.get("subject") == subject and int(r.get("version", -1)) == version
                               for r in v.references)})

    @staticmethod
    def _fallbacks(subject: str | None) -> tuple:
        """Where a subject's config or mode comes from, first first: its own, its context's, the global one."""
        if subject is None:
            return None,
        context = qualifier(context_of(subject))
        return (subject, context, None) if context and context != subject else (subject, None)

    def compatibility(self, subject: str | None) -> str:
        for name in self._fallbacks(subject):
            level = self.configs.get(name, {}).get("compatibilityLevel")
            if level:
                return level
        return "BACKWARD"

    def mode(self, subject: str | None) -> str:
        for name in self._fallbacks(subject):
            if name in self.modes:
                return self.modes[name]
        return "READWRITE"

    def contexts(self) -> list[str]:
        return sorted({"."} | {context_of(s) for s in self.versions})
