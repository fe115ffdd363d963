/* torcia.autograd._native: the hot paths of torcia/autograd/engine.py in C, optional.
 *
 * record(op, inputs, params, out) is engine.record for its common case (one plain Tensor
 * output of an op with a formula); run(roots, root_grads, retain_graph, create_graph,
 * capture, accumulate, targets) is the loop of engine.run_backward (dependency counting, the
 * ready stack, the gradient buffers, each node's Entry.backward, its post hooks, releasing
 * it), statement for statement, for the passes with neither anomaly detection nor a
 * dispatch mode. What is rarer (hooks, a leaf's first gradient, the in-place sum of two
 * gradients, packed or modified saved tensors) calls the engine's own Python code, given
 * once to setup() and setup_record(). The helpers that count references (sys.getrefcount)
 * to know when a gradient is private are called holding the same references to it as the
 * Python loop holds.
 *
 * The module is built where a C compiler is found; without it, or with
 * TORCIA_PURE_PYTHON=1 in the environment, the Python engine runs, which the tests compare
 * this one with.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* setup()'s arguments */
static PyObject *node_type, *acc_type, *accumulate_fn, *pre_hooks_fn, *add_in_place_fn,
    *needed_fn, *set_grad_mode_fn, *entry_type, *meta_type, *tensor_type, *fit_fn;
static PyObject *s_next_functions, *s_n_outputs, *s_pre_hooks, *s_post_hooks, *s_entry,
    *s_backward, *s_apply, *s_release, *s_shape, *s_dtype, *s_result, *s_needs, *one, *two;

/* setup_record()'s arguments */
static PyObject *table, *python_record, *accumulator_of_fn, *no_edge,
    *saved_hooks, *anomaly, *alias_fn, *bfloat16, *strided;

/* slots read by offset: a slot of a Node or an Entry, or a Tensor's published field */
enum { N_ARGS, N_VERSIONS, N_METAS, N_EDGES, N_PARAMS, N_RELEASED, N_PACKED, N_HOLDS,
       N_OP, N_ENTRY, N_N_OUTPUTS, N_PRE_HOOKS, N_POST_HOOKS, N_TRACE,
       E_FN, E_MULTI, E_PARAM_NAMES, E_USES_RESULT, E_WANTS_NEEDS, E_SAVED_FLAGS,
       E_VARIADIC_SAVED, E_ONLY_FOR, E_SAVED_OUTPUTS,
       T_DATA, T_VERSION, T_DEVICE, T_REQUIRES_GRAD, T_GRAD_FN, T_OUTPUT_NR, T_META,
       N_OFFSETS };
static const char *offset_names[N_OFFSETS] = {
    "args", "versions", "metas", "next_functions", "params", "released", "packed",
    "holds_saved", "op", "entry", "n_outputs", "pre_hooks", "post_hooks", "trace",
    "fn", "multi", "param_names", "uses_result", "wants_needs", "saved_flags",
    "variadic_saved", "only_for", "saved_outputs",
    "__torcia_data__", "__torcia_version__", "__torcia_device__",
    "__torcia_requires_grad__", "grad_fn", "__torcia_output_nr__",
    "__torcia_autograd_meta__"};
static Py_ssize_t offsets[N_OFFSETS];

/* a slot's value (borrowed), or NULL with AttributeError where it is unset */
static inline PyObject *slot(PyObject *o, int i) {
  PyObject *v = *(PyObject **)((char *)o + offsets[i]);
  if (v == NULL) PyErr_SetString(PyExc_AttributeError, offset_names[i]);
  return v;
}

static int read_offsets(void) {
  for (int i = 0; i < N_OFFSETS; i++) {
    PyObject *cls = i < E_FN ? node_type : i < T_DATA ? entry_type : tensor_type;
    PyObject *descr = PyDict_GetItemString(((PyTypeObject *)cls)->tp_dict, offset_names[i]);
    if (descr == NULL || !PyObject_TypeCheck(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
      PyErr_Format(PyExc_TypeError, "setup: %s is not a slot of %R", offset_names[i], cls);
      return -1;
    }
    offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
  }
  return 0;
}

#define N_SETUP 11

static PyObject *setup(PyObject *self, PyObject *args) {
  PyObject *a[N_SETUP];
  if (!PyArg_ParseTuple(args, "OOOOOOOOOOO", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5],
                        &a[6], &a[7], &a[8], &a[9], &a[10]))
    return NULL;
  PyObject **dst[N_SETUP] = {&node_type,    &acc_type,        &accumulate_fn,
                             &pre_hooks_fn, &add_in_place_fn, &needed_fn,
                             &set_grad_mode_fn, &entry_type,  &meta_type,
                             &tensor_type,  &fit_fn};
  for (int i = 0; i < N_SETUP; i++) {
    if (i == 0 || i == 1 || i == 7 || i == 8 || i == 9) {
      if (!PyType_Check(a[i])) {
        PyErr_SetString(PyExc_TypeError, "setup: expected a class");
        return NULL;
      }
    }
    Py_INCREF(a[i]);
    Py_XSETREF(*dst[i], a[i]);
  }
  if (read_offsets() < 0) {
    Py_CLEAR(node_type); /* run() refuses to run with offsets unread */
    return NULL;
  }
  Py_RETURN_NONE;
}

static inline int is_none(PyObject *o) { return o == Py_None; }

/* [None] * n */
static PyObject *nones(Py_ssize_t n) {
  PyObject *list = PyList_New(n);
  if (list == NULL) return NULL;
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_INCREF(Py_None);
    PyList_SET_ITEM(list, i, Py_None);
  }
  return list;
}

static Py_ssize_t n_outputs(PyObject *node) {
  PyObject *n = PyObject_GetAttr(node, s_n_outputs);
  if (n == NULL) return -1;
  Py_ssize_t v = PyNumber_AsSsize_t(n, PyExc_OverflowError);
  Py_DECREF(n);
  return v;
}

/* obj[i] for a list or any sequence; a new reference */
static PyObject *item(PyObject *seq, Py_ssize_t i) {
  if (PyList_CheckExact(seq)) {
    if (i < 0 || i >= PyList_GET_SIZE(seq)) {
      PyErr_SetString(PyExc_IndexError, "list index out of range");
      return NULL;
    }
    PyObject *v = PyList_GET_ITEM(seq, i);
    Py_INCREF(v);
    return v;
  }
  return PySequence_GetItem(seq, i);
}

/* the count of edges into nxt, from deps */
static Py_ssize_t count_of(PyObject *deps, PyObject *nxt) {
  PyObject *c = PyDict_GetItemWithError(deps, nxt);
  if (c == NULL) {
    if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, nxt);
    return -1;
  }
  return PyLong_AsSsize_t(c);
}

static int set_count(PyObject *deps, PyObject *nxt, Py_ssize_t v) {
  PyObject *c = PyLong_FromSsize_t(v);
  if (c == NULL) return -1;
  int r = PyDict_SetItem(deps, nxt, c);
  Py_DECREF(c);
  return r;
}

/* the Python loop's `buffers.pop(node, None)`: a new reference or None (new) */
static PyObject *pop(PyObject *dict, PyObject *key) {
  PyObject *v = PyDict_GetItemWithError(dict, key);
  if (v == NULL) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  Py_INCREF(v);
  if (PyDict_DelItem(dict, key) < 0) {
    Py_DECREF(v);
    return NULL;
  }
  return v;
}

/* Counts edges (deps), the pruning's parents, the first buffers and the ready stack, as
 * the first half of engine.run_backward. */
static int prepare(PyObject *roots, PyObject *root_grads, int pruning, PyObject *deps,
                   PyObject *parents, PyObject *buffers, PyObject *ready) {
  PyObject *starts = NULL, *root_set = NULL, *stack = NULL;
  int ok = -1;
  Py_ssize_t n_roots = PyList_GET_SIZE(roots);
  if ((starts = PyList_New(0)) == NULL) goto done;
  if ((root_set = PySet_New(NULL)) == NULL) goto done;
  for (Py_ssize_t i = 0; i < n_roots; i++) {
    PyObject *node = PyTuple_GET_ITEM(PyList_GET_ITEM(roots, i), 0);
    int seen = PySet_Contains(root_set, node);
    if (seen < 0) goto done;
    if (seen) continue;
    if (PySet_Add(root_set, node) < 0 || PyList_Append(starts, node) < 0) goto done;
  }
  if ((stack = PyList_GetSlice(starts, 0, PyList_GET_SIZE(starts))) == NULL) goto done;
  while (PyList_GET_SIZE(stack)) {
    Py_ssize_t top = PyList_GET_SIZE(stack) - 1;
    PyObject *node = PyList_GET_ITEM(stack, top);
    Py_INCREF(node);
    if (PyList_SetSlice(stack, top, top + 1, NULL) < 0) {
      Py_DECREF(node);
      goto done;
    }
    PyObject *edges = PyObject_GetAttr(node, s_next_functions);
    if (edges == NULL) {
      Py_DECREF(node);
      goto done;
    }
    PyObject *fast = PySequence_Fast(edges, "next_functions must be a sequence");
    Py_DECREF(edges);
    if (fast == NULL) {
      Py_DECREF(node);
      goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t k = 0; k < n; k++) {
      PyObject *edge = PySequence_Fast_GET_ITEM(fast, k);
      PyObject *nxt = PySequence_GetItem(edge, 0);
      if (nxt == NULL) goto edge_fail;
      if (is_none(nxt)) {
        Py_DECREF(nxt);
        continue;
      }
      PyObject *count = PyDict_GetItemWithError(deps, nxt);
      int r;
      if (count == NULL) {
        if (PyErr_Occurred()) goto nxt_fail;
        r = PyDict_SetItem(deps, nxt, one);
        if (r == 0) {
          int in_roots = PySet_Contains(root_set, nxt);
          r = in_roots < 0 ? -1 : in_roots ? 0 : PyList_Append(stack, nxt);
        }
      } else {
        r = set_count(deps, nxt, PyLong_AsSsize_t(count) + 1);
      }
      if (r == 0 && pruning) {
        PyObject *list = PyDict_GetItemWithError(parents, nxt);
        if (list == NULL) {
          if (PyErr_Occurred()) goto nxt_fail;
          if ((list = PyList_New(0)) == NULL) goto nxt_fail;
          r = PyDict_SetItem(parents, nxt, list);
          Py_DECREF(list);
        }
        if (r == 0) r = PyList_Append(list, node);
      }
      Py_DECREF(nxt);
      if (r < 0) goto edge_fail;
      continue;
    nxt_fail:
      Py_DECREF(nxt);
    edge_fail:
      Py_DECREF(fast);
      Py_DECREF(node);
      goto done;
    }
    Py_DECREF(fast);
    Py_DECREF(node);
  }
  for (Py_ssize_t i = 0; i < n_roots; i++) {
    PyObject *root = PyList_GET_ITEM(roots, i), *g = PyList_GET_ITEM(root_grads, i);
    PyObject *node = PyTuple_GET_ITEM(root, 0);
    Py_ssize_t nr = PyLong_AsSsize_t(PyTuple_GET_ITEM(root, 1));
    if (nr == -1 && PyErr_Occurred()) goto done;
    PyObject *buf = PyDict_GetItemWithError(buffers, node);
    if (buf == NULL) {
      if (PyErr_Occurred()) goto done;
      Py_ssize_t n = n_outputs(node);
      if (n < 0 || (buf = nones(n)) == NULL) goto done;
      int r = PyDict_SetItem(buffers, node, buf);
      Py_DECREF(buf);
      if (r < 0) goto done;
    }
    PyObject *old = item(buf, nr);
    if (old == NULL) goto done;
    PyObject *sum = is_none(old) ? (Py_INCREF(g), g) : PyNumber_Add(old, g);
    Py_DECREF(old);
    if (sum == NULL || PyList_SetItem(buf, nr, sum) < 0) goto done;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(starts); i++) {
    PyObject *node = PyList_GET_ITEM(starts, i);
    int has = PyDict_Contains(deps, node);
    if (has < 0 || (!has && PyList_Append(ready, node) < 0)) goto done;
  }
  ok = 0;
done:
  Py_XDECREF(starts);
  Py_XDECREF(root_set);
  Py_XDECREF(stack);
  return ok;
}

/* Entry.backward (torcia/autograd/derivatives/__init__.py) for a Node whose saved tensors
 * are its own (not packed by saved-tensor hooks), whose versions still match, and that
 * needs no output re-attached (result under create_graph): everything else, errors
 * included, is the Python method's. */
static PyObject *entry_backward(PyObject *entry, PyObject *node, PyObject *grads,
                                PyObject *create_graph) {
  PyObject *released, *packed, *args, *versions, *metas, *edges, *uses_result;
  if ((released = slot(node, N_RELEASED)) == NULL || (packed = slot(node, N_PACKED)) == NULL ||
      (args = slot(node, N_ARGS)) == NULL || (versions = slot(node, N_VERSIONS)) == NULL ||
      (metas = slot(node, N_METAS)) == NULL || (edges = slot(node, N_EDGES)) == NULL ||
      (uses_result = slot(entry, E_USES_RESULT)) == NULL)
    return NULL;
  int slow = released != Py_False || packed != Py_False || !PyTuple_CheckExact(args) ||
             !PyTuple_CheckExact(versions) || !PyTuple_CheckExact(metas) ||
             !PyTuple_CheckExact(edges) || (PyObject *)Py_TYPE(entry) != entry_type;
  if (!slow && uses_result != Py_False) {
    slow = PyObject_IsTrue(create_graph);
    if (slow < 0) return NULL;
  }
  for (Py_ssize_t k = 0; !slow && k < PyTuple_GET_SIZE(versions); k++) {
    PyObject *pair = PyTuple_GET_ITEM(versions, k);
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
      slow = 1;
      break;
    }
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
    if (i == -1 && PyErr_Occurred()) return NULL;
    PyObject *t = i >= 0 && i < PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, i) : NULL;
    PyObject *vc = t != NULL && Py_TYPE(t) == (PyTypeObject *)tensor_type
                       ? *(PyObject **)((char *)t + offsets[T_VERSION]) : NULL;
    if (vc == NULL || !PyList_CheckExact(vc) || PyList_GET_SIZE(vc) != 1) {
      slow = 1;
      break;
    }
    int same = PyObject_RichCompareBool(PyList_GET_ITEM(vc, 0), PyTuple_GET_ITEM(pair, 1),
                                        Py_EQ);
    if (same < 0) return NULL;
    slow = !same;  /* the Python method raises PyTorch's error */
  }
  if (slow) {
    PyObject *a[4] = {entry, node, grads, create_graph};
    return PyObject_VectorcallMethod(s_backward, a, 4, NULL);
  }
  PyObject *fn, *multi, *param_names, *wants_needs;
  if ((fn = slot(entry, E_FN)) == NULL || (multi = slot(entry, E_MULTI)) == NULL ||
      (param_names = slot(entry, E_PARAM_NAMES)) == NULL ||
      (wants_needs = slot(entry, E_WANTS_NEEDS)) == NULL)
    return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(edges), n_args = PyTuple_GET_SIZE(args);
  if (PyTuple_GET_SIZE(metas) != n || n_args < n || (uses_result != Py_False && n_args == n)) {
    PyObject *a[4] = {entry, node, grads, create_graph};
    return PyObject_VectorcallMethod(s_backward, a, 4, NULL);
  }
  PyObject *call = PyTuple_New(n + 1), *kwargs = NULL, *out = NULL, *fitted = NULL;
  if (call == NULL) return NULL;
  PyObject *first;
  if (PyObject_IsTrue(multi)) {
    Py_INCREF(grads);
    first = grads;
  } else if ((first = item(grads, 0)) == NULL) {
    goto done;
  }
  PyTuple_SET_ITEM(call, 0, first);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PyTuple_GET_ITEM(args, i), *m = PyTuple_GET_ITEM(metas, i);
    if (x == Py_None && m != Py_None) {
      /* an input the formula does not keep: its Meta */
      if ((x = PyObject_CallOneArg(meta_type, m)) == NULL) goto done;
    } else {
      Py_INCREF(x);
    }
    PyTuple_SET_ITEM(call, i + 1, x);
  }
  if ((kwargs = PyDict_New()) == NULL) goto done;
  if (PyObject_IsTrue(param_names)) {
    PyObject *params = slot(node, N_PARAMS);
    if (params == NULL) goto done;
    PyObject *names = PySequence_Fast(param_names, "param_names must be a sequence");
    if (names == NULL) goto done;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(names); k++) {
      PyObject *name = PySequence_Fast_GET_ITEM(names, k);
      PyObject *v = PyObject_GetItem(params, name);
      if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
          Py_DECREF(names);
          goto done;
        }
        PyErr_Clear();
        continue;
      }
      int r = PyDict_SetItem(kwargs, name, v);
      Py_DECREF(v);
      if (r < 0) {
        Py_DECREF(names);
        goto done;
      }
    }
    Py_DECREF(names);
  }
  if (uses_result != Py_False) {
    PyObject *result = n_args - n == 1 ? (Py_INCREF(PyTuple_GET_ITEM(args, n)),
                                          PyTuple_GET_ITEM(args, n))
                                       : PyTuple_GetSlice(args, n, n_args);
    if (result == NULL) goto done;
    int r = PyDict_SetItem(kwargs, s_result, result);
    Py_DECREF(result);
    if (r < 0) goto done;
  }
  if (PyObject_IsTrue(wants_needs)) {
    PyObject *needs = PyTuple_New(n);
    if (needs == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject *nxt = PySequence_GetItem(PyTuple_GET_ITEM(edges, i), 0);
      if (nxt == NULL) {
        Py_DECREF(needs);
        goto done;
      }
      PyObject *flag = nxt != Py_None ? Py_True : Py_False;
      Py_DECREF(nxt);
      Py_INCREF(flag);
      PyTuple_SET_ITEM(needs, i, flag);
    }
    int r = PyDict_SetItem(kwargs, s_needs, needs);
    Py_DECREF(needs);
    if (r < 0) goto done;
  }
  out = PyObject_Call(fn, call, PyDict_GET_SIZE(kwargs) ? kwargs : NULL);
  if (out == NULL) goto done;
  if (!PyTuple_CheckExact(out)) {
    PyObject *one_out = PyTuple_Pack(1, out);
    Py_SETREF(out, one_out);
    if (out == NULL) goto done;
  }
  /* zip(out, metas, edges) */
  Py_ssize_t n_out = PyTuple_GET_SIZE(out) < n ? PyTuple_GET_SIZE(out) : n;
  if ((fitted = PyList_New(n_out)) == NULL) goto done;
  for (Py_ssize_t i = 0; i < n_out; i++) {
    PyObject *g = PyTuple_GET_ITEM(out, i), *m = PyTuple_GET_ITEM(metas, i);
    PyObject *nxt = PySequence_GetItem(PyTuple_GET_ITEM(edges, i), 0), *kept = NULL;
    if (nxt == NULL) goto fitted_fail;
    int no_edge = nxt == Py_None;
    Py_DECREF(nxt);
    if (g == Py_None || no_edge) {
      kept = Py_None;
      Py_INCREF(kept);
    } else {
      int fits = 0;
      if (Py_TYPE(g) == (PyTypeObject *)tensor_type && PyTuple_CheckExact(m) &&
          PyTuple_GET_SIZE(m) == 3) {
        PyObject *data = *(PyObject **)((char *)g + offsets[T_DATA]);
        PyObject *shape = data ? PyObject_GetAttr(data, s_shape) : NULL;
        if (shape == NULL) goto fitted_fail;
        fits = PyObject_RichCompareBool(shape, PyTuple_GET_ITEM(m, 0), Py_EQ);
        Py_DECREF(shape);
        if (fits < 0) goto fitted_fail;
        if (fits) {
          PyObject *dtype = PyObject_GetAttr(data, s_dtype);
          if (dtype == NULL) goto fitted_fail;
          fits = dtype == PyTuple_GET_ITEM(m, 1);
          Py_DECREF(dtype);
        }
      }
      if (fits) {
        kept = g;
        Py_INCREF(kept);
      } else {
        PyObject *a[2] = {g, m};
        if ((kept = PyObject_Vectorcall(fit_fn, a, 2, NULL)) == NULL) goto fitted_fail;
      }
    }
    PyList_SET_ITEM(fitted, i, kept);
    continue;
  fitted_fail:
    Py_CLEAR(fitted);
    goto done;
  }
done:
  Py_DECREF(call);
  Py_XDECREF(kwargs);
  Py_XDECREF(out);
  return fitted;
}

/* Node.release(): a node that saved nothing can run again */
static int release(PyObject *node) {
  if ((PyObject *)Py_TYPE(node) != node_type) {
    PyObject *r = PyObject_CallMethodNoArgs(node, s_release);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
  }
  PyObject *holds = slot(node, N_HOLDS);
  if (holds == NULL) return -1;
  int h = PyObject_IsTrue(holds);
  if (h <= 0) return h;
  PyObject **args = (PyObject **)((char *)node + offsets[N_ARGS]);
  PyObject **released = (PyObject **)((char *)node + offsets[N_RELEASED]);
  Py_INCREF(Py_None);
  Py_XSETREF(*args, Py_None);
  Py_INCREF(Py_True);
  Py_XSETREF(*released, Py_True);
  return 0;
}

static PyObject *s_variable, *s_hooks, *s_post_accumulate_hooks, *s_layout;

/* engine._no_leaf_hooks: no hook of any kind on the leaf acc accumulates into */
static int no_leaf_hooks(PyObject *acc) {
  PyObject *v = PyObject_GetAttr(acc, s_pre_hooks);
  if (v == NULL) return -1;
  int none = v == Py_None;
  Py_DECREF(v);
  if (!none) return 0;
  if ((v = PyObject_GetAttr(acc, s_post_hooks)) == NULL) return -1;
  none = v == Py_None;
  Py_DECREF(v);
  if (!none) return 0;
  PyObject *leaf = PyObject_GetAttr(acc, s_variable);
  if (leaf == NULL) return -1;
  PyObject *meta = PyObject_GetAttrString(leaf, "__torcia_autograd_meta__");
  Py_DECREF(leaf);
  if (meta == NULL) return -1;
  int quiet = 1;
  const PyObject *names[2] = {s_hooks, s_post_accumulate_hooks};
  for (int k = 0; k < 2 && quiet == 1 && meta != Py_None; k++) {
    PyObject *hooks = PyObject_GetAttr(meta, (PyObject *)names[k]);
    int any = hooks == NULL ? -1 : PyObject_IsTrue(hooks);
    Py_XDECREF(hooks);
    quiet = any < 0 ? -1 : !any;
  }
  Py_DECREF(meta);
  return quiet;
}

/* engine._accumulate where the leaf has no hook (no_leaf_hooks), no graph of the gradient is
 * made and the leaf's .grad is a plain Tensor that does not require grad: g's values are
 * added into it in place. 1 when done, 0 when the Python _accumulate must do it. */
static int add_into_grad(PyObject *acc, PyObject *g) {
  if (Py_TYPE(g) != (PyTypeObject *)tensor_type) return 0;
  PyObject *layout = PyObject_GetAttr(g, s_layout);
  if (layout == NULL) return -1;
  int dense = layout == strided;
  Py_DECREF(layout);
  if (!dense) return 0;
  PyObject *leaf = PyObject_GetAttr(acc, s_variable);
  if (leaf == NULL) return -1;
  int done = 0;
  PyObject *old = Py_TYPE(leaf) == (PyTypeObject *)tensor_type
                      ? PyObject_GetAttrString(leaf, "__torcia_grad__") : NULL;
  Py_DECREF(leaf);
  if (old == NULL) return PyErr_Occurred() ? -1 : 0;
  if (Py_TYPE(old) == (PyTypeObject *)tensor_type &&
      *(PyObject **)((char *)old + offsets[T_REQUIRES_GRAD]) == Py_False) {
    PyObject **data = (PyObject **)((char *)old + offsets[T_DATA]);
    PyObject *other = *(PyObject **)((char *)g + offsets[T_DATA]);
    PyObject *vc = *(PyObject **)((char *)old + offsets[T_VERSION]);
    if (*data != NULL && other != NULL && vc != NULL && PyList_CheckExact(vc) &&
        PyList_GET_SIZE(vc) == 1) {
      /* old.__torcia_data__ += grad.__torcia_data__; old.__torcia_version__[0] += 1 */
      PyObject *sum = PyNumber_InPlaceAdd(*data, other);
      if (sum == NULL) {
        done = -1;
      } else {
        Py_SETREF(*data, sum);
        PyObject *bumped = PyNumber_Add(PyList_GET_ITEM(vc, 0), one);
        done = bumped == NULL ? -1 : (PyList_SetItem(vc, 0, bumped), 1);
      }
    }
  }
  Py_DECREF(old);
  return done;
}

/* The ready-stack loop of engine.run_backward; results is filled for capture. */
static int loop(PyObject *ready, PyObject *deps, PyObject *buffers, PyObject *needed,
                PyObject *results, PyObject *retain_graph, PyObject *create_graph,
                PyObject *capture, int accumulate, PyObject *targets) {
  int keep_graph = PyObject_IsTrue(retain_graph);
  int make_graph = PyObject_IsTrue(create_graph);
  int capturing = is_none(capture) ? 0 : PyObject_IsTrue(capture);
  if (keep_graph < 0 || make_graph < 0 || capturing < 0) return -1;
  int direct = accumulate && !capturing && is_none(targets);
  PyObject *node = NULL, *grads = NULL, *edges = NULL, *grad_inputs = NULL, *g = NULL;
  while (PyList_GET_SIZE(ready)) {
    Py_ssize_t top = PyList_GET_SIZE(ready) - 1;
    node = PyList_GET_ITEM(ready, top);
    Py_INCREF(node);
    if (PyList_SetSlice(ready, top, top + 1, NULL) < 0) goto fail;
    if ((grads = pop(buffers, node)) == NULL) goto fail;
    if (is_none(grads)) {
      Py_ssize_t n = n_outputs(node);
      Py_SETREF(grads, n < 0 ? NULL : nones(n));
      if (grads == NULL) goto fail;
    }
    PyObject *pre = PyObject_GetAttr(node, s_pre_hooks);
    if (pre == NULL) goto fail;
    int hooked = PyObject_IsTrue(pre);
    if (hooked > 0) {
      PyObject *a[2] = {pre, grads};
      Py_SETREF(grads, PyObject_Vectorcall(pre_hooks_fn, a, 2, NULL));
    }
    Py_DECREF(pre);
    if (hooked < 0 || grads == NULL) goto fail;
    if (capturing) {
      Py_ssize_t n = n_outputs(node);
      if (n < 0) goto fail;
      for (Py_ssize_t nr = 0; nr < n; nr++) {
        PyObject *key = Py_BuildValue("(On)", node, nr);
        if (key == NULL) goto fail;
        PyObject *slot = PyDict_GetItemWithError(capture, key);
        Py_DECREF(key);
        if (slot == NULL) {
          if (PyErr_Occurred()) goto fail;
          continue;
        }
        PyObject *gn = item(grads, nr);
        if (gn == NULL || PyObject_SetItem(results, slot, gn) < 0) {
          Py_XDECREF(gn);
          goto fail;
        }
        Py_DECREF(gn);
      }
    }
    if ((PyObject *)Py_TYPE(node) == acc_type) {
      if (accumulate) {
        PyObject *g0 = item(grads, 0);
        if (g0 == NULL) goto fail;
        int wanted = !is_none(g0);
        Py_DECREF(g0); /* as the Python loop: the buffer list is the only reference held */
        if (wanted && !is_none(targets)) wanted = PySequence_Contains(targets, node);
        if (wanted < 0) goto fail;
        if (wanted) {
          if (!PyList_CheckExact(grads)) {
            PyErr_SetString(PyExc_TypeError, "a pre hook must give a list of gradients");
            goto fail;
          }
          int added = make_graph ? 0 : no_leaf_hooks(node);
          if (added > 0) added = add_into_grad(node, PyList_GET_ITEM(grads, 0));
          if (added < 0) goto fail;
          if (!added) {
            PyObject *a[4] = {node, PyList_GET_ITEM(grads, 0), create_graph, one};
            PyObject *r = PyObject_Vectorcall(accumulate_fn, a, 4, NULL);
            if (r == NULL) goto fail;
            Py_DECREF(r);
          }
        }
      }
      Py_CLEAR(grads);
      Py_CLEAR(node);
      continue;
    }
    if ((edges = PyObject_GetAttr(node, s_next_functions)) == NULL) goto fail;
    PyObject *fast = PySequence_Fast(edges, "next_functions must be a sequence");
    if (fast == NULL) goto fail;
    Py_SETREF(edges, fast);
    Py_ssize_t n_edges = PySequence_Fast_GET_SIZE(edges);
    int builtin = (PyObject *)Py_TYPE(node) == node_type;
    /* the references to a formula's gradient this loop holds when passing it on: its
     * place in grad_inputs and g (None: unknown, a hook may keep it) */
    PyObject *owned = builtin ? two : Py_None;
    int flowing = 0;
    Py_ssize_t n_grads = PySequence_Size(grads);
    if (n_grads < 0) goto fail;
    for (Py_ssize_t i = 0; i < n_grads && !flowing; i++) {
      PyObject *gi = item(grads, i);
      if (gi == NULL) goto fail;
      flowing = !is_none(gi);
      Py_DECREF(gi);
    }
    if (flowing && needed != NULL) {
      flowing = PySet_Contains(needed, node);
      if (flowing < 0) goto fail;
    }
    if (!flowing) {
      if ((grad_inputs = PyTuple_New(n_edges)) == NULL) goto fail;
      for (Py_ssize_t i = 0; i < n_edges; i++) {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(grad_inputs, i, Py_None);
      }
    } else {
      if (builtin) {
        PyObject *entry = PyObject_GetAttr(node, s_entry);
        if (entry == NULL) goto fail;
        grad_inputs = entry_backward(entry, node, grads, create_graph);
        Py_DECREF(entry);
      } else {
        PyObject *a[3] = {node, grads, create_graph};
        grad_inputs = PyObject_VectorcallMethod(s_apply, a, 3, NULL);
      }
      if (grad_inputs == NULL) goto fail;
      PyObject *post = PyObject_GetAttr(node, s_post_hooks);
      if (post == NULL) goto fail;
      int has_post = PyObject_IsTrue(post);
      if (has_post > 0) {
        owned = Py_None;
        PyObject *hooks = PySequence_List(post), *as_tuple = NULL;
        if (hooks == NULL || (as_tuple = PySequence_Tuple(grads)) == NULL) has_post = -1;
        for (Py_ssize_t k = 0; has_post > 0 && k < PyList_GET_SIZE(hooks); k++) {
          PyObject *a[2] = {grad_inputs, as_tuple};
          PyObject *r = PyObject_Vectorcall(PyList_GET_ITEM(hooks, k), a, 2, NULL);
          if (r == NULL) {
            has_post = -1;
          } else if (!is_none(r)) {
            Py_SETREF(grad_inputs, PySequence_Tuple(r));
            if (grad_inputs == NULL) has_post = -1;
          }
          Py_XDECREF(r);
          /* the next hook is given a fresh tuple of the same grads, as the Python loop */
          if (has_post > 0 && k + 1 < PyList_GET_SIZE(hooks)) {
            Py_SETREF(as_tuple, PySequence_Tuple(grads));
            if (as_tuple == NULL) has_post = -1;
          }
        }
        Py_XDECREF(hooks);
        Py_XDECREF(as_tuple);
      }
      Py_DECREF(post);
      if (has_post < 0) goto fail;
      if (!keep_graph) {
        if (release(node) < 0) goto fail;
      }
    }
    for (Py_ssize_t i = 0; i < n_edges; i++) {
      PyObject *edge = PySequence_Fast_GET_ITEM(edges, i);
      PyObject *nxt = PySequence_GetItem(edge, 0), *nr_obj = NULL;
      if (nxt == NULL) goto fail;
      if (is_none(nxt)) {
        Py_DECREF(nxt);
        continue;
      }
      if ((nr_obj = PySequence_GetItem(edge, 1)) == NULL) goto edge_fail;
      if ((g = item(grad_inputs, i)) == NULL) goto edge_fail;
      if (direct && (PyObject *)Py_TYPE(nxt) == acc_type) {
        Py_ssize_t left = count_of(deps, nxt);
        if (left < 0) goto edge_fail;
        int fast_leaf = 0;
        if (left == 1) {
          int buffered = PyDict_Contains(buffers, nxt);
          if (buffered < 0) goto edge_fail;
          if (!buffered && (fast_leaf = no_leaf_hooks(nxt)) < 0) goto edge_fail;
        }
        if (fast_leaf) {
          /* the last edge into a leaf, and the others brought nothing: accumulate now */
          if (set_count(deps, nxt, 0) < 0) goto edge_fail;
          int added = is_none(g) || make_graph ? 0 : add_into_grad(nxt, g);
          if (added < 0) goto edge_fail;
          if (!added && !is_none(g)) {
            PyObject *a[4] = {nxt, g, create_graph, owned};
            PyObject *r = PyObject_Vectorcall(accumulate_fn, a, 4, NULL);
            if (r == NULL) goto edge_fail;
            Py_DECREF(r);
          }
          Py_CLEAR(g);
          Py_DECREF(nr_obj);
          Py_DECREF(nxt);
          continue;
        }
      }
      if (!is_none(g)) {
        Py_ssize_t nr = PyLong_AsSsize_t(nr_obj);
        if (nr == -1 && PyErr_Occurred()) goto edge_fail;
        PyObject *buf = PyDict_GetItemWithError(buffers, nxt);
        if (buf == NULL) {
          if (PyErr_Occurred()) goto edge_fail;
          Py_ssize_t n = n_outputs(nxt);
          if (n < 0 || (buf = nones(n)) == NULL) goto edge_fail;
          int r = PyDict_SetItem(buffers, nxt, buf);
          Py_DECREF(buf);
          if (r < 0 || PyList_SetItem(buf, nr, (Py_INCREF(g), g)) < 0) goto edge_fail;
        } else {
          PyObject *old = item(buf, nr); /* a reference, as the Python loop's local */
          if (old == NULL) goto edge_fail;
          if (is_none(old)) {
            Py_DECREF(old);
            if (PyList_SetItem(buf, nr, (Py_INCREF(g), g)) < 0) goto edge_fail;
          } else {
            int added = 0;
            if (!make_graph) {
              PyObject *a[2] = {old, g};
              PyObject *r = PyObject_Vectorcall(add_in_place_fn, a, 2, NULL);
              added = r == NULL ? -1 : PyObject_IsTrue(r);
              Py_XDECREF(r);
            }
            PyObject *sum = NULL;
            if (added == 0) sum = PyNumber_Add(old, g);
            Py_DECREF(old);
            if (added < 0 || (added == 0 && sum == NULL)) goto edge_fail;
            if (sum != NULL && PyList_SetItem(buf, nr, sum) < 0) goto edge_fail;
          }
        }
      }
      Py_CLEAR(g);
      Py_DECREF(nr_obj);
      nr_obj = NULL;
      Py_ssize_t left = count_of(deps, nxt);
      if (left < 0 || set_count(deps, nxt, left - 1) < 0) goto edge_fail;
      if (left == 1 && PyList_Append(ready, nxt) < 0) goto edge_fail;
      Py_DECREF(nxt);
      continue;
    edge_fail:
      Py_XDECREF(nr_obj);
      Py_DECREF(nxt);
      goto fail;
    }
    Py_CLEAR(grad_inputs);
    Py_CLEAR(edges);
    Py_CLEAR(grads);
    Py_CLEAR(node);
  }
  return 0;
fail:
  Py_XDECREF(g);
  Py_XDECREF(grad_inputs);
  Py_XDECREF(edges);
  Py_XDECREF(grads);
  Py_XDECREF(node);
  return -1;
}

static PyObject *s_enabled, *s_accumulator, *s_kind, *fc;

static PyObject *setup_record(PyObject *self, PyObject *args) {
  PyObject *a[9];
  if (!PyArg_ParseTuple(args, "O!OOO!O!OOOO", &PyDict_Type, &a[0], &a[1], &a[2],
                        &PyTuple_Type, &a[3], &PyList_Type, &a[4], &a[5], &a[6], &a[7],
                        &a[8]))
    return NULL;
  PyObject **dst[9] = {&table,   &python_record, &accumulator_of_fn, &no_edge,
                       &saved_hooks, &anomaly, &alias_fn, &bfloat16, &strided};
  for (int i = 0; i < 9; i++) {
    Py_INCREF(a[i]);
    Py_XSETREF(*dst[i], a[i]);
  }
  Py_RETURN_NONE;
}

#define T_SLOT(o, i) (*(PyObject **)((char *)(o) + offsets[i]))

static PyObject *fallback(PyObject *const *args) {
  return PyObject_Vectorcall(python_record, args, 4, NULL);
}

/* the edge of a tensor that requires grad: (grad_fn, output_nr), or the leaf's
 * accumulator; a new reference */
static PyObject *edge_of(PyObject *x) {
  PyObject *fn = T_SLOT(x, T_GRAD_FN);
  if (fn == NULL) return slot(x, T_GRAD_FN);
  if (fn != Py_None) {
    PyObject *nr = T_SLOT(x, T_OUTPUT_NR);
    if (nr == NULL) return slot(x, T_OUTPUT_NR);
    return PyTuple_Pack(2, fn, nr);
  }
  PyObject *acc = NULL, *meta = T_SLOT(x, T_META);
  if (meta != NULL && meta != Py_None) {
    /* meta.accumulator() if meta.accumulator else None */
    PyObject *ref = PyObject_GetAttr(meta, s_accumulator);
    if (ref == NULL) return NULL;
    int has = PyObject_IsTrue(ref);
    if (has > 0) acc = PyObject_CallNoArgs(ref);
    Py_DECREF(ref);
    if (has < 0 || (has && acc == NULL)) return NULL;
    if (acc != NULL) {
      has = PyObject_IsTrue(acc);
      if (has < 0) {
        Py_DECREF(acc);
        return NULL;
      }
      if (!has) Py_CLEAR(acc);
    }
  }
  if (acc == NULL && (acc = PyObject_CallOneArg(accumulator_of_fn, x)) == NULL) return NULL;
  PyObject *edge = PyTuple_Pack(2, acc, PyTuple_GET_ITEM(no_edge, 1));
  Py_DECREF(acc);
  return edge;
}

/* whether a result of this dtype carries a gradient: float, complex or bfloat16 */
static int differentiable_dtype(PyObject *out) {
  PyObject *data = T_SLOT(out, T_DATA);
  if (data == NULL) return slot(out, T_DATA) == NULL ? -1 : 0;
  PyObject *dtype = PyObject_GetAttr(data, s_dtype);
  if (dtype == NULL) return -1;
  PyObject *kind = PyObject_GetAttr(dtype, s_kind);
  Py_DECREF(dtype);
  if (kind == NULL) return -1;
  int found = PySequence_Contains(fc, kind);
  Py_DECREF(kind);
  if (found) return found;
  PyObject *tdtype = PyObject_GetAttr(out, s_dtype);
  if (tdtype == NULL) return -1;
  found = tdtype == bfloat16;
  Py_DECREF(tdtype);
  return found;
}

/* engine.record for one plain Tensor output of an op with a formula, plain Tensor (or
 * non-tensor) inputs, and no saved-tensor hooks or anomaly mode; anything else is the
 * Python record's. */
static PyObject *record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (table == NULL || node_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "record: setup_record() was not called");
    return NULL;
  }
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "record() takes 4 arguments");
    return NULL;
  }
  PyObject *op = args[0], *inputs = args[1], *params = args[2], *out = args[3];
  if (Py_TYPE(out) != (PyTypeObject *)tensor_type || !PyTuple_CheckExact(inputs) ||
      PyList_GET_SIZE(saved_hooks))
    return fallback(args);
  PyObject *out_fn = slot(out, T_GRAD_FN);
  if (out_fn == NULL) return NULL;
  if (out_fn != Py_None) Py_RETURN_NONE;
  PyObject *entry = PyDict_GetItemWithError(table, op);
  if (entry == NULL) {
    if (PyErr_Occurred()) return NULL;
    return fallback(args);
  }
  if ((PyObject *)Py_TYPE(entry) != entry_type) return fallback(args);
  PyObject *on = PyObject_GetAttr(anomaly, s_enabled);
  if (on == NULL) return NULL;
  int anomalous = PyObject_IsTrue(on);
  Py_DECREF(on);
  if (anomalous) return anomalous < 0 ? NULL : fallback(args);
  PyObject *fn, *flags, *variadic, *only_for, *uses_result;
  if ((fn = slot(entry, E_FN)) == NULL || (flags = slot(entry, E_SAVED_FLAGS)) == NULL ||
      (variadic = slot(entry, E_VARIADIC_SAVED)) == NULL ||
      (only_for = slot(entry, E_ONLY_FOR)) == NULL ||
      (uses_result = slot(entry, E_USES_RESULT)) == NULL)
    return NULL;
  if (fn == Py_None) Py_RETURN_NONE;
  if (!PyTuple_CheckExact(flags) || (only_for != Py_None && !PyDict_CheckExact(only_for)))
    return fallback(args);
  Py_ssize_t n = PyTuple_GET_SIZE(inputs), n_flags = PyTuple_GET_SIZE(flags);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PyTuple_GET_ITEM(inputs, i);
    if (Py_TYPE(x) == (PyTypeObject *)tensor_type) continue;
    int sub = PyObject_IsInstance(x, tensor_type);
    if (sub) return sub < 0 ? NULL : fallback(args);  /* a subclass: a dual tensor... */
  }
  PyObject *edges = PyTuple_New(n), *saved = PyTuple_New(n), *metas = PyTuple_New(n),
           *versions = PyList_New(0), *node = NULL, *result = NULL;
  int scalar_saved = 0;
  if (edges == NULL || saved == NULL || metas == NULL || versions == NULL) goto done;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PyTuple_GET_ITEM(inputs, i);
    PyObject *flag = i < n_flags ? PyTuple_GET_ITEM(flags, i) : variadic;
    int keep = PyObject_IsTrue(flag);
    if (keep < 0) goto done;
    if (Py_TYPE(x) != (PyTypeObject *)tensor_type) {
      Py_INCREF(no_edge);
      PyTuple_SET_ITEM(edges, i, no_edge);
      Py_INCREF(Py_None);
      PyTuple_SET_ITEM(metas, i, Py_None);
      Py_INCREF(x);
      PyTuple_SET_ITEM(saved, i, x);
      /* a number in a saved slot counts as saved, as PyTorch's wrapped scalars do */
      if (x != Py_None && keep) scalar_saved = 1;
      continue;
    }
    PyObject *rg = slot(x, T_REQUIRES_GRAD);
    if (rg == NULL) goto done;
    int wants = PyObject_IsTrue(rg);
    if (wants < 0) goto done;
    PyObject *edge = wants ? edge_of(x) : (Py_INCREF(no_edge), no_edge);
    if (edge == NULL) goto done;
    PyTuple_SET_ITEM(edges, i, edge);
    PyObject *data = slot(x, T_DATA), *dev = slot(x, T_DEVICE);
    if (data == NULL || dev == NULL) goto done;
    PyObject *shape = PyObject_GetAttr(data, s_shape), *dtype = NULL;
    if (shape == NULL || (dtype = PyObject_GetAttr(data, s_dtype)) == NULL) {
      Py_XDECREF(shape);
      goto done;
    }
    PyObject *meta = PyTuple_Pack(3, shape, dtype, dev);
    Py_DECREF(shape);
    Py_DECREF(dtype);
    if (meta == NULL) goto done;
    PyTuple_SET_ITEM(metas, i, meta);
    if (keep && only_for != Py_None) {
      PyObject *key = PyLong_FromSsize_t(i);
      if (key == NULL) goto done;
      PyObject *j = PyDict_GetItemWithError(only_for, key);
      Py_DECREF(key);
      if (j == NULL && PyErr_Occurred()) goto done;
      if (j != NULL) {
        /* kept only when the other input wants a gradient */
        PyObject *other = PyObject_GetItem(inputs, j);
        if (other == NULL) goto done;
        keep = PyObject_IsInstance(other, tensor_type);
        if (keep > 0) {
          PyObject *org = PyObject_GetAttrString(other, "__torcia_requires_grad__");
          keep = org == NULL ? -1 : PyObject_IsTrue(org);
          Py_XDECREF(org);
        }
        Py_DECREF(other);
        if (keep < 0) goto done;
      }
    }
    if (keep) {
      PyObject *vc = slot(x, T_VERSION);
      if (vc == NULL) goto done;
      PyObject *v = PySequence_GetItem(vc, 0);
      if (v == NULL) goto done;
      PyObject *pair = Py_BuildValue("(nN)", i, v);
      if (pair == NULL || PyList_Append(versions, pair) < 0) {
        Py_XDECREF(pair);
        goto done;
      }
      Py_DECREF(pair);
      Py_INCREF(x);
      PyTuple_SET_ITEM(saved, i, x);
    } else {
      Py_INCREF(Py_None);
      PyTuple_SET_ITEM(saved, i, Py_None);
    }
  }
  if (uses_result != Py_False) {
    /* the output through an alias without grad_fn: saving it would make a cycle */
    PyObject *kept = slot(entry, E_SAVED_OUTPUTS), *alias;
    if (kept == NULL) goto done;
    int keep_out = 1;
    if (kept != Py_None) {
      PyObject *zero = PyLong_FromLong(0);
      keep_out = zero == NULL ? -1 : PySequence_Contains(kept, zero);
      Py_XDECREF(zero);
      if (keep_out < 0) goto done;
    }
    if (keep_out) {
      if ((alias = PyObject_CallOneArg(alias_fn, out)) == NULL) goto done;
      PyObject *vc = slot(out, T_VERSION), *v = vc ? PySequence_GetItem(vc, 0) : NULL;
      PyObject *pair = v ? Py_BuildValue("(nN)", n, v) : NULL;
      if (pair == NULL || PyList_Append(versions, pair) < 0) {
        Py_XDECREF(pair);
        Py_DECREF(alias);
        goto done;
      }
      Py_DECREF(pair);
    } else {
      alias = Py_None;
      Py_INCREF(alias);
    }
    PyObject *longer = PyTuple_New(n + 1);
    if (longer == NULL) {
      Py_DECREF(alias);
      goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      Py_INCREF(PyTuple_GET_ITEM(saved, i));
      PyTuple_SET_ITEM(longer, i, PyTuple_GET_ITEM(saved, i));
    }
    PyTuple_SET_ITEM(longer, n, alias);
    Py_SETREF(saved, longer);
  }
  PyObject *version_tuple = PyList_AsTuple(versions);
  if (version_tuple == NULL) goto done;
  Py_SETREF(versions, version_tuple);
  int holds = PyTuple_GET_SIZE(versions) > 0 || scalar_saved || uses_result != Py_False;
  if ((node = ((PyTypeObject *)node_type)->tp_alloc((PyTypeObject *)node_type, 0)) == NULL)
    goto done;
  /* Node.__init__'s slots, stored directly */
  PyObject *values[] = {op,        entry,     saved,   versions, params,   edges,
                        metas,     one,       Py_None, Py_None,  Py_False, Py_None,
                        holds ? Py_True : Py_False, Py_False};
  int which[] = {N_OP,        N_ENTRY,      N_ARGS,     N_VERSIONS, N_PARAMS,
                 N_EDGES,     N_METAS,      N_N_OUTPUTS, N_PRE_HOOKS, N_POST_HOOKS,
                 N_RELEASED,  N_TRACE,      N_HOLDS,    N_PACKED};
  for (int k = 0; k < 14; k++) {
    Py_INCREF(values[k]);
    T_SLOT(node, which[k]) = values[k];
  }
  int diff = differentiable_dtype(out);
  if (diff < 0) goto done;
  if (diff) {
    Py_INCREF(Py_True);
    Py_XSETREF(T_SLOT(out, T_REQUIRES_GRAD), Py_True);
    Py_INCREF(node);
    Py_XSETREF(T_SLOT(out, T_GRAD_FN), node);
  }
  result = Py_None;
  Py_INCREF(result);
done:
  Py_XDECREF(edges);
  Py_XDECREF(saved);
  Py_XDECREF(metas);
  Py_XDECREF(versions);
  Py_XDECREF(node);
  return result;
}

static PyObject *run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (node_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "run: setup() was not called");
    return NULL;
  }
  if (nargs != 7) {
    PyErr_SetString(PyExc_TypeError, "run() takes 7 arguments");
    return NULL;
  }
  PyObject *roots = args[0], *root_grads = args[1], *retain_graph = args[2],
           *create_graph = args[3], *capture = args[4], *targets = args[6];
  int accumulate = PyObject_IsTrue(args[5]);
  if (accumulate < 0) return NULL;
  if (!PyList_CheckExact(roots) || !PyList_CheckExact(root_grads) ||
      PyList_GET_SIZE(roots) != PyList_GET_SIZE(root_grads)) {
    PyErr_SetString(PyExc_TypeError, "run: roots and root_grads must be lists of one length");
    return NULL;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(roots); i++) {
    PyObject *r = PyList_GET_ITEM(roots, i);
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 2) {
      PyErr_SetString(PyExc_TypeError, "run: a root must be a (node, output_nr) tuple");
      return NULL;
    }
  }
  int pruning = !is_none(capture) || !is_none(targets);
  PyObject *deps = PyDict_New(), *parents = PyDict_New(), *buffers = PyDict_New(),
           *ready = PyList_New(0), *needed = NULL, *results = NULL, *before = NULL;
  if (deps == NULL || parents == NULL || buffers == NULL || ready == NULL) goto done;
  if (prepare(roots, root_grads, pruning, deps, parents, buffers, ready) < 0) goto done;
  if (pruning) {
    PyObject *a[3] = {parents, capture, targets};
    if ((needed = PyObject_Vectorcall(needed_fn, a, 3, NULL)) == NULL) goto done;
    if (!PyAnySet_Check(needed)) {
      PyErr_SetString(PyExc_TypeError, "run: the needed nodes must be a set");
      goto done;
    }
  }
  Py_ssize_t n_results = 0;
  if (!is_none(capture)) {
    int any = PyObject_IsTrue(capture);
    if (any < 0) goto done;
    if (any && (n_results = PyObject_Size(capture)) < 0) goto done;
  }
  if ((results = nones(n_results)) == NULL) goto done;
  if ((before = PyObject_CallOneArg(set_grad_mode_fn, create_graph)) == NULL) goto done;
  int failed = loop(ready, deps, buffers, needed, results, retain_graph, create_graph, capture,
                    accumulate, targets);
  /* grad mode comes back whatever happened, keeping the loop's error */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *r = PyObject_CallOneArg(set_grad_mode_fn, before);
  if (failed) {
    Py_XDECREF(r);
    if (r == NULL) {
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
    } else {
      PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(results);
  } else if (r == NULL) {
    Py_CLEAR(results);
  } else {
    Py_DECREF(r);
  }
done:
  Py_XDECREF(deps);
  Py_XDECREF(parents);
  Py_XDECREF(buffers);
  Py_XDECREF(ready);
  Py_XDECREF(needed);
  Py_XDECREF(before);
  return results;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(Node, AccumulateGrad, accumulate, run_pre_hooks, add_in_place, needed, "
     "set_grad_mode, Entry, Meta, Tensor, fit)"},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(roots, root_grads, retain_graph, create_graph, capture, accumulate, targets): "
     "engine.run_backward's loop, natively"},
    {"setup_record", setup_record, METH_VARARGS,
     "setup_record(TABLE, record, accumulator_of, NO_EDGE, SAVED_HOOKS, ANOMALY, alias, "
     "bfloat16, strided)"},
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(op, inputs, params, out): engine.record, natively for its common case"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "torcia.autograd._native",
                                    "The native backward loop of torcia.autograd (optional).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
  const char *names[] = {"next_functions", "n_outputs", "pre_hooks", "post_hooks",
                         "entry",          "backward",  "apply",     "release",
                         "shape",          "dtype",     "result",    "needs_input_grad"};
  PyObject **dst[] = {&s_next_functions, &s_n_outputs, &s_pre_hooks, &s_post_hooks,
                      &s_entry,          &s_backward,  &s_apply,     &s_release,
                      &s_shape,          &s_dtype,     &s_result,    &s_needs};
  for (int i = 0; i < 12; i++)
    if ((*dst[i] = PyUnicode_InternFromString(names[i])) == NULL) return NULL;
  if ((s_variable = PyUnicode_InternFromString("variable")) == NULL ||
      (s_hooks = PyUnicode_InternFromString("hooks")) == NULL ||
      (s_post_accumulate_hooks = PyUnicode_InternFromString("post_accumulate_hooks")) == NULL ||
      (s_layout = PyUnicode_InternFromString("layout")) == NULL ||
      (s_enabled = PyUnicode_InternFromString("enabled")) == NULL ||
      (s_accumulator = PyUnicode_InternFromString("accumulator")) == NULL ||
      (s_kind = PyUnicode_InternFromString("kind")) == NULL ||
      (fc = PyUnicode_FromString("fc")) == NULL)
    return NULL;
  if ((one = PyLong_FromLong(1)) == NULL || (two = PyLong_FromLong(2)) == NULL) return NULL;
  return PyModule_Create(&module);
}
