/* CRC-32C (Castagnoli), the checksum of record batch v2, over any contiguous buffer without copying it.
 *
 * google_crc32c's C entry point accepts only `bytes`, so every batch that arrived in a bytearray or a memoryview
 * slice of one had to be copied first: for a 1 MB produce batch that copy (a fresh allocation and its page faults)
 * cost more than the checksum. Here `value` takes any buffer (bytes, bytearray, memoryview, mmap) and releases the
 * GIL for large ones.
 *
 * On x86-64 with SSE4.2 the `crc32` instruction does the work, three independent streams at a time so the loop runs
 * at the instruction's throughput rather than its latency (3 cycles); the three partial CRCs are combined by
 * shifting the first over the length of the others with precomputed tables (GF(2) matrix powers of the CRC's
 * "append a zero bit" operator), the method of Mark Adler's crc32c.c. Elsewhere, or without SSE4.2, a slice-by-8
 * table loop computes the same value; `portable_value` exposes it so the tests check it on any machine. The chosen
 * loop is also exported to other C modules as the capsule `extend` (uint32_t extend(crc, bytes, length)).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82f63b78u   /* CRC-32C, reflected */
#define LONG_BLOCK 8192    /* bytes per stream in the three-stream loop for long buffers */
#define SHORT_BLOCK 256    /* ... and for what is left */
#define GIL_FREE_BYTES 65536

static uint32_t table[8][256];           /* slice-by-8 tables */
static uint32_t shift_long[4][256];      /* a CRC register advanced over LONG_BLOCK zero bytes, byte by byte */
static uint32_t shift_short[4][256];     /* ... over SHORT_BLOCK zero bytes */

static uint32_t portable_extend(uint32_t crc, const uint8_t *next, size_t length) {
    crc = ~crc;
    while (length && ((uintptr_t)next & 7)) {
        crc = table[0][(crc ^ *next++) & 0xff] ^ (crc >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
        word ^= crc; /* little-endian: the register meets the first four bytes */
        crc = table[7][word & 0xff] ^ table[6][(word >> 8) & 0xff] ^ table[5][(word >> 16) & 0xff] ^
              table[4][(word >> 24) & 0xff] ^ table[3][(word >> 32) & 0xff] ^ table[2][(word >> 40) & 0xff] ^
              table[1][(word >> 48) & 0xff] ^ table[0][word >> 56];
        next += 8;
        length -= 8;
    }
    while (length--)
        crc = table[0][(crc ^ *next++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* The product of a 32x32 GF(2) matrix (one column per bit) and a vector. */
static uint32_t matrix_times(const uint32_t *matrix, uint32_t vector) {
    uint32_t sum = 0;
    while (vector) {
        if (vector & 1)
            sum ^= *matrix;
        vector >>= 1;
        matrix++;
    }
    return sum;
}

static void matrix_square(uint32_t *square, const uint32_t *matrix) {
    for (int n = 0; n < 32; n++)
        square[n] = matrix_times(matrix, matrix[n]);
}

/* The operator that advances a CRC register over `length` zero bytes, `length` a power of two. */
static void zeros_operator(uint32_t *even, size_t length) {
    uint32_t odd[32];
    uint32_t row = 1;
    odd[0] = POLY; /* one zero bit */
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    matrix_square(even, odd); /* two zero bits */
    matrix_square(odd, even); /* four */
    for (;;) {
        matrix_square(even, odd); /* eight, on the first turn: one zero byte */
        length >>= 1;
        if (length == 0)
            return;
        matrix_square(odd, even);
        length >>= 1;
        if (length == 0)
            break;
    }
    memcpy(even, odd, sizeof odd);
}

static void make_shift_table(uint32_t shift[4][256], size_t length) {
    uint32_t operator[32];
    zeros_operator(operator, length);
    for (uint32_t n = 0; n < 256; n++) {
        shift[0][n] = matrix_times(operator, n);
        shift[1][n] = matrix_times(operator, n << 8);
        shift[2][n] = matrix_times(operator, n << 16);
        shift[3][n] = matrix_times(operator, n << 24);
    }
}

static inline uint32_t shift_crc(uint32_t shift[4][256], uint32_t crc) {
    return shift[0][crc & 0xff] ^ shift[1][(crc >> 8) & 0xff] ^ shift[2][(crc >> 16) & 0xff] ^ shift[3][crc >> 24];
}

static void make_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ POLY : crc >> 1;
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            table[k][n] = table[0][table[k - 1][n] & 0xff] ^ (table[k - 1][n] >> 8);
    make_shift_table(shift_long, LONG_BLOCK);
    make_shift_table(shift_short, SHORT_BLOCK);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HARDWARE 1
#include <nmmintrin.h>

/* Three streams of `block` bytes each at once while three blocks remain, their CRCs joined by shifting. */
#define THREE_STREAMS(block, shift)                                                                               \
    while (length >= 3 * (block)) {                                                                               \
        uint64_t crc1 = 0, crc2 = 0;                                                                              \
        const uint8_t *end = next + (block);                                                                      \
        do {                                                                                                      \
            uint64_t word0, word1, word2;                                                                         \
            memcpy(&word0, next, 8);                                                                              \
            memcpy(&word1, next + (block), 8);                                                                    \
            memcpy(&word2, next + 2 * (block), 8);                                                                \
            crc0 = _mm_crc32_u64(crc0, word0);                                                                    \
            crc1 = _mm_crc32_u64(crc1, word1);                                                                    \
            crc2 = _mm_crc32_u64(crc2, word2);                                                                    \
            next += 8;                                                                                            \
        } while (next < end);                                                                                     \
        crc0 = shift_crc(shift, (uint32_t)crc0) ^ (uint32_t)crc1;                                                 \
        crc0 = shift_crc(shift, (uint32_t)crc0) ^ (uint32_t)crc2;                                                 \
        next += 2 * (block);                                                                                      \
        length -= 3 * (block);                                                                                    \
    }

__attribute__((target("sse4.2"))) static uint32_t hardware_extend(uint32_t crc, const uint8_t *next,
                                                                   size_t length) {
    uint64_t crc0 = ~crc;
    while (length && ((uintptr_t)next & 7)) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        length--;
    }
    THREE_STREAMS(LONG_BLOCK, shift_long)
    THREE_STREAMS(SHORT_BLOCK, shift_short)
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
        crc0 = _mm_crc32_u64(crc0, word);
        next += 8;
        length -= 8;
    }
    while (length--)
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
    return ~(uint32_t)crc0;
}
#endif

static uint32_t (*extend)(uint32_t, const uint8_t *, size_t) = portable_extend;

static PyObject *checksum(PyObject *data, uint32_t (*compute)(uint32_t, const uint8_t *, size_t)) {
    Py_buffer buffer;
    uint32_t crc;
    if (PyObject_GetBuffer(data, &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    if (buffer.len >= GIL_FREE_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        crc = compute(0, buffer.buf, (size_t)buffer.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = compute(0, buffer.buf, (size_t)buffer.len);
    }
    PyBuffer_Release(&buffer);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *value(PyObject *self, PyObject *data) {
    return checksum(data, extend);
}

static PyObject *portable_value(PyObject *self, PyObject *data) {
    return checksum(data, portable_extend);
}

static PyMethodDef methods[] = {
    {"value", value, METH_O, "value(buffer) -> int: the CRC-32C of a contiguous buffer, read in place."},
    {"portable_value", portable_value, METH_O,
     "portable_value(buffer) -> int: the same through the table loop that `value` uses without SSE4.2."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_crc32c", .m_doc = "CRC-32C of buffers read in place.", .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__crc32c(void) {
    make_tables();
#ifdef HAVE_HARDWARE
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        extend = hardware_extend;
#endif
    PyObject *created = PyModule_Create(&module);
    if (created == NULL)
        return NULL;
    /* `extend` for other C modules (records._batch), through PyCapsule_Import("odradek.records._crc32c.extend") */
    PyObject *capsule = PyCapsule_New((void *)extend, "odradek.records._crc32c.extend", NULL);
    int failed = capsule == NULL || PyModule_AddObjectRef(created, "extend", capsule) < 0 ||
                 PyModule_AddStringConstant(created, "implementation",
                                            extend == portable_extend ? "portable" : "sse4.2") < 0;
    Py_XDECREF(capsule);
    if (failed) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
