#include "core/runtime/topology.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/runtime/hwloc_machine.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

TopologyHandle new_topology() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) throw Error("hwloc: cannot initialise a topology");
  return TopologyHandle(t);
}

std::vector<int> bitmap_indexes(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (hwloc_bitmap_weight(set) < 0) return out;  // infinite set: not a real mask
  int i;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(i); }
  hwloc_bitmap_foreach_end();
  return out;
}

// The NUMA nodes (at least one) and their hwloc objects, in logical order.
std::vector<hwloc_obj_t> read_numa_nodes(hwloc_topology_t t, Topology& topo) {
  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  std::vector<hwloc_obj_t> numa_objs;
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    numa_objs.push_back(o);
    NumaInfo n;
    n.logical = int(o->logical_index);
    n.os_index = int(o->os_index);
    n.memory = o->attr ? o->attr->numanode.local_memory : 0;
    topo.numa_nodes.push_back(n);
  }
  if (topo.numa_nodes.empty()) topo.numa_nodes.push_back(NumaInfo{});
  return numa_objs;
}

// The PUs with their core, package and NUMA node. `affinity` (OS indexes) marks the allowed PUs;
// null allows every PU hwloc kept.
void read_pus(hwloc_topology_t t, const std::vector<hwloc_obj_t>& numa_objs, bool have_cores,
              const std::vector<int>* affinity, Topology& topo) {
  const int npu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (int i = 0; i < npu; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i);
    PuInfo p;
    p.os_index = int(pu->os_index);
    p.logical = int(pu->logical_index);
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
    p.core = have_cores && core ? int(core->logical_index) : p.logical;
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
    p.package = pkg ? int(pkg->logical_index) : 0;
    p.numa = 0;
    for (size_t n = 0; n < numa_objs.size(); ++n) {
      if (hwloc_bitmap_isset(numa_objs[n]->cpuset, pu->os_index)) {
        p.numa = int(n);
        break;
      }
    }
    if (affinity) {
      p.allowed = false;
      for (int a : *affinity) p.allowed |= a == p.os_index;
    }
    topo.pus.push_back(p);
  }
}

// Cores in logical order, from the PUs, and each NUMA node's cores. Without core objects every PU
// stands for its own core.
void group_cores(int ncores, Topology& topo) {
  topo.cores.resize(ncores);
  for (int c = 0; c < ncores; ++c) topo.cores[c].logical = c;
  for (size_t i = 0; i < topo.pus.size(); ++i) {
    const PuInfo& p = topo.pus[i];
    if (p.core < 0 || p.core >= ncores) continue;
    CoreInfo& core = topo.cores[p.core];
    if (core.pus.empty()) {
      core.package = p.package;
      core.numa = p.numa;
    }
    core.pus.push_back(int(i));
  }
  for (const CoreInfo& c : topo.cores) {
    if (c.pus.empty()) continue;
    NumaInfo& n = topo.numa_nodes[c.numa];
    if (n.cores.empty()) n.package = c.package;
    n.cores.push_back(c.logical);
  }
}

// The caches, one entry per level and distinct size, with how many there are.
void read_caches(hwloc_topology_t t, Topology& topo) {
  const int depth = hwloc_topology_get_depth(t);
  for (int d = 0; d < depth; ++d) {
    hwloc_obj_t o = hwloc_get_obj_by_depth(t, d, 0);
    if (!o || !hwloc_obj_type_is_cache(o->type)) continue;
    char name[64];
    hwloc_obj_type_snprintf(name, sizeof name, o, 0);
    const size_t first = topo.caches.size();
    for (hwloc_obj_t c = o; c; c = c->next_cousin) {  // one entry per distinct size at this level
      const uint64_t size = c->attr ? c->attr->cache.size : 0;
      size_t k = first;
      while (k < topo.caches.size() && topo.caches[k].size != size) ++k;
      if (k == topo.caches.size()) topo.caches.push_back({name, size, 0});
      ++topo.caches[k].count;
    }
  }
}

// Copies what the planner and `llmcpu topo` need out of a loaded hwloc topology. `affinity` (OS
// indexes) marks the allowed PUs; null allows every PU hwloc kept.
Topology read_topology(hwloc_topology_t t, std::string source, const std::vector<int>* affinity) {
  Topology topo;
  topo.source = std::move(source);
  topo.this_system = hwloc_topology_is_thissystem(t) != 0;
  topo.packages = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
  const std::vector<hwloc_obj_t> numa_objs = read_numa_nodes(t, topo);
  const bool have_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0;
  read_pus(t, numa_objs, have_cores, affinity, topo);
  const int npu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  group_cores(have_cores ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) : npu, topo);
  read_caches(t, topo);
  return topo;
}

struct ThisMachine {
  TopologyHandle topology;
  std::vector<int> affinity;

  ThisMachine() : topology(new_topology()) {
    if (hwloc_topology_load(topology.get()) != 0) {
      throw Error(std::string("hwloc cannot read this machine's topology: ") +
                  std::strerror(errno));
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (const int places = omp_get_num_places(); places > 0) {
      // OMP_PLACES / OMP_PROC_BIND / GOMP_CPU_AFFINITY: the OpenMP runtime pinned the main thread
      // before main(); its places, made from the original mask, are what the process may use.
      for (int p = 0; p < places; ++p) {
        std::vector<int> ids(std::max(0, omp_get_place_num_procs(p)));
        omp_get_place_proc_ids(p, ids.data());
        for (int id : ids) hwloc_bitmap_set(set, unsigned(id));
      }
      hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topology.get()));
      affinity = bitmap_indexes(set);
    } else if (hwloc_get_cpubind(topology.get(), set, HWLOC_CPUBIND_PROCESS) == 0) {
      hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topology.get()));
      affinity = bitmap_indexes(set);
    }
    if (affinity.empty())
      affinity = bitmap_indexes(hwloc_topology_get_allowed_cpuset(topology.get()));
    hwloc_bitmap_free(set);
  }
};

ThisMachine& this_machine() {
  static ThisMachine machine;
  return machine;
}

}  // namespace

namespace detail {
hwloc_topology_t this_machine_hwloc() { return this_machine().topology.get(); }
const std::vector<int>& initial_affinity() { return this_machine().affinity; }
}  // namespace detail

int Topology::find_pu(int os_index) const {
  for (size_t i = 0; i < pus.size(); ++i) {
    if (pus[i].os_index == os_index) return int(i);
  }
  return -1;
}

std::vector<int> Topology::allowed_os_indexes() const {
  std::vector<int> out;
  for (const PuInfo& p : pus) {
    if (p.allowed) out.push_back(p.os_index);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Topology this_machine_topology() {
  ThisMachine& m = this_machine();
  return read_topology(m.topology.get(), "this machine", &m.affinity);
}

namespace {

// The PUs a synthetic description asks for: the product of its levels' arities ("package:2 core:4
// pu:2" is 16; a bare "8" is one level of 8), or -1 when a level is not "N" or "TYPE:N" (attributes
// in parentheses and "[numa]" memory levels aside; hwloc then judges it). kMaxSyntheticPus + 1
// stands for anything larger, overflow included.
int64_t synthetic_pus(const std::string& description) {
  int64_t pus = 1;
  size_t pos = 0;
  while ((pos = description.find_first_not_of(" \t\n", pos)) != std::string::npos) {
    const size_t end = std::min(description.find_first_of(" \t\n", pos), description.size());
    std::string level = description.substr(pos, end - pos);
    pos = end;
    if (level[0] == '[') continue;
    level = level.substr(0, level.find('('));
    const std::string arity =
        level.substr(level.find(':') == std::string::npos ? 0 : level.find(':') + 1);
    int64_t n = 0;
    const auto [last, ec] = std::from_chars(arity.data(), arity.data() + arity.size(), n);
    if (arity.empty() || last != arity.data() + arity.size()) return -1;
    if (ec == std::errc::result_out_of_range || __builtin_mul_overflow(pus, n, &pus) ||
        pus > kMaxSyntheticPus) {
      return kMaxSyntheticPus + 1;
    }
  }
  return pus;
}

}  // namespace

Topology synthetic_topology(const std::string& description) {
  if (synthetic_pus(description) > kMaxSyntheticPus) {
    throw UsageError("--topology '" + description + "': describes more than " +
                     std::to_string(kMaxSyntheticPus) +
                     " PUs, more than any machine llmcpu plans for");
  }
  TopologyHandle t = new_topology();
  if (description.empty() || hwloc_topology_set_synthetic(t.get(), description.c_str()) != 0) {
    throw UsageError("--topology '" + description +
                     "': hwloc rejects this synthetic description (expected hwloc's synthetic "
                     "syntax, e.g. \"package:2 numa:2 core:4 pu:2\")");
  }
  if (hwloc_topology_load(t.get()) != 0) {
    throw UsageError("--topology '" + description +
                     "': hwloc cannot build this topology: " + std::strerror(errno));
  }
  return read_topology(t.get(), "synthetic \"" + description + "\"", nullptr);
}

Topology xml_topology(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    throw FileError(path,
                    std::string("cannot read the --topology-xml file: ") + std::strerror(errno));
  }
  TopologyHandle t = new_topology();
  // hwloc parses the file here; when it fails, loading would silently read this machine instead.
  if (hwloc_topology_set_xml(t.get(), path.c_str()) != 0) {
    throw FileError(path,
                    "the --topology-xml file is not an hwloc XML topology (make one with "
                    "`lstopo FILE.xml` or `hwloc-gather-topology`)");
  }
  if (hwloc_topology_load(t.get()) != 0) {
    // hwloc's built-in reader takes only what hwloc itself writes (no comments, no other layout);
    // the libxml2 reader, a plugin Debian ships apart, takes any well-formed hwloc XML.
    throw FileError(path, std::string("hwloc cannot load the --topology-xml file: ") +
                              std::strerror(errno) +
                              " (hwloc's built-in XML reader accepts only files written by hwloc "
                              "itself; for a hand-written or edited file install its libxml2 "
                              "reader: apt-get install libhwloc-plugins)");
  }
  return read_topology(t.get(), "XML file " + path, nullptr);
}

std::string format_index_list(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(v[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = double(bytes);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0 || v == double(uint64_t(v))) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

}  // namespace llmcpu
