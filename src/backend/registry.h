// The process's backends: one per device, shared by every model, session and engine, so
// that a device's weights and threads are set up once per process.
#pragma once
#include "backend/cpu/cpu_backend.h"

namespace glia {

// The CPU backend with `n_threads` threads (0: every core). One per distinct thread count
// (a process normally asks for one); created on first use, kept to the end.
cpu::CpuBackend& cpu_backend(int n_threads = 0);

}  // namespace glia
