// src/cuda/model/decode_graph.cpp — the decode step's CUDA graph (decode_graph.h).
// Tested by tests/cuda/test_gpu_runtime_graph.cpp.
#include "cuda/model/decode_graph.h"

#include <algorithm>
#include <string>

#include "cuda/common/cuda_status.h"

namespace kascade::cuda {

Status graph_safe_policy(const PolicyConfig& config) {
  static const char* const kSafe[] = {"dense", "kascade", "kascade-noremap", "kascade-pooled", "kascade-decode"};
  for (const char* name : kSafe)
    if (config.name == name) return ok_status();
  const char* why = config.name == "quest" || config.name == "lessismore"
                        ? "its selection copies row lengths back to the host at every step"
                    : config.name == "streaming" ? "its rows are written from the host at every step"
                                                 : "baselines run outside graph capture";
  return unsupported("policy '", config.name, "' decodes eagerly (", why,
                     "); CUDA graphs cover dense and the kascade variants");
}

DecodeGraph::~DecodeGraph() { reset(); }

void DecodeGraph::reset() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
}

Status DecodeGraph::capture(cudaStream_t stream, const std::function<Status()>& body) {
  KC_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status body_status = body();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!body_status.ok() || end != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // an invalidated capture leaves its error behind; it is reported below
    reset();
    if (!body_status.ok()) return Status(body_status).with_context("while capturing the decode step in a CUDA graph");
    return internal_error("CUDA graph capture of the decode step failed: cudaStreamEndCapture: ",
                          cudaGetErrorString(end));
  }
  if (exec_ != nullptr) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess) {
      (void)cudaGraphDestroy(graph);
      ++updates_;
      return ok_status();
    }
    (void)cudaGetLastError();  // a different topology: instantiate anew
    reset();
  }
  const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    exec_ = nullptr;
    (void)cudaGetLastError();
    return internal_error("CUDA graph of the decode step: cudaGraphInstantiate: ", cudaGetErrorString(made));
  }
  return ok_status();
}

Status DecodeGraph::launch(cudaStream_t stream) {
  KC_CHECK_ARG(exec_ != nullptr, "decode graph: launch before a capture");
  KC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
  return ok_status();
}

}  // namespace kascade::cuda
