/* A bytearray whose bytes are left as malloc gives them, for a large request frame to be received into in place.
 *
 * Python has no way to ask for an uninitialized buffer: bytearray(n) zeroes every byte, which for the 1 MB frames of
 * a batching producer costs about what the copy it would save. PyByteArray_FromStringAndSize(NULL, n) does not.
 * Untouched memory is also what keeps a frame's memory following the bytes the peer actually sent: a large
 * allocation is a fresh mapping whose pages become resident only when a receive writes them, and a smaller one
 * reuses heap memory that was resident already.
 *
 * That fresh mapping has a price when the frames keep coming: glibc serves a 1 MB allocation by mmap, or from the top
 * of the heap once a freed one has raised its threshold, and gives the memory back to the kernel at the free (munmap,
 * or a trim of the heap's top past 2 MB free), so the receives faulted the frames' pages in again and again: 11,264
 * page faults for 12M records of 1 MB batches, 4% of the broker's CPU in faults, brk and munmap (perf).
 * `keep_freed_frames` has the process keep what it frees below a bound instead (mallopt, glibc only): allocations up
 * to 32 MiB come from the heap, and up to 64 MiB free at its top stays mapped for the next frames (931 faults for
 * the same run). Larger frames are still fresh mappings, so a header announcing 100 MB still costs what arrives.
 * `odradek serve` asks for it at start, as it owns its process; a broker embedded in someone else's does not.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define HEAP_ALLOCATION_MAX (32 << 20) /* glibc's own ceiling for the threshold it raises by itself */
#define KEPT_FREE_MAX (64 << 20)

static PyObject *frame_buffer(PyObject *module, PyObject *arg) {
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "a frame buffer's size is not negative");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyObject *keep_freed_frames(PyObject *module, PyObject *unused) {
#ifdef __GLIBC__
    if (mallopt(M_MMAP_THRESHOLD, HEAP_ALLOCATION_MAX) && mallopt(M_TRIM_THRESHOLD, KEPT_FREE_MAX))
        Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"frame_buffer", frame_buffer, METH_O,
     "frame_buffer(size) -> bytearray: `size` bytes, not zeroed, to be overwritten by what is received."},
    {"keep_freed_frames", keep_freed_frames, METH_NOARGS,
     "keep_freed_frames() -> bool: have this process's allocator keep freed frames' memory for the next ones "
     "(whether it could)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_frame_buffer", .m_doc = "Uninitialized buffers for large request frames.",
    .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__frame_buffer(void) { return PyModule_Create(&module); }
