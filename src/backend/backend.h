// The backend interface: a backend knows ops, never architectures.
#pragma once
#include <string>

#include "graph/graph.h"

namespace glia {

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;
    virtual bool supports(const Node& node) const = 0;
    virtual void run(const Node& node) = 0;
};

}  // namespace glia
