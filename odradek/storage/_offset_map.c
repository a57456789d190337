/* The cleaner's offset map in C, for storage.offset_map, which is the only caller: the table's probes, the MD5 of
 * each key, and the cleaner's keep-or-drop decision for a batch's records, all over a batch's bytes and the int64
 * columns records.walk finds in them, so no Python object is made per record.
 *
 * The table is the caller's bytearray (its layout is storage.offset_map's: slots of a 16-byte MD5 digest and a
 * little-endian int64 offset, an all-zero digest a free slot, a power-of-two count of slots, double hashing: the
 * digest's low 64 bits, read little-endian, pick the first slot, its high 64 bits made odd the stride). Every
 * function holds the buffers it reads pinned and releases the GIL over its loop, so a cleaner thread lets the
 * broker's event loop run while it maps or judges records.
 *
 * MD5 is RFC 1321, written here rather than linked from OpenSSL, so that building the package needs only Python's
 * headers; tests/cleaner/test_offset_map.py checks it against hashlib.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define DIGEST_BYTES 16
#define SLOT_BYTES 24

/* ---- MD5 (RFC 1321) ---- */

static uint32_t md5_sines[64]; /* floor(2**32 * abs(sin(i + 1))), filled at import */
static const uint8_t md5_shifts[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

static inline uint32_t rotate_left(uint32_t value, int bits) { return (value << bits) | (value >> (32 - bits)); }

static inline uint32_t load_le32(const uint8_t *bytes) {
    return (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
}

static void md5_block(uint32_t state[4], const uint8_t block[64]) {
    uint32_t words[16];
    for (int i = 0; i < 16; i++)
        words[i] = load_le32(block + 4 * i);
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
#define MD5_STEP(mix, word)                                                                                        \
    do {                                                                                                           \
        uint32_t sum = a + (mix) + md5_sines[i] + words[word];                                                     \
        a = d;                                                                                                     \
        d = c;                                                                                                     \
        c = b;                                                                                                     \
        b = b + rotate_left(sum, md5_shifts[i / 16][i % 4]);                                                       \
    } while (0)
    for (int i = 0; i < 16; i++)
        MD5_STEP((b & c) | (~b & d), i);
    for (int i = 16; i < 32; i++)
        MD5_STEP((d & b) | (~d & c), (5 * i + 1) % 16);
    for (int i = 32; i < 48; i++)
        MD5_STEP(b ^ c ^ d, (3 * i + 5) % 16);
    for (int i = 48; i < 64; i++)
        MD5_STEP(c ^ (b | ~d), (7 * i) % 16);
#undef MD5_STEP
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
}

static void md5(const uint8_t *data, size_t length, uint8_t digest[DIGEST_BYTES]) {
    uint32_t state[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    size_t whole = length - length % 64;
    for (size_t at = 0; at < whole; at += 64)
        md5_block(state, data + at);
    uint8_t tail[128] = {0}; /* the rest, 0x80, zeros, and the length in bits: one block or two */
    size_t rest = length - whole;
    memcpy(tail, data + whole, rest);
    tail[rest] = 0x80;
    size_t tail_bytes = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)length * 8;
    for (int i = 0; i < 8; i++)
        tail[tail_bytes - 8 + i] = (uint8_t)(bits >> (8 * i));
    for (size_t at = 0; at < tail_bytes; at += 64)
        md5_block(state, tail + at);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            digest[4 * i + j] = (uint8_t)(state[i] >> (8 * j));
}

/* ---- the table ---- */

typedef struct {
    uint8_t *slots;
    uint64_t mask;
} Table;

static const uint8_t empty_digest[DIGEST_BYTES];

static inline uint64_t load_le64(const uint8_t *bytes) {
    return (uint64_t)load_le32(bytes) | (uint64_t)load_le32(bytes + 4) << 32;
}

/* The slot holding `digest`, or the free slot where it belongs (the caller keeps one slot free at least). */
static inline uint8_t *find_slot(const Table *table, const uint8_t digest[DIGEST_BYTES]) {
    uint64_t slot = load_le64(digest) & table->mask, stride = load_le64(digest + 8) | 1;
    for (;;) {
        uint8_t *held = table->slots + slot * SLOT_BYTES;
        if (memcmp(held, digest, DIGEST_BYTES) == 0 || memcmp(held, empty_digest, DIGEST_BYTES) == 0)
            return held;
        slot = (slot + stride) & table->mask;
    }
}

static inline int64_t slot_offset(const uint8_t *slot) { return (int64_t)load_le64(slot + DIGEST_BYTES); }

static inline void set_slot(uint8_t *slot, const uint8_t digest[DIGEST_BYTES], int64_t offset) {
    memcpy(slot, digest, DIGEST_BYTES);
    for (int i = 0; i < 8; i++)
        slot[DIGEST_BYTES + i] = (uint8_t)((uint64_t)offset >> (8 * i));
}

/* The latest offset of the key whose digest this is, or -1. */
static inline int64_t latest_offset(const Table *table, const uint8_t digest[DIGEST_BYTES]) {
    const uint8_t *slot = find_slot(table, digest);
    return memcmp(slot, empty_digest, DIGEST_BYTES) == 0 ? -1 : slot_offset(slot);
}

#define AHEAD 16 /* keys digested, and their first slots prefetched, before the first of them is probed */

/* The digests of the non-null keys of records [from, from + AHEAD) (fewer at the end: `count` records in all) into
 * digests[], each key's first slot prefetched: a large table's probes then find their slots in cache rather than
 * waiting on memory one key at a time (a third of a probe's cost in a 96 MiB table). */
static inline void digest_ahead(const Table *table, const uint8_t *data, const int64_t *starts,
                                const int64_t *lengths, Py_ssize_t from, Py_ssize_t count,
                                uint8_t digests[AHEAD][DIGEST_BYTES]) {
    for (Py_ssize_t j = 0; j < AHEAD && from + j < count; j++) {
        if (lengths[from + j] < 0)
            continue;
        md5(data + starts[from + j], (size_t)lengths[from + j], digests[j]);
        __builtin_prefetch(table->slots + (load_le64(digests[j]) & table->mask) * SLOT_BYTES, 1);
    }
}

/* The table from a buffer of a power-of-two count of slots (0, or -1 with TypeError). */
static int take_table(Py_buffer *buffer, Table *table) {
    Py_ssize_t slots = buffer->len / SLOT_BYTES;
    if (buffer->len % SLOT_BYTES || slots < 2 || (slots & (slots - 1))) {
        PyErr_SetString(PyExc_TypeError, "offset map: the table must be a power-of-two count of 24-byte slots");
        return -1;
    }
    table->slots = buffer->buf;
    table->mask = (uint64_t)slots - 1;
    return 0;
}

/* The table (`table_object`, writable if `writable`) and the bytes a call reads (`bytes_object`: a batch's record
 * bytes, or a key), both pinned: 0, or -1 with an exception and nothing held. */
static int take_table_and_bytes(PyObject *table_object, PyObject *bytes_object, int writable, Py_buffer *table_buffer,
                                Table *table, Py_buffer *bytes) {
    if (PyObject_GetBuffer(table_object, table_buffer, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (take_table(table_buffer, table) < 0 || PyObject_GetBuffer(bytes_object, bytes, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(table_buffer);
        return -1;
    }
    return 0;
}

/* The int64 columns of one batch's records, each `count` long, checked against the `data` they point into. */
typedef struct {
    Py_buffer buffers[4];
    int taken;
    Py_ssize_t count;
} Columns;

static void release_columns(Columns *columns) {
    for (int i = 0; i < columns->taken; i++)
        PyBuffer_Release(&columns->buffers[i]);
    columns->taken = 0;
}

static int take_columns(PyObject *const *args, int n, Columns *columns) {
    columns->taken = 0;
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(args[i], &columns->buffers[i], PyBUF_SIMPLE) < 0) {
            release_columns(columns);
            return -1;
        }
        columns->taken++;
        if (columns->buffers[i].len % (Py_ssize_t)sizeof(int64_t)
            || (i > 0 && columns->buffers[i].len != columns->buffers[0].len)) {
            PyErr_SetString(PyExc_TypeError, "offset map: the columns must be int64 buffers of one length");
            release_columns(columns);
            return -1;
        }
    }
    columns->count = columns->buffers[0].len / (Py_ssize_t)sizeof(int64_t);
    return 0;
}

static inline const int64_t *column(const Columns *columns, int i) { return columns->buffers[i].buf; }

/* Each key lies inside the data (null keys, a negative length, excepted): the walker's columns always do. */
static int check_keys(const Columns *columns, Py_ssize_t data_length) {
    const int64_t *starts = column(columns, 0), *lengths = column(columns, 1);
    for (Py_ssize_t i = 0; i < columns->count; i++)
        if (lengths[i] >= 0 && (starts[i] < 0 || starts[i] > data_length || lengths[i] > data_length - starts[i])) {
            PyErr_SetString(PyExc_ValueError, "offset map: a key lies outside the data");
            return -1;
        }
    return 0;
}

/* put(table, room, data, key_starts, key_lengths, base_offset, offset_deltas) -> (added, last offset put, full)
 * Maps each record's key (data[start:start + length]; a null key is skipped) to base_offset + its delta, in
 * order. A key not yet in the table takes a free slot while `room` allows; `full` says a new key found none and
 * stopped the puts there. */
static PyObject *put(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "put takes 7 arguments, not %zd", nargs);
        return NULL;
    }
    long long room = PyLong_AsLongLong(args[1]), base_offset = PyLong_AsLongLong(args[5]);
    if ((room == -1 || base_offset == -1) && PyErr_Occurred())
        return NULL;
    Py_buffer table_buffer, data;
    Table table;
    Columns columns;
    if (take_table_and_bytes(args[0], args[2], 1, &table_buffer, &table, &data) < 0)
        return NULL;
    PyObject *answer = NULL;
    if (take_columns((PyObject *const[]){args[3], args[4], args[6]}, 3, &columns) < 0)
        goto done;
    if (check_keys(&columns, data.len) < 0)
        goto release;
    long long added = 0, last = -1;
    int full = 0;
    const int64_t *starts = column(&columns, 0), *lengths = column(&columns, 1), *deltas = column(&columns, 2);
    Py_BEGIN_ALLOW_THREADS
    uint8_t digests[AHEAD][DIGEST_BYTES];
    for (Py_ssize_t i = 0; i < columns.count; i++) {
        if (i % AHEAD == 0)
            digest_ahead(&table, data.buf, starts, lengths, i, columns.count, digests);
        if (lengths[i] < 0)
            continue;
        const uint8_t *digest = digests[i % AHEAD];
        uint8_t *slot = find_slot(&table, digest);
        if (memcmp(slot, empty_digest, DIGEST_BYTES) == 0) {
            if (added >= room) {
                full = 1;
                break;
            }
            added++;
        }
        last = base_offset + deltas[i];
        set_slot(slot, digest, last);
    }
    Py_END_ALLOW_THREADS
    answer = Py_BuildValue("(LLO)", added, last, full ? Py_True : Py_False);
release:
    release_columns(&columns);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&table_buffer);
    return answer;
}

/* get(table, key) -> the latest offset put for `key`, or -1 */
static PyObject *get(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get takes 2 arguments, not %zd", nargs);
        return NULL;
    }
    Py_buffer table_buffer, key;
    Table table;
    if (take_table_and_bytes(args[0], args[1], 0, &table_buffer, &table, &key) < 0)
        return NULL;
    uint8_t digest[DIGEST_BYTES];
    md5(key.buf, (size_t)key.len, digest);
    int64_t offset = latest_offset(&table, digest);
    PyBuffer_Release(&key);
    PyBuffer_Release(&table_buffer);
    return PyLong_FromLongLong(offset);
}

/* retained(table, data, key_starts, key_lengths, value_lengths, base_offset, offset_deltas, end_offset,
 *          tombstones_expired) -> (bytes of the int64 indexes kept, keyless dropped, tombstones kept)
 * The cleaner's decision for a data batch's records: a record at end_offset or later is not judged and stays; a
 * keyless one goes; another stays if no later offset is mapped for its key, and, when `tombstones_expired`, it is
 * not a tombstone (a null value). */
static PyObject *retained(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "retained takes 9 arguments, not %zd", nargs);
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(args[5]), end_offset = PyLong_AsLongLong(args[7]);
    int tombstones_expired = PyObject_IsTrue(args[8]);
    if (((base_offset == -1 || end_offset == -1) && PyErr_Occurred()) || tombstones_expired < 0)
        return NULL;
    Py_buffer table_buffer, data;
    Table table;
    Columns columns;
    if (take_table_and_bytes(args[0], args[1], 0, &table_buffer, &table, &data) < 0)
        return NULL;
    PyObject *answer = NULL, *kept = NULL;
    if (take_columns((PyObject *const[]){args[2], args[3], args[4], args[6]}, 4, &columns) < 0)
        goto done;
    if (check_keys(&columns, data.len) < 0)
        goto release;
    kept = PyBytes_FromStringAndSize(NULL, columns.count * (Py_ssize_t)sizeof(int64_t));
    if (kept == NULL)
        goto release;
    int64_t *indexes = (int64_t *)PyBytes_AS_STRING(kept);
    Py_ssize_t kept_count = 0;
    long long keyless = 0, tombstones = 0;
    const int64_t *starts = column(&columns, 0), *key_lengths = column(&columns, 1),
                  *value_lengths = column(&columns, 2), *deltas = column(&columns, 3);
    Py_BEGIN_ALLOW_THREADS
    uint8_t digests[AHEAD][DIGEST_BYTES];
    for (Py_ssize_t i = 0; i < columns.count; i++) {
        if (i % AHEAD == 0)
            digest_ahead(&table, data.buf, starts, key_lengths, i, columns.count, digests);
        int64_t offset = base_offset + deltas[i];
        int keep;
        if (offset >= end_offset) {
            keep = 1;
        } else if (key_lengths[i] < 0) {
            keep = 0;
            keyless++;
        } else {
            keep = offset >= latest_offset(&table, digests[i % AHEAD])
                   && (value_lengths[i] >= 0 || !tombstones_expired);
        }
        if (keep) {
            indexes[kept_count++] = i;
            tombstones += value_lengths[i] < 0;
        }
    }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&kept, kept_count * (Py_ssize_t)sizeof(int64_t)) == 0)
        answer = Py_BuildValue("(OLL)", kept, keyless, tombstones);
release:
    release_columns(&columns);
done:
    Py_XDECREF(kept);
    PyBuffer_Release(&data);
    PyBuffer_Release(&table_buffer);
    return answer;
}

static PyMethodDef offset_map_methods[] = {
    {"put", (PyCFunction)(void (*)(void))put, METH_FASTCALL,
     "put(table, room, data, key_starts, key_lengths, base_offset, offset_deltas)\n--\n\n"
     "Map each non-null key data[start:start + length] to base_offset + its delta, in order: (keys added, the\n"
     "last offset put or -1, whether a new key found no room and stopped the puts)."},
    {"get", (PyCFunction)(void (*)(void))get, METH_FASTCALL,
     "get(table, key)\n--\n\nThe latest offset put for `key`, or -1."},
    {"retained", (PyCFunction)(void (*)(void))retained, METH_FASTCALL,
     "retained(table, data, key_starts, key_lengths, value_lengths, base_offset, offset_deltas, end_offset,\n"
     "         tombstones_expired)\n--\n\n"
     "The cleaner's decision for a batch's records: (bytes of the int64 indexes kept, keyless records dropped,\n"
     "tombstones kept)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef offset_map_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_offset_map",
    .m_doc = "The cleaner's offset map in C (see storage.offset_map).",
    .m_size = 0,
    .m_methods = offset_map_methods,
};

PyMODINIT_FUNC PyInit__offset_map(void) {
    for (int i = 0; i < 64; i++)
        md5_sines[i] = (uint32_t)(fabs(sin((double)(i + 1))) * 4294967296.0);
    return PyModule_Create(&offset_map_module);
}
