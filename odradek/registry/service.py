"""What each Confluent Schema Registry call does, on the store's state, with Confluent's error codes and messages
(RegistryError: HTTP status, error_code, message). odradek.registry.app maps the REST routes onto these methods.
"""

from __future__ import annotations

import json
from typing import Any

from odradek.registry import schemas
from odradek.registry.compatibility import LEVELS, check
from odradek.registry.schemas import InvalidSchema, ParsedSchema
from odradek.registry.state import (CONFIG, DELETE_SUBJECT, MODE, State, Version, context_of, schema_key,
                                    subject_key)
from odradek.registry.store import KafkaStore

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
CONFIG_FIELDS = ("compatibilityLevel", "normalize", "validateFields", "compatibilityGroup", "defaultMetadata",
                 "overrideMetadata", "defaultRuleSet", "overrideRuleSet", "alias")
MAX_VERSION = 2 ** 31 - 1
PARSED_CACHE = 1024


class RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what="") -> RegistryError:
    return RegistryError(404, 40403, f"Schema {what} not found".replace("  ", " "))


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def parse(state: State, schema_type: str, text, references: list, normalize: bool = False) -> ParsedSchema:
    """A schema parsed as the registry parses it, its references resolved in `state` (RegistryError 42201 if it
    does not parse or a reference is not registered): what a reader of `_schemas` (odradek/iceberg) needs without a
    store; Registry.parse is this with a cache."""
    return _parse_resolved(schema_type, text, resolve_references(state, references), normalize)


def _parse_resolved(schema_type: str, text, resolved: list[tuple[str, str]], normalize: bool) -> ParsedSchema:
    try:
        return schemas.parse(schema_type, text, resolved, normalize)
    except InvalidSchema as exc:
        raise invalid_schema(str(exc)) from None


def resolve_references(state: State, references: list, seen: frozenset = frozenset()) -> list[tuple[str, str]]:
    """The (name, schema) of each reference and of theirs, deepest first."""
    if not isinstance(references, list):
        raise invalid_schema("references must be a list")
    resolved = []
    for reference in references:
        if not isinstance(reference, dict) or not {"name", "subject", "version"} <= set(reference):
            raise invalid_schema(f"Invalid reference {reference}: name, subject and version are required")
        version = find_version(state, reference["subject"], reference["version"], deleted=True,
                               missing=lambda: invalid_schema(f"Invalid schema: reference {reference['name']} "
                                                              f"(subject {reference['subject']} version "
                                                              f"{reference['version']}) is not registered"))
        key = (version.subject, version.version)
        if key in seen:
            raise invalid_schema(f"Invalid schema: circular reference {reference['name']}")
        resolved += resolve_references(state, version.references, seen | {key})
        resolved.append((reference["name"], version.schema))
    return resolved


def find_version(state: State, subject: str, version, deleted: bool = False, missing=None) -> Version:
    """A subject's version (-1 or "latest": its last live one); `missing()` or Confluent's 404 if it has none."""
    versions = state.live(subject, deleted=True)
    if not versions:
        raise missing() if missing else subject_not_found(subject)
    number = _version_number(version)
    if number == -1:
        live = [v for v in versions if deleted or not v.deleted]
        if not live:
            raise missing() if missing else subject_not_found(subject)
        return live[-1]
    found = state.versions[subject].get(number)
    if found is None or (found.deleted and not deleted):
        raise missing() if missing else version_not_found(number)
    return found


class Registry:
    def __init__(self, store: KafkaStore):
        self.store = store
        self._parsed_cache: dict[tuple, ParsedSchema] = {}  # oldest first; its users never change what they get

    @property
    def state(self) -> State:
        return self.store.state

    # ---- parsing ----

    def parse(self, state: State, schema_type: str, text, references: list, normalize: bool = False
              ) -> ParsedSchema:
        """The parsed schema, from the cache of recent ones (every registration parses the versions it checks)."""
        resolved = resolve_references(state, references)
        key = (schema_type, text, tuple(resolved), normalize)
        found = self._parsed_cache.get(key) if isinstance(text, str) else None
        if found is None:
            found = _parse_resolved(schema_type, text, resolved, normalize)
            if len(self._parsed_cache) >= PARSED_CACHE:
                self._parsed_cache.pop(next(iter(self._parsed_cache)))
            self._parsed_cache[key] = found
        return found

    def _parsed(self, state: State, version: Version) -> ParsedSchema:
        return self.parse(state, version.schema_type, version.schema, version.references)

    # ---- lookups ----

    def get_version(self, subject: str, version, deleted: bool = False) -> Version:
        _version_number(version)  # a bad version id is refused before the subject is looked up, as Confluent does
        with self.store.lock:
            if not self.state.live(subject, deleted=deleted):
                raise subject_not_found(subject)
            return find_version(self.state, subject, version, deleted)

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> Version:
        """The id's schema in the context the `subject` parameter names (State.context_of_id); the version it is,
        first registered in that context, is under a subject of it."""
        with self.store.lock:
            context = self.state.context_of_id(schema_id, subject)
            version = self.state.ids_in(context).get(schema_id)
            if version is None or not self.state.uses_of(schema_id, context):
                raise RegistryError(404, 40403, "Schema not found")
            return version

    def schema_by_guid(self, guid: str) -> Version:
        with self.store.lock:
            for context in self.state.contexts():
                for schema_id, version in self.state.ids_in(context).items():
                    if schemas.guid(version.schema_type, version.schema) == guid and \
                            self.state.uses_of(schema_id, context):
                        return version
        raise RegistryError(404, 40403, "Schema not found")

    def serialized(self, version: Version) -> str:
        """A PROTOBUF schema as its base64 FileDescriptorProto (format=serialized)."""
        with self.store.lock:
            return self._parsed(self.state, version).serialized()

    def lookup(self, subject: str, body: dict, normalize: bool, deleted: bool) -> Version:
        """POST /subjects/{subject}: the version of this subject that holds this schema."""
        with self.store.lock:
            state = self.state
            if not state.live(subject, deleted=deleted):
                raise subject_not_found(subject)
            schema_type, text, references = _schema_fields(body)
            parsed = self.parse(state, schema_type, text, references, normalize)
            for version in reversed(state.live(subject, deleted=deleted)):
                if self._same(state, version, parsed, references, normalize):
                    return version
        raise RegistryError(404, 40403, "Schema not found")

    def _same(self, state: State, version: Version, parsed: ParsedSchema, references: list, normalize: bool) -> bool:
        if version.schema_type != parsed.schema_type or version.references != references:
            return False
        if version.schema == parsed.text:
            return True
        try:
            return self.parse(state, version.schema_type, version.schema, version.references,
                              normalize).text == parsed.text
        except RegistryError:
            return False

    # ---- registering ----

    def register(self, subject: str, body: dict, normalize: bool = False) -> Version:
        _check_subject(subject)
        schema_type, text, references = _schema_fields(body)
        wanted_id, wanted_version = body.get("id"), body.get("version")
        metadata, rule_set = body.get("metadata"), body.get("ruleSet")
        for name, value in (("id", wanted_id), ("version", wanted_version)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise RegistryError(422, 42201 if name == "id" else 42202, f"Invalid {name} {value}")
        result: list[Version] = []

        context = context_of(subject)

        def compute(state: State):
            result.clear()
            ids = state.ids_in(context)
            mode = state.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise RegistryError(422, 42205, f"Subject {subject} is in read-only mode")
            if (wanted_id or wanted_version) and mode != "IMPORT" and wanted_id not in (None, 0, -1):
                existing = ids.get(wanted_id)
                if existing is None or existing.schema != text:
                    raise RegistryError(422, 42205, f"Subject {subject} is not in import mode")
            normalized = normalize or bool(state.configs.get(subject, state.configs.get(None, {})).get("normalize"))
            parsed = self.parse(state, schema_type, text, references, normalized)
            versions = state.live(subject, deleted=True)
            live = [v for v in versions if not v.deleted]
            for version in reversed(live):
                if self._same(state, version, parsed, references, normalized) and \
                        (metadata is None or version.metadata == metadata) and \
                        (rule_set is None or version.rule_set == rule_set):
                    result.append(version)
                    return []
            if mode != "IMPORT":
                previous = [(v.version, self._parsed(state, v)) for v in live]
                problems = check(state.compatibility(subject), parsed, previous)
                if problems:
                    raise RegistryError(409, 409, f'Schema being registered is incompatible with an earlier schema '
                                                  f'for subject "{subject}", details: [{", ".join(problems)}]')
            content = (schema_type, parsed.text, _json_refs(references))
            schema_id = wanted_id if wanted_id not in (None, 0, -1) else state.id_of(content, context)
            if schema_id is None:
                schema_id = state.max_id(context) + 1
            elif ids.get(schema_id) is not None and ids[schema_id].content() != content:
                raise RegistryError(422, 42207, f"Overwrite new schema with id {schema_id} in context {context} is "
                                                f"not permitted.")
            number = wanted_version or (max((v.version for v in versions), default=0) + 1)
            if mode == "IMPORT" and number in state.versions.get(subject, {}):
                raise RegistryError(422, 42205, f"Version {number} of subject {subject} already exists")
            version = Version(subject, number, schema_id, parsed.text, schema_type, references, False,
                              metadata if metadata is not None else (live[-1].metadata if live else None),
                              rule_set if rule_set is not None else (live[-1].rule_set if live else None))
            result.append(version)
            return [(schema_key(subject, number), version.value())]

        self.store.write(compute)
        return result[0]

    def test_compatibility(self, subject: str, version, body: dict, normalize: bool) -> list[str]:
        """The incompatibilities of the body's schema with `version` of the subject (None: the versions the
        subject's level checks)."""
        with self.store.lock:
            state = self.state
            schema_type, text, references = _schema_fields(body)
            parsed = self.parse(state, schema_type, text, references, normalize)
            level = state.compatibility(subject)
            if version is None:
                previous = [(v.version, self._parsed(state, v)) for v in state.live(subject)]
            else:
                if not state.live(subject):
                    raise subject_not_found(subject)
                old = find_version(state, subject, version)
                previous = [(old.version, self._parsed(state, old))]
                level = level.removesuffix("_TRANSITIVE")
            return check(level, parsed, previous)

    # ---- deletes ----

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        result: list[int] = []

        def compute(state: State):
            self._writable(state, subject)
            versions = state.live(subject, deleted=True)
            if not versions:
                raise subject_not_found(subject)
            live = [v for v in versions if not v.deleted]
            if permanent and live:
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                                f"permanently deleted")
            if not permanent and not live:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                                                f"permanently")
            for version in versions:
                if state.referenced_by(subject, version.version):
                    raise _reference_exists(subject, version.version)
            result[:] = [v.version for v in versions]
            if permanent:  # the versions go, and the subject's own config and mode with them
                return [(schema_key(subject, v.version), None) for v in versions] + \
                    [(subject_key(kind, subject), None) for kind, held in ((CONFIG, state.configs),
                                                                         (MODE, state.modes)) if subject in held]
            return [(subject_key(DELETE_SUBJECT, subject), {"subject": subject, "version": versions[-1].version})]

        self.store.write(compute)
        return result

    def delete_version(self, subject: str, version, permanent: bool) -> int:
        result: list[int] = []

        def compute(state: State):
            self._writable(state, subject)
            if not state.live(subject, deleted=True):
                raise subject_not_found(subject)
            found = find_version(state, subject, version, deleted=permanent)
            if permanent and not found.deleted:
                raise RegistryError(404, 40407, f"Subject '{subject}' Version {found.version} was not deleted first "
                                                f"before being permanently deleted")
            if state.referenced_by(subject, found.version):
                raise _reference_exists(subject, found.version)
            result.append(found.version)
            if permanent:
                return [(schema_key(subject, found.version), None)]
            return [(schema_key(subject, found.version), {**found.value(), "deleted": True})]

        try:
            self.store.write(compute)
        except RegistryError as exc:
            if exc.error_code == 40402 and not permanent:
                with self.store.lock:
                    number = _version_number(version)
                    gone = self.state.versions.get(subject, {}).get(number)
                if gone is not None and gone.deleted:
                    raise RegistryError(404, 40406, f"Subject '{subject}' Version {number} was soft deleted.Set "
                                                    f"permanent=true to delete permanently") from None
            raise
        return result[0]

    @staticmethod
    def _writable(state: State, subject: str | None) -> None:
        if state.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(422, 42205, f"Subject {subject} is in read-only mode")

    # ---- config and mode ----

    def get_config(self, subject: str | None, default_to_global: bool) -> dict:
        with self.store.lock:
            config = self.state.configs.get(subject)
            if config is None and subject is not None and not default_to_global:
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility "
                                                f"configured")
            config = dict(config or self.state.configs.get(None) or {})
            config.setdefault("compatibilityLevel", "BACKWARD")
            return config

    def set_config(self, subject: str | None, body: Any) -> dict:
        if not isinstance(body, dict):
            raise RegistryError(422, 42203, _INVALID_LEVEL)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise RegistryError(422, 42203, _INVALID_LEVEL)
        if subject is not None:
            _check_subject(subject)
        update = {key: body[key] for key in CONFIG_FIELDS if key in body and key != "compatibilityLevel"}
        if level is not None:
            update["compatibilityLevel"] = level.upper()

        def compute(state: State):
            merged = {**state.configs.get(subject, {}), **update}
            return [(subject_key(CONFIG, subject), merged)]

        self.store.write(compute)
        answer = {("compatibility" if key == "compatibilityLevel" else key): value for key, value in update.items()}
        return answer

    def delete_config(self, subject: str | None) -> dict:
        previous: list[dict] = []

        def compute(state: State):
            if subject is not None and subject not in state.configs and not state.live(subject, deleted=True):
                raise subject_not_found(subject)
            previous.append(dict(state.configs.get(subject) or {"compatibilityLevel": state.compatibility(None)}))
            return [(subject_key(CONFIG, subject), None)] if subject in state.configs else []

        self.store.write(compute)
        return previous[-1]

    def get_mode(self, subject: str | None, default_to_global: bool) -> str:
        with self.store.lock:
            if subject is not None and subject not in self.state.modes and not default_to_global:
                raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
            return self.state.mode(subject)

    def set_mode(self, subject: str | None, body: Any, force: bool) -> str:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE "
                                            "and IMPORT.")
        mode = mode.upper()

        def compute(state: State):
            has_schemas = state.live(subject, deleted=True) if subject is not None else state.versions
            if mode == "IMPORT" and has_schemas and not force and state.mode(subject) != "IMPORT":
                raise RegistryError(422, 42205, "Cannot import since found existing subjects")
            return [(subject_key(MODE, subject), {"mode": mode})]

        self.store.write(compute)
        return mode

    def delete_mode(self, subject: str) -> str:
        previous: list[str] = []

        def compute(state: State):
            if subject not in state.modes:
                raise subject_not_found(subject)
            previous.append(state.modes[subject])
            return [(subject_key(MODE, subject), None)]

        self.store.write(compute)
        return previous[0]


_INVALID_LEVEL = ("Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
                  "forward_transitive, and full_transitive")


def _reference_exists(subject: str, version: int) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema "
                                     f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")


def _json_refs(references: list) -> str:
    return json.dumps(references, sort_keys=True)


def _check_subject(subject: str) -> None:
    if not subject or not subject.strip() or any(ord(c) < 32 for c in subject):
        raise RegistryError(422, 42208, "The specified subject is not valid.")


def _version_number(version) -> int:
    """A version path parameter: 1..2^31-1, or "latest" / -1 for the newest."""
    if version in ("latest", -1, "-1"):
        return -1
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = 0
    if not 1 <= number <= MAX_VERSION:
        raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed "
                                        f"values are between [1, 2^31-1] and the string \"latest\"")
    return number


def _schema_fields(body: Any) -> tuple[str, str, list]:
    """schemaType, schema and references of a request body, checked for shape."""
    if not isinstance(body, dict):
        raise RegistryError(422, 422, "Unprocessable Entity: the body must be a JSON object")
    text = body.get("schema")
    if text is None or text == "":
        raise invalid_schema("Empty schema")
    schema_type = body.get("schemaType") or "AVRO"
    if schema_type not in schemas.SCHEMA_TYPES:
        raise invalid_schema(f"Invalid schemaType {schema_type}")
    references = body.get("references") or []
    if not isinstance(references, list):
        raise invalid_schema("references must be a list")
    for name in ("metadata", "ruleSet"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise RegistryError(422, 422, f"Unprocessable Entity: {name} must be an object")
    return schema_type, text, references
