// Transport security for the gRPC port: server certificate + key, and optionally a client CA
// that every client certificate must chain to (mutual TLS).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "server/env/file_system.h"

namespace bandit::server {

struct TlsOptions {
  std::string cert_path;       // PEM certificate chain; empty = plaintext (insecure)
  std::string key_path;        // PEM private key
  std::string client_ca_path;  // PEM CA bundle; set = clients must present a certificate it signed
  bool enabled() const { return !cert_path.empty(); }
};

// Insecure credentials when TLS is off; otherwise reads the files and builds SSL credentials.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& tls, FileSystem* fs = PosixFileSystem());

// True for 127.0.0.0/8, ::1, localhost and unix sockets: addresses no other machine can reach.
bool IsLoopbackListen(absl::string_view listen);

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what,
                                         FileSystem* fs = PosixFileSystem());

}  // namespace bandit::server
