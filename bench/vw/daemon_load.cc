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
//   --mode=banditd-http: Personalizer's rank then reward over banditd's HTTP door
//     (`--http_listen`, port `--http_port`): `POST /instances/{instance}/personalizer/v1.0/rank`
//     with the same context and actions in Personalizer's JSON and a client-chosen `eventId`,
//     then `POST .../events/{eventId}/reward` with `{"value": r}`, on one HTTP/1.1 keep-alive
//     connection per thread (a minimal client on a raw socket as --mode=vw's, TCP_NODELAY, each
//     request's header and body in one sendmsg, which cpp-httplib's client does not do; the body
//     built once but for the eventId and context);
//     a rank must answer 201 and a reward 204 without `x-bandit-reward-not-learned`, anything
//     else is counted as a failure and makes the run fail (exit status 1);
//   --mode=vw: one labeled example on VW's daemon (`vw --daemon --json`), the label on the action
//     a client-side draw picked (the 50 labeled variants built once), the reply read to its
//     blank line.
// Prints the rounds completed and the seconds they took, as JSON on one line (with
// --mode=banditd-http also the failed requests). `--print_round=I` prints round I's requests of
// the gRPC modes and of the HTTP mode instead, for daemon_compare.py's check that both carry the
// same VW features.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/cpp/bandit_client.h"

ABSL_FLAG(std::string, mode, "banditd",
          "banditd, banditd-stream, banditd-batch, banditd-http or vw");
ABSL_FLAG(bool, pipeline, true,
          "--mode=banditd-stream: send a round's Update with the next round's Select");
ABSL_FLAG(int, batch, 8, "--mode=banditd-batch: rounds per SelectBatch / UpdateBatch");
ABSL_FLAG(std::string, target, "127.0.0.1:50051", "--mode=banditd: banditd's gRPC address");
ABSL_FLAG(std::string, instance, "vw", "--mode=banditd*: the instance");
ABSL_FLAG(int, http_port, 8080, "--mode=banditd-http: banditd's --http_listen port on 127.0.0.1");
ABSL_FLAG(int64_t, print_round, -1,
          "print round I's requests (the gRPC modes' context and actions, the HTTP mode's rank "
          "body) as JSON and exit");
ABSL_FLAG(int, vw_port, 26542, "--mode=vw: VW's daemon port on 127.0.0.1");
ABSL_FLAG(int, inflight, 8, "client threads, one connection each");
ABSL_FLAG(double, seconds, 10, "duration");

namespace {

using Clock = std::chrono::steady_clock;

// daemon_compare.py's context(i) and actions(): the namespaces' members, then the documents.
std::string UserMembers(int64_t i) {
  std::vector<std::string> user;
  for (int f = 0; f < 10; ++f)
    user.push_back(absl::StrCat("\"u", f, "\": \"v", (i * 7 + f * 3) % 13, "\""));
  return absl::StrCat("\"User\": {", absl::StrJoin(user, ", "), "}");
}

std::string ContextMembers(int64_t i) {
  std::vector<std::string> context;
  for (int f = 0; f < 10; ++f)
    context.push_back(absl::StrCat("\"c", f, "\": ", 0.1 * static_cast<double>((i + f) % 9)));
  return absl::StrCat("\"Context\": {", absl::StrJoin(context, ", "), "}");
}

std::string ActionMembers(int a) {
  std::vector<std::string> features;
  for (int f = 0; f < 10; ++f)
    features.push_back(absl::StrCat("\"a", f, "\": \"x", (a * 11 + f) % 97, "\""));
  return absl::StrCat("\"Action\": {", absl::StrJoin(features, ", "), "}");
}

// VW's JSON, one object (the gRPC modes' SelectRequest.context and VW's example).
std::string Context(int64_t i) {
  return absl::StrCat("{", UserMembers(i), ", ", ContextMembers(i), "}");
}

std::string Action(int a, const std::string& label) {
  return absl::StrCat("{", ActionMembers(a),
                      label.empty() ? "" : absl::StrCat(", \"_label\": \"", label, "\""), "}");
}

// Personalizer's JSON of the same features: `contextFeatures` and an action's `features` are
// lists of objects, one namespace each. They are the same VW features as Context(i) and
// Action(a, ""): the HTTP door copies `contextFeatures` and each action's `features` as JSON
// text into SelectRequest.context and NamedAction.features (server/api/http/
// personalizer_requests.cc, ReadFeatures), and the featurizer reads a top-level list of objects
// as their union (core/features/vw_input.cc), so `[{"User": {..}}, {"Context": {..}}]` holds
// the namespaces and terms of `{"User": {..}, "Context": {..}}`. daemon_compare.py checks it
// before it measures the HTTP door: the audit (SelectRequest.explain) of every action of a round,
// from this mode's strings (--print_round) and from the gRPC modes', must be the same
// (names, indices, values).
std::string PersonalizerContext(int64_t i) {
  return absl::StrCat("[{", UserMembers(i), "}, {", ContextMembers(i), "}]");
}

std::string PersonalizerActions() {
  std::vector<std::string> actions;
  for (int a = 0; a < 50; ++a)
    actions.push_back(
        absl::StrCat("{\"id\": \"a", a, "\", \"features\": [{", ActionMembers(a), "}]}"));
  return absl::StrCat("[", absl::StrJoin(actions, ", "), "]");
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

// The reward of a round whose chosen action is `arm_index` (of the 50), in every mode.
double RewardOf(int arm_index) { return arm_index % 5 == 0 ? 1.0 : 0.0; }
double Reward(const bandit::v1::Decision& d) { return RewardOf(d.arm_index()); }

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

// A TCP connection to 127.0.0.1:`port` with TCP_NODELAY; -1 (and why, on stderr) on failure.
int ConnectLoopback(int port, const char* what) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    std::perror(what);
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror(what);
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// One HTTP/1.1 keep-alive connection to banditd's HTTP door: a request's pieces (header and
// body) leave in one sendmsg, a response is read to the end of its Content-Length.
class HttpConnection {
 public:
  struct Response {
    int status = 0;
    bool close = false;        // `Connection: close`: the server closes after this answer
    bool not_learned = false;  // `x-bandit-reward-not-learned`: a reward accepted, not learned
    absl::string_view body;    // valid until the next Receive
  };

  explicit HttpConnection(int port) : port_(port) { in_.reserve(1 << 16); }
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool Open() {
    Close();
    fd_ = ConnectLoopback(port_, "connect to banditd's HTTP door");
    return fd_ >= 0;
  }
  bool is_open() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    in_.clear();
    consumed_ = 0;
  }

  bool Send(std::initializer_list<absl::string_view> pieces) {
    iovec iov[4];
    size_t n = 0;
    for (absl::string_view p : pieces) iov[n++] = {const_cast<char*>(p.data()), p.size()};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    while (msg.msg_iovlen > 0) {
      ssize_t sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (sent <= 0) return false;
      while (msg.msg_iovlen > 0 && static_cast<size_t>(sent) >= msg.msg_iov->iov_len) {
        sent -= static_cast<ssize_t>(msg.msg_iov->iov_len);
        ++msg.msg_iov;
        --msg.msg_iovlen;
      }
      if (msg.msg_iovlen > 0) {
        msg.msg_iov->iov_base = static_cast<char*>(msg.msg_iov->iov_base) + sent;
        msg.msg_iov->iov_len -= static_cast<size_t>(sent);
      }
    }
    return true;
  }

  // The next response; false, with `error` saying why, if the connection failed or the answer
  // is not the HTTP/1.1 this client reads (a status line, then a Content-Length body).
  bool Receive(Response* r, std::string* error) {
    in_.erase(0, consumed_);
    consumed_ = 0;
    size_t header_end;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos)
      if (!Read()) return *error = "the connection closed before a response", false;
    const absl::string_view head(in_.data(), header_end);
    *r = Response();
    if (!absl::StartsWith(head, "HTTP/1.1 ") || head.size() < 12 ||
        !absl::SimpleAtoi(head.substr(9, 3), &r->status))
      return *error = absl::StrCat("not an HTTP/1.1 status line: ", head.substr(0, 80)), false;
    size_t length = 0;
    bool has_length = false;
    for (size_t line = head.find("\r\n"); line != absl::string_view::npos;) {
      const size_t next = head.find("\r\n", line + 2);
      const absl::string_view field = head.substr(
          line + 2, next == absl::string_view::npos ? absl::string_view::npos : next - line - 2);
      line = next;
      const size_t colon = field.find(':');
      if (colon == absl::string_view::npos) continue;
      const absl::string_view name = field.substr(0, colon);
      const absl::string_view value = absl::StripAsciiWhitespace(field.substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "content-length")) {
        if (!absl::SimpleAtoi(value, &length)) return *error = "a bad Content-Length", false;
        has_length = true;
      } else if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
        return *error = absl::StrCat("Transfer-Encoding: ", value, " (not read here)"), false;
      } else if (absl::EqualsIgnoreCase(name, "connection")) {
        r->close = absl::EqualsIgnoreCase(value, "close");
      } else if (absl::EqualsIgnoreCase(name, "x-bandit-reward-not-learned")) {
        r->not_learned = true;
      }
    }
    // Without Content-Length only the answers that have no body (1xx, 204, 304).
    if (!has_length && r->status / 100 != 1 && r->status != 204 && r->status != 304)
      return *error = absl::StrCat("status ", r->status, " without Content-Length"), false;
    const size_t end = header_end + 4 + length;
    while (in_.size() < end)
      if (!Read()) return *error = "the connection closed inside a response body", false;
    r->body = absl::string_view(in_).substr(header_end + 4, length);
    consumed_ = end;
    return true;
  }

 private:
  bool Read() {
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    in_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  const int port_;
  int fd_ = -1;
  std::string in_;       // bytes read: the current response first
  size_t consumed_ = 0;  // of in_, by the response last returned
};

// The chosen action of a rank response: `rewardActionId` "a<k>" (the rank response's last
// member, `"rewardActionId":"a17"`), k; -1 if it is not there.
int ChosenAction(absl::string_view body) {
  constexpr absl::string_view kKey = "\"rewardActionId\"";
  size_t at = body.rfind(kKey);
  if (at == absl::string_view::npos) return -1;
  at += kKey.size();
  while (at < body.size() && (body[at] == ' ' || body[at] == ':')) ++at;
  if (at + 2 >= body.size() || body[at] != '"' || body[at + 1] != 'a') return -1;
  const size_t end = body.find('"', at + 2);
  int k = -1;
  if (end == absl::string_view::npos || !absl::SimpleAtoi(body.substr(at + 2, end - at - 2), &k) ||
      k < 0 || k >= 50)
    return -1;
  return k;
}

// The rank body of round `i` in two pieces: what changes per round (the eventId and the
// context) and the actions, which do not.
std::string RankBodyStart(absl::string_view event_id, int64_t i) {
  return absl::StrCat("{\"eventId\": \"", event_id,
                      "\", \"contextFeatures\": ", PersonalizerContext(i));
}
std::string RankBodyEnd() { return absl::StrCat(", \"actions\": ", PersonalizerActions(), "}"); }

// The header of a POST of a JSON body of `length` bytes to `target`.
std::string PostHead(absl::string_view target, size_t length) {
  return absl::StrCat("POST ", target,
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: ",
                      length, "\r\n\r\n");
}

// This run's event ids start with it: the process id and the start time, so that no two runs
// (each phase of daemon_compare.py is one) send the same id (banditd refuses an id it
// remembers as finished).
std::string run_id;

// Failed HTTP requests of all threads; the first few are described on stderr.
std::atomic<int64_t> http_failures{0};

void HttpFailure(const std::string& what) {
  if (http_failures.fetch_add(1) < 10) std::fprintf(stderr, "banditd-http: %s\n", what.c_str());
}

int64_t HttpRounds(int seed, Clock::time_point end) {
  const std::string path =
      absl::StrCat("/instances/", absl::GetFlag(FLAGS_instance), "/personalizer/v1.0/");
  const std::string body_end = RankBodyEnd();
  const std::string event_prefix = absl::StrCat(run_id, ".", seed, ".");
  HttpConnection conn(absl::GetFlag(FLAGS_http_port));
  int64_t done = 0, failed = 0;
  std::string head, body_start, reward;
  HttpConnection::Response r;
  std::string error;
  for (int64_t i = seed * 1000; Clock::now() < end; ++i) {
    // A failure closes the connection unless its answer was whole; the next round reopens it.
    auto fail = [&](absl::string_view what, bool close) {
      HttpFailure(absl::StrCat(what, " (event ", event_prefix, i, ")"));
      if (close || r.close) conn.Close();
      ++failed;
    };
    if (failed >= 100) break;
    if (!conn.is_open() && !conn.Open()) {
      HttpFailure("connect");
      break;
    }
    const std::string event_id = absl::StrCat(event_prefix, i);
    body_start = RankBodyStart(event_id, i);
    head = PostHead(absl::StrCat(path, "rank"), body_start.size() + body_end.size());
    r = HttpConnection::Response();
    if (!conn.Send({head, body_start, body_end})) {
      fail("rank: the request could not be sent", true);
      continue;
    }
    if (!conn.Receive(&r, &error)) {
      fail(absl::StrCat("rank: ", error), true);
      continue;
    }
    if (r.status != 201) {
      fail(absl::StrCat("rank: status ", r.status, " ", r.body.substr(0, 300)), false);
      continue;
    }
    const int chosen = ChosenAction(r.body);
    if (chosen < 0) {
      fail(absl::StrCat("rank: no rewardActionId \"a<k>\" in ", r.body.substr(0, 300)), false);
      continue;
    }
    if (r.close && !conn.Open()) {
      HttpFailure("reconnect");
      break;
    }
    const std::string value = absl::StrCat("{\"value\": ", RewardOf(chosen), "}");
    reward = absl::StrCat(
        PostHead(absl::StrCat(path, "events/", event_id, "/reward"), value.size()), value);
    r = HttpConnection::Response();
    if (!conn.Send({reward})) {
      fail("reward: the request could not be sent", true);
      continue;
    }
    if (!conn.Receive(&r, &error)) {
      fail(absl::StrCat("reward: ", error), true);
      continue;
    }
    if (r.status != 204 || r.not_learned) {
      fail(absl::StrCat("reward: status ", r.status, r.not_learned ? " (not learned)" : "", " ",
                        r.body.substr(0, 300)),
           false);
      continue;
    }
    if (r.close) conn.Close();
    ++done;
  }
  return done;
}

// A JSON string holding `text` (which has no control characters).
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// --print_round: round i's requests, the gRPC modes' (context, each action's features) and the
// HTTP mode's rank body, as JSON strings holding the exact texts sent.
void PrintRound(int64_t i) {
  std::vector<std::string> actions;
  for (int a = 0; a < 50; ++a) actions.push_back(JsonString(Action(a, "")));
  std::printf(
      "{\"context\": %s, \"actions\": [%s], \"rank\": %s}\n", JsonString(Context(i)).c_str(),
      absl::StrJoin(actions, ", ").c_str(),
      JsonString(absl::StrCat(RankBodyStart(absl::StrCat(run_id, ".0.", i), i), RankBodyEnd()))
          .c_str());
}

int64_t VwRounds(int seed, Clock::time_point end) {
  const int fd = ConnectLoopback(absl::GetFlag(FLAGS_vw_port), "connect to VW's daemon");
  if (fd < 0) return 0;
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
  run_id = absl::StrCat("r", ::getpid(), ".",
                        std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
  if (const int64_t i = absl::GetFlag(FLAGS_print_round); i >= 0) {
    PrintRound(i);
    return 0;
  }
  const std::string mode = absl::GetFlag(FLAGS_mode);
  int64_t (*rounds_of)(int, Clock::time_point) = mode == "vw"               ? VwRounds
                                                 : mode == "banditd"        ? BanditdRounds
                                                 : mode == "banditd-stream" ? StreamRounds
                                                 : mode == "banditd-batch"  ? BatchRounds
                                                 : mode == "banditd-http"   ? HttpRounds
                                                                            : nullptr;
  if (rounds_of == nullptr) {
    std::fprintf(stderr,
                 "--mode=%s: expected banditd, banditd-stream, banditd-batch, banditd-http or "
                 "vw\n",
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
  if (mode == "banditd-http") {
    std::printf("{\"rounds\": %lld, \"seconds\": %.3f, \"failures\": %lld}\n",
                static_cast<long long>(rounds.load()), seconds,
                static_cast<long long>(http_failures.load()));
    if (http_failures.load() > 0) {
      std::fprintf(stderr, "banditd-http: %lld requests failed\n",
                   static_cast<long long>(http_failures.load()));
      return 1;
    }
    return 0;
  }
  std::printf("{\"rounds\": %lld, \"seconds\": %.3f}\n", static_cast<long long>(rounds.load()),
              seconds);
  return 0;
}
