"""ApiVersions: the table of APIs and version ranges we serve.

The table is one Kafka release, 4.0: every API's maximum is exactly Apache Kafka 4.0's. Clients infer the broker's
release from the table (kafka-python matches it against its per-release tables; a ListOffsets v11 would say 4.2,
and a client pinned to 4.0 then sends DescribeGroups v6), so a mixed table makes them send versions we do not serve.
4.0 rather than 4.1 because we can serve every 4.0 version honestly: 4.1 adds Produce v13 and OffsetCommit/
OffsetFetch v10 (topics by id) and InitProducerId v6 (two-phase commit), which need work elsewhere first.
The 4.0 versions new to us are answered as Kafka 4.0 does: Produce v12 is v11 (its implicit partition add needs the
transaction.version 2 feature, which we do not advertise), Fetch v17 adds a follower's directory id, ListOffsets
v10 a timeout for remote storage (we have none), DescribeGroups v6 GROUP_ID_NOT_FOUND with a message (KIP-1043),
DescribeCluster v2 fenced brokers (never, with one broker). Of the APIs 4.0 adds or a 4.0 admin client calls, we
serve those one broker can answer honestly (odradek/broker/handlers/partition_admin.py, AlterReplicaLogDirs, key 74
as 4.0's ListClientMetricsResources v0, which 4.1 renames ListConfigResources), the ACL APIs (29-31) and the
client quota APIs (48, 49) and the SCRAM credential APIs (50, 51); UpdateFeatures, delegation tokens, the KRaft
quorum's APIs and streams groups are not advertised (Kafka 4.3's AdminClient ends those calls in
UnsupportedVersionException at once: tests/interop/test_java_admin.py), nor any feature, so a 4.x client runs
transactions v1. Share groups are the exception to the one release: ShareGroupHeartbeat, ShareGroupDescribe (v1),
ShareFetch and ShareAcknowledge (v1-v2) are advertised as Kafka 4.2+ advertise them, on a single node
(handlers/share.py), because 4.0's early-access v0 is what no current client sends; 4.3 clients and librdkafka 2.16
need no feature level to use them (Kafka gates them by share.version, which needs the tagged feature fields this
answer leaves out for old kcat).

Ranges start at 0 (old librdkafka turns compression off unless Produce starts at 0; aiokafka fails when a minimum is
above its own maximum). The answer carries no tagged fields, because Debian's kcat (librdkafka 2.0.2) mis-skips them.
A request at a version we do not know still gets an answer, at v0 with UNSUPPORTED_VERSION and our table (KIP-511),
so the client can retry at a version we serve. The table's entries are encoded once per version and copied into each
answer (every client connection asks once; encoding the 52 entries was over half the cost of answering).
"""

from __future__ import annotations

from odradek.errors import ErrorCode
from odradek.protocol import API_BY_KEY, RequestHeader, api, pre_encode

API_VERSIONS = api("ApiVersions")
ApiVersionsResponse = API_VERSIONS.response


def make(served_keys: set[int]):
    """The ApiVersions handler and the KIP-511 answer, for the given handled API keys (plus ApiVersions)."""
    served_keys = served_keys | {API_VERSIONS.key}
    table = [
        ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
        for a in sorted(API_BY_KEY.values(), key=lambda a: a.key) if a.key in served_keys
    ]

    encoded: dict[int, list] = {}  # version: the table's entries as that version encodes them

    def entries(version: int) -> list:
        table_as = encoded.get(version)
        if table_as is None:
            table_as = encoded[version] = [pre_encode(API_VERSIONS.key, version, entry) for entry in table]
        return table_as

    def answer_api_versions(connection, header: RequestHeader, request):
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=entries(header.api_version),
                                   throttle_time_ms=0)

    def unsupported_version_answer(header: RequestHeader):
        if header.api_key != API_VERSIONS.key:
            return None
        header.api_version = 0
        return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=entries(0), throttle_time_ms=0)

    return answer_api_versions, unsupported_version_answer
