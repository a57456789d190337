/* A bytearray whose bytes are left as malloc gives them, for a large request frame to be received into in place.
 *
 * Python has no way to ask for an uninitialized buffer: bytearray(n) zeroes every byte, which for the 1 MB frames of
 * a batching producer costs about what the copy it would save. PyByteArray_FromStringAndSize(NULL, n) does not.
 * Untouched memory is also what keeps a frame's memory following the bytes the peer actually sent: a large
 * allocation is a fresh mapping whose pages become resident only when a receive writes them, and a smaller one
 * reuses heap memory that was resident already.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyMethodDef methods[] = {
    {"frame_buffer", frame_buffer, METH_O,
     "frame_buffer(size) -> bytearray: `size` bytes, not zeroed, to be overwritten by what is received."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_frame_buffer", .m_doc = "Uninitialized buffers for large request frames.",
    .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__frame_buffer(void) { return PyModule_Create(&module); }
