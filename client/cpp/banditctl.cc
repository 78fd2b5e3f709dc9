// banditctl: command-line client for banditd.
//
//   banditctl [--target=HOST:PORT] [--json] [--tls_ca=CA.pem [--tls_cert=C --tls_key=K]]
//             [--token=T | env BANDIT_TOKEN] COMMAND ARGS...
//   create NAME --config='policy { ucb1 {} num_arms: 3 }'   (text-format bandit.v1.InstanceConfig)
//   get NAME | list [--page_size=N --page_token=T] | delete NAME | reset NAME
//   select NAME [--candidates='x1,x2;y1,y2'] [--x='x1,x2'] [--scores]
//   select NAME --context='{"User":{"age":35}}' --actions=@actions.json [--exclude=ID,..]
//   update NAME --reward=R (--event=ID | --arm=ID | --features='f1,f2' | --x='x1,x2' |
//                          --context='{...}' --action='{"id":..,"features":{..}}')
//   add-arms NAME --arms='id1,id2' | remove-arms NAME --arms='id1,id2'
//   export NAME --file=F | import [NAME] --file=F [--replace]   (move an instance between servers)
//   set-reference NAME (--embeddings_file=F.csv [--append] | --mean='m1,m2' --covariance='c11,c12,c21,c22')
//   log NAME [--since=T] [--until=T] [--format=dsjson|jsonl|csv] > file
//                                            the decision log (T: RFC 3339 or epoch ms)
//   evaluate NAME --since=T --until=T [--evaluation_name=N] [--policies='N1=ARGS;N2=ARGS']
//            [--optimize] [--wait]
//   evaluation get|delete NAME ID | evaluation list NAME
//                                            offline evaluations of the decision log
//   health                                   exits 0 exactly when the server reports SERVING
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cpp/bandit_client.h"
#include "client/cpp/decision_log_format.h"
#include "client/cpp/named_request.h"
#include "server/api/http/personalizer_defaults.h"
#include "server/env/file_system.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "banditd address");
ABSL_FLAG(bool, json, false, "Print responses as JSON");
ABSL_FLAG(int64_t, deadline_ms, 5000, "Per-call deadline");
ABSL_FLAG(int32_t, max_message_bytes, 16 << 20,
          "Largest gRPC message sent or received (export/import of an instance with a large "
          "decision log; the server has its own --max_message_bytes)");
ABSL_FLAG(std::string, config, "",
          "create: text-format bandit.v1.InstanceConfig; shadow add: bandit.v1.ShadowConfig; "
          "configure: the settings of a bandit.v1.ConfigureInstanceRequest");
ABSL_FLAG(bool, personalizer, false,
          "create: Azure Personalizer's default learning settings (docs/personalizer.md); "
          "--config, if given, is merged over them");
ABSL_FLAG(int32_t, page_size, 0, "list: page size (0 = server default)");
ABSL_FLAG(std::string, page_token, "", "list: token from a previous page");
ABSL_FLAG(std::string, candidates, "", "select: candidate vectors, 'a,b;c,d'");
ABSL_FLAG(std::string, x, "", "select/update: input vector 'a,b,c'");
ABSL_FLAG(bool, scores, false, "select: return every arm's score or probability");
ABSL_FLAG(std::string, context, "",
          "select/update: named context as JSON ('{\"User\":{\"age\":35}}') or @file");
ABSL_FLAG(std::string, actions, "",
          "select: named actions, a JSON list of {\"id\":..., \"features\":{...}}, or @file");
ABSL_FLAG(std::string, exclude, "", "select: comma-separated ids of actions not to choose");
ABSL_FLAG(bool, explain, false,
          "select (named): also list the chosen action's hashed features with their weights");
ABSL_FLAG(std::string, action, "",
          "update: the played named action, {\"id\":..., \"features\":{...}} or @file (direct)");
ABSL_FLAG(std::string, event, "",
          "update: event id from select; select: the decision's event id, chosen by the caller");
ABSL_FLAG(std::string, arm, "", "update: arm id (direct update, logged data)");
ABSL_FLAG(std::string, slots, "",
          "select: a multi-slot decision, a JSON list of {\"id\":..., \"features\":{...}, "
          "\"excluded_actions\":[...], \"baseline_action\":...} (or @file), or comma-separated "
          "slot ids");
ABSL_FLAG(bool, defer, false, "select: defer activation (learned from only once activated)");
ABSL_FLAG(std::string, slot, "", "update: the slot of a multi-slot decision the reward is for");
ABSL_FLAG(std::string, features, "", "update: played arm's features (direct update)");
ABSL_FLAG(std::string, reward, "", "update: the reward (or label)");
ABSL_FLAG(std::string, arms, "", "add-arms/remove-arms: comma-separated arm ids");
ABSL_FLAG(std::string, file, "", "export: write the instance state here; import: read it");
ABSL_FLAG(bool, replace, false,
          "import: replace the instance of that name if there is one, in one step (a refused "
          "file leaves it as it was)");
ABSL_FLAG(std::string, vw_arguments, "",
          "import --format=vw: VW arguments the model file does not keep (--l1, --l2)");
ABSL_FLAG(std::string, embeddings_file, "",
          "set-reference: reference embeddings, one per line, values separated by commas");
ABSL_FLAG(bool, append, false, "set-reference: add the embeddings to the current reference");
ABSL_FLAG(std::string, mean, "", "set-reference: FD reference mean 'm1,m2,...'");
ABSL_FLAG(std::string, covariance, "", "set-reference: FD reference covariance, row-major");
ABSL_FLAG(std::string, since, "",
          "log: decisions made at or after this time (RFC 3339 or epoch ms)");
ABSL_FLAG(std::string, until, "", "log: decisions made before this time (RFC 3339 or epoch ms)");
ABSL_FLAG(std::string, format, "",
          "log: dsjson (Vowpal Wabbit --dsjson; the default), jsonl or csv. export/import: "
          "snapshot (the service's own, everything; the default) or vw (Vowpal Wabbit's model "
          "file, what `vw -f` writes and `vw -i` reads: a vw instance's model)");
ABSL_FLAG(uint64_t, after_seq, 0, "log: only decisions after this event_seq (resume an export)");
ABSL_FLAG(std::string, evaluation_name, "evaluation", "evaluate: the evaluation's name");
ABSL_FLAG(std::string, policies, "",
          "evaluate: learning settings to compare, 'NAME=VW ARGUMENTS;NAME=VW ARGUMENTS'");
ABSL_FLAG(bool, optimize, false,
          "evaluate: also search learning settings on the log (offline experimentation)");
ABSL_FLAG(bool, wait, false, "evaluate: wait for the job to end and print its results");
ABSL_FLAG(int64_t, wait_ms, 600000, "evaluate --wait: give up after this long");
ABSL_FLAG(int64_t, max_events, 0, "log: at most this many decisions (0 = all)");
ABSL_FLAG(std::string, token, "",
          "Bearer token (default: $BANDIT_TOKEN; prefer the variable, flags show in `ps`)");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA of the server certificate (enables TLS)");
ABSL_FLAG(bool, tls, false, "Use TLS with the system's root certificates");
ABSL_FLAG(std::string, tls_cert, "", "Mutual TLS: this client's PEM certificate");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: this client's PEM private key");
ABSL_FLAG(std::string, tls_server_name, "", "Name to verify the server certificate against");

namespace {

using bandit::client::BanditClient;

int Fail(const absl::Status& s) {
  std::cerr << "error: " << absl::StatusCodeToString(s.code()) << ": " << s.message() << "\n";
  return 1;
}

int Usage(const std::string& why) {
  std::cerr << "banditctl: " << why << "\n" << absl::ProgramUsageMessage() << "\n";
  return 2;
}

void Print(const google::protobuf::Message& m) {
  std::string out;
  if (absl::GetFlag(FLAGS_json)) {
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    o.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  } else {
    google::protobuf::TextFormat::PrintToString(m, &out);
  }
  std::cout << out;
  if (!out.empty() && out.back() != '\n') std::cout << "\n";
}

template <typename T>
int PrintOr(const absl::StatusOr<T>& r) {
  if (!r.ok()) return Fail(r.status());
  Print(*r);
  return 0;
}

// Through the server's file seam, like every other file read of the project.
bool ReadFile(const std::string& path, std::string* out) {
  auto text = bandit::server::PosixFileSystem()->ReadFile(path);
  if (!text.ok()) return false;
  *out = *std::move(text);
  return true;
}

// Creates or truncates `path` and makes `data` durable there (an export is often the only copy
// on its way to another server).
absl::Status WriteFile(const std::string& path, const std::string& data) {
  auto f = bandit::server::PosixFileSystem()->NewWritableFile(path);
  if (!f.ok()) return f.status();
  if (auto s = (*f)->Append(data); !s.ok()) return s;
  if (auto s = (*f)->Sync(); !s.ok()) return s;
  return (*f)->Close();
}

bool ParseVector(const std::string& text, google::protobuf::RepeatedField<double>* out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    double v;
    if (!absl::SimpleAtod(part, &v)) return false;
    out->Add(v);
  }
  return true;
}

// "" -> 0; epoch milliseconds or an RFC 3339 time -> epoch milliseconds.
bool ParseTimeFlag(const std::string& text, int64_t* ms) {
  *ms = 0;
  if (text.empty()) return true;
  if (absl::SimpleAtoi(text, ms)) return *ms >= 0;
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return false;
  *ms = absl::ToUnixMillis(t);
  return *ms >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "banditctl [--target=HOST:PORT] [--json] [--tls_ca=CA.pem] [--token=T | $BANDIT_TOKEN] "
      "COMMAND ARGS\n"
      "  create NAME --config='policy { ucb1 {} num_arms: 3 }'\n"
      "  create NAME --personalizer        (Azure Personalizer's default learning settings)\n"
      "  get NAME | list | delete NAME | reset NAME\n"
      "  configure NAME --config='learning_mode: APPRENTICE reward_wait_ms: 60000'\n"
      "         (live settings: reward_wait_ms, on_expiry, default_reward, reward_aggregation,\n"
      "          epsilon, learning_mode)\n"
      "  select NAME [--candidates='a,b;c,d'] [--x='a,b'] [--scores]\n"
      "  select NAME --context='{...}' --actions=@actions.json [--exclude=ID,...] [--scores]\n"
      "         [--explain] [--event=ID] [--slots='[{\"id\":\"hero\"},...]' | --slots=a,b]"
      " [--defer]\n"
      "  activate NAME --event=ID\n"
      "  update NAME --reward=R (--event=ID | --arm=ID | --features='a,b' | --x='a,b' |\n"
      "                          --context='{...}' --action='{\"id\":...,\"features\":{...}}')\n"
      "  add-arms NAME --arms=id1,id2 | remove-arms NAME --arms=id1,id2\n"
      "  export NAME --file=F | import [NAME] --file=F [--replace]\n"
      "  set-reference NAME (--embeddings_file=F.csv [--append] | --mean=.. --covariance=..)\n"
      "  log NAME [--since=T] [--until=T] [--format=dsjson|jsonl|csv] > file\n"
      "  shadow add NAME SHADOW --config='policy { glb_omd { dimension: 20 } } seed: 7'\n"
      "  shadow remove|promote NAME SHADOW | shadow list NAME\n"
      "  evaluate NAME --since=T --until=T [--evaluation_name=N]\n"
      "         [--policies='low eps=--cb_explore_adf --epsilon 0.05 -q ::;...'] [--optimize]\n"
      "         [--wait]\n"
      "  evaluation get|delete NAME ID | evaluation list NAME\n"
      "  health   (exit 0 exactly when SERVING)");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return Usage("missing COMMAND");
  const std::string cmd = args[1];
  const std::string name = args.size() > 2 ? args[2] : "";
  bandit::client::ClientOptions options;
  options.deadline = std::chrono::milliseconds(absl::GetFlag(FLAGS_deadline_ms));
  options.token = absl::GetFlag(FLAGS_token);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (options.token.empty())
    if (const char* env = std::getenv("BANDIT_TOKEN")) options.token = env;
  options.tls = absl::GetFlag(FLAGS_tls);
  if (const std::string ca = absl::GetFlag(FLAGS_tls_ca); !ca.empty()) {
    if (!ReadFile(ca, &options.tls_root_certs)) return Usage("cannot read --tls_ca=" + ca);
    options.tls = true;
  }
  if (const std::string cert = absl::GetFlag(FLAGS_tls_cert); !cert.empty())
    if (!ReadFile(cert, &options.tls_client_cert)) return Usage("cannot read --tls_cert=" + cert);
  if (const std::string key = absl::GetFlag(FLAGS_tls_key); !key.empty())
    if (!ReadFile(key, &options.tls_client_key)) return Usage("cannot read --tls_key=" + key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  BanditClient client(absl::GetFlag(FLAGS_target), options);

  if (cmd == "health") {
    auto r = client.Health();
    if (!r.ok()) return Fail(r.status());
    const bool serving = *r == grpc::health::v1::HealthCheckResponse::SERVING;
    std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*r) << "\n";
    return serving ? 0 : 1;
  }
  if (cmd == "list") {
    return PrintOr(
        client.ListInstances(absl::GetFlag(FLAGS_page_size), absl::GetFlag(FLAGS_page_token)));
  }
  if (cmd == "shadow") {
    // shadow VERB NAME [SHADOW]
    const std::string verb = name;
    const std::string instance = args.size() > 3 ? args[3] : "";
    const std::string shadow = args.size() > 4 ? args[4] : "";
    if (instance.empty()) return Usage("shadow " + verb + " needs an instance NAME");
    if (verb == "list") {
      auto r = client.GetInstance(instance);
      if (!r.ok()) return Fail(r.status());
      bandit::v1::Instance shadows;
      *shadows.mutable_shadows() = r->shadows();
      return PrintOr(absl::StatusOr<bandit::v1::Instance>(std::move(shadows)));
    }
    if (shadow.empty()) return Usage("shadow " + verb + " needs NAME SHADOW");
    if (verb == "add") {
      bandit::v1::AddShadowRequest req;
      req.set_name(instance);
      req.set_shadow(shadow);
      if (!google::protobuf::TextFormat::ParseFromString(absl::GetFlag(FLAGS_config),
                                                         req.mutable_config()))
        return Usage("--config is not a text-format bandit.v1.ShadowConfig");
      return PrintOr(client.AddShadow(req));
    }
    if (verb == "remove") {
      bandit::v1::RemoveShadowRequest req;
      req.set_name(instance);
      req.set_shadow(shadow);
      return PrintOr(client.RemoveShadow(req));
    }
    if (verb == "promote") {
      bandit::v1::PromoteShadowRequest req;
      req.set_name(instance);
      req.set_shadow(shadow);
      return PrintOr(client.PromoteShadow(req));
    }
    return Usage("unknown shadow command '" + verb + "', expected add, remove, promote or list");
  }
  if (cmd == "evaluation") {
    // evaluation VERB NAME [ID]
    const std::string verb = name;
    const std::string instance = args.size() > 3 ? args[3] : "";
    const std::string id = args.size() > 4 ? args[4] : "";
    if (instance.empty()) return Usage("evaluation " + verb + " needs an instance NAME");
    if (verb == "list") return PrintOr(client.ListEvaluations(instance));
    if (id.empty()) return Usage("evaluation " + verb + " needs NAME ID");
    if (verb == "get") return PrintOr(client.GetEvaluation(instance, id));
    if (verb == "delete") {
      if (auto s = client.DeleteEvaluation(instance, id); !s.ok()) return Fail(s);
      std::cout << "deleted evaluation " << id << "\n";
      return 0;
    }
    return Usage("unknown evaluation command '" + verb + "', expected get, list or delete");
  }
  if (name.empty() && cmd != "import")  // import without NAME keeps the exported name
    return Usage(absl::StrCat(cmd, " needs an instance NAME"));
  if (cmd == "create") {
    bandit::v1::CreateInstanceRequest req;
    req.set_name(name);
    if (absl::GetFlag(FLAGS_personalizer))
      *req.mutable_config() = bandit::server::http::PersonalizerDefaultConfig();
    if (!google::protobuf::TextFormat::MergeFromString(absl::GetFlag(FLAGS_config),
                                                       req.mutable_config()))
      return Usage("--config is not a text-format bandit.v1.InstanceConfig");
    return PrintOr(client.CreateInstance(req));
  }
  if (cmd == "configure") {
    bandit::v1::ConfigureInstanceRequest req;
    if (!google::protobuf::TextFormat::ParseFromString(absl::GetFlag(FLAGS_config), &req))
      return Usage("--config is not a text-format bandit.v1.ConfigureInstanceRequest (e.g. "
                   "'learning_mode: APPRENTICE epsilon: 0.1')");
    req.set_name(name);
    return PrintOr(client.ConfigureInstance(req));
  }
  if (cmd == "evaluate") {
    bandit::v1::CreateEvaluationRequest req;
    req.set_instance(name);
    req.set_name(absl::GetFlag(FLAGS_evaluation_name));
    int64_t since = 0, until = 0;
    if (absl::GetFlag(FLAGS_since).empty() || !ParseTimeFlag(absl::GetFlag(FLAGS_since), &since))
      return Usage("evaluate needs --since, epoch milliseconds or an RFC 3339 time");
    if (absl::GetFlag(FLAGS_until).empty() || !ParseTimeFlag(absl::GetFlag(FLAGS_until), &until))
      return Usage("evaluate needs --until, epoch milliseconds or an RFC 3339 time");
    req.set_start_ms(since);
    req.set_end_ms(until);
    req.set_offline_experimentation(absl::GetFlag(FLAGS_optimize));
    for (absl::string_view item :
         absl::StrSplit(absl::GetFlag(FLAGS_policies), ';', absl::SkipWhitespace())) {
      const size_t eq = item.find('=');
      if (eq == absl::string_view::npos)
        return Usage(absl::StrCat("--policies item '", item, "' is not NAME=VW ARGUMENTS"));
      auto* p = req.add_policies();
      p->set_name(std::string(absl::StripAsciiWhitespace(item.substr(0, eq))));
      p->set_arguments(std::string(absl::StripAsciiWhitespace(item.substr(eq + 1))));
    }
    auto created = client.CreateEvaluation(req);
    if (!created.ok() || !absl::GetFlag(FLAGS_wait)) return PrintOr(std::move(created));
    const absl::Time give_up = absl::Now() + absl::Milliseconds(absl::GetFlag(FLAGS_wait_ms));
    while (true) {
      auto got = client.GetEvaluation(name, created->id());
      if (!got.ok() || got->status() != bandit::v1::EVALUATION_PENDING) {
        const bool failed = got.ok() && got->status() == bandit::v1::EVALUATION_FAILED;
        const int rc = PrintOr(std::move(got));
        return rc != 0 ? rc : (failed ? 1 : 0);
      }
      if (absl::Now() > give_up)
        return Fail(absl::DeadlineExceededError(absl::StrCat(
            "evaluation ", created->id(), " still pending after --wait_ms; poll it with "
            "`banditctl evaluation get ", name, " ", created->id(), "`")));
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  if (cmd == "get") return PrintOr(client.GetInstance(name));
  if (cmd == "reset") return PrintOr(client.ResetInstance(name));
  if (cmd == "delete") {
    auto s = client.DeleteInstance(name);
    if (!s.ok()) return Fail(s);
    std::cout << "deleted " << name << "\n";
    return 0;
  }
  // A JSON flag's value, or the file it names with a leading '@'.
  auto json_flag = [](const std::string& value, std::string* out) {
    if (value.empty() || value[0] != '@') {
      *out = value;
      return true;
    }
    return ReadFile(value.substr(1), out);
  };
  if (cmd == "select") {
    bandit::v1::SelectRequest req;
    req.set_instance(name);
    req.set_return_scores(absl::GetFlag(FLAGS_scores));
    std::string context, actions;
    if (!json_flag(absl::GetFlag(FLAGS_context), &context))
      return Usage("--context=@FILE: cannot read the file");
    if (!json_flag(absl::GetFlag(FLAGS_actions), &actions))
      return Usage("--actions=@FILE: cannot read the file");
    req.set_context(context);
    req.set_explain(absl::GetFlag(FLAGS_explain));
    req.set_event_id(absl::GetFlag(FLAGS_event));
    req.set_defer_activation(absl::GetFlag(FLAGS_defer));
    std::string slots;
    if (!json_flag(absl::GetFlag(FLAGS_slots), &slots))
      return Usage("--slots=@FILE: cannot read the file");
    if (!slots.empty())
      if (auto s = bandit::client::AddSlotsFromJson(slots, &req); !s.ok()) return Fail(s);
    if (!actions.empty())
      if (auto s = bandit::client::AddActionsFromJson(actions, &req); !s.ok()) return Fail(s);
    for (absl::string_view id :
         absl::StrSplit(absl::GetFlag(FLAGS_exclude), ',', absl::SkipWhitespace()))
      req.add_excluded_actions(std::string(id));
    for (absl::string_view c :
         absl::StrSplit(absl::GetFlag(FLAGS_candidates), ';', absl::SkipWhitespace()))
      if (!ParseVector(std::string(c), req.add_candidates()->mutable_values()))
        return Usage("--candidates must be numbers, e.g. '0.1,0.2;0.3,0.4'");
    if (!ParseVector(absl::GetFlag(FLAGS_x), req.mutable_x()))
      return Usage("--x must be numbers, e.g. '0.1,0.2'");
    return PrintOr(client.Select(req));
  }
  if (cmd == "update") {
    bandit::v1::UpdateRequest req;
    req.set_instance(name);
    double reward;
    if (!absl::SimpleAtod(absl::GetFlag(FLAGS_reward), &reward))
      return Usage("--reward is required and must be a number");
    req.set_reward(reward);
    req.set_slot_id(absl::GetFlag(FLAGS_slot));
    if (!absl::GetFlag(FLAGS_event).empty()) {
      req.set_event_id(absl::GetFlag(FLAGS_event));
    } else if (!absl::GetFlag(FLAGS_action).empty()) {
      std::string context, action;
      if (!json_flag(absl::GetFlag(FLAGS_context), &context) ||
          !json_flag(absl::GetFlag(FLAGS_action), &action))
        return Usage("--context/--action=@FILE: cannot read the file");
      bandit::v1::SelectRequest one;
      if (auto s = bandit::client::AddActionsFromJson("[" + action + "]", &one); !s.ok())
        return Fail(s);
      req.mutable_direct()->set_context(context);
      *req.mutable_direct()->mutable_action() = one.actions(0);
    } else if (!absl::GetFlag(FLAGS_arm).empty()) {
      req.mutable_direct()->set_arm_id(absl::GetFlag(FLAGS_arm));
    } else if (!absl::GetFlag(FLAGS_features).empty()) {
      if (!ParseVector(absl::GetFlag(FLAGS_features), req.mutable_direct()->mutable_features()))
        return Usage("--features must be numbers");
    } else if (!absl::GetFlag(FLAGS_x).empty()) {
      if (!ParseVector(absl::GetFlag(FLAGS_x), req.mutable_direct()->mutable_x()))
        return Usage("--x must be numbers");
    } else {
      return Usage("update needs --event, --arm, --features, --x or --action (with --context)");
    }
    return PrintOr(client.Update(req));
  }
  if (cmd == "activate") {
    if (absl::GetFlag(FLAGS_event).empty()) return Usage("activate needs --event=ID");
    bandit::v1::ActivateRequest req;
    req.set_instance(name);
    req.set_event_id(absl::GetFlag(FLAGS_event));
    return PrintOr(client.Activate(req));
  }
  if (cmd == "add-arms" || cmd == "remove-arms") {
    std::vector<std::string> ids =
        absl::StrSplit(absl::GetFlag(FLAGS_arms), ',', absl::SkipEmpty());
    if (ids.empty()) return Usage("--arms needs at least one arm id");
    if (cmd == "add-arms") {
      bandit::v1::AddArmsRequest req;
      req.set_name(name);
      for (const auto& id : ids) req.add_arms()->set_id(id);
      return PrintOr(client.AddArms(req));
    }
    bandit::v1::RemoveArmsRequest req;
    req.set_name(name);
    for (const auto& id : ids) req.add_arm_ids(id);
    return PrintOr(client.RemoveArms(req));
  }
  if (cmd == "log") {
    const std::string given = absl::GetFlag(FLAGS_format);
    auto format = bandit::client::ParseLogFormat(given.empty() ? "dsjson" : given);
    if (!format.ok()) return Usage(std::string(format.status().message()));
    bandit::v1::ExportDecisionLogRequest req;
    req.set_name(name);
    int64_t since = 0, until = 0;
    if (!ParseTimeFlag(absl::GetFlag(FLAGS_since), &since))
      return Usage("--since must be epoch milliseconds or an RFC 3339 time");
    if (!ParseTimeFlag(absl::GetFlag(FLAGS_until), &until))
      return Usage("--until must be epoch milliseconds or an RFC 3339 time");
    req.set_since_ms(since);
    req.set_until_ms(until);
    req.set_after_event_seq(absl::GetFlag(FLAGS_after_seq));
    req.set_max_events(absl::GetFlag(FLAGS_max_events));
    if (const std::string header = bandit::client::LogHeader(*format); !header.empty())
      std::cout << header << "\n";
    int64_t written = 0;
    // A multi-slot decision's entries are written together (one CCB line in DSJSON).
    bandit::client::DecisionGrouper grouper(
        [&](std::span<const bandit::v1::LoggedDecision> decision) {
          std::cout << bandit::client::FormatSlots(*format, decision, name) << "\n";
          written += static_cast<int64_t>(decision.size());
        });
    absl::Status s = client.ExportDecisionLog(req, [&](const bandit::v1::LoggedDecision& d) {
      grouper.Add(d);
      if (!std::cout.good()) return absl::UnavailableError("cannot write to standard output");
      return absl::OkStatus();
    });
    grouper.Flush();
    std::cout.flush();
    if (!s.ok()) return Fail(s);
    std::cerr << written << " decisions\n";
    return 0;
  }
  if (cmd == "export" || cmd == "import") {
    const std::string file = absl::GetFlag(FLAGS_file);
    if (file.empty()) return Usage(cmd + " needs --file");
    const std::string format =
        absl::GetFlag(FLAGS_format).empty() ? "snapshot" : absl::GetFlag(FLAGS_format);
    if (format != "snapshot" && format != "vw")
      return Usage(absl::StrCat("--format is '", format, "', expected snapshot or vw"));
    const bool vw = format == "vw";
    if (cmd == "export") {
      auto state = client.ExportInstance(name, vw ? bandit::v1::VW : bandit::v1::SNAPSHOT);
      if (!state.ok()) return PrintOr(absl::StatusOr<bandit::v1::Instance>(state.status()));
      if (auto s = WriteFile(file, *state); !s.ok())
        return Usage(absl::StrCat("cannot write --file=", file, ": ", s.message()));
      std::cout << "exported '" << name << "' (" << state->size() << " bytes) to " << file << "\n";
      return 0;
    }
    std::string state;
    if (!ReadFile(file, &state)) return Usage("cannot read --file=" + file);
    if (vw) {
      bandit::v1::InstanceConfig config;
      if (!google::protobuf::TextFormat::ParseFromString(absl::GetFlag(FLAGS_config), &config))
        return Usage("--config is not a text-format bandit.v1.InstanceConfig");
      return PrintOr(client.ImportVwModel(name, state, absl::GetFlag(FLAGS_vw_arguments), config,
                                          absl::GetFlag(FLAGS_replace)));
    }
    return PrintOr(client.ImportInstance(name, state, absl::GetFlag(FLAGS_replace)));
  }
  if (cmd == "set-reference") {
    bandit::v1::SetMixtureReferenceRequest req;
    req.set_name(name);
    if (const std::string file = absl::GetFlag(FLAGS_embeddings_file); !file.empty()) {
      std::string text;
      if (!ReadFile(file, &text)) return Usage("cannot read --embeddings_file=" + file);
      int line_no = 0;
      for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
        ++line_no;
        if (!ParseVector(std::string(line), req.add_embeddings()->mutable_values()))
          return Usage(absl::StrCat(file, ":", line_no, ": expected numbers separated by commas"));
      }
      req.set_append(absl::GetFlag(FLAGS_append));
    } else {
      if (!ParseVector(absl::GetFlag(FLAGS_mean), req.mutable_mean()) ||
          !ParseVector(absl::GetFlag(FLAGS_covariance), req.mutable_covariance()))
        return Usage("--mean and --covariance must be numbers");
    }
    return PrintOr(client.SetMixtureReference(req));
  }
  return Usage(absl::StrCat("unknown command '", cmd, "'"));
}
