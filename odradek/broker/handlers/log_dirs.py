"""DescribeLogDirs: the log directory, and each partition's size in it, as `kafka-log-dirs --describe` shows.
AlterReplicaLogDirs: moving a partition to a log directory, which with one directory only succeeds in place.

One broker, one log directory (log.dirs), so the answer has one result. A partition's size is the bytes of its
segment files; offset_lag is 0 (there is no future replica being moved in); v4's total and usable bytes come from
statvfs of the directory's file system. A request for partitions we do not host simply leaves them out, as Kafka's
answer does.

AlterReplicaLogDirs answers as Kafka's ReplicaManager.alterReplicaLogDirs: a path that is not a configured log
directory (absolute, as Kafka compares them) is LOG_DIR_NOT_FOUND, a partition we do not host REPLICA_NOT_AVAILABLE,
and a partition already in the named directory succeeds without moving.
With an authorizer, describing needs DESCRIBE on the cluster and moving ALTER on it (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import os

from odradek.errors import ErrorCode
from odradek.protocol import api
from odradek.protocol.acl import AclOperation

DESCRIBE_LOG_DIRS = api("DescribeLogDirs")
ALTER_REPLICA_LOG_DIRS = api("AlterReplicaLogDirs")
DescribeLogDirsResponse = DESCRIBE_LOG_DIRS.response
AlterReplicaLogDirsResponse = ALTER_REPLICA_LOG_DIRS.response


def handlers(broker) -> dict:
    def answer_describe_log_dirs(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.DESCRIBE):
            return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                           results=[])
        if request.topics is None:
            wanted = {name: range(len(topic.partitions)) for name, topic in broker.metadata.topics.items()}
        else:
            wanted = {entry.topic: entry.partitions for entry in request.topics}
        topics = []
        for name, indexes in wanted.items():
            partitions = [
                DescribeLogDirsResponse.DescribeLogDirsPartition(
                    partition_index=index, partition_size=partition.log.size_bytes, offset_lag=0,
                    is_future_key=False)
                for index in indexes if (partition := broker.partitions.get((name, index))) is not None]
            if partitions:
                topics.append(DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=partitions))
        disk = os.statvfs(broker.log_dir)
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, results=[DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.NONE, log_dir=str(broker.log_dir), topics=topics,
                total_bytes=disk.f_blocks * disk.f_frsize, usable_bytes=disk.f_bavail * disk.f_frsize)])

    def answer_alter_replica_log_dirs(connection, header, request):
        destinations = {(topic.name, index): entry.path
                        for entry in request.dirs for topic in entry.topics for index in topic.partitions}
        allowed = broker.access(connection).allows_cluster(AclOperation.ALTER)
        by_topic: dict = {}
        for (name, index), path in destinations.items():
            if not allowed:
                code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elif path != str(broker.log_dir):
                code = ErrorCode.LOG_DIR_NOT_FOUND
            elif (name, index) not in broker.partitions:
                code = ErrorCode.REPLICA_NOT_AVAILABLE
            else:
                code = ErrorCode.NONE  # already there: one log directory
            by_topic.setdefault(name, []).append(AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                partition_index=index, error_code=code))
        return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
            for name, partitions in by_topic.items()])

    return {DESCRIBE_LOG_DIRS.key: answer_describe_log_dirs,
            ALTER_REPLICA_LOG_DIRS.key: answer_alter_replica_log_dirs}
