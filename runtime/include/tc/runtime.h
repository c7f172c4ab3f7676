/*===- tc/runtime.h - the public C API of the tc runtime -------------------===
 *
 * Load a compiled artifact (.tca) and run it: its functions ("infer",
 * "eval_step", "train_step", ...) on host tensors (tc_session_*), a training
 * run with its data, schedule, validation, metrics and checkpoints
 * (tc_trainer_*, tc_run_train), evaluation over token files (tc_run_eval),
 * text generation, and the tensor and token file formats those use. tc-run
 * is a client of this header and of nothing else; docs/runtime-api.md walks
 * through it.
 *
 * Conventions
 *   - Handles are opaque. Functions are named tc_<object>_<verb>; outputs
 *     come last and are named out_*.
 *   - Options structs get their defaults from tc_<name>_options_initialize;
 *     a NULL options pointer means the defaults. Strings in options are
 *     borrowed for the call (copied when they are kept).
 *   - Every fallible function returns a tc_status_t*: NULL means OK (and
 *     costs nothing); otherwise the caller owns the status, reads it with
 *     tc_status_code / tc_status_message and frees it with tc_status_release.
 *     A bad argument gives TC_STATUS_INVALID_ARGUMENT with a message naming
 *     the argument ("out_trainer is NULL", "options->steps is -3: ...").
 *   - Every _release function accepts NULL.
 *   - Strings and arrays returned by accessors (names, shapes, data) are
 *     owned by the object they come from and stay valid until it is
 *     released. Strings returned through a char **out_* argument are the
 *     caller's: free them with tc_string_release.
 *
 * Thread-safety
 *   - An artifact is immutable once opened except by tc_artifact_load_weights
 *     (call it before sharing the artifact); its queries may run
 *     concurrently.
 *   - A session is immutable once created: all tc_session_* queries and
 *     tc_session_run may be called concurrently from any number of threads
 *     on the same session (a CUDA session serialises its runs internally).
 *     tc_session_release must not race with them.
 *   - A trainer serialises its calls itself; "trainers" below says what may
 *     be called from other threads while tc_trainer_run runs.
 *   - Tensors, tensor lists and statuses are not synchronised: use one from
 *     one thread at a time (reading from several threads is fine). A token
 *     source is immutable: any number of threads may read it.
 *   - Functions without a handle (formats, metrics, tc_cuda_check) are
 *     thread-safe.
 *
 * Devices: TC_DEVICE_CPU is the reference executor; TC_DEVICE_CUDA runs the
 * artifact's GPU program (tc-compile --target sm_90|sm_120). A build without
 * the CUDA backend answers TC_DEVICE_CUDA with TC_STATUS_UNIMPLEMENTED.
 *===----------------------------------------------------------------------===*/
#ifndef TC_RUNTIME_H
#define TC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------- version -----------------------------===*/

/* tc's version ("0.3.0"), static storage: every tool's --version and the
 * "written by" of checkpoints and artifacts. */
const char *tc_version(void);

/* tc's cache folder, the one place it is decided: $TC_CACHE_DIR when set
 * and not empty, else $HOME/.cache/tc, else "" (no cache); read once, static
 * storage. tc-compile keeps kernels and artifacts there, tc-run the matmul
 * tuning record (tc_cuda_options_t.matmul_tune_dir). A helper for the
 * tools: sessions themselves read no environment variables. */
const char *tc_cache_dir(void);

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
/* 1 when the failure is the caller's input (a bad option, a missing or
 * malformed file, a checkpoint that does not fit the model) rather than a
 * failure of the run itself: tc-run exits 2 for those and 1 for the others.
 * 0 for NULL. */
int tc_status_is_input_error(const tc_status_t *status);
/* Frees a status; NULL is fine. */
void tc_status_release(tc_status_t *status);

/* Frees a string returned through a char **out_* argument; NULL is fine. */
void tc_string_release(char *text);

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
/* 1 for the floating-point types (f32 ... f8e8m0fnu), else 0. */
int tc_dtype_is_float(tc_dtype_t dtype);
/* A tensor type as the runtime's messages write it (dtype and shape); the
 * caller owns *out_text. */
tc_status_t *tc_type_to_string(tc_dtype_t dtype, size_t rank, const int64_t *shape,
                               char **out_text);

/*===------------------------------- tensors -----------------------------===*/

/* A host tensor owned by the runtime (the outputs of tc_session_run, what
 * the file readers return). Data is row-major, little-endian, in the
 * storage format of its dtype. */
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

/* A caller-owned tensor passed to tc_session_run (and every other function
 * taking views); nothing is copied before the call and nothing is retained
 * after it. */
typedef struct tc_tensor_view_t {
  const char *name;     /* the function input it feeds */
  tc_dtype_t dtype;
  size_t rank;
  const int64_t *shape; /* rank dimensions */
  const void *data;     /* data_size bytes in storage format */
  size_t data_size;
} tc_tensor_view_t;

/* A new tensor holding a copy of `view` (its name too; NULL: ""). The
 * caller owns *out_tensor. */
tc_status_t *tc_tensor_create(const tc_tensor_view_t *view, tc_tensor_t **out_tensor);
/* A view of `tensor`, borrowing its name, shape and data. */
void tc_tensor_as_view(const tc_tensor_t *tensor, tc_tensor_view_t *out_view);
/* The elements as doubles (exact for every dtype but 64-bit integers beyond
 * 2^53); `count` must be tc_tensor_element_count(tensor). */
tc_status_t *tc_tensor_to_f64(const tc_tensor_t *tensor, double *out_values, size_t count);

/*===----------------------------- tensor files --------------------------===*/

/* Reads a NumPy .npy file (v1-v3, C order, little-endian; bool, integers,
 * f16, f32, f64) as a tensor named `name` (NULL: ""). Errors name the file.
 * The caller owns *out_tensor. */
tc_status_t *tc_npy_read(const char *path, const char *name, tc_tensor_t **out_tensor);
/* Writes `tensor` as .npy; the dtypes NumPy has no type for (bf16, fp8,
 * fp4) are widened to f32, exactly. */
tc_status_t *tc_npy_write(const char *path, const tc_tensor_view_t *tensor);
/* tc-run --save-outputs: creates folder `dir` (and its parents) and writes
 * each tensor as DIR/NAME.npy, widened as tc_npy_write widens (a slash or
 * backslash in NAME becomes '_': output names are not paths). */
tc_status_t *tc_npy_write_dir(const char *dir, const tc_tensor_t *const *tensors, size_t count);

/* Named tensors (a safetensors file), sorted by name. */
typedef struct tc_tensor_list_t tc_tensor_list_t;
size_t tc_tensor_list_count(const tc_tensor_list_t *list);
/* Tensor `index` (NULL when out of range), owned by the list. */
const tc_tensor_t *tc_tensor_list_get(const tc_tensor_list_t *list, size_t index);
/* The tensor named `name` (NULL when there is none), owned by the list. */
const tc_tensor_t *tc_tensor_list_find(const tc_tensor_list_t *list, const char *name);
void tc_tensor_list_release(tc_tensor_list_t *list);

/* safetensors (Hugging Face's format): every tensor of a file; or `count`
 * tensors with unique names written atomically (a temporary renamed into
 * place). */
tc_status_t *tc_safetensors_read(const char *path, tc_tensor_list_t **out_list);
tc_status_t *tc_safetensors_write(const char *path, const tc_tensor_view_t *tensors,
                                  size_t count);

/*===----------------------------- token sources -------------------------===*/

/* A flat token stream: a nanoGPT / llm.c .bin file (raw little-endian
 * uint16 or uint32 tokens, no header; read on demand, never loaded whole)
 * or token ids given in memory. Training and evaluation cut [batch, seq]
 * windows from it: input_ids = tokens[o, o+seq), labels = tokens[o+1,
 * o+seq+1) (TC_LABELS_NEXT) or tokens[o, o+seq) (TC_LABELS_SAME). */
typedef struct tc_token_source_t tc_token_source_t;

typedef enum tc_label_shift_t {
  TC_LABELS_NEXT = 0, /* labels are the next tokens (nanoGPT, llm.c) */
  TC_LABELS_SAME = 1, /* labels = input_ids: the model shifts them (HF *ForCausalLM) */
} tc_label_shift_t;

/* Opens a token file of TC_DTYPE_U16 or TC_DTYPE_U32 tokens. */
tc_status_t *tc_token_source_open(const char *path, tc_dtype_t token_dtype,
                                  tc_token_source_t **out_source);
/* A source over `count` token ids (copied; each in [0, 2^32)). */
tc_status_t *tc_token_source_from_memory(const int64_t *tokens, size_t count,
                                         tc_token_source_t **out_source);
void tc_token_source_release(tc_token_source_t *source);
/* The number of tokens (0 for NULL). */
int64_t tc_token_source_count(const tc_token_source_t *source);
/* The windows at `offsets` (one row each; each must leave seq + 1 tokens)
 * as [num_offsets, seq] tensors "input_ids" and "labels" of integer dtype
 * `dtype`. The caller owns both. */
tc_status_t *tc_token_source_batch(const tc_token_source_t *source, const uint64_t *offsets,
                                   size_t num_offsets, int64_t seq, tc_dtype_t dtype,
                                   tc_label_shift_t labels, tc_tensor_t **out_input_ids,
                                   tc_tensor_t **out_labels);
/* The offsets of batch `index` of `iters` batches of `batch` evenly spaced
 * windows of `seq` tokens (the same every time, covering the source): what
 * evaluation and validation feed. `out_offsets` receives `batch` values. */
tc_status_t *tc_token_source_eval_offsets(const tc_token_source_t *source, int64_t batch,
                                          int64_t seq, int64_t index, int64_t iters,
                                          uint64_t *out_offsets);

/*===------------------------------ artifacts ----------------------------===*/

/* A loaded, validated artifact. Sessions and trainers created from it share
 * it and keep it alive: it may be released right after creating them. */
typedef struct tc_artifact_t tc_artifact_t;

/* Loads and validates the artifact at `path`. The caller owns *out_artifact. */
tc_status_t *tc_artifact_open(const char *path, tc_artifact_t **out_artifact);
void tc_artifact_release(tc_artifact_t *artifact);
/* The path it was opened from; owned by the artifact. */
const char *tc_artifact_path(const tc_artifact_t *artifact);
/* The target it was compiled for ("cpu", "sm_90", ...); owned by the artifact. */
const char *tc_artifact_target(const tc_artifact_t *artifact);
/* 1 when it has a GPU program (device functions). */
int tc_artifact_has_device_program(const tc_artifact_t *artifact);
size_t tc_artifact_function_count(const tc_artifact_t *artifact);
/* Name of (host) function `index`, NULL when out of range; owned by the artifact. */
const char *tc_artifact_function_name(const tc_artifact_t *artifact, size_t index);
/* 1 when the artifact has a host function / a GPU function called `name`. */
int tc_artifact_has_function(const tc_artifact_t *artifact, const char *name);
int tc_artifact_has_device_function(const tc_artifact_t *artifact, const char *name);
/* Inputs and outputs of function `function_name`, as tc_session_input_info
 * and tc_session_output_info give them (without making a session). */
tc_status_t *tc_artifact_input_count(const tc_artifact_t *artifact, const char *function_name,
                                     size_t *out_count);
tc_status_t *tc_artifact_input_info(const tc_artifact_t *artifact, const char *function_name,
                                    size_t index, const char **out_name, tc_dtype_t *out_dtype,
                                    size_t *out_rank, const int64_t **out_shape);
tc_status_t *tc_artifact_output_count(const tc_artifact_t *artifact, const char *function_name,
                                      size_t *out_count);
tc_status_t *tc_artifact_output_info(const tc_artifact_t *artifact, const char *function_name,
                                     size_t index, const char **out_name, tc_dtype_t *out_dtype,
                                     size_t *out_rank, const int64_t **out_shape);
/* The checks tc-run makes before running a function: `inputs` come in the
 * function's input order; their count, dtypes, shapes and sizes must be the
 * declared ones ("input 'ids': expected ..., got ...") and integer inputs
 * must lie in the ranges the compiler recorded (a token id within the
 * embedding, a label within the classes). INVALID_ARGUMENT naming the input,
 * the element and its value otherwise. */
tc_status_t *tc_artifact_check_inputs(const tc_artifact_t *artifact, const char *function_name,
                                      const tc_tensor_view_t *inputs, size_t num_inputs);
/* Replaces the model entries (parameters and buffers) by those of `weights`:
 * a checkpoint folder (or its newest step-N folder), DIR/model.safetensors
 * or a .safetensors file. Names and shapes must match exactly (the error
 * lists every missing, unexpected and mismatched name). *out_step (may be
 * NULL) gets the checkpoint's step, -1 for a plain file. Sessions and
 * trainers created before keep the weights they had. Not thread-safe. */
tc_status_t *tc_artifact_load_weights(tc_artifact_t *artifact, const char *weights,
                                      int64_t *out_step);

/*===------------------------------- devices -----------------------------===*/

/* On both devices a session holds the parameters and optimizer state from
 * its creation on; functions with "update:NAME" results (train_step,
 * apply_step) update them in place. */
typedef enum tc_device_t {
  TC_DEVICE_CPU = 0,  /* the reference executor */
  TC_DEVICE_CUDA = 1, /* a GPU: runs the artifact's device program (tc-compile
                         --target sm_90|sm_120); parameters stay on the GPU */
} tc_device_t;

/* 1 when this build has the CUDA backend. */
int tc_cuda_built(void);
/* NULL when a CUDA GPU can be used; else why not (no driver, no GPU; a
 * build without the backend: TC_STATUS_UNIMPLEMENTED). */
tc_status_t *tc_cuda_check(void);

/* How the CUDA backend runs. The runtime reads no environment variables:
 * tc-run sets these from TC_CUDA_GRAPHS, TC_CUDA_CHECK_OPS, TC_CUDA_PROFILE,
 * TC_MATMUL_TUNE and TC_CUDA_PIPELINE. */
typedef struct tc_cuda_options_t {
  int graphs;        /* 1 (default): replay functions as CUDA graphs after their first run */
  int check_each_op; /* 1: synchronise and check after every op (slow; names the op) */
  int profile;       /* 1: time every op; a profile goes to stderr at the end */
  int matmul_tune;   /* 1 (default): time the cuBLASLt candidates of each matmul once and
                        keep the fastest; 0: the heuristic's first choice, reproducibly */
  int pipeline;      /* 1 (default): a training run enqueues step N + 1 (a replayed graph) before
                        it waits for step N's results, so the GPU does not wait for the host
                        between steps; 0: each step is waited for before the next is enqueued */
  const char *matmul_tune_dir; /* NULL (default): each process times its own matmuls, and two
                        processes may keep different algorithms where two time alike (other
                        bits); a folder: the choices are kept in <folder>/matmul/<device,
                        cuBLASLt and tc version>.tsv and every later process takes them (the
                        same bits run to run and across a resume; tc-run: tc's cache folder).
                        Read when the session is created */
} tc_cuda_options_t;

typedef enum tc_ref_precision_t {
  TC_REF_PRECISION_F32 = 0, /* f32 values rounded to float at every op */
  TC_REF_PRECISION_F64 = 1, /* f32 values kept in double */
} tc_ref_precision_t;

/*===------------------------------ sessions -----------------------------===*/

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
  int device_ordinal;       /* the GPU of TC_DEVICE_CUDA (0) */
  uint64_t init_seed;       /* seed of the initialisers of entries without data (1337) */
  tc_cuda_options_t cuda;
} tc_session_options_t;

/* Fills `out_options` with the defaults: CPU, f32, malloc, GPU 0, seed
 * 1337, CUDA graphs and matmul tuning on. */
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
/* The same on an opened artifact (shared, not copied). */
tc_status_t *tc_session_create_from_artifact(const tc_artifact_t *artifact,
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

/*===------------------------------ generation ---------------------------===*/

/* The runtime's one sampler, as nanoGPT's sample.py: one "infer" call per
 * new token at the compiled [B, T], the context cropped to its last T
 * tokens in row 0, the logits of its last position sampled. The model needs
 * an output named "logits" (or exactly one float output [B, T, V]); it is
 * fed input_ids, attention_mask (ones over the context) and labels (which
 * the logits do not depend on). */
typedef struct tc_generate_options_t {
  int64_t max_new_tokens; /* 32 */
  double temperature;     /* 1.0; 0 is greedy (argmax) */
  int64_t top_k;          /* 0: every token; K: the K most likely */
  uint64_t seed;          /* 1337: the sampler's RNG (splitmix64) */
  /* Only tc_run_generate reads these: */
  const char *init;       /* weights to load first (NULL: the artifact's) */
  tc_ref_precision_t ref_precision;
} tc_generate_options_t;

void tc_generate_options_initialize(tc_generate_options_t *out_options);

/* Continues `prompt` (`prompt_length` >= 1 token ids) on a session. On
 * success *out_tokens is a new rank-1 i64 tensor "tokens": the prompt
 * followed by the new tokens. */
tc_status_t *tc_session_generate(tc_session_t *session, const tc_generate_options_t *options,
                                 const int64_t *prompt, size_t prompt_length,
                                 tc_tensor_t **out_tokens);
/* The next-token logits after `context` (>= 1 token ids, cropped to the
 * last T): a new f32 tensor "logits" of shape [V]. */
tc_status_t *tc_session_next_logits(tc_session_t *session, const int64_t *context,
                                    size_t context_length, tc_tensor_t **out_logits);
/* tc_session_next_logits and greedy tc_session_generate in one call, as
 * tc_trainer_infer_greedy: the logits after `prompt` and the prompt
 * followed by `max_new_tokens` (>= 0) greedy tokens. The caller owns both;
 * on failure both are NULL. */
tc_status_t *tc_session_infer_greedy(tc_session_t *session, const int64_t *prompt,
                                     size_t prompt_length, int64_t max_new_tokens,
                                     tc_tensor_t **out_logits, tc_tensor_t **out_tokens);
/* tc-run --generate: options->init loaded into a copy of the artifact, the
 * CPU reference at options->ref_precision, sampled as tc_session_generate
 * samples. */
tc_status_t *tc_run_generate(const tc_artifact_t *artifact, const tc_generate_options_t *options,
                             const int64_t *prompt, size_t prompt_length,
                             tc_tensor_t **out_tokens);

/*===------------------------------- metrics -----------------------------===*/

/* One optimizer step: a "kind": "train" record of the tc.metrics/1 schema
 * (docs/metrics.md). */
typedef struct tc_step_metrics_t {
  int64_t step;         /* this step (1-based; a resumed run continues the count) */
  int64_t first_step;   /* the first step this trainer made */
  int64_t total_steps;  /* the run's planned last step */
  double loss;          /* the step's loss (the mean over micro-batches) */
  double loss_smooth;   /* EMA (0.9) of loss, bias-corrected */
  double lr;            /* the learning rate the step used */
  double grad_norm;     /* global L2 norm of the gradients before clipping */
  int has_grad_norm;    /* 0: the step computes none (grad_norm is NaN) */
  int64_t tokens;       /* tokens of this step */
  int64_t tokens_total; /* tokens of steps 1..step */
  double tokens_per_s, step_time_s, elapsed_s, eta_s;
  double mfu, hfu;      /* fractions of the device's dense peak; < 0: unknown */
  int periodic;         /* a log_every step: a line to keep in the scrollback */
  int skipped;          /* 1: the step made no update: loss scaling (tc-compile --fp16)
                           found an inf/NaN gradient and only halved the scale */
  double loss_scale;    /* the loss scale the step used; 0: no loss scaling */
  int has_fp8_saturated; /* 1: the step counts FP8 saturations (--fp8-scaling delayed) */
  int64_t fp8_saturated; /* elements its FP8 quantisations saturated (E4M3 448, E5M2 57344) */
} tc_step_metrics_t;

/* A validation: a "kind": "val" record. */
typedef struct tc_val_metrics_t {
  int64_t step;
  double val_loss;
  int64_t val_tokens;
} tc_val_metrics_t;

/* The JSON lines (without the newline) tc-run writes to --metrics: shortest
 * round-trip decimals, null for unknown or non-finite values. The caller
 * owns *out_json. */
tc_status_t *tc_metrics_train_json(const tc_step_metrics_t *metrics, char **out_json);
tc_status_t *tc_metrics_val_json(const tc_val_metrics_t *metrics, char **out_json);
/* "kind": "eval" of tc-run --eval --data: step (< 0: null), "function":
 * "loss", val_loss and val_tokens. */
tc_status_t *tc_metrics_eval_loss_json(int64_t step, double loss, int64_t tokens,
                                       char **out_json);
/* "kind": "eval" of tc-run --eval --feed: step (< 0: null), the function
 * and every scalar output by its tensor name. */
tc_status_t *tc_metrics_eval_outputs_json(int64_t step, const char *function,
                                          const tc_tensor_t *const *outputs, size_t count,
                                          char **out_json);

/*===------------------------------ observers ----------------------------===*/

/* What a run (training, evaluation) has to say. Any callback may be NULL
 * (dropped). They are called on the thread doing the work, with pointers
 * valid for the call only. */
typedef struct tc_run_observer_t {
  /* A line for the user ("device: ...", "labels: ...", "saved DIR (step N)"). */
  void (*line)(void *user, const char *text);
  /* A note (tc-run prints it as "tc-run: note: TEXT"). */
  void (*note)(void *user, const char *text);
  void (*step)(void *user, const tc_step_metrics_t *metrics);
  void (*val)(void *user, const tc_val_metrics_t *metrics);
  void *user;
} tc_run_observer_t;

/*===------------------------------- trainers ----------------------------===*/

/* A fixed input of every step, read from a .npy file. */
typedef struct tc_feed_t {
  const char *name; /* the training step's input */
  const char *path; /* FILE.npy */
} tc_feed_t;

/* A training run: tc-run's training flags. "Not given" values (-1, NULL)
 * take the resumed checkpoint's value with `resume` and the default
 * otherwise; a given one that differs from the resumed run's is an error
 * (`steps` may be raised). */
typedef struct tc_train_options_t {
  int64_t steps;            /* the planned total (-1: not given; needed without resume) */
  double lr;                /* base learning rate (< 0: tc-compile's --lr) */
  int64_t warmup;           /* linear warmup over steps 1..W (-1: 0) */
  const char *schedule;     /* "constant" (NULL) or "cosine" (down to 0.1*lr at `steps`) */
  int64_t seed;             /* data windows and initialisers (-1: 1337) */
  const char *data;         /* a token file: random windows drawn with `seed` */
  const char *data_dtype;   /* "uint16" (NULL) or "uint32"; with data_source, that of
                             * val_data (default: a file source's own, else uint16) */
  /* Tokens of the caller's instead of `data`: random windows drawn with
   * `seed`, as from a token file. Borrowed by tc_trainer_create /
   * tc_run_train only (the trainer reads its own copy: a file source is
   * opened again, a memory source's tokens are copied), so it may be
   * released right after. A checkpoint records the tokens' size and hash;
   * resuming such a run needs the same tokens as data_source again (a file
   * source's run may also be resumed with data = its file). NULL: none. */
  const tc_token_source_t *data_source;
  const char *labels;       /* "next", "same" or NULL (the artifact's convention) */
  const tc_feed_t *feeds;   /* fixed inputs instead of `data` */
  size_t num_feeds;
  int64_t batch, seq;       /* checked against the compiled input (-1: not given) */
  const char *save;         /* checkpoint folder (NULL: none) */
  int64_t save_every;       /* also save every K steps (0: off) */
  int overwrite;            /* 1: `save` may replace any checkpoint */
  int64_t keep_checkpoints; /* > 0: DIR/step-NNNNNNNN folders, the newest N kept */
  const char *resume;       /* continue the run saved in this folder */
  const char *init;         /* start from these weights (checkpoint or .safetensors) */
  const char *val_data;     /* validation tokens */
  int64_t eval_every;       /* validate every K steps (-1: 100 with val_data) */
  int64_t eval_iters;       /* batches per validation (-1: 20) */
  const char *metrics;      /* tc.metrics/1 JSONL file (appended to on resume) */
  const char *tensorboard;  /* TensorBoard event folder */
  int64_t log_every;        /* periodic progress records every K steps (10; 0: none) */
  tc_device_t device;       /* the CPU reference (default) or a GPU */
  int device_ordinal;       /* the GPU of TC_DEVICE_CUDA (0) */
  tc_ref_precision_t ref_precision;
  tc_cuda_options_t cuda;
  /* Polled after every step of tc_trainer_run: a non-zero value (tc-run:
   * the signal number) stops the run there, saving it when `save` is
   * given, and becomes tc_train_summary_t.interrupted. NULL: never. */
  int (*should_stop)(void *user);
  void *stop_user;
} tc_train_options_t;

void tc_train_options_initialize(tc_train_options_t *out_options);

/* What tc_trainer_run did. */
typedef struct tc_train_summary_t {
  int64_t first_step, last_step; /* the steps it ran (last < first: none) */
  double first_loss, last_loss, seconds;
  /* What stopped it: should_stop's value, -1 for tc_trainer_request_stop;
   * 0 when it ran to options.steps. */
  int interrupted;
} tc_train_summary_t;

/* A trainer: the parameter and optimizer state of an artifact compiled with
 * tc-compile --train, on the CPU reference or a GPU, one optimizer step at a
 * time, with its data, learning-rate schedule, validation, metrics and
 * checkpoints.
 *
 * Thread-safety: every tc_trainer_* function may be called from any thread.
 * The trainer serialises its calls: tc_trainer_run holds the trainer during
 * each step and lets the calls that wait for it in between two steps, so a
 * call made during a step runs right after that step, on the weights it
 * made (the live weights). tc_trainer_progress and tc_trainer_request_stop
 * never wait for a step. The calls that read (eval, next_logits, generate,
 * infer_greedy, get_parameter, progress, learning_rate, save) never change
 * the training state (RNG, data position, optimizer state, step): a run that answers them
 * makes the same losses, to the bit, as one that does not. The calls that
 * change it (step, step_inputs, set_learning_rate, set_parameter, load_*)
 * give TC_STATUS_FAILED_PRECONDITION while tc_trainer_run runs.
 * tc_trainer_release must not race with any call. */
typedef struct tc_trainer_t tc_trainer_t;

/* Sets up a run on `artifact`: resolves the options (against the resumed
 * checkpoint with options->resume), builds the state table on the device
 * (initialisers seeded by `seed`), loads `init` or `resume`, opens the data,
 * metrics and TensorBoard files and checks that `save` would not replace
 * another run's checkpoint. Without `data` and `feeds` the steps take their
 * inputs from tc_trainer_step_inputs. `observer` (may be NULL) is copied and
 * kept: it hears the set-up's lines and every later step, validation and
 * save, on the thread making them. The caller owns *out_trainer. */
tc_status_t *tc_trainer_create(const tc_artifact_t *artifact, const tc_train_options_t *options,
                               const tc_run_observer_t *observer, tc_trainer_t **out_trainer);
void tc_trainer_release(tc_trainer_t *trainer);

/* Runs the steps up to options.steps from the run's data, validating every
 * eval_every steps, saving every save_every steps and at the end; stops
 * after a step (saving) when should_stop or tc_trainer_request_stop asks. */
tc_status_t *tc_trainer_run(tc_trainer_t *trainer, tc_train_summary_t *out_summary);
/* Asks a running (or the next) tc_trainer_run to stop after its current
 * step. Never waits. */
void tc_trainer_request_stop(tc_trainer_t *trainer);

/* One optimizer step from the run's data (windows drawn with its RNG, or
 * the feeds) at the schedule's learning rate, with the metrics, validation
 * and save_every of tc_trainer_run. */
tc_status_t *tc_trainer_step(tc_trainer_t *trainer, tc_step_metrics_t *out_metrics);
/* One optimizer step on the given inputs: each data input of the training
 * step, by name, given grad_accum times (the k-th view of a name feeds
 * micro-batch k). Integer inputs are range-checked. Metrics as
 * tc_trainer_step. Windows of any token source at offsets of the caller's
 * choosing are tc_token_source_batch's "input_ids" and "labels", as views. */
tc_status_t *tc_trainer_step_inputs(tc_trainer_t *trainer, const tc_tensor_view_t *inputs,
                                    size_t num_inputs, tc_step_metrics_t *out_metrics);

/* Where the run is, for another thread; never waits for a step. */
typedef struct tc_trainer_progress_t {
  int64_t step;        /* the last step made (the resumed step before any) */
  int64_t total_steps; /* the planned last step */
  int running;         /* 1 while tc_trainer_run runs */
  int stop_requested;
  int has_last;        /* 1 when `last` holds a step this trainer made */
  tc_step_metrics_t last;
} tc_trainer_progress_t;
tc_status_t *tc_trainer_progress(tc_trainer_t *trainer, tc_trainer_progress_t *out_progress);

/* The mean loss on the live weights over `iters` batches of evenly spaced
 * windows of `source` (tc_token_source_eval_offsets), with the run's labels
 * convention: validation, or (a tc_token_source_from_memory source of at
 * least seq + 1 tokens) posted token ids. *out_tokens (may be NULL) gets
 * the number of tokens evaluated. */
tc_status_t *tc_trainer_eval(tc_trainer_t *trainer, const tc_token_source_t *source,
                             int64_t iters, double *out_loss, int64_t *out_tokens);
/* Next-token logits and sampling on the live weights (the artifact's infer
 * function with the trainer's parameters), as tc_session_next_logits and
 * tc_session_generate. */
tc_status_t *tc_trainer_next_logits(tc_trainer_t *trainer, const int64_t *context,
                                    size_t context_length, tc_tensor_t **out_logits);
tc_status_t *tc_trainer_generate(tc_trainer_t *trainer, const tc_generate_options_t *options,
                                 const int64_t *prompt, size_t prompt_length,
                                 tc_tensor_t **out_tokens);

/* Inference in one call: the next-token logits after `prompt` (>= 1 token
 * ids) and `max_new_tokens` (>= 0) tokens of greedy generation after it,
 * both from the same live weights (separate tc_trainer_next_logits and
 * tc_trainer_generate calls may straddle a step of a running
 * tc_trainer_run). *out_logits is tc_trainer_next_logits's tensor and
 * *out_tokens tc_trainer_generate's at temperature 0 (the prompt, then the
 * new tokens, the first of which is the argmax of the logits). The caller
 * owns both; on failure both are NULL. */
tc_status_t *tc_trainer_infer_greedy(tc_trainer_t *trainer, const int64_t *prompt,
                                     size_t prompt_length, int64_t max_new_tokens,
                                     tc_tensor_t **out_logits, tc_tensor_t **out_tokens);

/* The learning rate of `step` (1-based; 0: the next step) under the run's
 * schedule. */
tc_status_t *tc_trainer_learning_rate(tc_trainer_t *trainer, int64_t step, double *out_lr);
/* Replaces the schedule: base learning rate `lr` (>= 0), `warmup` steps
 * (>= 0) and `schedule` ("constant" or "cosine"; NULL keeps it). Later
 * checkpoints record it. */
tc_status_t *tc_trainer_set_learning_rate(tc_trainer_t *trainer, double lr, int64_t warmup,
                                          const char *schedule);

/* Entry `name` of the state table (a parameter, buffer or optimizer state)
 * as a new tensor; or replaced by `value` (named so, same dtype and shape). */
tc_status_t *tc_trainer_get_parameter(tc_trainer_t *trainer, const char *name,
                                      tc_tensor_t **out_value);
tc_status_t *tc_trainer_set_parameter(tc_trainer_t *trainer, const tc_tensor_view_t *value);

/* Checkpoints. save: `dir` gets model.safetensors (the model's own names),
 * optimizer.safetensors and state.json (step, RNG, data position, the run's
 * configuration), each file written atomically and the folder replaced
 * atomically. load_checkpoint: restores all of it (a checkpoint of this
 * artifact). load_weights: replaces the model entries by name (a checkpoint
 * folder or .safetensors; the optimizer state stays). */
tc_status_t *tc_trainer_save(tc_trainer_t *trainer, const char *dir);
tc_status_t *tc_trainer_load_checkpoint(tc_trainer_t *trainer, const char *dir);
tc_status_t *tc_trainer_load_weights(tc_trainer_t *trainer, const char *weights);

/*===-------------------------------- runs -------------------------------===*/

/* tc-run's training: tc_trainer_create, tc_trainer_run, release, with
 * `data` or `feeds` required. Input failures are tc_status_is_input_error. */
tc_status_t *tc_run_train(const tc_artifact_t *artifact, const tc_train_options_t *options,
                          const tc_run_observer_t *observer, tc_train_summary_t *out_summary);

/* tc-run --eval --data: the mean loss over `iters` batches of evenly spaced
 * windows of a token file (the same windows every time), with the
 * artifact's weights or those of `init`. */
typedef struct tc_eval_options_t {
  const char *data;       /* the token file (required) */
  const char *data_dtype; /* "uint16" (NULL) or "uint32" */
  const char *labels;     /* "next", "same" or NULL (the artifact's) */
  const char *init;       /* checkpoint or .safetensors (NULL: the artifact's weights) */
  int64_t iters;          /* 20 */
  int64_t seed;           /* initialisers of entries without data (1337) */
  tc_device_t device;
  int device_ordinal;
  tc_ref_precision_t ref_precision;
  tc_cuda_options_t cuda;
} tc_eval_options_t;

void tc_eval_options_initialize(tc_eval_options_t *out_options);

typedef struct tc_eval_result_t {
  double loss;
  int64_t tokens, batches;
  int64_t step; /* the checkpoint's step, -1 for the artifact's weights */
} tc_eval_result_t;

tc_status_t *tc_run_eval(const tc_artifact_t *artifact, const tc_eval_options_t *options,
                         const tc_run_observer_t *observer, tc_eval_result_t *out_result);

/* tc-run --check: the first step of a training run (`train`, which must
 * name a GPU, and its data, feeds, init and seed) on the GPU and on the CPU
 * reference from the same state and inputs, every value that both the
 * device program and the op-level reference program hold compared as it is
 * written (relative L2 error over the finite elements; non-finite elements
 * must match; integers must be equal). */
typedef struct tc_check_options_t {
  const char *function; /* NULL: train_step (grad_step with gradient accumulation) */
  double tolerance;     /* > 0: for every value; 0 (default): by type, f32 1e-3,
                         * f16 1e-2, bf16 2e-2, fp8 2.5e-1, fp4 3e-1, and at
                         * least that of the step's narrowest float type */
} tc_check_options_t;

void tc_check_options_initialize(tc_check_options_t *out_options);

/* On success *out_report (the caller frees it with tc_string_release) is a
 * line per value and a verdict naming the first device op whose output is
 * beyond tolerance, and *out_beyond the number of such values (0: the two
 * agree). */
tc_status_t *tc_run_check(const tc_artifact_t *artifact, const tc_train_options_t *train,
                          const tc_check_options_t *options, const tc_run_observer_t *observer,
                          char **out_report, int64_t *out_beyond);

/* tc-run --export-onnx / --export-safetensors (docs/export.md): the
 * artifact's weights (or those of `init`) as standard ONNX with the linear
 * layers of the --fp8 plan quantised to `precision`, and / or as
 * safetensors. Input failures (bad options, an unwritable path, an artifact
 * without the export records) are tc_status_is_input_error. Thread-safe. */
typedef struct tc_export_options_t {
  const char *onnx;        /* the .onnx file to write, or NULL */
  const char *safetensors; /* the .safetensors file to write, or NULL */
  const char *precision;   /* "nvfp4", "mxfp4", "fp8" or "bf16" (required) */
  const char *init;        /* checkpoint or .safetensors (NULL: the artifact's weights) */
  int64_t seed;            /* initialisers of entries without data (1337) */
} tc_export_options_t;

void tc_export_options_initialize(tc_export_options_t *out_options);

tc_status_t *tc_run_export(const tc_artifact_t *artifact, const tc_export_options_t *options);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TC_RUNTIME_H */
