#include "server/api/auth.h"

#include <sys/stat.h>

#include <grpcpp/server_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/env/log.h"

namespace bandit::server {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kWriter:
      return "writer";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

namespace {

bool TokenCharsOk(absl::string_view t) {
  for (unsigned char c : t)
    if (c < 0x21 || c > 0x7e) return false;  // printable ASCII, no spaces (HTTP/2 header-safe)
  return true;
}

// Equal-length comparison that does not stop at the first difference.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Parse(absl::string_view text,
                                                              absl::string_view origin) {
  std::unique_ptr<Authorizer> auth(new Authorizer());
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (auto hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(origin, " line ", line_no);
    if (parts.size() < 2 || parts.size() > 4)
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          ": expected 'ROLE TOKEN [LABEL] [instance=NAME]' (ROLE = admin, writer or reader)"));
    Entry e;
    if (parts[0] == "admin") {
      e.role = Role::kAdmin;
    } else if (parts[0] == "writer") {
      e.role = Role::kWriter;
    } else if (parts[0] == "reader") {
      e.role = Role::kReader;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown role '", parts[0], "', expected admin, writer or reader"));
    }
    if (parts[1].size() < kMinTokenLength || !TokenCharsOk(parts[1]))
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": token has ", parts[1].size(), " characters, expected at least ",
                       kMinTokenLength,
                       " printable ASCII characters without spaces (e.g. openssl rand -hex 32)"));
    e.token = std::string(parts[1]);
    for (size_t i = 2; i < parts.size(); ++i) {
      constexpr absl::string_view kInstance = "instance=";
      if (absl::StartsWith(parts[i], kInstance)) {
        if (!e.instance.empty() || parts[i].size() == kInstance.size())
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": expected one 'instance=NAME' with a non-empty NAME after the token"));
        e.instance = std::string(parts[i].substr(kInstance.size()));
      } else if (e.label.empty()) {
        e.label = std::string(parts[i]);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": expected 'ROLE TOKEN [LABEL] [instance=NAME]', found two labels"));
      }
    }
    if (e.label.empty()) e.label = absl::StrCat("line ", line_no);
    if (auth->Find(e.token) != nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the token duplicates an earlier line's, expected unique tokens"));
    auth->entries_.push_back(std::move(e));
  }
  if (auth->entries_.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(origin, " has no tokens, expected lines 'ROLE TOKEN [LABEL]'"));
  return auth;
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromFile(const std::string& path,
                                                                 FileSystem* fs) {
  auto text = fs->ReadFile(path);
  if (!text.ok())
    return absl::NotFoundError(
        absl::StrCat("cannot read --tokens_file=", path, ": ", text.status().message()));
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    BANDIT_LOG_WARN("--tokens_file=", path,
                    " is readable by group or others; chmod 600 it (it holds secrets)");
  return Parse(*text, absl::StrCat("--tokens_file=", path));
}

const Authorizer::Entry* Authorizer::Find(absl::string_view token) const {
  const Entry* found = nullptr;
  for (const auto& e : entries_)
    if (ConstantTimeEquals(e.token, token) && found == nullptr) found = &e;
  return found;
}

int Authorizer::count(Role role) const {
  int n = 0;
  for (const auto& e : entries_) n += e.role == role;
  return n;
}

absl::Status Authorizer::Permit(Rpc rpc, const Entry* e, const std::string& instance) const {
  const Role need = RequiredRole(rpc);
  if (static_cast<int>(e->role) < static_cast<int>(need))
    return absl::PermissionDeniedError(absl::StrCat(RpcName(rpc), " needs role ", RoleName(need),
                                                    "; token '", e->label, "' has role ",
                                                    RoleName(e->role)));
  if (!e->instance.empty() && instance != e->instance)
    return absl::PermissionDeniedError(
        instance.empty()
            ? absl::StrCat(RpcName(rpc), ": token '", e->label, "' is bound to instance '",
                           e->instance, "' and may only make calls about it")
            : absl::StrCat(RpcName(rpc), ": token '", e->label, "' is bound to instance '",
                           e->instance, "', not '", instance, "'"));
  return absl::OkStatus();
}

std::string Authorizer::BoundInstance(absl::string_view token) const {
  const Entry* e = Find(token);
  return e == nullptr ? "" : e->instance;
}

absl::Status Authorizer::AuthorizeToken(Rpc rpc, const std::string* token,
                                        const std::string& instance, absl::string_view kind) const {
  if (token == nullptr || token->empty())
    return absl::UnauthenticatedError(absl::StrCat(RpcName(rpc), " needs a token: send ", kind));
  const Entry* e = Find(absl::StripAsciiWhitespace(*token));
  if (e == nullptr)
    return absl::UnauthenticatedError(
        absl::StrCat(RpcName(rpc), ": the token is not known to this server"));
  return Permit(rpc, e, instance);
}

absl::Status Authorizer::Authorize(Rpc rpc, const std::string* authorization,
                                   const std::string& instance) const {
  if (authorization == nullptr || authorization->empty())
    return absl::UnauthenticatedError(absl::StrCat(
        RpcName(rpc), " needs a token: send metadata 'authorization: Bearer <token>'"));
  absl::string_view value = *authorization;
  constexpr absl::string_view kBearer = "Bearer ";
  if (value.size() <= kBearer.size() || !absl::StartsWithIgnoreCase(value, kBearer))
    return absl::UnauthenticatedError(
        "authorization metadata is malformed, expected 'Bearer <token>'");
  const Entry* e = Find(absl::StripAsciiWhitespace(value.substr(kBearer.size())));
  if (e == nullptr)
    return absl::UnauthenticatedError(
        absl::StrCat(RpcName(rpc), ": the bearer token is not known to this server"));
  return Permit(rpc, e, instance);
}

absl::Status Authorizer::Check(Rpc rpc, const grpc::ServerContextBase& ctx,
                               const std::string& instance) const {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return Authorize(rpc, nullptr, instance);
  const std::string value(it->second.data(), it->second.size());
  return Authorize(rpc, &value, instance);
}

}  // namespace bandit::server
