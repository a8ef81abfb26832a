// Internal: the tracked allocator's link to the profiler (declared in attnprof/profiler.h).
#pragma once
#include "attnprof/profiler.h"
