/*===- tc/runtime.h - the public C API of the tc runtime -------------------===
 *
 * Load a compiled artifact (.tca) into a session and run its functions
 * ("infer", "eval_step", "train_step", ...) on host tensors.
 *
 * Conventions
 *   - Handles are opaque. Functions are named tc_<object>_<verb>; outputs
 *     come last and are named out_*.
 *   - Every fallible function returns a tc_status_t*: NULL means OK (and
 *     costs nothing); otherwise the caller owns the status, reads it with
 *     tc_status_code / tc_status_message and frees it with tc_status_release.
 *   - Every _release function accepts NULL.
 *   - Strings and arrays returned by accessors (names, shapes, data) are
 *     owned by the object they come from and stay valid until it is released.
 *
 * Thread-safety
 *   - A session is immutable once created: all tc_session_* queries and
 *     tc_session_run may be called concurrently from any number of threads
 *     on the same session. tc_session_release must not race with them.
 *   - Tensors and statuses are not synchronised: use one from one thread at
 *     a time (reading from several threads is fine).
 *
 * Devices: this build runs on the CPU reference executor only; asking for
 * TC_DEVICE_CUDA gives TC_STATUS_UNIMPLEMENTED.
 *===----------------------------------------------------------------------===*/
#ifndef TC_RUNTIME_H
#define TC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===-------------------------------- status -----------------------------===*/

typedef enum tc_status_code_t {
  TC_STATUS_OK = 0,
  TC_STATUS_INVALID_ARGUMENT = 1,
  TC_STATUS_NOT_FOUND = 2,
  TC_STATUS_OUT_OF_RANGE = 3,
  TC_STATUS_UNIMPLEMENTED = 4,
  TC_STATUS_DATA_LOSS = 5, /* truncated or corrupted artifact */
  TC_STATUS_IO_ERROR = 6,
  TC_STATUS_FAILED_PRECONDITION = 7,
  TC_STATUS_INTERNAL = 8,
  TC_STATUS_RESOURCE_EXHAUSTED = 9,
} tc_status_code_t;

typedef struct tc_status_t tc_status_t;

/* TC_STATUS_OK for NULL. */
tc_status_code_t tc_status_code(const tc_status_t *status);
/* The message ("" for NULL), owned by the status. */
const char *tc_status_message(const tc_status_t *status);
/* Frees a status; NULL is fine. */
void tc_status_release(tc_status_t *status);

/*===-------------------------------- dtypes -----------------------------===*/

/* Element types; the numbers match the artifact format. */
typedef enum tc_dtype_t {
  TC_DTYPE_F32 = 0,
  TC_DTYPE_F64 = 1,
  TC_DTYPE_F16 = 2,
  TC_DTYPE_BF16 = 3,
  TC_DTYPE_F8E4M3FN = 4,
  TC_DTYPE_F8E5M2 = 5,
  TC_DTYPE_F4E2M1FN = 6, /* one byte per element, value in the low 4 bits */
  TC_DTYPE_F8E8M0FNU = 7,
  TC_DTYPE_I1 = 8, /* one byte per element, 0 or 1 */
  TC_DTYPE_I8 = 9,
  TC_DTYPE_I16 = 10,
  TC_DTYPE_I32 = 11,
  TC_DTYPE_I64 = 12,
  TC_DTYPE_U8 = 13,
  TC_DTYPE_U16 = 14,
  TC_DTYPE_U32 = 15,
  TC_DTYPE_U64 = 16,
} tc_dtype_t;

/* "f32", "bf16", "i64", ... (static storage); "?" for an invalid value. */
const char *tc_dtype_name(tc_dtype_t dtype);
/* Bytes per element in storage format (0 for an invalid value). */
size_t tc_dtype_size(tc_dtype_t dtype);

/*===------------------------------- tensors -----------------------------===*/

/* A host tensor owned by the runtime (the outputs of tc_session_run). Data
 * is row-major, little-endian, in the storage format of its dtype. */
typedef struct tc_tensor_t tc_tensor_t;

/* The output name it was returned as (owned by the tensor). */
const char *tc_tensor_name(const tc_tensor_t *tensor);
tc_dtype_t tc_tensor_dtype(const tc_tensor_t *tensor);
size_t tc_tensor_rank(const tc_tensor_t *tensor);
/* rank() dimensions, owned by the tensor (NULL for rank 0 is allowed). */
const int64_t *tc_tensor_shape(const tc_tensor_t *tensor);
size_t tc_tensor_element_count(const tc_tensor_t *tensor);
size_t tc_tensor_byte_size(const tc_tensor_t *tensor);
/* byte_size() bytes, owned by the tensor. */
const void *tc_tensor_data(const tc_tensor_t *tensor);
/* Frees the tensor and its data; NULL is fine. */
void tc_tensor_release(tc_tensor_t *tensor);

/* A caller-owned tensor passed to tc_session_run; nothing is copied before
 * the call and nothing is retained after it. */
typedef struct tc_tensor_view_t {
  const char *name;     /* the function input it feeds */
  tc_dtype_t dtype;
  size_t rank;
  const int64_t *shape; /* rank dimensions */
  const void *data;     /* data_size bytes in storage format */
  size_t data_size;
} tc_tensor_view_t;

/*===------------------------------ sessions -----------------------------===*/

typedef enum tc_device_t {
  TC_DEVICE_CPU = 0,  /* the reference executor */
  TC_DEVICE_CUDA = 1, /* GPU 0: runs the artifact's device program (tc-compile
                         --target sm_90|sm_120); parameters stay on the GPU and
                         train/apply steps update them in place */
} tc_device_t;

typedef enum tc_ref_precision_t {
  TC_REF_PRECISION_F32 = 0, /* f32 values rounded to float at every op */
  TC_REF_PRECISION_F64 = 1, /* f32 values kept in double */
} tc_ref_precision_t;

/* Host memory for output tensors. NULL functions mean malloc/free. */
typedef struct tc_allocator_t {
  void *(*alloc)(void *user, size_t size, size_t alignment);
  void (*free)(void *user, void *ptr);
  void *user;
} tc_allocator_t;

typedef struct tc_session_options_t {
  tc_device_t device;
  tc_ref_precision_t ref_precision;
  tc_allocator_t allocator; /* copied into the session */
} tc_session_options_t;

/* Fills `out_options` with the defaults: CPU, f32, malloc. */
void tc_session_options_initialize(tc_session_options_t *out_options);

typedef struct tc_session_t tc_session_t;

/* Loads and validates the artifact at `artifact_path`. `options` may be NULL
 * (defaults). On success the caller owns *out_session. */
tc_status_t *tc_session_create(const char *artifact_path,
                               const tc_session_options_t *options,
                               tc_session_t **out_session);
/* The same from an artifact in memory (copied; `data` may be freed after). */
tc_status_t *tc_session_create_from_memory(const void *data, size_t size,
                                           const tc_session_options_t *options,
                                           tc_session_t **out_session);
/* Frees the session; NULL is fine. Tensors it returned stay valid. */
void tc_session_release(tc_session_t *session);

size_t tc_session_function_count(const tc_session_t *session);
/* Name of function `index`, or NULL when out of range. Owned by the session. */
const char *tc_session_function_name(const tc_session_t *session, size_t index);

/* Inputs and outputs of function `function_name`. Returned names and shapes
 * are owned by the session. NOT_FOUND for an unknown function, OUT_OF_RANGE
 * for a bad index. */
tc_status_t *tc_session_input_count(const tc_session_t *session,
                                    const char *function_name,
                                    size_t *out_count);
tc_status_t *tc_session_input_info(const tc_session_t *session,
                                   const char *function_name, size_t index,
                                   const char **out_name, tc_dtype_t *out_dtype,
                                   size_t *out_rank, const int64_t **out_shape);
tc_status_t *tc_session_output_count(const tc_session_t *session,
                                     const char *function_name,
                                     size_t *out_count);
tc_status_t *tc_session_output_info(const tc_session_t *session,
                                    const char *function_name, size_t index,
                                    const char **out_name, tc_dtype_t *out_dtype,
                                    size_t *out_rank, const int64_t **out_shape);

/* Runs `function_name` on `inputs` (one view per function input, any order,
 * matched by name; dtype and shape must be exactly the declared ones).
 * `num_outputs` must equal the function's output count; on success
 * out_outputs[i] receives output i as a new tensor owned by the caller (on
 * failure every out_outputs[i] is set to NULL). */
tc_status_t *tc_session_run(tc_session_t *session, const char *function_name,
                            const tc_tensor_view_t *inputs, size_t num_inputs,
                            tc_tensor_t **out_outputs, size_t num_outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TC_RUNTIME_H */
