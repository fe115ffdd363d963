/* torcia._speedups: the native half of the per-op path, optional.
 *
 * make(arr, dev, base=None) is Tensor._make (torcia/_tensor.py), which wraps every op's
 * result: the same new Tensor with the same ten slots, stored directly into the instance
 * instead of through ten attribute assignments (a third of its time in Python). The module
 * is built where a C compiler is found; without it, or with TORCIA_PURE_PYTHON=1 in the
 * environment, torcia runs the Python _make, which the tests compare this one with.
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

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(Tensor, ndarray, generic, asarray)"},
    {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL,
     "make(arr, dev, base=None): Tensor._make, natively"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "torcia._speedups",
                                    "The native half of the per-op path (optional).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
