/* What the wire programs (wire-producer.c, wire-consumer.c) share: a blocking TCP connection to one broker, whole
 * Kafka frames over it, big-endian fields and CRC-32C. They speak the protocol themselves instead of through
 * librdkafka, whose cost per record (0.2-0.4 us of client CPU) exceeds what a broker spends, so that with them the
 * broker is what saturates: a request's bytes are built once and sent again and again, an answer is read per
 * request and a fetched batch per header, never per record. One broker only: every partition must be led by the
 * bootstrap broker (the benchmark's single-node brokers), and any error in an answer is reported, not retried. */
#ifndef LOADGEN_WIRE_H
#define LOADGEN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

struct frame {
    unsigned char *data; /* one answer's bytes after its size, grown as answers need */
    size_t size, capacity;
};

int wire_connect(const char *bootstrap); /* HOST:PORT, TCP_NODELAY; exits with a message on failure */
void wire_send(int fd, const void *data, size_t size);
void wire_receive(int fd, struct frame *frame); /* the next whole answer into frame (its size prefix read off) */
uint32_t crc32c(const unsigned char *data, size_t size);
/* The librdkafka setting `name` as -X gave it (global or topic-level), else `otherwise`, into value. */
void wire_setting(rd_kafka_conf_t *conf, const char *name, const char *otherwise, char *value, size_t size);

static inline void put16(unsigned char *p, int16_t v) {
    p[0] = (unsigned char)((uint16_t)v >> 8), p[1] = (unsigned char)v;
}
static inline void put32(unsigned char *p, int32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)((uint32_t)v >> (24 - 8 * i));
}
static inline void put64(unsigned char *p, int64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)((uint64_t)v >> (56 - 8 * i));
}
static inline int16_t get16(const unsigned char *p) { return (int16_t)(p[0] << 8 | p[1]); }
static inline int32_t get32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}
static inline int64_t get64(const unsigned char *p) { return (int64_t)((uint64_t)get32(p) << 32 | (uint32_t)get32(p + 4)); }

#endif
