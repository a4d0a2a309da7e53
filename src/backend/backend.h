// The backend interface: a backend knows ops, never architectures.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace glia {

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;
    virtual bool supports(const Node& node) const = 0;
    virtual void run(const Node& node) = 0;
    // Runs nodes[i] and, where the backend can do better by fusing, some of the nodes
    // right after it (e.g. several matrix products of one input); returns how many nodes
    // it ran (at least 1). Every node it runs must be supported.
    virtual size_t run_from(const std::vector<Node>& nodes, size_t i) {
        run(nodes[i]);
        return 1;
    }
};

}  // namespace glia
