/*
 * Kafka 4.3's AdminClient against Odradek, one JSON line per scenario (Scenarios.runAll, side by side): topics and
 * their refusals, partitions, configs (incremental; 4.x's Admin has no legacy alterConfigs), ACLs, SCRAM
 * credentials, client quotas, reassignments, leader elections, log directories, deleteRecords and listOffsets,
 * consumer groups (classic and KIP-848) and their offsets, the cluster and its features, producers and transactions
 * (describe, list, fence, abort, force-terminate), config resources, edges where Kafka refuses; and "unsupported":
 * every admin method whose API Odradek does not serve, each of which must end in UnsupportedVersionException within
 * the client's timeout. The details carry what the broker answered (values, or the exception class a call ended
 * in) and the pytest side asserts what Kafka answers.
 *
 * Usage: AdminScenarios <bootstrap> <client properties file | -> <topic prefix> <scenario,...>
 */
package odradek.interop.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class AdminScenarios {
    private final Properties base;
    private final String prefix;
    private final Admin admin;

    private AdminScenarios(Properties base, String prefix) {
        this.base = base;
        this.prefix = prefix;
        this.admin = Admin.create(Scenarios.with(base, "default.api.timeout.ms", 30000, "request.timeout.ms", 15000));
    }

    public static void main(String[] args) throws Exception {
        AdminScenarios scenarios = new AdminScenarios(Scenarios.clientProperties(args[0], args[1]), args[2]);
        Map<String, Scenarios.Body> all = new LinkedHashMap<>();
        all.put("topics", scenarios::topics);
        all.put("configs", scenarios::configs);
        all.put("acls", scenarios::acls);
        all.put("scram", scenarios::scram);
        all.put("quotas", scenarios::quotas);
        all.put("reassignments", scenarios::reassignments);
        all.put("elect_leaders", scenarios::electLeaders);
        all.put("log_dirs", scenarios::logDirs);
        all.put("records_and_offsets", scenarios::recordsAndOffsets);
        all.put("groups", scenarios::groups);
        all.put("cluster", scenarios::cluster);
        all.put("transactions", scenarios::transactions);
        all.put("config_resources", scenarios::configResources);
        all.put("topic_refusals", scenarios::topicRefusals);
        all.put("consumer_protocol_group", scenarios::consumerProtocolGroup);
        all.put("edges", scenarios::edges);
        all.put("unsupported", scenarios::unsupported);
        try {
            Scenarios.runAll(all, args[3]);
        } finally {
            scenarios.admin.close(Duration.ofSeconds(10));
        }
    }

    private String topic(String name, int partitions, Map<String, String> configs) throws Exception {
        String topic = prefix + "-" + name;
        admin.createTopics(List.of(new NewTopic(topic, Optional.of(partitions), Optional.empty()).configs(configs)))
                .all().get();
        return topic;
    }

    private void produce(String topic, int partition, int count) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(base, new StringSerializer(),
                new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, partition, null, "v" + i));
            }
        }
    }

    private void topics(Map<String, Object> d) throws Exception {
        String topic = topic("topics", 2, Map.of("retention.ms", "3600000"));
        d.put("listed", admin.listTopics().names().get().contains(topic));
        TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        d.put("partitions", described.partitions().size());
        d.put("topic_id_set", !described.topicId().equals(org.apache.kafka.common.Uuid.ZERO_UUID));
        d.put("by_id", admin.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(
                List.of(described.topicId()))).allTopicIds().get().get(described.topicId()).name().equals(topic));
        d.put("duplicate_create", Scenarios.thrown(x -> topic("topics", 2, Map.of())));
        d.put("describe_missing", Scenarios.thrown(x -> admin.describeTopics(List.of(prefix + "-missing"))
                .allTopicNames().get()));
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
        d.put("partitions_after_increase", admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                .partitions().size());
        d.put("decrease", Scenarios.thrown(x -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3)))
                .all().get()));
        admin.deleteTopics(List.of(topic)).all().get();
        long deadline = System.currentTimeMillis() + 30000;
        boolean gone = false;
        while (!gone && System.currentTimeMillis() < deadline) {
            gone = !admin.listTopics().names().get().contains(topic);
            Thread.sleep(100);
        }
        d.put("deleted", gone);
    }

    /** What createTopics and deleteTopics refuse, and the calls by topic id. */
    private void topicRefusals(Map<String, Object> d) throws Exception {
        int brokers = brokerIds().size();
        d.put("replication_factor_too_high", Scenarios.thrown(x -> admin.createTopics(List.of(new NewTopic(
                prefix + "-rf", 1, (short) (brokers + 1)))).all().get()));
        d.put("bad_config", Scenarios.thrown(x -> admin.createTopics(List.of(new NewTopic(prefix + "-badcfg", 1,
                (short) 1).configs(Map.of("cleanup.policy", "sometimes")))).all().get()));
        d.put("bad_name", Scenarios.thrown(x -> admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1)))
                .all().get()));
        d.put("zero_partitions", Scenarios.thrown(x -> admin.createTopics(List.of(new NewTopic(prefix + "-zero", 0,
                (short) 1))).all().get()));
        d.put("validate_only", Scenarios.thrown(x -> admin.createTopics(List.of(new NewTopic(prefix + "-vo", 3,
                (short) 1)), new org.apache.kafka.clients.admin.CreateTopicsOptions().validateOnly(true)).all().get()));
        d.put("validate_only_created", admin.listTopics().names().get().contains(prefix + "-vo"));
        var created = admin.createTopics(List.of(new NewTopic(prefix + "-byid", 2, (short) 1)
                .configs(Map.of("retention.ms", "12345"))));
        created.all().get();
        d.put("create_result_partitions", created.numPartitions(prefix + "-byid").get());
        d.put("create_result_retention", created.config(prefix + "-byid").get().get("retention.ms").value());
        org.apache.kafka.common.Uuid id = created.topicId(prefix + "-byid").get();
        d.put("delete_by_id", Scenarios.thrown(x -> admin.deleteTopics(org.apache.kafka.common.TopicCollection
                .ofTopicIds(List.of(id))).all().get()));
        d.put("delete_unknown_id", Scenarios.thrown(x -> admin.deleteTopics(org.apache.kafka.common.TopicCollection
                .ofTopicIds(List.of(org.apache.kafka.common.Uuid.randomUuid()))).all().get()));
        d.put("delete_unknown_name", Scenarios.thrown(x -> admin.deleteTopics(List.of(prefix + "-nothing"))
                .all().get()));
        d.put("describe_internal", admin.listTopics(new org.apache.kafka.clients.admin.ListTopicsOptions()
                .listInternal(true)).names().get().contains("__consumer_offsets"));
    }

    /** Refusals and answers at the edges: deleteRecords where Kafka refuses it, the tiered-storage offset specs,
     * config synonyms and types, SUBTRACT, dynamic and read-only broker configs, the config resource types a 4.0
     * broker without log4j loggers or group configs refuses, and reassignment to one broker twice. */
    private void edges(Map<String, Object> d) throws Exception {
        String compacted = topic("compacted", 1, Map.of("cleanup.policy", "compact"));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(base, new StringSerializer(),
                new StringSerializer())) {
            producer.send(new ProducerRecord<>(compacted, 0, "k", "v")).get();
        }
        d.put("delete_records_compacted", Scenarios.thrown(x -> admin.deleteRecords(Map.of(
                new TopicPartition(compacted, 0), RecordsToDelete.beforeOffset(1))).all().get()));
        admin.alterConsumerGroupOffsets(prefix + "-edges-g", Map.of(new TopicPartition(compacted, 0),
                new OffsetAndMetadata(0))).all().get();  // __consumer_offsets exists from here on
        d.put("delete_records_internal", Scenarios.thrown(x -> admin.deleteRecords(Map.of(
                new TopicPartition("__consumer_offsets", 0), RecordsToDelete.beforeOffset(0))).all().get()));
        TopicPartition partition = new TopicPartition(compacted, 0);
        d.put("latest_tiered", Scenarios.thrown(x -> d.put("latest_tiered_offset", offsets(partition,
                OffsetSpec.latestTiered(), IsolationLevel.READ_UNCOMMITTED))));
        d.put("earliest_pending_upload", Scenarios.thrown(x -> offsets(partition, OffsetSpec.earliestPendingUpload(),
                IsolationLevel.READ_UNCOMMITTED)));
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, compacted);
        Config withSynonyms = admin.describeConfigs(List.of(resource), new org.apache.kafka.clients.admin
                .DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get().get(resource);
        ConfigEntry retention = withSynonyms.get("retention.ms");
        d.put("retention_synonyms", retention.synonyms().stream().map(x -> x.name() + "=" + x.value() + ":"
                + x.source()).collect(Collectors.toList()));
        d.put("retention_type", retention.type().toString());
        d.put("retention_documented", retention.documentation() != null && !retention.documentation().isEmpty());
        ConfigEntry policy = withSynonyms.get("cleanup.policy");
        d.put("policy_synonyms", policy.synonyms().stream().map(x -> x.name() + "=" + x.value() + ":"
                + x.source()).collect(Collectors.toList()));
        d.put("subtract", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT))))
                .all().get()));
        d.put("after_subtract", entry(describe(resource), "cleanup.policy"));
        String brokerId = String.valueOf(brokerIds().get(0));
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, brokerId);
        d.put("broker_dynamic_set", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.cleaner.threads", "2"), AlterConfigOp.OpType.SET))))
                .all().get()));
        d.put("broker_dynamic", entry(describe(broker), "log.cleaner.threads"));
        d.put("broker_dynamic_delete", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.cleaner.threads", ""), AlterConfigOp.OpType.DELETE))))
                .all().get()));
        d.put("broker_read_only", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.dirs", "/elsewhere"), AlterConfigOp.OpType.SET))))
                .all().get()));
        ConfigResource loggers = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, brokerId);
        d.put("broker_logger", Scenarios.thrown(x -> d.put("broker_logger_entries", describe(loggers).entries()
                .size())));
        ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, prefix + "-configured-group");
        d.put("group_config_set", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(groupResource, List.of(
                new AlterConfigOp(new ConfigEntry("consumer.session.timeout.ms", "50000"),
                        AlterConfigOp.OpType.SET)))).all().get()));
        d.put("group_config", Scenarios.thrown(x -> d.put("group_session_timeout",
                entry(describe(groupResource), "consumer.session.timeout.ms"))));
        d.put("reassign_duplicate", Scenarios.thrown(x -> admin.alterPartitionReassignments(Map.of(partition,
                Optional.of(new NewPartitionReassignment(List.of(1, 1))))).all().get()));
        d.put("fenced_brokers", Scenarios.thrown(x -> d.put("with_fenced", admin.describeCluster(
                new org.apache.kafka.clients.admin.DescribeClusterOptions().includeFencedBrokers(true)).nodes().get()
                .size())));
        d.put("topic_authorized_operations", new TreeSet<>(admin.describeTopics(List.of(compacted),
                new org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(true))
                .allTopicNames().get().get(compacted).authorizedOperations().stream().map(Object::toString)
                .collect(Collectors.toList())));
    }

    /** A KIP-848 group seen through describeConsumerGroups (ConsumerGroupDescribe) and listGroups. */
    private void consumerProtocolGroup(Map<String, Object> d) throws Exception {
        String topic = topic("cgroup", 2, Map.of());
        String group = topic + "-g";
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Scenarios.with(base,
                ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"), new StringDeserializer(),
                new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60000;
            while (consumer.assignment().size() < 2 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200));
            }
            ConsumerGroupDescription described = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            d.put("type", described.type().toString());
            d.put("state", described.groupState().toString());
            d.put("members", described.members().size());
            d.put("assigned", described.members().stream().mapToInt(m -> m.assignment().topicPartitions().size())
                    .sum());
            d.put("target_assigned", described.members().stream().mapToInt(m -> m.targetAssignment()
                    .map(a -> a.topicPartitions().size()).orElse(-1)).sum());
            d.put("group_epoch_present", described.groupEpoch().isPresent());
            d.put("assignor", described.partitionAssignor());
            d.put("list_groups", admin.listGroups().all().get().stream().filter(g -> g.groupId().equals(group))
                    .map(g -> g.type().map(Object::toString).orElse("?") + "/"
                            + g.groupState().map(Object::toString).orElse("?")).collect(Collectors.toList()));
            d.put("describe_classic", Scenarios.thrown(x -> admin.describeClassicGroups(List.of(group)).all().get()));
            d.put("delete_active", Scenarios.thrown(x -> admin.deleteConsumerGroups(List.of(group)).all().get()));
        }
    }

    private static Map<String, Object> entry(Config config, String name) {
        ConfigEntry entry = config.get(name);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("value", entry == null ? null : entry.value());
        out.put("source", entry == null ? null : entry.source().toString());
        return out;
    }

    private Config describe(ConfigResource resource) throws Exception {
        return admin.describeConfigs(List.of(resource)).all().get().get(resource);
    }

    private void configs(Map<String, Object> d) throws Exception {
        String topic = topic("configs", 1, Map.of());
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        d.put("default_retention", entry(describe(resource), "retention.ms"));
        admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                .all().get();
        Config altered = describe(resource);
        d.put("set_retention", entry(altered, "retention.ms"));
        d.put("appended_cleanup_policy", entry(altered, "cleanup.policy"));
        admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        d.put("deleted_retention", entry(describe(resource), "retention.ms"));
        d.put("invalid_value", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get()));
        d.put("unknown_name", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all().get()));
        d.put("validate_only_kept", Scenarios.thrown(x -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.SET))),
                new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly(true)).all().get()));
        d.put("after_validate_only", entry(describe(resource), "retention.ms"));
        String brokerId = String.valueOf(admin.describeCluster().nodes().get().iterator().next().id());
        Config broker = describe(new ConfigResource(ConfigResource.Type.BROKER, brokerId));
        d.put("broker_num_partitions_present", broker.get("num.partitions") != null);
        d.put("broker_log_retention_hours", entry(broker, "log.retention.hours"));
        d.put("missing_topic", Scenarios.thrown(x -> describe(new ConfigResource(ConfigResource.Type.TOPIC,
                prefix + "-no-such-topic"))));
    }

    private void acls(Map<String, Object> d) throws Exception {
        ResourcePattern pattern = new ResourcePattern(ResourceType.TOPIC, prefix + "-acl", PatternType.LITERAL);
        AclBinding binding = new AclBinding(pattern,
                new AccessControlEntry("User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW));
        d.put("create", Scenarios.thrown(x -> admin.createAcls(List.of(binding)).all().get()));
        AclBindingFilter filter = new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC,
                prefix + "-acl", PatternType.LITERAL), AccessControlEntryFilter.ANY);
        List<String> described = new ArrayList<>();
        d.put("describe", Scenarios.thrown(x -> admin.describeAcls(filter).values().get()
                .forEach(b -> described.add(b.entry().principal() + " " + b.entry().operation()))));
        d.put("described", described);
        List<String> deleted = new ArrayList<>();
        d.put("delete", Scenarios.thrown(x -> admin.deleteAcls(List.of(filter)).all().get()
                .forEach(b -> deleted.add(b.entry().principal()))));
        d.put("deleted", deleted);
        List<String> after = new ArrayList<>();
        d.put("describe_after", Scenarios.thrown(x -> admin.describeAcls(filter).values().get()
                .forEach(b -> after.add(b.toString()))));
        d.put("after", after);
    }

    private void scram(Map<String, Object> d) throws Exception {
        String user = prefix + "-carol";
        admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "carol-secret"))).all().get();
        var described = admin.describeUserScramCredentials(List.of(user)).all().get().get(user);
        d.put("mechanisms", described.credentialInfos().stream()
                .map(info -> info.mechanism() + ":" + info.iterations()).collect(Collectors.toList()));
        d.put("listed", admin.describeUserScramCredentials().users().get().contains(user));
        admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)))
                .all().get();
        d.put("after_delete", Scenarios.thrown(x -> admin.describeUserScramCredentials(List.of(user))
                .description(user).get()));
        d.put("too_few_iterations", Scenarios.thrown(x -> admin.alterUserScramCredentials(List.of(
                new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1),
                        "x"))).all().get()));
    }

    private void quotas(Map<String, Object> d) throws Exception {
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, prefix + "-bob"));
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))))).all().get();
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, prefix + "-bob")));
        d.put("described", new TreeMap<>(admin.describeClientQuotas(filter).entities().get()
                .getOrDefault(entity, Map.of())));
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
        d.put("after_remove", new TreeMap<>(admin.describeClientQuotas(filter).entities().get()
                .getOrDefault(entity, Map.of())));
        d.put("unknown_key", Scenarios.thrown(x -> admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                List.of(new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).all().get()));
    }

    private List<Integer> brokerIds() throws Exception {
        return admin.describeCluster().nodes().get().stream().map(n -> n.id()).sorted().collect(Collectors.toList());
    }

    private void reassignments(Map<String, Object> d) throws Exception {
        String topic = topic("reassign", 1, Map.of());
        TopicPartition partition = new TopicPartition(topic, 0);
        List<Integer> replicas = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()
                .get(0).replicas().stream().map(n -> n.id()).collect(Collectors.toList());
        List<Integer> target = new ArrayList<>(replicas);
        java.util.Collections.reverse(target);  // the same replicas, another preferred leader
        admin.alterPartitionReassignments(Map.of(partition, Optional.of(new NewPartitionReassignment(target))))
                .all().get();
        long deadline = System.currentTimeMillis() + 30000;
        Map<TopicPartition, ?> ongoing = admin.listPartitionReassignments(Set.of(partition)).reassignments().get();
        while (!ongoing.isEmpty() && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
            ongoing = admin.listPartitionReassignments(Set.of(partition)).reassignments().get();
        }
        d.put("ongoing_after_wait", ongoing.size());
        d.put("replicas_after", admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()
                .get(0).replicas().stream().map(n -> n.id()).collect(Collectors.toList()));
        d.put("target", target);
        d.put("elect_preferred_after", Scenarios.thrown(x -> admin.electLeaders(ElectionType.PREFERRED,
                Set.of(partition)).all().get()));
        d.put("leader_after", admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()
                .get(0).leader().id());
        d.put("cancel_without_reassignment", Scenarios.thrown(x -> admin.alterPartitionReassignments(
                Map.of(partition, Optional.empty())).all().get()));
        d.put("unknown_broker", Scenarios.thrown(x -> admin.alterPartitionReassignments(Map.of(partition,
                Optional.of(new NewPartitionReassignment(List.of(9999))))).all().get()));
        d.put("list_all", admin.listPartitionReassignments().reassignments().get().size());
    }

    private void electLeaders(Map<String, Object> d) throws Exception {
        String topic = topic("elect", 2, Map.of());
        Set<TopicPartition> partitions = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        Map<String, Object> preferred = new TreeMap<>();
        admin.electLeaders(ElectionType.PREFERRED, partitions).partitions().get().forEach((tp, error) ->
                preferred.put(tp.toString(), error.map(e -> e.getClass().getName()).orElse("none")));
        d.put("preferred", preferred);
        Map<String, Object> unclean = new TreeMap<>();
        admin.electLeaders(ElectionType.UNCLEAN, partitions).partitions().get().forEach((tp, error) ->
                unclean.put(tp.toString(), error.map(e -> e.getClass().getName()).orElse("none")));
        d.put("unclean", unclean);
        d.put("unknown_partition", Scenarios.thrown(x -> admin.electLeaders(ElectionType.PREFERRED,
                Set.of(new TopicPartition(topic, 7))).all().get()));
    }

    private void logDirs(Map<String, Object> d) throws Exception {
        String topic = topic("logdirs", 1, Map.of());
        produce(topic, 0, 10);
        TopicPartition partition = new TopicPartition(topic, 0);
        int leader = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(0)
                .leader().id();
        Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(leader)).allDescriptions().get()
                .get(leader);
        d.put("dirs", dirs.size());
        String holding = null;
        for (Map.Entry<String, LogDirDescription> dir : dirs.entrySet()) {
            if (dir.getValue().replicaInfos().containsKey(partition)) {
                holding = dir.getKey();
                d.put("size", dir.getValue().replicaInfos().get(partition).size());
                d.put("total_bytes_present", dir.getValue().totalBytes().isPresent());
            }
        }
        d.put("holding_dir", holding);
        var info = admin.describeReplicaLogDirs(List.of(new TopicPartitionReplica(topic, 0, leader))).all().get()
                .get(new TopicPartitionReplica(topic, 0, leader));
        d.put("replica_dir", info.getCurrentReplicaLogDir());
        d.put("replica_future_dir", info.getFutureReplicaLogDir());
        d.put("alter_to_same_dir", Scenarios.thrown(x -> admin.alterReplicaLogDirs(
                Map.of(new TopicPartitionReplica(topic, 0, leader), info.getCurrentReplicaLogDir())).all().get()));
    }

    private Map<String, Object> offsets(TopicPartition partition, OffsetSpec spec, IsolationLevel isolation)
            throws Exception {
        var info = admin.listOffsets(Map.of(partition, spec), new ListOffsetsOptions(isolation)).all().get()
                .get(partition);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("offset", info.offset());
        out.put("timestamp", info.timestamp());
        return out;
    }

    private void recordsAndOffsets(Map<String, Object> d) throws Exception {
        String topic = topic("records", 1, Map.of());
        TopicPartition partition = new TopicPartition(topic, 0);
        long start = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(base, new StringSerializer(),
                new StringSerializer())) {
            for (int i = 0; i < 10; i++) {  // record i at start + 1000 i, record 7 the latest timestamp
                long timestamp = i == 7 ? start + 50_000 : start + 1000L * i;
                producer.send(new ProducerRecord<>(topic, 0, timestamp, null, "v" + i));
            }
        }
        d.put("low_watermark", admin.deleteRecords(Map.of(partition, RecordsToDelete.beforeOffset(5)))
                .lowWatermarks().get(partition).get().lowWatermark());
        d.put("earliest", offsets(partition, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED));
        d.put("latest", offsets(partition, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED));
        Map<String, Object> max = offsets(partition, OffsetSpec.maxTimestamp(), IsolationLevel.READ_UNCOMMITTED);
        max.put("timestamp", (Long) max.get("timestamp") - start);
        d.put("max_timestamp", max);
        d.put("for_timestamp", offsets(partition, OffsetSpec.forTimestamp(start + 5500),
                IsolationLevel.READ_UNCOMMITTED).get("offset"));
        d.put("earliest_local", offsets(partition, OffsetSpec.earliestLocal(), IsolationLevel.READ_UNCOMMITTED)
                .get("offset"));
        d.put("beyond_end", Scenarios.thrown(x -> admin.deleteRecords(Map.of(partition,
                RecordsToDelete.beforeOffset(11))).all().get()));
        d.put("delete_all", admin.deleteRecords(Map.of(partition, RecordsToDelete.beforeOffset(-1)))
                .lowWatermarks().get(partition).get().lowWatermark());
    }

    private void groups(Map<String, Object> d) throws Exception {
        String topic = topic("groups", 2, Map.of());
        produce(topic, 0, 10);
        produce(topic, 1, 10);
        String group = topic + "-g";
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(Scenarios.with(base,
                ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false"), new StringDeserializer(),
                new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60000;
            while (consumer.assignment().size() < 2 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200));
            }
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(4), p1, new OffsetAndMetadata(6)));
            ConsumerGroupDescription stable = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            d.put("stable_state", stable.groupState().toString());
            d.put("stable_members", stable.members().size());
            d.put("stable_assignor", stable.partitionAssignor());
            d.put("stable_type", stable.type().toString());
            d.put("stable_member_partitions", stable.members().stream().mapToInt(m -> m.assignment()
                    .topicPartitions().size()).sum());
            d.put("delete_active_offsets", Scenarios.thrown(x -> admin.deleteConsumerGroupOffsets(group, Set.of(p0))
                    .all().get()));
            d.put("alter_active", Scenarios.thrown(x -> admin.alterConsumerGroupOffsets(group,
                    Map.of(p0, new OffsetAndMetadata(1))).all().get()));
        }
        d.put("listed", admin.listConsumerGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group)));
        d.put("list_groups", admin.listGroups().all().get().stream().filter(g -> g.groupId().equals(group))
                .map(g -> g.type().map(Object::toString).orElse("?") + "/" + g.protocol() + "/"
                        + g.groupState().map(Object::toString).orElse("?")).collect(Collectors.toList()));
        d.put("empty_state", admin.describeConsumerGroups(List.of(group)).all().get().get(group).groupState()
                .toString());
        Map<String, Object> committed = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .forEach((tp, o) -> committed.put(tp.toString(), o.offset()));
        d.put("committed", committed);
        admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(2))).all().get();
        admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
        Map<String, Object> altered = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .forEach((tp, o) -> altered.put(tp.toString(), o == null ? null : o.offset()));
        d.put("altered", altered);
        admin.deleteConsumerGroups(List.of(group)).all().get();
        d.put("after_delete", Scenarios.thrown(x -> admin.deleteConsumerGroups(List.of(group)).all().get()));
        d.put("describe_deleted", Scenarios.thrown(x -> admin.describeConsumerGroups(List.of(group)).all().get()));
    }

    private void cluster(Map<String, Object> d) throws Exception {
        var cluster = admin.describeCluster(new org.apache.kafka.clients.admin.DescribeClusterOptions()
                .includeAuthorizedOperations(true));
        d.put("nodes", cluster.nodes().get().stream().map(n -> n.id()).sorted().collect(Collectors.toList()));
        d.put("controller_known", cluster.controller().get() != null && cluster.controller().get().id() >= 0);
        d.put("cluster_id", cluster.clusterId().get());
        d.put("authorized_operations", cluster.authorizedOperations().get() == null ? null
                : new TreeSet<>(cluster.authorizedOperations().get().stream().map(Object::toString)
                        .collect(Collectors.toList())));
        var features = admin.describeFeatures().featureMetadata().get();
        d.put("finalized_features", new TreeMap<>(features.finalizedFeatures().entrySet().stream().collect(
                Collectors.toMap(Map.Entry::getKey, e -> e.getValue().minVersionLevel() + "-"
                        + e.getValue().maxVersionLevel()))));
        d.put("supported_features", new TreeSet<>(features.supportedFeatures().keySet()));
    }

    /** The producer with a transaction open on the partition, as describeProducers sees it (null if none). */
    private ProducerState openProducer(TopicPartition partition) throws Exception {
        DescribeProducersResult.PartitionProducerState state = admin.describeProducers(List.of(partition))
                .partitionResult(partition).get();
        return state.activeProducers().stream().filter(p -> p.currentTransactionStartOffset().isPresent())
                .findFirst().orElse(null);
    }

    private void transactions(Map<String, Object> d) throws Exception {
        String topic = topic("admin-txn", 1, Map.of());
        TopicPartition partition = new TopicPartition(topic, 0);
        String fenced = prefix + "-fenced";
        String hanging = prefix + "-hanging";
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(Scenarios.with(base, "transactional.id",
                fenced), new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "open")).get();
            ProducerState state = openProducer(partition);
            d.put("producer_open_transaction_at", state == null ? null
                    : state.currentTransactionStartOffset().getAsLong());
            d.put("listed", admin.listTransactions().all().get().stream().filter(t -> t.transactionalId()
                    .equals(fenced)).map(t -> t.state().toString()).collect(Collectors.toList()));
            TransactionDescription description = admin.describeTransactions(List.of(fenced)).all().get().get(fenced);
            d.put("described_state", description.state().toString());
            d.put("described_partitions", description.topicPartitions().stream().map(Object::toString)
                    .collect(Collectors.toList()));
            d.put("described_producer_matches", state != null && description.producerId() == state.producerId());
            admin.fenceProducers(List.of(fenced)).all().get();
            d.put("commit_after_fence", Scenarios.thrown(x -> producer.commitTransaction()));
        }
        d.put("lso_after_fence", offsets(partition, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED).get("offset"));
        d.put("describe_unknown", Scenarios.thrown(x -> admin.describeTransactions(List.of(prefix + "-nobody"))
                .all().get()));
        // a hanging transaction: the partition's open transaction aborted by a marker written through the admin
        KafkaProducer<String, String> producer = new KafkaProducer<>(Scenarios.with(base, "transactional.id",
                hanging, "transaction.timeout.ms", 600000), new StringSerializer(), new StringSerializer());
        try {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "hanging")).get();
            ProducerState state = openProducer(partition);
            d.put("hanging_open_at", state.currentTransactionStartOffset().getAsLong());
            d.put("lso_before_abort", offsets(partition, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
                    .get("offset"));
            admin.abortTransaction(new AbortTransactionSpec(partition, state.producerId(),
                    (short) state.producerEpoch(), state.coordinatorEpoch().orElse(0))).all().get();
            d.put("lso_after_abort", offsets(partition, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
                    .get("offset"));
            d.put("log_end", offsets(partition, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED).get("offset"));
            d.put("open_after_abort", openProducer(partition) != null);
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        // forceTerminateTransaction (KIP-939) is an InitProducerId for the id: the open transaction is aborted
        try (KafkaProducer<String, String> open = new KafkaProducer<>(Scenarios.with(base, "transactional.id",
                hanging), new StringSerializer(), new StringSerializer())) {
            open.initTransactions();
            open.beginTransaction();
            open.send(new ProducerRecord<>(topic, 0, null, "terminated")).get();
            d.put("open_before_terminate", openProducer(partition) != null);
            d.put("force_terminate", Scenarios.thrown(x -> admin.forceTerminateTransaction(hanging).result().get()));
            d.put("open_after_terminate", openProducer(partition) != null);
            d.put("commit_after_terminate", Scenarios.thrown(x -> open.commitTransaction()));
        }
    }

    @SuppressWarnings("deprecation")
    private void configResources(Map<String, Object> d) throws Exception {
        // key 74 is served at v0 (Kafka 4.0's ListClientMetricsResources): client metrics only, as a 4.0 broker
        d.put("all_types", Scenarios.thrown(x -> admin.listConfigResources().all().get()));
        d.put("client_metrics_type", admin.listConfigResources(Set.of(ConfigResource.Type.CLIENT_METRICS),
                new org.apache.kafka.clients.admin.ListConfigResourcesOptions()).all().get().size());
        d.put("client_metrics", admin.listClientMetricsResources().all().get().size());
    }

    /** The admin methods whose APIs Odradek does not advertise: each must fail with UnsupportedVersionException, and
     * within the client's timeout. */
    private void unsupported(Map<String, Object> d) throws Exception {
        Map<String, Scenarios.Body> calls = new LinkedHashMap<>();
        calls.put("describeMetadataQuorum", x -> admin.describeMetadataQuorum().quorumInfo().get());
        calls.put("updateFeatures", x -> admin.updateFeatures(Map.of("transaction.version",
                new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                new org.apache.kafka.clients.admin.UpdateFeaturesOptions()).all().get());
        calls.put("unregisterBroker", x -> admin.unregisterBroker(1).all().get());
        calls.put("createDelegationToken", x -> admin.createDelegationToken().delegationToken().get());
        calls.put("describeDelegationToken", x -> admin.describeDelegationToken().delegationTokens().get());
        calls.put("describeStreamsGroups", x -> admin.describeStreamsGroups(List.of(prefix + "-streams")).all().get());
        calls.put("addRaftVoter", x -> admin.addRaftVoter(1, org.apache.kafka.common.Uuid.randomUuid(),
                Set.of(new org.apache.kafka.clients.admin.RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 1)))
                .all().get());
        Map<String, Object> thrown = new LinkedHashMap<>();
        Map<String, Object> seconds = new LinkedHashMap<>();
        for (Map.Entry<String, Scenarios.Body> call : calls.entrySet()) {
            long began = System.nanoTime();
            thrown.put(call.getKey(), Scenarios.thrown(call.getValue()));
            seconds.put(call.getKey(), (System.nanoTime() - began) / 1_000_000_000.0);
        }
        d.put("thrown", thrown);
        d.put("seconds", seconds);
    }
}
