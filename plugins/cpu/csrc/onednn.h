// The part of oneDNN's C API (version 3) that quant.cpp's convolutions and products use, declared here
// because the onednn-cpu-gomp wheel ships the library without its headers. Every handle
// of the API is an opaque pointer; the constants are the values of oneDNN 3's
// dnnl_types.h / dnnl_common_types.h, which oneDNN keeps stable across a major version
// (its ABI promise). The functions are looked up by name when the library is loaded
// (use_onednn), so a library lacking one leaves the convolutions on the GEMM path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torcia_dnnl {

using handle = void*;
using const_handle = const void*;
using dims = std::int64_t[12];  // dnnl_dims_t: DNNL_MAX_NDIMS entries

struct exec_arg {  // dnnl_exec_arg_t
  int arg;
  handle memory;
};

constexpr int kSuccess = 0;
constexpr int kCpu = 1;                  // dnnl_cpu
constexpr int kFormatAny = 1;            // dnnl_format_tag_any
constexpr int kS32 = 4, kS8 = 5, kU8 = 6;  // dnnl_s32, dnnl_s8, dnnl_u8
constexpr int kForwardInference = 96;    // dnnl_forward_inference
constexpr int kConvolutionDirect = 1;    // dnnl_convolution_direct
constexpr int kScratchpadUser = 1;       // dnnl_scratchpad_mode_user
constexpr int kStreamInOrder = 1;        // dnnl_stream_in_order
constexpr int kQueryWeightsMd = 131;     // dnnl_query_weights_md
constexpr int kQueryScratchpadMd = 136;  // dnnl_query_scratchpad_md
constexpr int kArgSrc = 1, kArgDst = 17, kArgWeights = 33, kArgScratchpad = 80;
constexpr int kArgZeroPoints = 8192;  // DNNL_ARG_ATTR_ZERO_POINTS, or-ed with an argument
inline handle const kAllocate = reinterpret_cast<handle>(static_cast<std::size_t>(-1));

struct Api {
  int (*engine_create)(handle*, int, std::size_t);
  int (*stream_create)(handle*, handle, unsigned);
  int (*stream_wait)(handle);
  int (*stream_destroy)(handle);
  int (*memory_desc_create_with_strides)(handle*, int, const dims, int, const dims);
  int (*memory_desc_create_with_tag)(handle*, int, const dims, int, int);
  int (*memory_desc_destroy)(handle);
  std::size_t (*memory_desc_get_size)(const_handle);
  int (*memory_create)(handle*, const_handle, handle, handle);
  int (*memory_destroy)(handle);
  int (*primitive_attr_create)(handle*);
  int (*primitive_attr_destroy)(handle);
  int (*primitive_attr_set_scratchpad_mode)(handle, int);
  int (*primitive_attr_set_zero_points_mask)(handle, int, int);
  int (*convolution_forward_primitive_desc_create)(handle*, handle, int, int, const_handle,
                                                   const_handle, const_handle, const_handle,
                                                   const dims, const dims, const dims,
                                                   const dims, const_handle);
  int (*reorder_primitive_desc_create)(handle*, const_handle, handle, const_handle, handle,
                                       const_handle);
  const_handle (*primitive_desc_query_md)(const_handle, int, int);
  int (*primitive_desc_destroy)(handle);
  int (*primitive_create)(handle*, const_handle);
  int (*primitive_execute)(const_handle, handle, int, const exec_arg*);
  int (*primitive_destroy)(handle);
  // looked up on its own: a library without it keeps the linear layers on its GEMM
  int (*matmul_primitive_desc_create)(handle*, handle, const_handle, const_handle,
                                      const_handle, const_handle, const_handle);
};

}  // namespace torcia_dnnl
