#ifndef BANDIT_SERVER_VERSION_H_
#define BANDIT_SERVER_VERSION_H_

namespace bandit::server {

// The release version (CMake's PROJECT_VERSION) and the short commit the build was configured at.
// Defined in a file generated at configure time (server/env/version.cc.in).
extern const char* const kVersion;
extern const char* const kGitSha;

}  // namespace bandit::server

#endif  // BANDIT_SERVER_VERSION_H_
