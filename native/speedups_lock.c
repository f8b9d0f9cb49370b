/*
 * Lock: a non-reentrant lock with threading.Lock's methods, the producer's
 * accumulator's. threading's lock has no C API to try, and FastProduce
 * (speedups_accumulator.c) tries this one without a Python call:
 * sp_lock_take(lock, 0, 0), then sp_lock_give. LockObject is in speedups.h.
 */
#include "speedups.h"

#include <math.h>

static PyTypeObject LockType;

/* Takes the lock: 1, or 0 when it is held and !blocking or timeout_us ran
 * out (timeout_us < 0: no limit). A wait releases the GIL. Signals do not
 * cut a wait short (intr_flag 0): holders keep this lock for a few
 * statements, never across a wait. */
int sp_lock_take(LockObject *self, int blocking, PY_TIMEOUT_T timeout_us) {
    PyLockStatus r = PyThread_acquire_lock_timed(self->lock, 0, 0);
    if (r != PY_LOCK_ACQUIRED && blocking && timeout_us != 0) {
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(self->lock, timeout_us, 0);
        Py_END_ALLOW_THREADS
    }
    if (r != PY_LOCK_ACQUIRED) return 0;
    ls_assert(!self->locked);
    self->locked = 1;
    return 1;
}

void sp_lock_give(LockObject *self) {
    ls_assert(self->locked);
    self->locked = 0;
    PyThread_release_lock(self->lock);
}

static PyObject *lock_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":Lock", names)) return NULL;
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void lock_dealloc(LockObject *self) {
    if (self->lock != NULL) {
        if (self->locked) PyThread_release_lock(self->lock); /* freeing a held lock is undefined */
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* acquire(blocking=True, timeout=-1) -> bool, as threading.Lock's. */
static PyObject *lock_acquire(LockObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", names, &blocking, &timeout)) return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (isnan(timeout) || (timeout < 0 && timeout != -1)) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (timeout * 1e6 >= (double)PY_TIMEOUT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    /* Rounded up, as threading rounds a timeout: never wait less than asked. */
    PY_TIMEOUT_T us = timeout < 0 ? -1 : (PY_TIMEOUT_T)ceil(timeout * 1e6);
    return PyBool_FromLong(sp_lock_take(self, blocking, us));
}

static PyObject *lock_enter(LockObject *self, PyObject *unused) {
    sp_lock_take(self, 1, -1);
    Py_RETURN_TRUE;
}

static PyObject *lock_release(LockObject *self, PyObject *unused) {
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    sp_lock_give(self);
    Py_RETURN_NONE;
}

static PyObject *lock_exit(LockObject *self, PyObject *args) {
    return lock_release(self, NULL);
}

static PyObject *lock_locked(LockObject *self, PyObject *unused) {
    return PyBool_FromLong(self->locked);
}

static PyObject *lock_repr(LockObject *self) {
    return PyUnicode_FromFormat("<%s %s>", self->locked ? "locked" : "unlocked", Py_TYPE(self)->tp_name);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool: take the lock (waiting with the GIL released)"},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "release(): RuntimeError if it is not held"},
    {"locked", (PyCFunction)lock_locked, METH_NOARGS, "locked() -> bool"},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)lock_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logstore._speedups.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lock()\n\nthreading.Lock's methods (acquire, release, locked, with), for the producer's\n"
              "accumulator: FastProduce tries it from C without a Python call.",
    .tp_new = lock_tp_new,
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_repr = (reprfunc)lock_repr,
    .tp_methods = lock_methods,
};

LockObject *sp_lock_new(void) {
    return (LockObject *)PyObject_CallNoArgs((PyObject *)&LockType);
}

int sp_lock_install(PyObject *module) {
    return PyModule_AddType(module, &LockType);
}
