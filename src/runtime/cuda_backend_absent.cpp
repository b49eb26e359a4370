// src/runtime/cuda_backend_absent.cpp — make_cuda_backend (kascade/backends.h) in a build without the
// CUDA backend: a refusal that names the build option, so a program linked against a CPU-only
// kascade learns why rather than failing to link. CUDA builds define it in
// src/cuda/backend/cuda_backend.cpp (this file is then empty). Lives in the runtime module because
// that is the module KASCADE_HAVE_CUDA reaches (it links kascade_cuda when there is one).
// Tested by tests/unit/runtime/test_backends.cpp.
#include "kascade/backends.h"

namespace kascade {

#ifndef KASCADE_HAVE_CUDA
Result<std::shared_ptr<AttentionBackend>> make_cuda_backend(const CudaBackendOptions&) {
  return unsupported("make_cuda_backend: this build of kascade has no CUDA backend (configure with "
                     "-DKASCADE_CUDA=ON and nvcc on PATH)");
}
#endif

}  // namespace kascade
