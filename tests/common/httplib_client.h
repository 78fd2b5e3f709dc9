// One HTTP request to a local server's Personalizer API (cpp-httplib), and its answer with
// Personalizer's error fields picked out; and the check that a rank's answer is a given
// decision. For tests under tests/http and tests/cluster, whose CMake rule compiles a file alone
// when it mentions httplib (this header's name does).
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <httplib.h>
#include <rapidjson/document.h>

#include "bandit/v1/service.pb.h"

namespace bandit::testing {

struct HttpAnswer {
  int status = 0;      // 0: no answer (refused, timed out)
  std::string body;
  std::string code;    // error.code, when the body is Personalizer's error
  std::string target;  // error.target
  httplib::Headers headers;
};

// `method` (GET, POST, PUT, DELETE, else PATCH) on 127.0.0.1:`port` with `body` as JSON and,
// unless `key` is null, the key in Ocp-Apim-Subscription-Key.
inline HttpAnswer SendHttp(int port, const std::string& method, const std::string& path,
                           const std::string& body, const char* key) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  httplib::Headers headers;
  if (key != nullptr) headers.emplace("Ocp-Apim-Subscription-Key", key);
  auto send = [&]() -> httplib::Result {
    if (method == "GET") return http.Get(path.c_str(), headers);
    if (method == "POST") return http.Post(path.c_str(), headers, body, "application/json");
    if (method == "PUT") return http.Put(path.c_str(), headers, body, "application/json");
    if (method == "DELETE") return http.Delete(path.c_str(), headers);
    return http.Patch(path.c_str(), headers, body, "application/json");
  };
  httplib::Result r = send();
  HttpAnswer a;
  if (!r) return a;
  a.status = r->status;
  a.body = r->body;
  a.headers = r->headers;
  rapidjson::Document doc;
  if (!doc.Parse(a.body.c_str()).HasParseError() && doc.IsObject() && doc.HasMember("error")) {
    const auto& e = doc["error"];
    if (e.HasMember("code") && e["code"].IsString()) a.code = e["code"].GetString();
    if (e.HasMember("target") && e["target"].IsString()) a.target = e["target"].GetString();
  }
  return a;
}

// `body`, a rank's answer (Personalizer's RankResponse), is decision `d`: the same chosen action
// and the same ranking, probabilities included. `where` names the request in a failure.
inline void ExpectRankingOf(const std::string& body, const bandit::v1::Decision& d,
                            const std::string& where) {
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(body.c_str()).HasParseError()) << body;
  EXPECT_EQ(doc["rewardActionId"].GetString(), d.action_id()) << where;
  ASSERT_EQ(doc["ranking"].Size(), static_cast<unsigned>(d.ranking_size())) << where;
  for (int i = 0; i < d.ranking_size(); ++i) {
    EXPECT_EQ(doc["ranking"][i]["id"].GetString(), d.ranking(i).id()) << where;
    EXPECT_DOUBLE_EQ(doc["ranking"][i]["probability"].GetDouble(), d.ranking(i).probability())
        << where;
  }
}

}  // namespace bandit::testing
