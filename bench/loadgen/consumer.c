/* loadgen-consumer: reads --topic from the beginning of every partition it is given (all of them, or with
 * --member i --members k those p with p % k == i, so that k processes share a topic without a group protocol) until
 * --records records arrived (the producers' acknowledged counts for those partitions: high watermarks cannot be
 * trusted, Tansu's trail its acknowledged records), then prints one JSON line (common.h) timed from the assignment
 * (once connected) to the last record's arrival, with its CPU time over that span and the records read per
 * partition. Not from the first record's arrival: a broker that answers the first fetch with the whole partition
 * (noida-db ignores fetch limits) would do most of its work before it.
 *
 * Records come out of librdkafka's consumer queue as soon as one is there, with up to 9,999 more already queued, and
 * nothing is done with them beyond counting records and value bytes. Offsets are never committed; settings come
 * through -X name=value (group.id defaults to "loadgen", which assign() does not use to coordinate anything).
 *
 * With --latency W (values from loadgen-producer --rate), each record's latency is the batch's receipt time minus
 * the send time stamped in its value, both CLOCK_MONOTONIC; the first W records are a warm-up and not counted, and
 * the report adds "latency_ms": {"count", "p50", "p99", "p99_9", "max"} (nearest rank). Once assigned, it prints
 * {"assigned": true} on a line of its own, so that a producer can be started when someone is already fetching. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 10000
#define STALL_SECONDS 60

static const char USAGE[] =
    "usage: loadgen-consumer --bootstrap HOST:PORT --topic T --records N [--member I --members K] [--latency W]\n"
    "                        [-X librdkafka.setting=value ...]\n";

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double nearest_rank(const double *sorted, long count, double fraction) {
    long index = (long)(fraction * count + 0.5) - 1;
    return sorted[index < 0 ? 0 : index >= count ? count - 1 : index];
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value, int unless_set) {
    char error[512], current[256];
    size_t size = sizeof current;
    if (unless_set && rd_kafka_conf_get(conf, name, current, &size) == RD_KAFKA_CONF_OK && size > 1)
        return;
    if (rd_kafka_conf_set(conf, name, value, error, sizeof error) != RD_KAFKA_CONF_OK)
        fail(name, error);
}

/* The topic's partition count, waiting up to 30 s for the broker to know the topic. */
static int partition_count(rd_kafka_t *rk, const char *name) {
    rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, name, NULL);
    for (double deadline = now_seconds() + 30;; usleep(100000)) {
        const struct rd_kafka_metadata *metadata;
        rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, topic, &metadata, 10000);
        int count = err == RD_KAFKA_RESP_ERR_NO_ERROR && metadata->topic_cnt == 1 && !metadata->topics[0].err
                        ? metadata->topics[0].partition_cnt
                        : 0;
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            rd_kafka_metadata_destroy(metadata);
        if (count > 0) {
            rd_kafka_topic_destroy(topic);
            return count;
        }
        if (now_seconds() > deadline)
            fail(name, "topic not found in metadata");
    }
}

int main(int argc, char **argv) {
    struct options opts;
    char error[512];
    rd_kafka_conf_t *conf = parse_options(argc, argv, &opts, USAGE);
    set(conf, "group.id", "loadgen", 1);
    set(conf, "enable.auto.commit", "false", 0);
    set(conf, "enable.partition.eof", "false", 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
    if (rk == NULL)
        fail("rd_kafka_new", error);
    rd_kafka_poll_set_consumer(rk);

    int partitions = partition_count(rk, opts.topic);
    rd_kafka_topic_partition_list_t *assignment = rd_kafka_topic_partition_list_new(partitions);
    long expected = opts.records, *partition_records = calloc(partitions, sizeof *partition_records);
    for (int p = opts.member; p < partitions; p += opts.members)
        rd_kafka_topic_partition_list_add(assignment, opts.topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    struct cpu_times cpu_before = cpu_now();
    double started = now_seconds(), last_progress = started;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, assignment);
    if (err)
        fail("assign", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(assignment);
    printf("{\"assigned\": true}\n");
    fflush(stdout);

    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    rd_kafka_message_t *messages[BATCH];
    long seen = 0, errors = 0;
    long long bytes = 0;
    char first_error[256] = "";
    double *latencies = opts.latency_warmup >= 0 ? malloc(expected * sizeof *latencies) : NULL;
    long measured = 0;
    while (seen < expected) {
        /* a batch call returns only once BATCH records are there or its timeout passes, which would hold records
         * back for latency: wait for one, then take what else is already there */
        ssize_t got = (messages[0] = rd_kafka_consume_queue(queue, 1000)) != NULL;
        if (got)
            got += rd_kafka_consume_batch_queue(queue, 0, messages + 1, BATCH - 1);
        double received = now_seconds();
        for (ssize_t m = 0; m < got; m++) {
            if (messages[m]->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (latencies && seen++ >= opts.latency_warmup && messages[m]->len >= STAMP_BYTES) {
                    char stamp[STAMP_BYTES + 1];
                    memcpy(stamp, messages[m]->payload, STAMP_BYTES);
                    stamp[STAMP_BYTES] = '\0';
                    latencies[measured++] = received - strtoull(stamp, NULL, 16) / 1e9;
                } else if (!latencies) {
                    seen++;
                }
                bytes += messages[m]->len;
                partition_records[messages[m]->partition]++;
            } else if (errors++ == 0) {
                snprintf(first_error, sizeof first_error, "%s", rd_kafka_message_errstr(messages[m]));
            }
            rd_kafka_message_destroy(messages[m]);
        }
        double now = now_seconds();
        if (got > 0)
            last_progress = now;
        else if (now - last_progress > STALL_SECONDS)
            break;
    }
    double ended = now_seconds();
    char extra[256] = "";
    if (measured > 0) {
        qsort(latencies, measured, sizeof *latencies, ascending);
        snprintf(extra, sizeof extra,
                 ", \"latency_ms\": {\"count\": %ld, \"p50\": %.3f, \"p99\": %.3f, \"p99_9\": %.3f, \"max\": %.3f}",
                 measured, nearest_rank(latencies, measured, 0.5) * 1e3, nearest_rank(latencies, measured, 0.99) * 1e3,
                 nearest_rank(latencies, measured, 0.999) * 1e3, latencies[measured - 1] * 1e3);
    }
    report(seen, bytes, started, ended, cpu_before, cpu_now(), errors + (seen < expected),
           seen < expected ? "stalled before reading every record" : first_error, partition_records, partitions,
           extra);
    rd_kafka_queue_destroy(queue);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return seen < expected ? 1 : 0;
}
