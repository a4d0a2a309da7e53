// The process's backends: one per device, shared by every model, session and engine, so
// that a device's weights and threads are set up once per process.
#pragma once
#include "backend/cpu/cpu_backend.h"

namespace glia {

// The CPU backend with `n_threads` threads (0: every core). One per distinct thread count
// (a process normally asks for one); created on first use, kept to the end.
cpu::CpuBackend& cpu_backend(int n_threads = 0);

// The CUDA backend of device `ordinal`, created on first use; throws glia::Error when this
// build has no CUDA backend or the device is not there.
Backend& cuda_backend(int ordinal = 0);
// CUDA devices present (0 without a driver, a device, or CUDA in this build).
int cuda_device_count();
// Free memory of CUDA device `ordinal` in bytes (0 without CUDA).
size_t cuda_free_memory(int ordinal);

}  // namespace glia
