// NumPy's allocator for the data of arrays made while the plugin is in use: blocks of at
// least kPageFrom bytes start on a page boundary.
//
// Why: glibc's heap puts each block 16 bytes past its header, so two arrays of one size
// allocated one after the other (an op's input and its output) lie 16 bytes apart modulo
// the 4 KiB page. A loop that streams through both then loads each input vector from an
// address whose low 12 bits equal those of the output vector it has just stored ("4K
// aliasing"): the load waits for the store to complete. Memory-bound kernels on arrays
// reused from the heap (which _memory.py's malloc settings make the rule) took twice their
// time: tanh of 1024x1024 float32 on one AVX-512 thread 1.8-2.2 ms against 0.7-1.0 when
// the two were page-aligned. PyTorch's allocator aligns every tensor; on a page, any two
// arrays are 0 apart modulo the page, where no vector of one loop aliases another's.
//
// Each block is preceded by a Header that keeps what realloc and free need (numpy's
// realloc does not pass the old size). Blocks of 4 MiB or more are advised into huge
// pages, as NumPy's own allocator does where the user has not turned that off.
#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define NPY_TARGET_VERSION NPY_2_0_API_VERSION
#include <pybind11/pybind11.h>

#include <numpy/arrayobject.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace py = pybind11;

namespace {

struct Header {
  void* raw;    // what malloc returned
  size_t size;  // bytes the caller asked for
};
static_assert(sizeof(Header) == 16, "blocks stay 16-byte aligned after the header");

constexpr size_t kPage = 4096;
// below this a block is not worth a page of padding: at most 1/16 of it is wasted
constexpr size_t kPageFrom = 64 << 10;
constexpr size_t kHugeFrom = 4 << 20;
static_assert(kHugeFrom >= kPageFrom, "blocks advised into huge pages start on a page");
bool advise_huge = false;

size_t padding(size_t size) { return sizeof(Header) + (size >= kPageFrom ? kPage : 0); }

Header* header_of(void* block) { return static_cast<Header*>(block) - 1; }

void* place(void* raw, size_t size) {
  if (raw == nullptr) return nullptr;
  auto at = reinterpret_cast<uintptr_t>(raw) + sizeof(Header);
  if (size >= kPageFrom) at = (at + kPage - 1) & ~uintptr_t(kPage - 1);
  void* block = reinterpret_cast<void*>(at);
  *header_of(block) = Header{raw, size};
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // a block this large starts on a page, as madvise wants
  if (advise_huge && size >= kHugeFrom) madvise(block, size, MADV_HUGEPAGE);
#endif
  return block;
}

bool too_large(size_t size) { return size > SIZE_MAX - 2 * kPage; }

void* block_malloc(void*, size_t size) {
  if (too_large(size)) return nullptr;
  return place(std::malloc(size + padding(size)), size);
}

void* block_calloc(void*, size_t nelem, size_t elsize) {
  if (elsize != 0 && nelem > SIZE_MAX / elsize) return nullptr;
  const size_t size = nelem * elsize;
  if (too_large(size)) return nullptr;
  return place(std::calloc(1, size + padding(size)), size);
}

void block_free(void*, void* block, size_t) {
  if (block != nullptr) std::free(header_of(block)->raw);
}

void* block_realloc(void* ctx, void* block, size_t size) {
  if (block == nullptr) return block_malloc(ctx, size);
  void* moved = block_malloc(ctx, size);
  if (moved == nullptr) return nullptr;  // the old block stays valid, as realloc's
  const size_t old = header_of(block)->size;
  std::memcpy(moved, block, old < size ? old : size);
  block_free(ctx, block, old);
  return moved;
}

PyDataMem_Handler handler = {
    "torcia_cpu_page_aligned",
    1,
    {nullptr, block_malloc, block_calloc, block_realloc, block_free},
};

// use_page_aligned_arrays(huge_pages) -> None: NumPy allocates the data of arrays made
// from now on in this thread's context with this file's allocator.
void use_page_aligned_arrays(bool huge_pages) {
  if (PyArray_API == nullptr && _import_array() < 0) throw py::error_already_set();
  advise_huge = huge_pages;
  py::object capsule = py::reinterpret_steal<py::object>(
      PyCapsule_New(&handler, "mem_handler", nullptr));
  if (!capsule) throw py::error_already_set();
  py::object previous = py::reinterpret_steal<py::object>(PyDataMem_SetHandler(capsule.ptr()));
  if (!previous) throw py::error_already_set();
}

}  // namespace

void define_memory(py::module_& m) {
  m.def("use_page_aligned_arrays", &use_page_aligned_arrays, py::arg("huge_pages"));
}
