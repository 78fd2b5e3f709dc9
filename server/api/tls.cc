#include "server/api/tls.h"

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace bandit::server {

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what,
                                         FileSystem* fs) {
  auto text = fs->ReadFile(path);
  if (!text.ok())
    return absl::NotFoundError(
        absl::StrCat("cannot read ", what, "=", path, ": ", text.status().message()));
  if (text->empty())
    return absl::InvalidArgumentError(absl::StrCat(what, "=", path, " is empty, expected PEM"));
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& tls, FileSystem* fs) {
  if (!tls.enabled()) {
    if (!tls.key_path.empty() || !tls.client_ca_path.empty())
      return absl::InvalidArgumentError(
          "--tls_key / --tls_client_ca are set without --tls_cert, expected all of TLS or none");
    return grpc::InsecureServerCredentials();
  }
  if (tls.key_path.empty())
    return absl::InvalidArgumentError("--tls_cert is set without --tls_key");
  auto cert = ReadTextFile(tls.cert_path, "--tls_cert", fs);
  if (!cert.ok()) return cert.status();
  auto key = ReadTextFile(tls.key_path, "--tls_key", fs);
  if (!key.ok()) return key.status();
  if (!absl::StrContains(*cert, "-----BEGIN CERTIFICATE-----"))
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert=", tls.cert_path, " holds no PEM certificate"));
  if (!absl::StrContains(*key, "PRIVATE KEY-----"))
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key=", tls.key_path, " holds no PEM private key"));
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  opts.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_path.empty()) {
    auto ca = ReadTextFile(tls.client_ca_path, "--tls_client_ca", fs);
    if (!ca.ok()) return ca.status();
    if (!absl::StrContains(*ca, "-----BEGIN CERTIFICATE-----"))
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_client_ca=", tls.client_ca_path, " holds no PEM certificate"));
    opts.pem_root_certs = *ca;
    opts.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(opts);
}

bool IsLoopbackListen(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) return true;
  absl::string_view host = listen;
  if (absl::StartsWith(host, "[")) {
    const size_t end = host.find(']');
    host = end == absl::string_view::npos ? host.substr(1) : host.substr(1, end - 1);
  } else if (const size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace bandit::server
