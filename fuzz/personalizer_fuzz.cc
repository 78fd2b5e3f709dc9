// libFuzzer target: the Personalizer HTTP API's entry (server/api/http/personalizer_api.h), what
// the HTTP listener hands every request to, on arbitrary method, path, key and body.
//
// The first byte picks the method and the key, the second the path (one of Personalizer's routes
// on the instance, at the root, on a missing instance, or the input's own bytes); the rest is
// the body. The service holds one named-feature instance and one decision to reward.
// Oracles besides "no crash, no sanitizer report":
//   * the status is one Personalizer's API answers (2xx of the route, 400, 401, 403, 404, 405,
//     429, 503), and every error body is Personalizer's {"error": {"code", "message"}};
//   * a refused request (4xx, 5xx) leaves the instance exactly as it was (its exported
//     snapshot is unchanged);
//   * a rank that succeeds answers 201 with a ranking whose probabilities sum to 1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <google/protobuf/text_format.h>
#include <rapidjson/document.h>

#include "server/api/auth.h"
#include "server/api/http/personalizer_api.h"
#include "server/env/clock.h"
#include "server/service/decision_service.h"

namespace {

using namespace bandit::server;
namespace v1 = bandit::v1;

void Check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) {
    std::fprintf(stderr, "personalizer_fuzz: %s %s\n", what, detail.c_str());
    std::abort();
  }
}

constexpr char kWriter[] = "writer-key-0123456789";
constexpr char kReader[] = "reader-key-0123456789";
constexpr char kAdmin[] = "admin-key-0123456789";
constexpr char kBound[] = "bound-key-0123456789";

const char* const kPaths[] = {
    "/instances/shop/personalizer/v1.0/rank",
    "/personalizer/v1.0/rank",
    "/instances/shop/personalizer/v1.1-preview.3/rank",
    "/instances/shop/personalizer/v1.0/events/EVENT/reward",
    "/instances/shop/personalizer/v1.0/events/EVENT/activate",
    "/instances/shop/personalizer/v1.0/events/unknown-event/reward",
    "/instances/shop/personalizer/v1.1-preview.3/configurations/service",
    "/instances/shop/personalizer/v1.1-preview.3/configurations/policy",
    "/instances/shop/personalizer/v1.1-preview.3/model",
    "/instances/shop/personalizer/v1.1-preview.3/logs",
    "/instances/shop/personalizer/v1.1-preview.3/multislot/rank",
    "/instances/nobody/personalizer/v1.0/rank",
};
constexpr int kNumPaths = sizeof(kPaths) / sizeof(kPaths[0]);
const char* const kMethods[] = {"POST", "GET", "PUT", "DELETE", "PATCH"};

struct World {
  ManualClock clock;
  std::unique_ptr<DecisionService> service;
  std::unique_ptr<Authorizer> auth;
  std::string event;
};

std::unique_ptr<World> MakeWorld() {
  auto w = std::make_unique<World>();
  ServiceLimits limits;
  limits.max_instances = 4;
  limits.instance.named.max_features = 200;
  limits.instance.named.max_depth = 8;
  limits.instance.named.max_terms = 4000;
  w->service = std::make_unique<DecisionService>(&w->clock, limits);
  auto auth =
      Authorizer::Parse(std::string("writer ") + kWriter + "\nreader " + kReader + "\nadmin " +
                            kAdmin + "\nwriter " + kBound + " shop-app instance=shop\n",
                        "fuzz");
  Check(auth.ok(), "tokens refused");
  w->auth = *std::move(auth);
  v1::CreateInstanceRequest create;
  create.set_name("shop");
  Check(google::protobuf::TextFormat::ParseFromString(
            "policy { linucb {} } feature_space { bits: 6 interactions: 'UA' } seed: 1",
            create.mutable_config()),
        "config");
  v1::Instance out;
  Check(w->service->CreateInstance(create, &out).ok(), "create refused");
  v1::SelectRequest select;
  select.set_instance("shop");
  select.set_context("{\"User\":{\"k\":\"a\"}}");
  for (const char* id : {"x", "y"}) {
    v1::NamedAction* a = select.add_actions();
    a->set_id(id);
    a->set_features(std::string("{\"Action\":{\"id\":\"") + id + "\"}}");
  }
  v1::Decision d;
  Check(w->service->Select(select, &d).ok(), "seed select refused");
  w->event = d.event_id();
  return w;
}

std::string Snapshot(World& w) {
  v1::ExportInstanceRequest req;
  req.set_name("shop");
  v1::ExportInstanceResponse resp;
  Check(w.service->ExportInstance(req, &resp).ok(), "export refused");
  return resp.snapshot();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::unique_ptr<World> world = MakeWorld();
  bandit::server::http::PersonalizerOptions options;
  options.max_json_depth = 8;
  bandit::server::http::PersonalizerApi api(world->service.get(), world->auth.get(), options);
  const std::string method = kMethods[data[0] % 5];
  const std::string keys[] = {kWriter, kReader, kAdmin, kBound, "unknown-key-01234567"};
  const std::string key = keys[(data[0] / 5) % 5];
  const bool send_key = (data[0] / 25) % 5 != 0;
  std::string rest(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string path;
  if (data[1] % 16 < kNumPaths) {
    path = kPaths[data[1] % 16];
    if (const size_t at = path.find("EVENT"); at != std::string::npos)
      path.replace(at, 5, world->event);
  } else {
    // The path is the input's first line.
    const size_t nl = rest.find('\n');
    path = rest.substr(0, nl);
    rest = nl == std::string::npos ? "" : rest.substr(nl + 1);
  }
  const std::string before = Snapshot(*world);
  bandit::server::http::ApiRequest request;
  request.method = method;
  request.path = path;
  request.key = send_key ? &key : nullptr;
  request.body = rest;
  const bandit::server::http::ApiResponse r = api.Handle(request);
  const int s = r.status;
  Check(s == 200 || s == 201 || s == 204 || s == 400 || s == 401 || s == 403 || s == 404 ||
            s == 405 || s == 429 || s == 503,
        "unexpected status", std::to_string(s));
  if (s >= 400) {
    rapidjson::Document doc;
    Check(!doc.Parse(r.body.c_str()).HasParseError() && doc.IsObject() && doc.HasMember("error") &&
              doc["error"].IsObject() && doc["error"].HasMember("code") &&
              doc["error"]["code"].IsString() && doc["error"].HasMember("message") &&
              doc["error"]["message"].IsString(),
          "an error body is not Personalizer's shape", r.body);
    Check(Snapshot(*world) == before, "a refused request changed the instance", r.body);
  }
  if (s == 201) {
    rapidjson::Document doc;
    Check(!doc.Parse(r.body.c_str()).HasParseError() && doc.IsObject() && doc.HasMember("ranking"),
          "rank answer", r.body);
    double sum = 0;
    for (const auto& ranked : doc["ranking"].GetArray()) sum += ranked["probability"].GetDouble();
    Check(std::abs(sum - 1) < 1e-6, "ranking probabilities do not sum to 1", r.body);
  }
  return 0;
}
