// Standalone driver for the fuzz targets in the normal (g++) build: the fuzz_replay_* tests.
//
// Linked with one fuzz/<target>.cc, it runs that target's LLVMFuzzerTestOneInput (with all its
// oracles) on every input of the given corpus directories or files, and then on a bounded number
// of deterministic mutations of each input, the kinds libFuzzer's MutationDispatcher makes:
// bit flips, random and "interesting" bytes and integers, erased, inserted, copied and shuffled
// ranges, truncation, and cross-over with another corpus input, one to four stacked per mutant.
// There is no coverage feedback (that is what `make fuzz` / `make fuzz-check` are for, with
// libFuzzer, clang and ASan/UBSan); this is a bounded, reproducible regression run that needs no
// second build. The same corpus, --seed and --mutations give the same inputs on every machine
// (std::mt19937_64 is specified exactly; each input's mutations are seeded from its file name, so
// adding a file to the corpus does not change what the others are mutated into).
//
// An oracle failure aborts; a signal handler first writes the failing input to
// <artifact_prefix>crash-input and says which corpus file and mutation produced it, so
// `fuzz_replay_<t> <that file>` (or the libFuzzer binary) reproduces it.
//
// Protobuf's own log lines (e.g. "invalid UTF-8" for every mutated string field) are silenced
// unless --verbose: they are expected on mutated input and would bury an oracle's message.
//
//   fuzz_replay_<target> [--mutations=N] [--seed=S] [--max_len=B] [--artifact_prefix=P]
//                        [--verbose] PATH...
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

using Bytes = std::vector<uint8_t>;

// What the signal handler reports: the input being run and where it came from.
const uint8_t* g_data = nullptr;
size_t g_size = 0;
char g_origin[512] = "";
char g_artifact[512] = "crash-input";

void WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w <= 0) return;
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void OnFatalSignal(int sig) {
  // Only async-signal-safe calls: open, write, close, signal, raise.
  const char head[] = "\n== fuzz_replay: fatal signal while running ";
  WriteAll(2, head, sizeof(head) - 1);
  WriteAll(2, g_origin, std::strlen(g_origin));
  const int fd = ::open(g_artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (g_data != nullptr) WriteAll(fd, g_data, g_size);
    ::close(fd);
    const char mid[] = "\n== the input is saved in ";
    WriteAll(2, mid, sizeof(mid) - 1);
    WriteAll(2, g_artifact, std::strlen(g_artifact));
  }
  WriteAll(2, "\n", 1);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void Run(const Bytes& input, const std::string& origin) {
  std::snprintf(g_origin, sizeof(g_origin), "%s", origin.c_str());
  g_data = input.data();
  g_size = input.size();
  // libFuzzer passes a non-null pointer even for the empty input.
  static const uint8_t kEmpty = 0;
  LLVMFuzzerTestOneInput(input.empty() ? &kEmpty : input.data(), input.size());
  g_data = nullptr;
  g_size = 0;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class Mutator {
 public:
  Mutator(uint64_t seed, size_t max_len, const std::vector<Bytes>* corpus)
      : rng_(seed), max_len_(max_len), corpus_(corpus) {}

  // 1..4 stacked mutations of `in`.
  Bytes Mutate(const Bytes& in) {
    Bytes b = in;
    const int n = 1 + static_cast<int>(Below(4));
    for (int i = 0; i < n; ++i) Once(b);
    if (b.size() > max_len_) b.resize(max_len_);
    return b;
  }

 private:
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  uint8_t Byte() { return static_cast<uint8_t>(rng_()); }

  void Once(Bytes& b) {
    if (b.empty()) {
      const size_t n = 1 + Below(16);
      for (size_t i = 0; i < n; ++i) b.push_back(Byte());
      return;
    }
    switch (Below(11)) {
      case 0:  // flip one bit
        b[Below(b.size())] ^= static_cast<uint8_t>(1u << Below(8));
        break;
      case 1:  // a random byte
        b[Below(b.size())] = Byte();
        break;
      case 2: {  // an interesting byte
        static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x10, 0x20, 0x40, 0x64};
        b[Below(b.size())] = kInteresting[Below(sizeof(kInteresting))];
        break;
      }
      case 3: {  // an interesting 2-, 4- or 8-byte integer, either byte order
        static const uint64_t kValues[] = {0,          1,          0x7f,       0x80,
                                           0xff,       0x7fff,     0x8000,     0xffff,
                                           0x7fffffff, 0x80000000, 0xffffffff, ~0ull,
                                           1ull << 63, (1ull << 63) - 1};
        const size_t width = size_t{2} << Below(3);
        if (b.size() < width) break;
        uint64_t v = kValues[Below(std::size(kValues))];
        const size_t at = Below(b.size() - width + 1);
        const bool big = Below(2) == 1;
        for (size_t i = 0; i < width; ++i) {
          b[at + (big ? width - 1 - i : i)] = static_cast<uint8_t>(v);
          v >>= 8;
        }
        break;
      }
      case 4: {  // add or subtract a small number (varints, lengths, tags)
        const size_t at = Below(b.size());
        b[at] = static_cast<uint8_t>(b[at] + static_cast<int>(Below(71)) - 35);
        break;
      }
      case 5: {  // erase a range
        const size_t len = 1 + Below(std::min<size_t>(b.size(), 32));
        const size_t at = Below(b.size() - len + 1);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(at + len));
        break;
      }
      case 6: {  // insert random bytes
        const size_t len = 1 + Below(32);
        const size_t at = Below(b.size() + 1);
        Bytes ins(len);
        for (auto& c : ins) c = Byte();
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 7: {  // copy a chunk of the input to another place (insert)
        const size_t len = 1 + Below(std::min<size_t>(b.size(), 64));
        const size_t from = Below(b.size() - len + 1);
        const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(from),
                          b.begin() + static_cast<std::ptrdiff_t>(from + len));
        const size_t at = Below(b.size() + 1);
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
        break;
      }
      case 8: {  // shuffle a short range
        const size_t len = 1 + Below(std::min<size_t>(b.size(), 8));
        const size_t at = Below(b.size() - len + 1);
        for (size_t i = len; i > 1; --i) std::swap(b[at + i - 1], b[at + Below(i)]);
        break;
      }
      case 9:  // truncate
        b.resize(Below(b.size()));
        break;
      case 10: {  // cross-over: a prefix of this input, a suffix of another corpus input
        if (corpus_->empty()) break;
        const Bytes& other = (*corpus_)[Below(corpus_->size())];
        const size_t keep = Below(b.size() + 1);
        const size_t from = Below(other.size() + 1);
        b.resize(keep);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  size_t max_len_;
  const std::vector<Bytes>* corpus_;
};

bool ReadFile(const std::filesystem::path& p, Bytes* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  uint64_t mutations = 0;
  uint64_t seed = 1;
  size_t max_len = 0;  // 0: the largest corpus input, at least 4096 (libFuzzer's rule)
  bool verbose = false;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (std::strcmp(argv[i], "--verbose") == 0) {
      verbose = true;
    } else if (Flag(argv[i], "--mutations", &v)) {
      mutations = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(argv[i], "--seed", &v)) {
      seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(argv[i], "--max_len", &v)) {
      max_len = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(argv[i], "--artifact_prefix", &v)) {
      std::snprintf(g_artifact, sizeof(g_artifact), "%scrash-input", v.c_str());
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr,
                   "unknown flag %s\nusage: %s [--mutations=N] [--seed=S] [--max_len=B] "
                   "[--artifact_prefix=P] [--verbose] DIR_OR_FILE...\n",
                   argv[i], argv[0]);
      return 2;
    } else {
      paths.emplace_back(argv[i]);
    }
  }

  // Every input, sorted by path, so the run does not depend on directory order.
  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (std::filesystem::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "not a file or directory: %s\n", p.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no inputs (an empty corpus would make this test pass vacuously)\n");
    return 2;
  }
  std::vector<Bytes> corpus(files.size());
  size_t largest = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!ReadFile(files[i], &corpus[i])) {
      std::fprintf(stderr, "cannot read %s\n", files[i].c_str());
      return 2;
    }
    largest = std::max(largest, corpus[i].size());
  }
  if (max_len == 0) max_len = std::max<size_t>(largest, 4096);

  if (!verbose) google::protobuf::SetLogHandler(nullptr);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, OnFatalSignal);

  const auto start = std::chrono::steady_clock::now();
  uint64_t executions = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string name = files[i].filename().string();
    Run(corpus[i], files[i].string());
    ++executions;
    Mutator m(seed ^ Fnv1a(name), max_len, &corpus);
    for (uint64_t k = 0; k < mutations; ++k) {
      const Bytes mutant = m.Mutate(corpus[i]);
      Run(mutant, files[i].string() + " mutation " + std::to_string(k) + " (--seed=" +
                      std::to_string(seed) + ")");
      ++executions;
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz_replay: %zu corpus inputs, %llu mutations each (seed %llu, max_len %zu): "
              "%llu executions in %.1f s, no oracle failed\n",
              files.size(), static_cast<unsigned long long>(mutations),
              static_cast<unsigned long long>(seed), max_len,
              static_cast<unsigned long long>(executions), secs);
  return 0;
}
