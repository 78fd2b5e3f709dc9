// A message's bytes serialized deterministically (map entries in key order), so that equal
// messages give equal bytes: how the tests compare two saved states. Free of gtest.
#pragma once

#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>

namespace bandit::testing {

inline std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }  // the stream's destructor trims `out` to what was written
  return out;
}

}  // namespace bandit::testing
