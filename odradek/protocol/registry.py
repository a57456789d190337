"""The APIs this broker serves and the version range it advertises for each.

The ranges are a compatibility decision, not a transcription: every minimum but the share APIs' is 0 because
aiokafka gives up when a broker's minimum is above its own maximum and librdkafka before 2.8 turns compression off
unless Produce starts at 0; every maximum is Kafka 4.0's (but for the share-group APIs, at Kafka 4.2+'s ranges, from
the first version 4.x clients send), so the table as a whole is one release (the reasons are in
odradek/broker/handlers/api_versions.py). The schemas in `apis` may define later versions than we advertise; those
are usable by `encode_request`/`decode_response` only.
"""

from __future__ import annotations

from . import apis as m
from .codec import decoder, encoder


class Api:
    """One API key: its message classes, our advertised range, and per-version compiled codecs (filled lazily)."""

    __slots__ = ("key", "name", "request", "response", "min_version", "max_version", "flexible_from",
                 "_codecs")

    def __init__(self, request: type, response: type, min_version: int, max_version: int):
        schema = request._schema
        for v in (min_version, max_version):
            if v not in schema.valid_versions or v not in response._schema.valid_versions:
                raise ValueError(f"{schema.name}: advertised version {v} is not defined by the schema")
        self.key = schema.api_key
        self.name = schema.name.removesuffix("Request")
        self.request, self.response = request, response
        self.min_version, self.max_version = min_version, max_version
        flexible = schema.flexible_versions
        self.flexible_from = flexible.lo if flexible.lo <= flexible.hi else None
        self._codecs: dict = {}

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        return 1 if self.is_flexible(version) and self.key != 18 else 0

    def codec(self, kind: str, version: int):
        """`kind` is "request_decoder", "request_encoder", "response_decoder" or "response_encoder"."""
        fn = self._codecs.get((kind, version))
        if fn is None:
            cls = self.request if kind.startswith("request") else self.response
            if kind == "response_encoder":
                fn = encoder(cls, version, strict=False)
            else:
                fn = (decoder if kind.endswith("decoder") else encoder)(cls, version)
            self._codecs[kind, version] = fn
        return fn

    def __repr__(self) -> str:
        return f"Api({self.key}, {self.name}, {self.min_version}-{self.max_version})"


_ADVERTISED = [
    (m.ProduceRequest, m.ProduceResponse, 0, 12),
    (m.FetchRequest, m.FetchResponse, 0, 17),
    (m.ListOffsetsRequest, m.ListOffsetsResponse, 0, 10),
    (m.MetadataRequest, m.MetadataResponse, 0, 13),
    (m.OffsetCommitRequest, m.OffsetCommitResponse, 0, 9),
    (m.OffsetFetchRequest, m.OffsetFetchResponse, 0, 9),
    (m.FindCoordinatorRequest, m.FindCoordinatorResponse, 0, 6),
    (m.JoinGroupRequest, m.JoinGroupResponse, 0, 9),
    (m.HeartbeatRequest, m.HeartbeatResponse, 0, 4),
    (m.LeaveGroupRequest, m.LeaveGroupResponse, 0, 5),
    (m.SyncGroupRequest, m.SyncGroupResponse, 0, 5),
    (m.DescribeGroupsRequest, m.DescribeGroupsResponse, 0, 6),
    (m.ListGroupsRequest, m.ListGroupsResponse, 0, 5),
    (m.SaslHandshakeRequest, m.SaslHandshakeResponse, 0, 1),
    (m.ApiVersionsRequest, m.ApiVersionsResponse, 0, 4),
    (m.CreateTopicsRequest, m.CreateTopicsResponse, 0, 7),
    (m.DeleteTopicsRequest, m.DeleteTopicsResponse, 0, 6),
    (m.DeleteRecordsRequest, m.DeleteRecordsResponse, 0, 2),
    (m.InitProducerIdRequest, m.InitProducerIdResponse, 0, 5),
    (m.OffsetForLeaderEpochRequest, m.OffsetForLeaderEpochResponse, 0, 4),
    (m.AddPartitionsToTxnRequest, m.AddPartitionsToTxnResponse, 0, 5),
    (m.AddOffsetsToTxnRequest, m.AddOffsetsToTxnResponse, 0, 4),
    (m.EndTxnRequest, m.EndTxnResponse, 0, 5),
    (m.WriteTxnMarkersRequest, m.WriteTxnMarkersResponse, 0, 1),
    (m.TxnOffsetCommitRequest, m.TxnOffsetCommitResponse, 0, 5),
    (m.DescribeConfigsRequest, m.DescribeConfigsResponse, 0, 4),
    (m.AlterConfigsRequest, m.AlterConfigsResponse, 0, 2),
    (m.AlterReplicaLogDirsRequest, m.AlterReplicaLogDirsResponse, 0, 2),
    (m.DescribeLogDirsRequest, m.DescribeLogDirsResponse, 0, 4),
    (m.DescribeAclsRequest, m.DescribeAclsResponse, 0, 3),
    (m.CreateAclsRequest, m.CreateAclsResponse, 0, 3),
    (m.DeleteAclsRequest, m.DeleteAclsResponse, 0, 3),
    (m.SaslAuthenticateRequest, m.SaslAuthenticateResponse, 0, 2),
    (m.CreatePartitionsRequest, m.CreatePartitionsResponse, 0, 3),
    (m.DeleteGroupsRequest, m.DeleteGroupsResponse, 0, 2),
    (m.ElectLeadersRequest, m.ElectLeadersResponse, 0, 2),
    (m.IncrementalAlterConfigsRequest, m.IncrementalAlterConfigsResponse, 0, 1),
    (m.AlterPartitionReassignmentsRequest, m.AlterPartitionReassignmentsResponse, 0, 0),
    (m.ListPartitionReassignmentsRequest, m.ListPartitionReassignmentsResponse, 0, 0),
    (m.OffsetDeleteRequest, m.OffsetDeleteResponse, 0, 0),
    (m.DescribeUserScramCredentialsRequest, m.DescribeUserScramCredentialsResponse, 0, 0),
    (m.AlterUserScramCredentialsRequest, m.AlterUserScramCredentialsResponse, 0, 0),
    (m.DescribeClusterRequest, m.DescribeClusterResponse, 0, 2),
    (m.DescribeProducersRequest, m.DescribeProducersResponse, 0, 0),
    (m.DescribeTransactionsRequest, m.DescribeTransactionsResponse, 0, 0),
    (m.ListTransactionsRequest, m.ListTransactionsResponse, 0, 1),
    (m.DescribeClientQuotasRequest, m.DescribeClientQuotasResponse, 0, 1),
    (m.AlterClientQuotasRequest, m.AlterClientQuotasResponse, 0, 1),
    (m.ConsumerGroupHeartbeatRequest, m.ConsumerGroupHeartbeatResponse, 0, 1),
    (m.ConsumerGroupDescribeRequest, m.ConsumerGroupDescribeResponse, 0, 1),
    (m.ListConfigResourcesRequest, m.ListConfigResourcesResponse, 0, 0),
    (m.DescribeTopicPartitionsRequest, m.DescribeTopicPartitionsResponse, 0, 0),
    (m.ShareGroupHeartbeatRequest, m.ShareGroupHeartbeatResponse, 1, 1),
    (m.ShareGroupDescribeRequest, m.ShareGroupDescribeResponse, 1, 1),
    (m.ShareFetchRequest, m.ShareFetchResponse, 1, 2),
    (m.ShareAcknowledgeRequest, m.ShareAcknowledgeResponse, 1, 2),
    (m.InitializeShareGroupStateRequest, m.InitializeShareGroupStateResponse, 0, 0),
    (m.ReadShareGroupStateRequest, m.ReadShareGroupStateResponse, 0, 0),
    (m.WriteShareGroupStateRequest, m.WriteShareGroupStateResponse, 0, 1),
    (m.DeleteShareGroupStateRequest, m.DeleteShareGroupStateResponse, 0, 0),
    (m.ReadShareGroupStateSummaryRequest, m.ReadShareGroupStateSummaryResponse, 0, 1),
    (m.DescribeShareGroupOffsetsRequest, m.DescribeShareGroupOffsetsResponse, 0, 1),
    (m.AlterShareGroupOffsetsRequest, m.AlterShareGroupOffsetsResponse, 0, 0),
    (m.DeleteShareGroupOffsetsRequest, m.DeleteShareGroupOffsetsResponse, 0, 0),
]

API_BY_KEY: dict[int, Api] = {a.key: a for a in (Api(*row) for row in _ADVERTISED)}
_BY_NAME = {a.name: a for a in API_BY_KEY.values()}


def api(name: str) -> Api:
    """Look an API up by Kafka's name, e.g. api("Produce")."""
    return _BY_NAME[name]
