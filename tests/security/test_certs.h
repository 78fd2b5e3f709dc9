// Test certificates made at test time with the openssl CLI (no private key is committed):
// a CA, a server certificate for localhost/127.0.0.1, a client certificate from the same CA,
// and a "rogue" CA with its own client certificate.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/common/temp_dir.h"

namespace bandit::testing {

struct TestCerts {
  std::string dir;
  std::string ca_pem, server_pem, server_key, client_pem, client_key;
  std::string rogue_ca_pem, rogue_client_pem, rogue_client_key;
  bool ok = false;
  std::string error;

  static std::string Read(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  // Creates everything under a fresh temp dir; `ok` says whether openssl succeeded.
  static TestCerts Make() {
    TestCerts c;
    c.dir = bandit::testing::NewTempDir("bandit-certs");
    const std::string d = c.dir;
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    {
      std::ofstream ext(d + "/server.ext");
      ext << "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
             "extendedKeyUsage=serverAuth\n";
      std::ofstream cext(d + "/client.ext");
      cext << "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n";
    }
    auto ca = [&](const std::string& name) {
      return absl::StrCat("openssl req -x509 ", key, " -keyout ", d, "/", name, ".key -out ", d,
                          "/", name, ".pem -days 2 -subj /CN=", name, " 2>>", d, "/openssl.log");
    };
    auto leaf = [&](const std::string& name, const std::string& cn, const std::string& ca_name,
                    const std::string& ext) {
      return absl::StrCat("openssl req ", key, " -keyout ", d, "/", name, ".key -out ", d, "/",
                          name, ".csr -subj /CN=", cn, " 2>>", d,
                          "/openssl.log && openssl x509 -req -in ", d, "/", name, ".csr -CA ", d,
                          "/", ca_name, ".pem -CAkey ", d, "/", ca_name,
                          ".key -CAcreateserial -days 2 -extfile ", d, "/", ext, " -out ", d, "/",
                          name, ".pem 2>>", d, "/openssl.log");
    };
    const std::string script = absl::StrCat(
        ca("ca"), " && ", ca("rogue-ca"), " && ", leaf("server", "localhost", "ca", "server.ext"),
        " && ", leaf("client", "bandit-client", "ca", "client.ext"), " && ",
        leaf("rogue-client", "rogue-client", "rogue-ca", "client.ext"));
    if (std::system(script.c_str()) != 0) {
      c.error = "openssl failed (install the Debian package openssl): " + Read(d + "/openssl.log");
      return c;
    }
    c.ca_pem = d + "/ca.pem";
    c.server_pem = d + "/server.pem";
    c.server_key = d + "/server.key";
    c.client_pem = d + "/client.pem";
    c.client_key = d + "/client.key";
    c.rogue_ca_pem = d + "/rogue-ca.pem";
    c.rogue_client_pem = d + "/rogue-client.pem";
    c.rogue_client_key = d + "/rogue-client.key";
    c.ok = true;
    return c;
  }
  void Remove() const {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace bandit::testing
