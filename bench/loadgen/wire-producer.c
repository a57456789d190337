/* loadgen-wire-producer: sends --records records of --size bytes to the --partitions partitions of --topic in Produce
 * requests it encodes itself (v7: one v2 batch of one partition per request, partitions in turn, WINDOW requests in
 * flight), then prints one JSON line (common.h) timed from the first send to the last answer, with its CPU time
 * over that span and the records acknowledged per partition.
 *
 * Each batch holds as many records as fit in batch.size (-X batch.size=..., librdkafka's default 1,000,000; the last
 * batch holds what is left), acks comes from -X acks=... (0 is refused: the answers are what is counted). The records
 * are what loadgen-producer sends without keys: values of 16 hex digits padded with 'x', CreateTime timestamps of the
 * start, no producer id. A batch is built and its CRC-32C computed once; every request sends the same bytes with
 * only its correlation id and partition changed, which the broker stamps with offsets of its own. So the client
 * costs a send per batch and a read per answer, and the broker's work is what the rate measures. */
#include "common.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define WINDOW 5 /* requests in flight: the Java producer's max.in.flight.requests.per.connection */
#define PRODUCE_VERSION 7
#define BATCH_HEADER 61
#define CLIENT_ID "loadgen-wire"

static const char USAGE[] =
    "usage: loadgen-wire-producer --bootstrap HOST:PORT --topic T --partitions P --records N [--size BYTES]\n"
    "                             [-X batch.size=BYTES] [-X acks=1|all]\n";

static int put_varint(unsigned char *p, int64_t value) { /* zigzag, as record fields are written */
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    int n = 0;
    while (v >= 0x80)
        p[n++] = (unsigned char)(v | 0x80), v >>= 7;
    p[n++] = (unsigned char)v;
    return n;
}

static int64_t now_ms(void) {
    struct timeval now;
    gettimeofday(&now, NULL);
    return (int64_t)now.tv_sec * 1000 + now.tv_usec / 1000;
}

/* A Produce request frame (size prefix included) carrying one batch of `count` records; *partition_at is where its
 * partition index lies (the correlation id is at byte 8). */
static unsigned char *produce_frame(const char *topic, int acks, int count, int size, size_t *frame_size,
                                    size_t *partition_at) {
    size_t topic_length = strlen(topic), client_length = strlen(CLIENT_ID);
    size_t record_max = 1 + 1 + 5 + 1 + 5 + (size_t)size + 1 + 5; /* fields and the length varint, at most */
    size_t head = 4 + 2 + 2 + 4 + 2 + client_length + 2 + 2 + 4 + 4 + 2 + topic_length + 4 + 4 + 4;
    unsigned char *frame = malloc(head + BATCH_HEADER + record_max * (size_t)count);
    unsigned char *batch = frame + head, *p = batch + BATCH_HEADER;
    unsigned char *value = malloc(size);
    unsigned long long state = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < count; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17; /* xorshift64, as loadgen-producer */
        snprintf((char *)value, 17, "%016llx", state);
        memset(value + 16, 'x', size - 16);
        unsigned char body[32], *b = body;
        *b++ = 0;                  /* attributes */
        b += put_varint(b, 0);     /* timestamp delta */
        b += put_varint(b, i);     /* offset delta */
        b += put_varint(b, -1);    /* null key */
        b += put_varint(b, size);  /* value length */
        int64_t length = (b - body) + size + 1;
        p += put_varint(p, length);
        memcpy(p, body, b - body), p += b - body;
        memcpy(p, value, size), p += size;
        *p++ = 0; /* no headers */
    }
    free(value);
    int64_t timestamp = now_ms();
    size_t batch_size = p - batch;
    put64(batch, 0);
    put32(batch + 8, (int32_t)(batch_size - 12));
    put32(batch + 12, -1); /* partition leader epoch */
    batch[16] = 2;         /* magic */
    put16(batch + 21, 0);  /* attributes: no compression, CreateTime */
    put32(batch + 23, count - 1);
    put64(batch + 27, timestamp);
    put64(batch + 35, timestamp);
    put64(batch + 43, -1); /* producer id */
    put16(batch + 51, -1); /* producer epoch */
    put32(batch + 53, -1); /* base sequence */
    put32(batch + 57, count);
    put32(batch + 17, (int32_t)crc32c(batch + 21, batch_size - 21));

    unsigned char *h = frame;
    put32(h, (int32_t)(head - 4 + batch_size)), h += 4;
    put16(h, 0), h += 2; /* api key: Produce */
    put16(h, PRODUCE_VERSION), h += 2;
    put32(h, 0), h += 4; /* correlation id, set per send */
    put16(h, (int16_t)client_length), memcpy(h + 2, CLIENT_ID, client_length), h += 2 + client_length;
    put16(h, -1), h += 2; /* no transactional id */
    put16(h, (int16_t)acks), h += 2;
    put32(h, 30000), h += 4; /* timeout ms */
    put32(h, 1), h += 4;     /* one topic */
    put16(h, (int16_t)topic_length), memcpy(h + 2, topic, topic_length), h += 2 + topic_length;
    put32(h, 1), h += 4; /* one partition */
    *partition_at = h - frame;
    h += 4;
    put32(h, (int32_t)batch_size);
    *frame_size = head + batch_size;
    return frame;
}

int main(int argc, char **argv) {
    struct options opts;
    rd_kafka_conf_t *conf = parse_options(argc, argv, &opts, USAGE);
    char value[64];
    wire_setting(conf, "batch.size", "1000000", value, sizeof value);
    long batch_bytes = atol(value);
    wire_setting(conf, "acks", "-1", value, sizeof value);
    int acks = strcmp(value, "all") == 0 ? -1 : atoi(value);
    rd_kafka_conf_destroy(conf);
    if (opts.partitions < 1)
        fail("options", "--partitions is required");
    if (acks != 1 && acks != -1)
        fail("acks", "1 or all: the answers are what is counted");
    long per_batch = (batch_bytes - BATCH_HEADER) / (opts.size + 16);
    if (per_batch < 1)
        per_batch = 1;
    if (per_batch > opts.records)
        per_batch = opts.records;
    long full = opts.records / per_batch, rest = opts.records % per_batch, requests = full + (rest > 0);
    size_t full_size, rest_size = 0, full_partition_at, rest_partition_at = 0;
    unsigned char *full_frame = produce_frame(opts.topic, acks, (int)per_batch, opts.size, &full_size,
                                              &full_partition_at);
    unsigned char *rest_frame = rest ? produce_frame(opts.topic, acks, (int)rest, opts.size, &rest_size,
                                                     &rest_partition_at) : NULL;
    long *partition_records = calloc(opts.partitions, sizeof *partition_records);
    int fd = wire_connect(opts.bootstrap);
    struct frame answer = {0};
    struct { int partition; long count; } in_flight[WINDOW];
    long sent = 0, answered = 0, acknowledged = 0, failed = 0;
    char first_error[256] = "";

    struct cpu_times cpu_before = cpu_now();
    double started = now_seconds();
    while (answered < requests) {
        if (sent < requests && sent - answered < WINDOW) {
            int last = sent == full, partition = (int)(sent % opts.partitions);
            unsigned char *frame = last ? rest_frame : full_frame;
            put32(frame + 8, (int32_t)sent);
            put32(frame + (last ? rest_partition_at : full_partition_at), partition);
            wire_send(fd, frame, last ? rest_size : full_size);
            in_flight[sent % WINDOW].partition = partition;
            in_flight[sent % WINDOW].count = last ? rest : per_batch;
            sent++;
            continue;
        }
        wire_receive(fd, &answer);
        const unsigned char *a = answer.data;
        int partition = in_flight[answered % WINDOW].partition;
        long count = in_flight[answered % WINDOW].count;
        size_t name = answer.size >= 10 ? (size_t)get16(a + 8) : 0;
        if (answer.size < 4 + 4 + 2 + name + 4 + 4 + 2 || get32(a) != (int32_t)answered || get32(a + 4) != 1 ||
            get32(a + 10 + name) != 1 || get32(a + 14 + name) != partition)
            fail("produce", "an answer that is not the one to the oldest request in flight");
        int16_t error = get16(a + 18 + name);
        if (error == 0) {
            acknowledged += count;
            partition_records[partition] += count;
        } else {
            if (failed == 0)
                snprintf(first_error, sizeof first_error, "Produce answered error code %d for partition %d", error,
                         partition);
            failed += count;
        }
        answered++;
    }
    double ended = now_seconds();
    report(acknowledged, (long long)acknowledged * opts.size, started, ended, cpu_before, cpu_now(), failed,
           first_error, partition_records, opts.partitions, "");
    return failed ? 1 : 0;
}
