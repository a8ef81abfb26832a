// libFuzzer target for the readers of attnprof's JSON files (attnprof diff, attnprof report); the contract
// is in fuzz_json_body.h. Build as fuzz_npy (see fuzz_npy.cpp), then:
//   cmake --build build-fuzz --target fuzz_json
//   mkdir -p build-fuzz/corpus-json
//   build-fuzz/fuzz/fuzz_json -max_total_time=30 -dict=fuzz/json.dict build-fuzz/corpus-json fuzz/corpus/json
//
// Byte-level mutations of a JSON file mostly break its syntax, and a reader that refuses broken JSON is
// easy; the readers' real work is on well-formed files with the wrong content. So three mutations in four
// are structural: parse one document, replace a value somewhere in it with a hostile one (another type, an
// extreme or negative number, an empty container, markup in a string, a copy of another node) or drop an
// object member, and write it back. The fourth is libFuzzer's own byte-level mutation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fuzz_json_body.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using nlohmann::json;

// The report mode's output directory: one per process, removed when libFuzzer exits (the path lives on the
// heap, so the exit handler never sees a destroyed string).
const std::string& scratch_dir() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/attnprof-fuzz-json.XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return new std::string(tmpl);
  }();
  return *dir;
}

void collect(json& j, std::vector<json*>& nodes) {
  nodes.push_back(&j);
  if (j.is_structured())
    for (auto& child : j) collect(child, nodes);
}

json hostile_value(std::minstd_rand& rng, const json& donor) {
  switch (rng() % 14) {
    case 0: return nullptr;
    case 1: return "";
    case 2: return -1;
    case 3: return 0;
    case 4: return 1e308;
    case 5: return -1e308;
    case 6: return 5e-324;
    case 7: return json::array();
    case 8: return json::object();
    case 9: return "</script><!--\u2028\u00e9";
    case 10: return true;
    case 11: return std::string(300, 'x');
    case 12: return 18446744073709551615ull;
    default: return donor;  // a node from elsewhere in the document: right syntax, wrong place
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return attnprof::fuzz::json_one_input(data, size, scratch_dir());
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  if (size < 2 || rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  auto views = attnprof::fuzz::split_documents(data + 1, size - 1, std::size(attnprof::fuzz::kReportFiles));
  std::vector<std::string> docs(views.begin(), views.end());
  const size_t which = rng() % docs.size();
  json doc = json::parse(docs[which], nullptr, false);
  if (doc.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<json*> nodes;
  collect(doc, nodes);
  json* target = nodes[rng() % nodes.size()];
  if (target->is_object() && !target->empty() && rng() % 3 == 0) {
    auto it = target->begin();
    std::advance(it, long(rng() % target->size()));
    target->erase(it.key());
  } else {
    const json donor = *nodes[rng() % nodes.size()];
    *target = hostile_value(rng, donor);
  }
  docs[which] = doc.dump();
  std::string out(1, char(data[0]));
  for (size_t i = 0; i < docs.size(); ++i) out += (i ? std::string(1, '\0') : std::string()) + docs[i];
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
