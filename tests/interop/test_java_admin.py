"""Kafka 4.3.1's AdminClient against one `odradek serve` (the module's `broker`), every admin method whose API
Odradek serves, in one JVM (AdminScenarios, tests/java/src/odradek/interop/clients), each asserted on what Kafka
answers: the values a Kafka broker gives and, for refusals, the exception class the client turns Kafka's error code
into. The methods whose APIs Odradek does not advertise end in UnsupportedVersionException at once. Then the same
client over SASL_SSL with ACLs enforced (`secured_broker`, SecuredScenarios): alice is refused with Kafka's
authorization exceptions until the super user grants her ACLs, then produces and consumes in her group."""

from __future__ import annotations

import uuid

import pytest

from tests.interop.java_scenarios import passed, run_scenarios, run_together

SCENARIOS = ["topics", "configs", "acls", "scram", "quotas", "reassignments", "elect_leaders", "log_dirs",
             "records_and_offsets", "groups", "cluster", "transactions", "config_resources", "topic_refusals",
             "consumer_protocol_group", "edges", "unsupported"]
ERRORS = "org.apache.kafka.common.errors."


@pytest.fixture(scope="module")
def both(broker, secured_broker, tmp_path_factory):
    """AdminScenarios on the plain broker and SecuredScenarios on the secured one, side by side."""
    directory = tmp_path_factory.mktemp("java-admin-secured")
    admin, alice = (secured_broker.properties_file(directory, user) for user in ("admin", "alice"))
    return run_together(
        lambda: run_scenarios("AdminScenarios", broker.bootstrap_servers, "-", f"ja-{uuid.uuid4().hex[:6]}",
                              scenarios=SCENARIOS),
        lambda: run_scenarios("SecuredScenarios", secured_broker.bootstrap_servers, admin, alice,
                              f"js-{uuid.uuid4().hex[:6]}", scenarios=["denied", "granted"]))


@pytest.fixture(scope="module")
def lines(both):
    return both[0]


@pytest.fixture(scope="module")
def secured_lines(both):
    return both[1]


def refused(details: dict, key: str) -> str:
    return details[key].removeprefix(ERRORS)


def test_topics_created_described_grown_and_deleted(lines):
    details = passed(lines, "topics")
    assert details["listed"] and details["topic_id_set"] and details["by_id"]
    assert details["partitions"] == 2 and details["partitions_after_increase"] == 4
    assert refused(details, "duplicate_create") == "TopicExistsException"
    assert refused(details, "describe_missing") == "UnknownTopicOrPartitionException"
    assert refused(details, "decrease") == "InvalidPartitionsException"
    assert details["deleted"]


def test_topic_refusals_and_calls_by_id(lines):
    details = passed(lines, "topic_refusals")
    assert refused(details, "replication_factor_too_high") == "InvalidReplicationFactorException"
    assert refused(details, "bad_config") == "InvalidConfigurationException"
    assert refused(details, "bad_name") == "InvalidTopicException"
    assert refused(details, "zero_partitions") == "InvalidPartitionsException"
    assert details["validate_only"] == "none" and details["validate_only_created"] is False
    assert (details["create_result_partitions"], details["create_result_retention"]) == (2, "12345")
    assert details["delete_by_id"] == "none"
    assert refused(details, "delete_unknown_id") == "UnknownTopicIdException"
    assert refused(details, "delete_unknown_name") == "UnknownTopicOrPartitionException"
    assert details["describe_internal"]


def test_configs_described_and_altered_incrementally(lines):
    details = passed(lines, "configs")
    assert details["default_retention"] == {"value": "604800000", "source": "DEFAULT_CONFIG"}
    assert details["set_retention"] == {"value": "1000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert details["appended_cleanup_policy"] == {"value": "delete,compact", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert details["deleted_retention"] == {"value": "604800000", "source": "DEFAULT_CONFIG"}
    assert refused(details, "invalid_value") == "InvalidConfigurationException"
    assert refused(details, "unknown_name") == "InvalidConfigurationException"
    assert details["validate_only_kept"] == "none"
    assert details["after_validate_only"]["value"] == "604800000"
    assert details["broker_num_partitions_present"]
    assert details["broker_log_retention_hours"] == {"value": "168", "source": "DEFAULT_CONFIG"}
    assert refused(details, "missing_topic") == "UnknownTopicOrPartitionException"


def test_acls_without_an_authorizer_are_security_disabled(lines):
    details = passed(lines, "acls")  # Kafka with no authorizer.class.name: SECURITY_DISABLED for every ACL call
    for call in ("create", "describe", "delete"):
        assert refused(details, call) == "SecurityDisabledException"


def test_scram_credentials(lines):
    details = passed(lines, "scram")
    assert details["mechanisms"] == ["SCRAM_SHA_256:8192"] and details["listed"]
    assert refused(details, "after_delete") == "ResourceNotFoundException"
    assert refused(details, "too_few_iterations") == "UnacceptableCredentialException"


def test_client_quotas(lines):
    details = passed(lines, "quotas")
    assert details["described"] == {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0}
    assert details["after_remove"] == {"consumer_byte_rate": 2048.0}
    assert refused(details, "unknown_key") == "InvalidRequestException"


def test_partition_reassignments(lines):
    details = passed(lines, "reassignments")
    assert details["ongoing_after_wait"] == 0 and details["replicas_after"] == details["target"]
    assert refused(details, "elect_preferred_after") == "ElectionNotNeededException"
    assert details["leader_after"] == 1
    assert refused(details, "cancel_without_reassignment") == "NoReassignmentInProgressException"
    assert refused(details, "unknown_broker") == "InvalidReplicaAssignmentException"
    assert details["list_all"] == 0


def test_elect_leaders_when_the_leader_is_preferred(lines):
    details = passed(lines, "elect_leaders")
    assert set(details["preferred"].values()) == {ERRORS + "ElectionNotNeededException"}
    assert set(details["unclean"].values()) == {ERRORS + "ElectionNotNeededException"}
    assert refused(details, "unknown_partition") == "UnknownTopicOrPartitionException"


def test_log_dirs(lines, broker):
    details = passed(lines, "log_dirs")
    assert details["dirs"] == 1 and details["holding_dir"] == str(broker.data_dir)
    assert details["size"] > 0 and details["total_bytes_present"]
    assert details["replica_dir"] == str(broker.data_dir) and details["replica_future_dir"] is None
    assert details["alter_to_same_dir"] == "none"


def test_delete_records_and_list_offsets(lines):
    details = passed(lines, "records_and_offsets")
    assert details["low_watermark"] == 5
    assert details["earliest"]["offset"] == 5 and details["latest"]["offset"] == 10
    assert details["max_timestamp"] == {"offset": 7, "timestamp": 50000}
    assert details["for_timestamp"] == 6 and details["earliest_local"] == 5
    assert refused(details, "beyond_end") == "OffsetOutOfRangeException"
    assert details["delete_all"] == 10


def test_consumer_groups_and_their_offsets(lines):
    details = passed(lines, "groups")
    assert (details["stable_state"], details["stable_members"], details["stable_type"]) == ("Stable", 1, "Classic")
    assert details["stable_assignor"] == "range" and details["stable_member_partitions"] == 2
    assert refused(details, "delete_active_offsets") == "GroupSubscribedToTopicException"
    assert refused(details, "alter_active") == "UnknownMemberIdException"
    assert details["listed"] and details["list_groups"] == ["Classic/consumer/Empty"]
    assert details["empty_state"] == "Empty"
    assert list(details["committed"].values()) == [4, 6]
    assert list(details["altered"].values()) == [2]  # partition 0 altered, partition 1's offset deleted
    assert refused(details, "after_delete") == "GroupIdNotFoundException"
    assert refused(details, "describe_deleted") == "GroupIdNotFoundException"


def test_consumer_protocol_group_described(lines):
    details = passed(lines, "consumer_protocol_group")  # KIP-848: ConsumerGroupDescribe, not DescribeGroups
    assert (details["type"], details["state"], details["members"]) == ("Consumer", "Stable", 1)
    assert details["assigned"] == details["target_assigned"] == 2 and details["group_epoch_present"]
    assert details["assignor"] == "uniform" and details["list_groups"] == ["Consumer/Stable"]
    assert refused(details, "describe_classic") == "GroupIdNotFoundException"
    assert refused(details, "delete_active") == "GroupNotEmptyException"


def test_cluster_and_features(lines):
    details = passed(lines, "cluster")
    assert details["nodes"] == [1] and details["controller_known"] and details["cluster_id"]
    # no authorizer: every cluster operation, as Kafka answers
    assert details["authorized_operations"] == ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE",
                                                "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]
    assert "transaction.version" not in details["finalized_features"]


def test_producers_and_transactions(lines):
    details = passed(lines, "transactions")
    assert details["producer_open_transaction_at"] == 0
    assert details["listed"] == ["Ongoing"] and details["described_state"] == "Ongoing"
    assert len(details["described_partitions"]) == 1 and details["described_producer_matches"]
    assert refused(details, "commit_after_fence") == "ProducerFencedException"
    assert details["lso_after_fence"] == 2  # fencing aborted the open transaction: its marker at 1
    assert refused(details, "describe_unknown") == "TransactionalIdNotFoundException"
    assert details["hanging_open_at"] == details["lso_before_abort"] == 2
    assert details["lso_after_abort"] == details["log_end"] == 4 and not details["open_after_abort"]
    assert details["open_before_terminate"] and details["force_terminate"] == "none"
    assert not details["open_after_terminate"]
    assert refused(details, "commit_after_terminate") == "ProducerFencedException"


def test_config_resources_as_a_4_0_broker(lines):
    details = passed(lines, "config_resources")
    assert refused(details, "all_types") == "UnsupportedVersionException"
    assert details["client_metrics_type"] == 0 and details["client_metrics"] == 0


def test_delete_records_refused_where_kafka_refuses_it(lines):
    details = passed(lines, "edges")  # Kafka's ReplicaManager and Partition.deleteRecordsOnLeader
    assert refused(details, "delete_records_compacted") == "PolicyViolationException"
    assert refused(details, "delete_records_internal") == "InvalidTopicException"


def test_config_and_offset_edges(lines):
    details = passed(lines, "edges")
    assert details["latest_tiered"] == "none" and details["latest_tiered_offset"] == {"offset": -1, "timestamp": -1}
    assert refused(details, "earliest_pending_upload") == "UnsupportedVersionException"  # ListOffsets v11, 4.1
    assert details["retention_synonyms"] == [] and details["retention_type"] == "LONG"
    assert details["retention_documented"]
    assert details["policy_synonyms"] == ["cleanup.policy=compact:DYNAMIC_TOPIC_CONFIG",
                                          "log.cleanup.policy=delete:DEFAULT_CONFIG"]
    assert details["subtract"] == "none"
    assert details["broker_dynamic"] == {"value": "2", "source": "DYNAMIC_BROKER_CONFIG"}
    assert details["broker_dynamic_set"] == details["broker_dynamic_delete"] == "none"
    assert refused(details, "broker_read_only") == "InvalidRequestException"
    assert refused(details, "reassign_duplicate") == "InvalidReplicaAssignmentException"
    assert details["fenced_brokers"] == "none" and details["with_fenced"] == 1
    assert details["topic_authorized_operations"] == ["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE",
                                                      "DESCRIBE_CONFIGS", "READ", "WRITE"]


def test_unserved_apis_end_in_unsupported_version(lines):
    details = passed(lines, "unsupported")
    assert set(details["thrown"].values()) == {ERRORS + "UnsupportedVersionException"}, details["thrown"]
    assert max(details["seconds"].values()) < 30  # within the client's timeout, never a hang


def test_alice_refused_without_acls(secured_lines):
    details = passed(secured_lines, "denied")
    assert refused(details, "produce") == "TopicAuthorizationException"
    assert refused(details, "init_transactions") == "TransactionalIdAuthorizationException"
    assert refused(details, "fetch") == "TopicAuthorizationException"
    assert refused(details, "group_commit") == "GroupAuthorizationException"
    assert details["list_topics_sees_topic"] is False
    assert refused(details, "describe_acls") == "ClusterAuthorizationException"
    assert refused(details, "create_topic") == "TopicAuthorizationException"
    assert refused(details, "describe_group") == "GroupAuthorizationException"


def test_alice_allowed_after_admin_grants_acls(secured_lines):
    details = passed(secured_lines, "granted")
    assert details["acls_described"] == 4
    assert details["consumed"] == [f"v{i}" for i in range(10)]
    assert details["committed"] == 10
    assert details["list_topics_sees_topic"] and details["describe_group_state"] == "Empty"
