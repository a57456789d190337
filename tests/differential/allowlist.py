"""The differences between Kafka 4.3.1 and Odradek that the differential harness allows, each with the reason
(docs/compatibility.md explains them). An entry names the API, its versions (None: all), the case (None: every
case) and the field path of the normalised answer (a prefix matches the fields under it). `open` marks a
difference that is Odradek's to fix and not yet fixed; the others are decisions.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Allowed:
    api: str
    versions: range | None
    case: str | None
    field: str
    reason: str
    open: bool = False

    def matches(self, api_name: str, version: int, case: str, path: str) -> bool:
        return (self.api == api_name and (self.versions is None or version in self.versions)
                and (self.case is None or self.case == case)
                and (path == self.field or path.startswith(self.field + ".") or path.startswith(self.field + "[]")))


ALLOWED = [
    # -- decisions ---------------------------------------------------------------------------------------------
    Allowed("ApiVersions", None, None, "api_keys",
            "Odradek advertises Kafka 4.0's maxima from version 0 of every API it serves (registry.py), Kafka 4.3 "
            "more APIs, later maxima and no versions KIP-896 removed"),
    Allowed("ApiVersions", None, None, "supported_features",
            "Odradek has no feature levels (metadata.version, transaction.version, group.version): it advertises "
            "none, so clients use what needs none (transactions v1, the classic or KIP-848 v0 protocols)"),
    Allowed("ApiVersions", None, None, "finalized_features", "as supported_features"),
    *(Allowed(name, None, f"lone-{name}", "results[].partitions[].error_code",
              "a share-partition of a topic that does not exist: Kafka answers NOT_COORDINATOR until a FindCoordinator "
              "of key type 2 has made __share_group_state, Odradek makes the topic at the first state request and "
              "answers UNKNOWN_TOPIC_OR_PARTITION, as Kafka then does") for name in (
        "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState",
        "ReadShareGroupStateSummary")),
    Allowed("Metadata", None, "metadata-auto-create", "topics[].error_code",
            "Odradek creates an auto-created topic before it answers; Kafka's controller creates it after "
            "(UNKNOWN_TOPIC_OR_PARTITION, no partitions, until the next Metadata); clients retry either way"),
    Allowed("Metadata", None, "metadata-auto-create", "topics[].partitions", "as topics[].error_code"),
    Allowed("Metadata", None, "metadata-auto-create", "topics[].topic_id", "as topics[].error_code"),
    Allowed("IncrementalAlterConfigs", None, "incremental-alter-configs", "responses[].error_code",
            "one key twice in a resource: Kafka answers UNKNOWN_SERVER_ERROR (an uncaught duplicate-key "
            "exception), Odradek INVALID_REQUEST"),
    Allowed("CreateAcls", None, "authorization", "results[].error_code",
            "an ACL with pattern type ANY or MATCH: Kafka's controller answers UNKNOWN_SERVER_ERROR, Odradek "
            "INVALID_REQUEST; Kafka's own AdminClient refuses to send one"),
    Allowed("CreateAcls", None, "authorization", "<connection>",
            "an ACL with operation UNKNOWN: Kafka closes the connection, Odradek answers INVALID_REQUEST (either "
            "is a refusal the AdminClient never meets: it refuses to build one)"),
    Allowed("DescribeAcls", None, "authorization", "<connection>",
            "a filter with pattern type UNKNOWN: Kafka closes the connection, Odradek answers INVALID_REQUEST"),
    Allowed("DescribeClientQuotas", None, "client-quotas", "error_code",
            "an entity type Kafka does not know: Kafka answers UNSUPPORTED_VERSION, Odradek INVALID_REQUEST"),
    Allowed("ConsumerGroupHeartbeat", None, "consumer-group", "member_epoch",
            "KIP-848 leaves epochs to the coordinator: Kafka bumps the group epoch twice for a first member (the "
            "join, then the subscribed topics' metadata), Odradek once"),
    Allowed("ConsumerGroupHeartbeat", None, "consumer-group", "assignment",
            "KIP-848: Odradek assigns in the first heartbeat's answer, Kafka in the next one"),
    Allowed("ConsumerGroupDescribe", None, "consumer-group", "groups[].assignment_epoch", "as member_epoch"),
    Allowed("ConsumerGroupDescribe", None, "consumer-group", "groups[].group_epoch", "as member_epoch"),
    Allowed("ConsumerGroupDescribe", None, "consumer-group", "groups[].members[].member_epoch", "as member_epoch"),
    # -- open: Odradek's to fix --------------------------------------------------------------------------------
    Allowed("Produce", None, "transactions", "responses[].partition_responses[]",
            "KIP-890 verification: Kafka refuses a transactional produce to a partition not added to the "
            "transaction (INVALID_TXN_STATE), Odradek appends it; later produces follow from that and from EndTxn "
            "v5's epochs", open=True),
    Allowed("EndTxn", range(5, 6), "transactions", "producer_epoch",
            "EndTxn v5 (KIP-890 transactions v2) bumps the epoch in Kafka; Odradek serves v5 with v1 semantics",
            open=True),
    Allowed("AddPartitionsToTxn", None, "transactions", "results_by_transaction[]",
            "follows from EndTxn v5's epoch bump", open=True),
    Allowed("ListOffsets", None, "transactions", "topics[].partitions[].offset",
            "the last stable offset follows from the transactional produce Kafka refused", open=True),
    Allowed("DeleteTopics", None, "authorization", "responses[].error_code",
            "Kafka 4.3 in combined mode deleted a topic its ACLs deny the principal (DENY ALL by prefix); Odradek "
            "refuses TOPIC_AUTHORIZATION_FAILED: to be understood", open=True),
    Allowed("AddPartitionsToTxn", range(4, 6), "lone-AddPartitionsToTxn",
            "results_by_transaction[].topic_results[].results_by_partition[].partition_error_code",
            "a broker's verify_only check of an unknown transactional id: Kafka INVALID_PRODUCER_ID_MAPPING, Odradek "
            "TRANSACTION_ABORTABLE", open=True),
]


def allowed(api_name: str, version: int, case: str, path: str) -> Allowed | None:
    """The entry that allows a difference at `path` of that answer, or None."""
    return next((entry for entry in ALLOWED if entry.matches(api_name, version, case, path)), None)


CODES = "codes"  # any answer (a tuple of error codes), as opposed to "closed" or "no answer"


@dataclasses.dataclass(frozen=True)
class FuzzAllowed:
    """A difference of outcomes the fuzz run allows for an API: Kafka's and Odradek's, each a tuple of error codes,
    CODES (any answer), "closed" or "no answer"."""
    api: str
    kafka: object
    odradek: object
    reason: str
    open: bool = False

    def matches(self, api_name: str, kafka, odradek) -> bool:
        def fits(pattern, outcome) -> bool:
            return pattern == outcome or (pattern == CODES and isinstance(outcome, tuple))
        return self.api == api_name and fits(self.kafka, kafka) and fits(self.odradek, odradek)


ODD_INPUT = ("odd input refused with another code: where two checks fail, Kafka and Odradek check in another order, "
             "or Odradek takes a value Kafka refuses (docs/compatibility.md, the fuzz run)")
FUZZ_ALLOWED: list[FuzzAllowed] = [
    FuzzAllowed(name, CODES, CODES, ODD_INPUT, open=True) for name in (
        "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
        "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "ApiVersions",
        "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
        "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit",
        "DescribeConfigs", "AlterConfigs", "AlterReplicaLogDirs", "DescribeLogDirs", "DescribeAcls", "CreateAcls",
        "DeleteAcls", "CreatePartitions", "DeleteGroups", "ElectLeaders", "IncrementalAlterConfigs",
        "AlterPartitionReassignments", "ListPartitionReassignments", "OffsetDelete", "DescribeUserScramCredentials",
        "AlterUserScramCredentials", "DescribeCluster", "DescribeProducers", "DescribeTransactions",
        "ListTransactions", "DescribeClientQuotas", "AlterClientQuotas", "ConsumerGroupHeartbeat",
        "ConsumerGroupDescribe", "ListConfigResources", "DescribeTopicPartitions", "ShareGroupHeartbeat",
        "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge", "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
        "DeleteShareGroupOffsets", "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
        "DeleteShareGroupState", "ReadShareGroupStateSummary")] + [
    FuzzAllowed(name, "no answer", CODES, f"Kafka leaves {what} unanswered (for 5 s and more); Odradek answers it")
    for name, what in (("WriteTxnMarkers", "markers for partitions it does not have"),
                       ("AddPartitionsToTxn", "a v4+ request with no transactions"),
                       ("Produce", "a partition with null records"),
                       ("AlterConfigs", "a resource of a type it does not know"),
                       ("DescribeShareGroupOffsets", "a group with an empty topic name or no topics"))]


def fuzz_allowed(api_name: str, kafka, odradek) -> FuzzAllowed | None:
    return next((entry for entry in FUZZ_ALLOWED if entry.matches(api_name, kafka, odradek)), None)
