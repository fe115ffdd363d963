/* torcia._speedups: the native half of the per-op path, optional.
 *
 * make(arr, dev, base=None) is Tensor._make (torcia/_tensor.py), which wraps every op's
 * result: the same new Tensor with the same ten slots, stored directly into the instance
 * instead of through ten attribute assignments (a third of its time in Python).
 *
 * call, binary, unary and binary_inplace are the dispatcher's functions of the same names
 * for the common case, where every step is a slot read or a dict lookup: plain tensors of
 * NumPy arrays on one device, one dtype (or a float tensor and a Python number), a kernel
 * in the device's table, no dispatch mode entered in any thread. Anything else (a mode, a
 * promotion, a subclass, a missing kernel, a kernel's error) runs the Python function,
 * which is the reference: it is given the same arguments, and the native path has done
 * nothing visible yet (kernels of these ops are pure).
 *
 * The module is built where a C compiler is found; without it, or with TORCIA_PURE_PYTHON=1
 * in the environment, torcia runs the Python functions, which the tests compare these with.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

enum { DATA, DEVICE, REQUIRES_GRAD, GRAD, GRAD_FN, VC, BASE, OUT_NR, HOOKS, RETAINS, N_SLOTS };
static const char *slot_names[N_SLOTS] = {"_data", "_device", "_requires_grad", "_grad",
                                          "grad_fn", "_vc", "_base", "_out_nr", "_hooks",
                                          "_retains_grad"};

static PyTypeObject *tensor_type = NULL;
static PyObject *ndarray_type = NULL, *generic_type = NULL, *asarray = NULL, *zero = NULL;
static Py_ssize_t offsets[N_SLOTS];

#define SLOT(o, i) (*(PyObject **)((char *)(o) + offsets[i]))

/* setup(Tensor, numpy.ndarray, numpy.generic, numpy.asarray): reads the offsets of
 * Tensor's slots from its member descriptors, once at import */
static PyObject *setup(PyObject *self, PyObject *args) {
  PyObject *cls, *nd, *gen, *conv;
  if (!PyArg_ParseTuple(args, "O!OOO", &PyType_Type, &cls, &nd, &gen, &conv)) return NULL;
  Py_ssize_t found[N_SLOTS];
  for (int i = 0; i < N_SLOTS; i++) {
    const char *name = slot_names[i];
    PyObject *descr = PyDict_GetItemString(((PyTypeObject *)cls)->tp_dict, name);
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
      PyErr_Format(PyExc_TypeError, "setup: %s is not a slot of the Tensor class", name);
      return NULL;
    }
    found[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
  }
  if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL) return NULL;
  memcpy(offsets, found, sizeof(offsets));
  Py_INCREF(cls);
  Py_XSETREF(tensor_type, (PyTypeObject *)cls);
  Py_INCREF(nd);
  Py_XSETREF(ndarray_type, nd);
  Py_INCREF(gen);
  Py_XSETREF(generic_type, gen);
  Py_INCREF(conv);
  Py_XSETREF(asarray, conv);
  Py_RETURN_NONE;
}

/* a new reference stored into an empty slot of a fresh instance */
static inline void put(PyObject *t, int i, PyObject *value) {
  Py_INCREF(value);
  SLOT(t, i) = value;
}

static PyObject *make(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (tensor_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "make: setup() was not called");
    return NULL;
  }
  if (nargs < 2 || nargs > 3) {
    PyErr_SetString(PyExc_TypeError, "make(arr, dev, base=None) takes 2 or 3 arguments");
    return NULL;
  }
  PyObject *arr = args[0], *dev = args[1], *base = nargs == 3 ? args[2] : Py_None;
  PyObject *vc = NULL, *root = Py_None;
  if (base != Py_None) {
    /* a view shares its base's version counter and storage root (read as attributes
     * where base is not a Tensor, as the Python _make reads them) */
    if (PyObject_TypeCheck(base, tensor_type)) {
      vc = SLOT(base, VC);
      root = SLOT(base, BASE);
      if (vc == NULL || root == NULL) {
        PyErr_SetString(PyExc_AttributeError, "make: the base tensor is not initialised");
        return NULL;
      }
      Py_INCREF(vc);
      Py_INCREF(root);
    } else {
      if ((vc = PyObject_GetAttrString(base, "_vc")) == NULL) return NULL;
      if ((root = PyObject_GetAttrString(base, "_base")) == NULL) {
        Py_DECREF(vc);
        return NULL;
      }
    }
    if (root == Py_None) {
      Py_DECREF(root);
      Py_INCREF(base);
      root = base;
    }
  }
  PyObject *converted = NULL;
  if ((PyObject *)Py_TYPE(arr) != ndarray_type) {
    int scalar = PyObject_IsInstance(arr, generic_type);
    if (scalar < 0) goto fail;
    if (scalar) {
      /* a NumPy scalar (a full reduction's result) becomes a 0-d array */
      if ((converted = PyObject_CallOneArg(asarray, arr)) == NULL) goto fail;
      arr = converted;
    }
  }
  PyObject *t = tensor_type->tp_alloc(tensor_type, 0);
  if (t == NULL) {
    Py_XDECREF(converted);
    goto fail;
  }
  put(t, DATA, arr);
  Py_XDECREF(converted);
  put(t, DEVICE, dev);
  put(t, REQUIRES_GRAD, Py_False);
  put(t, GRAD, Py_None);
  put(t, GRAD_FN, Py_None);
  if (vc == NULL) {
    PyObject *counter = PyList_New(1);
    if (counter == NULL) {
      Py_DECREF(t);
      return NULL;
    }
    Py_INCREF(zero);
    PyList_SET_ITEM(counter, 0, zero);
    SLOT(t, VC) = counter;
    put(t, BASE, Py_None);
  } else {
    SLOT(t, VC) = vc;    /* the references taken above */
    SLOT(t, BASE) = root;
  }
  put(t, OUT_NR, zero);
  put(t, HOOKS, Py_None);
  put(t, RETAINS, Py_False);
  return t;
fail:
  Py_XDECREF(vc);
  if (vc != NULL) Py_DECREF(root);
  return NULL;
}

/* ----- dispatch --------------------------------------------------------------------- */

/* The first fields of a NumPy array and of its dtype, as NumPy's public headers lay them
 * out (PyArrayObject_fields, PyArray_Descr; the same in NumPy 1 and 2). Mirrored rather
 * than included so that building needs no NumPy; setup_dispatch checks them on a probe
 * array and leaves the native dispatch off where they do not match. */
typedef struct {
  PyObject_HEAD
  char *data;
  int nd;
  Py_ssize_t *dimensions;
  Py_ssize_t *strides;
  PyObject *base;
  PyObject *descr;
} ArrayHead;

typedef struct {
  PyObject_HEAD
  PyTypeObject *typeobj;
  char kind;
} DescrHead;

#define ARR(o) ((ArrayHead *)(o))
#define KIND(arr) (((DescrHead *)ARR(arr)->descr)->kind)

static int dispatch_on = 0;
static PyObject *globals = NULL;     /* torcia._tensor's namespace: _modes_on */
static PyObject *grad_state = NULL;  /* torcia._grad_mode.STATE: enabled */
static PyObject *autograd = NULL;    /* torcia._tensor.AUTOGRAD: record */
static PyObject *py_call = NULL, *py_binary = NULL, *py_unary = NULL, *py_inplace = NULL;
static PyObject *no_kernel = NULL;   /* torcia._tensor._no_kernel */
static PyObject *float32 = NULL, *float64 = NULL;  /* the dtypes a Python number joins */
static PyObject *s_modes_on = NULL, *s_enabled = NULL, *s_record = NULL, *s_engine = NULL,
                *s_anomaly = NULL;
static PyObject *one = NULL;
static PyObject *out_kwnames = NULL;  /* ("out",): the kernels' out= (hookspecs) */
static Py_ssize_t kernels_offset;    /* torcia.device's kernels slot */
/* the slots an op reads from its tensors: their names and Tensor's member descriptors */
static const int read_slots[3] = {DATA, DEVICE, REQUIRES_GRAD};
static PyObject *read_names[3], *read_descrs[3], *s_layout_binary = NULL;

/* setup_dispatch(globals, device, grad_state, autograd, call, binary, unary,
 * binary_inplace, no_kernel, probe): probe is a 1-d float32 array of 3 elements. Returns
 * the native (call, binary, unary, binary_inplace), or False where NumPy's arrays are not
 * laid out as this module reads them */
static PyObject *setup_dispatch(PyObject *self, PyObject *args) {
  PyObject *g, *dev_cls, *gs, *ag, *c, *b, *u, *bi, *nk, *probe;
  if (!PyArg_ParseTuple(args, "O!O!OOOOOOOO", &PyDict_Type, &g, &PyType_Type, &dev_cls, &gs,
                        &ag, &c, &b, &u, &bi, &nk, &probe))
    return NULL;
  if (tensor_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "setup_dispatch: setup() was not called");
    return NULL;
  }
  PyObject *descr = PyDict_GetItemString(((PyTypeObject *)dev_cls)->tp_dict, "kernels");
  if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type) ||
      ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
    PyErr_SetString(PyExc_TypeError, "setup_dispatch: kernels is not a slot of device");
    return NULL;
  }
  kernels_offset = ((PyMemberDescrObject *)descr)->d_member->offset;
  for (int i = 0; i < 3; i++) {
    const char *name = slot_names[read_slots[i]];
    PyObject *slot = PyDict_GetItemString(tensor_type->tp_dict, name);
    PyObject *interned = PyUnicode_InternFromString(name);
    if (slot == NULL || interned == NULL) {
      Py_XDECREF(interned);
      PyErr_Format(PyExc_TypeError, "setup_dispatch: %s is not a slot of Tensor", name);
      return NULL;
    }
    Py_INCREF(slot);
    Py_XSETREF(read_descrs[i], slot);
    Py_XSETREF(read_names[i], interned);
  }
  PyObject *dtype = PyObject_GetAttrString(probe, "dtype");
  if (dtype == NULL) return NULL;
  int matches = (PyObject *)Py_TYPE(probe) == ndarray_type && ARR(probe)->nd == 1 &&
                ARR(probe)->dimensions[0] == 3 && ARR(probe)->descr == dtype &&
                ((DescrHead *)dtype)->kind == 'f';
  Py_DECREF(dtype);
  if (s_modes_on == NULL) {
    s_modes_on = PyUnicode_InternFromString("_modes_on");
    s_enabled = PyUnicode_InternFromString("enabled");
    s_record = PyUnicode_InternFromString("record");
    s_engine = PyUnicode_InternFromString("engine");
    s_anomaly = PyUnicode_InternFromString("ANOMALY");
    s_layout_binary = PyUnicode_InternFromString("_layout_binary");
    one = PyLong_FromLong(1);
    out_kwnames = Py_BuildValue("(s)", "out");
    if (s_modes_on == NULL || s_enabled == NULL || s_record == NULL || s_engine == NULL ||
        s_anomaly == NULL || s_layout_binary == NULL || one == NULL || out_kwnames == NULL)
      return NULL;
  }
  PyObject *np = PyImport_ImportModule("numpy");
  if (np == NULL) return NULL;
  PyObject *f32 = PyObject_CallMethod(np, "dtype", "s", "float32");
  PyObject *f64 = f32 ? PyObject_CallMethod(np, "dtype", "s", "float64") : NULL;
  Py_DECREF(np);
  if (f64 == NULL) {
    Py_XDECREF(f32);
    return NULL;
  }
  Py_XSETREF(float32, f32);
  Py_XSETREF(float64, f64);
#define KEEP(var, value) Py_INCREF(value); Py_XSETREF(var, value)
  KEEP(globals, g);
  KEEP(grad_state, gs);
  KEEP(autograd, ag);
  KEEP(py_call, c);
  KEEP(py_binary, b);
  KEEP(py_unary, u);
  KEEP(py_inplace, bi);
  KEEP(no_kernel, nk);
#undef KEEP
  dispatch_on = matches;
  if (!matches) Py_RETURN_FALSE;
  PyObject *fns = PyTuple_New(4);
  const char *names[4] = {"call", "binary", "unary", "binary_inplace"};
  for (int i = 0; fns != NULL && i < 4; i++) {
    PyObject *fn = PyObject_GetAttrString(self, names[i]);
    if (fn == NULL)
      Py_CLEAR(fns);
    else
      PyTuple_SET_ITEM(fns, i, fn);
  }
  return fns;
}

/* 1: no dispatch mode is entered in any thread (_modes_on is 0), 0: one is, -1: error */
static inline int modes_off(void) {
  PyObject *n = PyDict_GetItemWithError(globals, s_modes_on);
  if (n == NULL) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "torcia._tensor._modes_on is missing");
    return -1;
  }
  int on = PyObject_IsTrue(n);
  return on < 0 ? -1 : !on;
}

/* a borrowed reference to the kernel of op on dev, or NULL (no error set) where the
 * device's table is not built or lacks it: the Python path's cases */
static inline PyObject *kernel_of(PyObject *dev, PyObject *op) {
  PyObject *kernels = *(PyObject **)((char *)dev + kernels_offset);
  if (kernels == NULL || !PyDict_Check(kernels)) return NULL;
  PyObject *kernel = PyDict_GetItemWithError(kernels, op);  /* never __missing__ */
  if (kernel == NULL) PyErr_Clear();
  return kernel;
}

/* 1 where the autograd engine's anomaly detection is on: an op it records takes the
 * Python path then, as the forward trace the engine keeps leaves out the frames of the
 * op's function and of the Python dispatcher (a native one has none); 0 off, -1 error */
static int anomaly_on(void) {
  PyObject *engine = PyObject_GetAttr(autograd, s_engine);
  if (engine == NULL) return -1;
  PyObject *anomaly = engine == Py_None ? NULL : PyObject_GetAttr(engine, s_anomaly);
  Py_DECREF(engine);
  if (anomaly == NULL) {
    if (!PyErr_Occurred()) return 0;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();  /* an engine without anomaly detection */
    return 0;
  }
  PyObject *enabled = PyObject_GetAttr(anomaly, s_enabled);
  Py_DECREF(anomaly);
  if (enabled == NULL) return -1;
  int on = PyObject_IsTrue(enabled);
  Py_DECREF(enabled);
  return on;
}

/* AUTOGRAD.record(op, inputs, params, result) where grad mode is on; steals nothing */
static int record(PyObject *op, PyObject *inputs, PyObject *params, PyObject *result) {
  PyObject *enabled = PyObject_GetAttr(grad_state, s_enabled);
  if (enabled == NULL) return -1;
  int on = PyObject_IsTrue(enabled);
  Py_DECREF(enabled);
  if (on <= 0) return on;
  PyObject *fn = PyObject_GetAttr(autograd, s_record);
  if (fn == NULL) return -1;
  PyObject *args[4] = {op, inputs, params, result};
  PyObject *r = PyObject_Vectorcall(fn, args, 4, NULL);
  Py_DECREF(fn);
  if (r == NULL) return -1;
  Py_DECREF(r);
  return 0;
}

/* whether the kernel's error (set) is one the Python path handles itself: it rewords
 * TypeError and ValueError as PyTorch, wraps a big Python int around on OverflowError,
 * and runs a decomposition on NotImplementedError; any other error is the op's */
static int clear_if_retryable(void) {
  if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
      PyErr_ExceptionMatches(PyExc_OverflowError) ||
      PyErr_ExceptionMatches(PyExc_NotImplementedError)) {
    PyErr_Clear();
    return 1;
  }
  return 0;
}

/* 1 where x is a Tensor whose class keeps the dense layout: Tensor, or a subclass
 * (nn.Parameter) that reads the same slots and has no layout arithmetic of its own, which
 * the Python functions treat as a Tensor; 0 otherwise (a sparse layout, or not a
 * tensor), -1 on error */
static int dense_tensor(PyObject *x) {
  PyTypeObject *t = Py_TYPE(x);
  if (t == tensor_type) return 1;
  if (!PyType_IsSubtype(t, tensor_type)) return 0;
  for (int i = 0; i < 3; i++)
    if (_PyType_Lookup(t, read_names[i]) != read_descrs[i]) return 0;
  PyObject *layout = PyObject_GetAttr(x, s_layout_binary);
  if (layout == NULL) return -1;
  Py_DECREF(layout);
  return layout == Py_None;
}

/* a slot's truth (requires_grad), without a call where it holds a bool */
static inline int is_true(PyObject *t, int slot) {
  PyObject *v = SLOT(t, slot);
  return v == Py_True || (v != Py_False && v != Py_None && PyObject_IsTrue(v) > 0);
}

static PyObject *fallback(PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
  return PyObject_Vectorcall(fn, args, nargs, kwnames);
}

/* the arguments of a call, given by position or by name, in the order of names (NULL for
 * one not given): how many there are up to the last one given, or -1 where a name is
 * unknown, given twice, or leaves a gap (the Python function reports those) */
static Py_ssize_t by_position(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                              const char *const *names, Py_ssize_t n, PyObject **out) {
  if (nargs > n) return -1;
  for (Py_ssize_t i = 0; i < n; i++) out[i] = i < nargs ? args[i] : NULL;
  Py_ssize_t given = nargs;
  Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nk; k++) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t j = nargs;
    while (j < n && PyUnicode_CompareWithASCIIString(name, names[j]) != 0) j++;
    if (j == n || out[j] != NULL) return -1;
    out[j] = args[nargs + k];
    if (j >= given) given = j + 1;
  }
  for (Py_ssize_t i = 0; i < given; i++)
    if (out[i] == NULL) return -1;
  return given;
}

#define MAX_INPUTS 8

/* the kernel's TypeError or ValueError (set) as _no_kernel words it, raised from None */
static void reword(PyObject *op, PyObject *const *arrays, Py_ssize_t n) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  PyObject *list = PyList_New(n), *error = NULL;
  if (list != NULL) {
    for (Py_ssize_t i = 0; i < n; i++) {
      Py_INCREF(arrays[i]);
      PyList_SET_ITEM(list, i, arrays[i]);
    }
    PyObject *nargs[3] = {op, list, value};
    error = PyObject_Vectorcall(no_kernel, nargs, 3, NULL);
    Py_DECREF(list);
  }
  if (error == NULL) {
    Py_DECREF(value);
    return;
  }
  if (error != value)
    PyException_SetContext(error, value);  /* steals value */
  else
    Py_DECREF(value);
  PyException_SetCause(error, NULL);  /* and sets __suppress_context__ */
  PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(error)), error, PyException_GetTraceback(error));
}

/* kernel(*args), or kernel(*args, **params), wrapped as a new tensor on dev (a tuple of
 * them for a tuple; view_of as for make), or NULL with the error set, reworded by
 * _no_kernel where op is given. The kernel, its arrays and dev were read from a table
 * and from slots that another thread may change while the kernel runs (it may release
 * the GIL), so they are held until the result is made. */
static PyObject *run(PyObject *kernel, PyObject *const *args, Py_ssize_t n, PyObject *params,
                     PyObject *dev, PyObject *view_of, PyObject *op) {
  Py_INCREF(kernel);
  Py_INCREF(dev);
  for (Py_ssize_t i = 0; i < n; i++) Py_INCREF(args[i]);
  PyObject *out = params != NULL ? PyObject_VectorcallDict(kernel, args, n, params)
                                 : PyObject_Vectorcall(kernel, args, n, NULL);
  PyObject *result = NULL;
  if (out == NULL) {
    if (op != NULL &&
        (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)))
      reword(op, args, n);
  } else if (PyTuple_CheckExact(out)) {
    Py_ssize_t k = PyTuple_GET_SIZE(out);
    result = PyTuple_New(k);
    for (Py_ssize_t i = 0; result != NULL && i < k; i++) {
      PyObject *margs[2] = {PyTuple_GET_ITEM(out, i), dev};
      PyObject *t = make(NULL, margs, 2);
      if (t == NULL)
        Py_CLEAR(result);
      else
        PyTuple_SET_ITEM(result, i, t);
    }
  } else {
    PyObject *margs[3] = {out, dev, view_of};
    result = make(NULL, margs, 3);
  }
  Py_XDECREF(out);
  for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(args[i]);
  Py_DECREF(dev);
  Py_DECREF(kernel);
  return result;
}

/* record() of an elementwise op of n operands, with no params */
static PyObject *recorded(PyObject *result, PyObject *op, PyObject *const *operands,
                          Py_ssize_t n) {
  PyObject *inputs = PyTuple_New(n), *params = PyDict_New();
  for (Py_ssize_t i = 0; inputs != NULL && i < n; i++) {
    Py_INCREF(operands[i]);
    PyTuple_SET_ITEM(inputs, i, operands[i]);
  }
  int rc = inputs && params ? record(op, inputs, params, result) : -1;
  Py_XDECREF(inputs);
  Py_XDECREF(params);
  if (rc < 0) Py_CLEAR(result);
  return result;
}

/* binary(op, a, b, float_op=False) */
static PyObject *binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames) {
  static const char *const names[] = {"op", "a", "b", "float_op"};
  PyObject *arg[4];
  Py_ssize_t given = by_position(args, nargs, kwnames, names, 4, arg);
  if (!dispatch_on || given < 3) return fallback(py_binary, args, nargs, kwnames);
  PyObject *op = arg[0], *a = arg[1], *b = arg[2];
  int float_op = 0;
  if (given == 4 && (float_op = PyObject_IsTrue(arg[3])) < 0) return NULL;
  int dense = dense_tensor(a);
  if (dense <= 0) return dense < 0 ? NULL : fallback(py_binary, args, nargs, kwnames);
  int off = modes_off();
  if (off < 0) return NULL;
  PyObject *ad = SLOT(a, DATA), *dev = SLOT(a, DEVICE), *bd;
  if (!off || (PyObject *)Py_TYPE(ad) != ndarray_type || !PyUnicode_CheckExact(op))
    return fallback(py_binary, args, nargs, kwnames);
  int grad = is_true(a, REQUIRES_GRAD);
  if ((dense = dense_tensor(b)) < 0) return NULL;
  if (dense) {
    /* one dtype and device: nothing to promote */
    bd = SLOT(b, DATA);
    if ((PyObject *)Py_TYPE(bd) != ndarray_type || ARR(bd)->descr != ARR(ad)->descr ||
        SLOT(b, DEVICE) != dev || (float_op && KIND(ad) != 'f'))
      return fallback(py_binary, args, nargs, kwnames);
    grad |= is_true(b, REQUIRES_GRAD);
  } else if (PyFloat_CheckExact(b) || PyLong_CheckExact(b)) {
    /* a float32/float64 tensor keeps its dtype beside a Python number, which the
     * kernel takes as it is */
    if (ARR(ad)->descr != float32 && ARR(ad)->descr != float64)
      return fallback(py_binary, args, nargs, kwnames);
    bd = b;
  } else {
    return fallback(py_binary, args, nargs, kwnames);
  }
  if (grad) {
    int anomaly = anomaly_on();
    if (anomaly < 0) return NULL;
    if (anomaly) return fallback(py_binary, args, nargs, kwnames);
  }
  PyObject *kernel = kernel_of(dev, op);
  if (kernel == NULL) {
    if (PyErr_Occurred()) return NULL;
    return fallback(py_binary, args, nargs, kwnames);
  }
  PyObject *karg[2] = {ad, bd};
  PyObject *result = run(kernel, karg, 2, NULL, dev, Py_None, NULL);
  if (result == NULL) {
    if (!clear_if_retryable()) return NULL;
    return fallback(py_binary, args, nargs, kwnames);
  }
  return grad ? recorded(result, op, arg + 1, 2) : result;
}

/* unary(op, a, to_float=False) */
static PyObject *unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames) {
  static const char *const names[] = {"op", "a", "to_float"};
  PyObject *arg[3];
  Py_ssize_t given = by_position(args, nargs, kwnames, names, 3, arg);
  if (!dispatch_on || given < 2) return fallback(py_unary, args, nargs, kwnames);
  PyObject *op = arg[0], *a = arg[1];
  int to_float = 0;
  if (given == 3 && (to_float = PyObject_IsTrue(arg[2])) < 0) return NULL;
  int dense = dense_tensor(a);
  if (dense < 0) return NULL;
  if (!dense || !PyUnicode_CheckExact(op)) return fallback(py_unary, args, nargs, kwnames);
  int off = modes_off();
  if (off < 0) return NULL;
  PyObject *ad = SLOT(a, DATA), *dev = SLOT(a, DEVICE);
  if (!off || (PyObject *)Py_TYPE(ad) != ndarray_type ||
      (to_float && strchr("biu", KIND(ad)) != NULL))
    return fallback(py_unary, args, nargs, kwnames);
  if (is_true(a, REQUIRES_GRAD)) {
    int anomaly = anomaly_on();
    if (anomaly < 0) return NULL;
    if (anomaly) return fallback(py_unary, args, nargs, kwnames);
  }
  PyObject *kernel = kernel_of(dev, op);
  if (kernel == NULL) {
    if (PyErr_Occurred()) return NULL;
    return fallback(py_unary, args, nargs, kwnames);
  }
  PyObject *result = run(kernel, &ad, 1, NULL, dev, Py_None, NULL);
  if (result == NULL) {
    if (!clear_if_retryable()) return NULL;
    return fallback(py_unary, args, nargs, kwnames);
  }
  return is_true(a, REQUIRES_GRAD) ? recorded(result, op, arg + 1, 1) : result;
}

/* call(op, inputs, params, view_of=None) */
static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames) {
  static const char *const names[] = {"op", "inputs", "params", "view_of"};
  PyObject *arg[4];
  Py_ssize_t given = by_position(args, nargs, kwnames, names, 4, arg);
  if (!dispatch_on || given < 3) return fallback(py_call, args, nargs, kwnames);
  PyObject *op = arg[0], *inputs = arg[1], *params = arg[2];
  PyObject *view_of = given == 4 ? arg[3] : Py_None;
  if (!PyTuple_CheckExact(inputs) || PyTuple_GET_SIZE(inputs) > MAX_INPUTS ||
      !PyDict_CheckExact(params) || !PyUnicode_CheckExact(op))
    return fallback(py_call, args, nargs, kwnames);
  int off = modes_off();
  if (off < 0) return NULL;
  if (!off) return fallback(py_call, args, nargs, kwnames);
  Py_ssize_t n = PyTuple_GET_SIZE(inputs);
  PyObject *arrays[MAX_INPUTS], *dev = NULL;
  int grad = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PyTuple_GET_ITEM(inputs, i);
    int dense = dense_tensor(x);
    if (dense < 0) return NULL;
    if (dense) {
      PyObject *d = SLOT(x, DEVICE);
      if (dev == NULL)
        dev = d;
      else if (d != dev)
        return fallback(py_call, args, nargs, kwnames);  /* its error */
      arrays[i] = SLOT(x, DATA);
      grad |= is_true(x, REQUIRES_GRAD);
    } else if (PyObject_TypeCheck(x, tensor_type)) {
      return fallback(py_call, args, nargs, kwnames);
    } else {
      arrays[i] = x;
    }
  }
  if (grad) {
    int anomaly = anomaly_on();
    if (anomaly < 0) return NULL;
    if (anomaly) return fallback(py_call, args, nargs, kwnames);
  }
  PyObject *kernel = dev != NULL ? kernel_of(dev, op) : NULL;
  if (kernel == NULL) {
    if (PyErr_Occurred()) return NULL;
    return fallback(py_call, args, nargs, kwnames);  /* a decomposition, or its error */
  }
  PyObject *result = run(kernel, arrays, n, params, dev, view_of, op);
  if (result != NULL && grad && record(op, inputs, params, result) < 0) Py_CLEAR(result);
  return result;
}

/* binary_inplace(op, op_fn, self, other, float_op=False): a += b where nothing records,
 * converts or watches, other is a plain tensor of self's dtype, shape and device over
 * another storage (no overlap to check), and self has no dim broadcast by a zero stride.
 * The kernel gets self's array as its out= and writes the result there; one that returns
 * an array of its own has it copied in */
static PyObject *binary_inplace(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
  static const char *const names[] = {"op", "op_fn", "self", "other", "float_op"};
  PyObject *arg[5];
  Py_ssize_t given = by_position(args, nargs, kwnames, names, 5, arg);
  if (!dispatch_on || given < 4) return fallback(py_inplace, args, nargs, kwnames);
  PyObject *op = arg[0], *t = arg[2], *other = arg[3];
  int float_op = 0;
  if (given == 5 && (float_op = PyObject_IsTrue(arg[4])) < 0) return NULL;
  if (Py_TYPE(t) != tensor_type || Py_TYPE(other) != tensor_type || !PyUnicode_CheckExact(op))
    return fallback(py_inplace, args, nargs, kwnames);
  int off = modes_off();
  if (off < 0) return NULL;
  PyObject *sd = SLOT(t, DATA), *od = SLOT(other, DATA), *dev = SLOT(t, DEVICE);
  if (!off || is_true(t, REQUIRES_GRAD) || is_true(other, REQUIRES_GRAD) ||
      SLOT(other, DEVICE) != dev || (PyObject *)Py_TYPE(sd) != ndarray_type ||
      (PyObject *)Py_TYPE(od) != ndarray_type || ARR(sd)->descr != ARR(od)->descr ||
      (float_op && KIND(sd) != 'f') || ARR(sd)->nd != ARR(od)->nd)
    return fallback(py_inplace, args, nargs, kwnames);
  PyObject *t_root = SLOT(t, BASE) != Py_None ? SLOT(t, BASE) : t;
  PyObject *o_root = SLOT(other, BASE) != Py_None ? SLOT(other, BASE) : other;
  if (t_root == o_root) return fallback(py_inplace, args, nargs, kwnames);
  for (int i = 0; i < ARR(sd)->nd; i++) {
    Py_ssize_t size = ARR(sd)->dimensions[i];
    if (size != ARR(od)->dimensions[i] || (ARR(sd)->strides[i] == 0 && size > 1))
      return fallback(py_inplace, args, nargs, kwnames);
  }
  PyObject *kernel = kernel_of(dev, op);
  if (kernel == NULL) {
    if (PyErr_Occurred()) return NULL;
    return fallback(py_inplace, args, nargs, kwnames);
  }
  /* held while the kernel runs, as in run() */
  Py_INCREF(kernel);
  Py_INCREF(sd);
  Py_INCREF(od);
  PyObject *karg[3] = {sd, od, sd};
  PyObject *out = PyObject_Vectorcall(kernel, karg, 2, out_kwnames);
  Py_DECREF(kernel);
  Py_DECREF(od);
  int rc = -1;
  if (out == sd) {
    rc = 0;
    Py_DECREF(out);
  } else if (out != NULL) {
    int same = (PyObject *)Py_TYPE(out) == ndarray_type &&
               ARR(out)->descr == ARR(sd)->descr && ARR(out)->nd == ARR(sd)->nd;
    for (int i = 0; same && i < ARR(sd)->nd; i++)
      same = ARR(out)->dimensions[i] == ARR(sd)->dimensions[i];
    rc = same ? PyObject_SetItem(sd, Py_Ellipsis, out) : -1;
    Py_DECREF(out);
  }
  Py_DECREF(sd);
  if (out == NULL) {
    if (!clear_if_retryable()) return NULL;
    return fallback(py_inplace, args, nargs, kwnames);
  }
  if (rc < 0) {
    /* a read-only array, or a result to convert: the Python path raises or converts */
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
      PyErr_Clear();
    }
    return fallback(py_inplace, args, nargs, kwnames);
  }
  PyObject *vc = SLOT(t, VC);
  PyObject *version = PyList_Check(vc) && PyList_GET_SIZE(vc) == 1 ? PyList_GET_ITEM(vc, 0)
                                                                      : NULL;
  PyObject *bumped = version != NULL ? PyNumber_Add(version, one) : NULL;
  if (bumped == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a tensor's _vc is not [int]");
    return NULL;
  }
  PyList_SET_ITEM(vc, 0, bumped);
  Py_DECREF(version);
  Py_INCREF(t);
  return t;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(Tensor, ndarray, generic, asarray)"},
    {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL,
     "make(arr, dev, base=None): Tensor._make, natively"},
    {"setup_dispatch", setup_dispatch, METH_VARARGS,
     "setup_dispatch(globals, device, grad_state, autograd, call, binary, unary, "
     "binary_inplace, no_kernel, probe): the native functions, or False"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL | METH_KEYWORDS,
     "call(op, inputs, params, view_of=None): torcia._tensor.call, natively"},
    {"binary", (PyCFunction)(void (*)(void))binary, METH_FASTCALL | METH_KEYWORDS,
     "binary(op, a, b, float_op=False): torcia._tensor.binary, natively"},
    {"unary", (PyCFunction)(void (*)(void))unary, METH_FASTCALL | METH_KEYWORDS,
     "unary(op, a, to_float=False): torcia._tensor.unary, natively"},
    {"binary_inplace", (PyCFunction)(void (*)(void))binary_inplace,
     METH_FASTCALL | METH_KEYWORDS,
     "binary_inplace(op, op_fn, self, other, float_op=False): natively"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "torcia._speedups",
                                    "The native half of the per-op path (optional).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
