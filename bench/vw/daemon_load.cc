// bandit-vw-daemon-load: the client side of bench/vw/daemon_compare.py in C++, so that the
// clients' own CPU (on the same cores as the servers) bounds neither server. The workload is the
// script's: a context of 20 features in 2 namespaces (`User` strings, `Context` numbers) and 50
// actions of 10 string features, VW's JSON. `--inflight` threads, each with its own connection,
// run rounds back to back for `--seconds`:
//   --mode=banditd: Select (the 50 actions, scores returned) then Update with the reward, over
//     gRPC on `--instance` (the request is built once; per round only the context changes);
//   --mode=banditd-stream: the same rounds on one Rounds stream per thread; with --pipeline (the
//     default) a round's Update leaves with the next round's Select (one round trip per round),
//     without it each request waits for its answer;
//   --mode=banditd-batch: --batch rounds at a time: one SelectBatch of their Selects, then one
//     UpdateBatch of their Updates;
//   --mode=vw: one labeled example on VW's daemon (`vw --daemon --json`), the label on the action
//     a client-side draw picked (the 50 labeled variants built once), the reply read to its
//     blank line.
// Prints the rounds completed and the seconds they took, as JSON on one line.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/bandit_client.h"

ABSL_FLAG(std::string, mode, "banditd", "banditd, banditd-stream, banditd-batch or vw");
ABSL_FLAG(bool, pipeline, true,
          "--mode=banditd-stream: send a round's Update with the next round's Select");
ABSL_FLAG(int, batch, 8, "--mode=banditd-batch: rounds per SelectBatch / UpdateBatch");
ABSL_FLAG(std::string, target, "127.0.0.1:50051", "--mode=banditd: banditd's gRPC address");
ABSL_FLAG(std::string, instance, "vw", "--mode=banditd: the instance");
ABSL_FLAG(int, vw_port, 26542, "--mode=vw: VW's daemon port on 127.0.0.1");
ABSL_FLAG(int, inflight, 8, "client threads, one connection each");
ABSL_FLAG(double, seconds, 10, "duration");

namespace {

using Clock = std::chrono::steady_clock;

// daemon_compare.py's context(i) and actions().
std::string Context(int64_t i) {
  std::vector<std::string> user, context;
  for (int f = 0; f < 10; ++f) {
    user.push_back(absl::StrCat("\"u", f, "\": \"v", (i * 7 + f * 3) % 13, "\""));
    context.push_back(absl::StrCat("\"c", f, "\": ", 0.1 * static_cast<double>((i + f) % 9)));
  }
  return absl::StrCat("{\"User\": {", absl::StrJoin(user, ", "), "}, \"Context\": {",
                      absl::StrJoin(context, ", "), "}}");
}

std::string Action(int a, const std::string& label) {
  std::vector<std::string> features;
  for (int f = 0; f < 10; ++f)
    features.push_back(absl::StrCat("\"a", f, "\": \"x", (a * 11 + f) % 97, "\""));
  return absl::StrCat("{\"Action\": {", absl::StrJoin(features, ", "), "}",
                      label.empty() ? "" : absl::StrCat(", \"_label\": \"", label, "\""), "}");
}

// Each thread its own channel and connection, as the script's client processes.
bandit::client::BanditClient NewClient() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return bandit::client::BanditClient(grpc::CreateCustomChannel(
      absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials(), args));
}

// The Select of every round, built once: per round only its context changes.
bandit::v1::SelectRequest SelectOfRound() {
  bandit::v1::SelectRequest req;
  req.set_instance(absl::GetFlag(FLAGS_instance));
  req.set_return_scores(true);
  for (int a = 0; a < 50; ++a) {
    auto* action = req.add_actions();
    action->set_id(absl::StrCat("a", a));
    action->set_features(Action(a, ""));
  }
  return req;
}

double Reward(const bandit::v1::Decision& d) { return d.arm_index() % 5 == 0 ? 1.0 : 0.0; }

int64_t BanditdRounds(int seed, Clock::time_point end) {
  bandit::client::BanditClient client = NewClient();
  bandit::v1::SelectRequest req = SelectOfRound();
  int64_t done = 0;
  for (int64_t i = seed * 1000; Clock::now() < end; ++i) {
    req.set_context(Context(i));
    auto d = client.Select(req);
    if (!d.ok()) {
      std::fprintf(stderr, "Select: %s\n", d.status().ToString().c_str());
      break;
    }
    bandit::v1::UpdateRequest up;
    up.set_instance(req.instance());
    up.set_event_id(d->event_id());
    up.set_reward(Reward(*d));
    if (auto u = client.Update(up); !u.ok()) {
      std::fprintf(stderr, "Update: %s\n", u.status().ToString().c_str());
      break;
    }
    ++done;
  }
  return done;
}

int64_t StreamRounds(int seed, Clock::time_point end) {
  bandit::client::BanditClient client = NewClient();
  auto stream = client.OpenRoundStream(absl::GetFlag(FLAGS_instance));
  if (!stream.ok()) {
    std::fprintf(stderr, "Rounds: %s\n", stream.status().ToString().c_str());
    return 0;
  }
  const bool pipeline = absl::GetFlag(FLAGS_pipeline);
  bandit::v1::RoundRequest select;
  *select.mutable_select() = SelectOfRound();
  bandit::v1::RoundRequest update;
  update.mutable_update()->set_instance(absl::GetFlag(FLAGS_instance));
  auto fail = [](const char* what, const absl::Status& s) {
    std::fprintf(stderr, "Rounds %s: %s\n", what, s.ToString().c_str());
  };
  int64_t done = 0;
  for (int64_t i = seed * 1000; Clock::now() < end; ++i) {
    select.mutable_select()->set_context(Context(i));
    // Pipelined, the previous round's Update is still unanswered: it left with this Select.
    if (absl::Status s = (*stream)->Send(select); !s.ok()) return fail("Send", s), done;
    if ((*stream)->unanswered() == 2) {
      auto u = (*stream)->Receive();
      if (!u.ok() || !bandit::client::StatusOf(*u).ok())
        return fail("Update", u.ok() ? bandit::client::StatusOf(*u) : u.status()), done;
    }
    auto d = (*stream)->Receive();
    if (!d.ok() || !bandit::client::StatusOf(*d).ok())
      return fail("Select", d.ok() ? bandit::client::StatusOf(*d) : d.status()), done;
    update.mutable_update()->set_event_id(d->decision().event_id());
    update.mutable_update()->set_reward(Reward(d->decision()));
    if (absl::Status s = (*stream)->Send(update, /*more_follow=*/pipeline); !s.ok())
      return fail("Send", s), done;
    if (!pipeline) {
      auto u = (*stream)->Receive();
      if (!u.ok() || !bandit::client::StatusOf(*u).ok())
        return fail("Update", u.ok() ? bandit::client::StatusOf(*u) : u.status()), done;
    }
    ++done;
  }
  if (absl::Status s = (*stream)->Close(); !s.ok()) fail("Close", s);
  return done;
}

int64_t BatchRounds(int seed, Clock::time_point end) {
  bandit::client::BanditClient client = NewClient();
  const int batch = absl::GetFlag(FLAGS_batch);
  bandit::v1::SelectBatchRequest selects;
  for (int k = 0; k < batch; ++k) *selects.add_requests() = SelectOfRound();
  bandit::v1::UpdateBatchRequest updates;
  for (int k = 0; k < batch; ++k)
    updates.add_requests()->set_instance(absl::GetFlag(FLAGS_instance));
  int64_t done = 0;
  for (int64_t i = seed * 1000; Clock::now() < end; i += batch) {
    for (int k = 0; k < batch; ++k) selects.mutable_requests(k)->set_context(Context(i + k));
    auto d = client.SelectBatch(selects);
    if (!d.ok()) {
      std::fprintf(stderr, "SelectBatch: %s\n", d.status().ToString().c_str());
      break;
    }
    for (int k = 0; k < batch; ++k) {
      if (d->statuses(k).code() != 0) {
        std::fprintf(stderr, "SelectBatch item: %s\n", d->statuses(k).message().c_str());
        return done;
      }
      updates.mutable_requests(k)->set_event_id(d->decisions(k).event_id());
      updates.mutable_requests(k)->set_reward(Reward(d->decisions(k)));
    }
    if (auto u = client.UpdateBatch(updates); !u.ok()) {
      std::fprintf(stderr, "UpdateBatch: %s\n", u.status().ToString().c_str());
      break;
    }
    done += batch;
  }
  return done;
}

int64_t VwRounds(int seed, Clock::time_point end) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(absl::GetFlag(FLAGS_vw_port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("connect to VW's daemon");
    ::close(fd);
    return 0;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // The 50 actions with the label on each possible one, built once.
  std::vector<std::string> multis;
  for (int chosen = 0; chosen < 50; ++chosen) {
    std::vector<std::string> actions;
    for (int a = 0; a < 50; ++a)
      actions.push_back(Action(
          a, a == chosen ? absl::StrCat("0:", chosen % 5 == 0 ? "-1.0" : "0.0", ":0.2") : ""));
    multis.push_back(absl::StrCat("[", absl::StrJoin(actions, ", "), "]"));
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::string buffer;
  char chunk[65536];
  int64_t done = 0;
  for (int64_t i = seed * 1000; Clock::now() < end; ++i) {
    std::string line = Context(i);
    line.pop_back();  // the closing brace: the actions join the context's object
    absl::StrAppend(&line, ", \"_multi\": ", multis[rng() % 50], "}\n");
    for (size_t sent = 0; sent < line.size();) {
      const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ::close(fd);
        return done;
      }
      sent += static_cast<size_t>(n);
    }
    size_t blank;
    while ((blank = buffer.find("\n\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        ::close(fd);
        return done;
      }
      buffer.append(chunk, static_cast<size_t>(n));
    }
    buffer.erase(0, blank + 2);
    ++done;
  }
  ::close(fd);
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  int64_t (*rounds_of)(int, Clock::time_point) = mode == "vw"               ? VwRounds
                                                 : mode == "banditd"        ? BanditdRounds
                                                 : mode == "banditd-stream" ? StreamRounds
                                                 : mode == "banditd-batch"  ? BatchRounds
                                                                            : nullptr;
  if (rounds_of == nullptr) {
    std::fprintf(stderr, "--mode=%s: expected banditd, banditd-stream, banditd-batch or vw\n",
                 mode.c_str());
    return 2;
  }
  const int inflight = absl::GetFlag(FLAGS_inflight);
  std::atomic<int64_t> rounds{0};
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds)));
  std::vector<std::thread> threads;
  for (int t = 0; t < inflight; ++t)
    threads.emplace_back([&, t] { rounds += rounds_of(t + 1, end); });
  for (auto& th : threads) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("{\"rounds\": %lld, \"seconds\": %.3f}\n", static_cast<long long>(rounds.load()),
              seconds);
  return 0;
}
