#include "server/api/message_pool.h"

#include <grpcpp/support/proto_buffer_reader.h>

namespace bandit::server {
namespace {

// The field number of the first field of a serialized message, or 0 when there is none.
int FirstField(grpc::ByteBuffer* in) {
  grpc::ProtoBufferReader reader(in);
  const void* data = nullptr;
  int size = 0;
  while (reader.Next(&data, &size)) {
    if (size == 0) continue;
    // The tag is a varint (field << 3 | wire type); the oneof's fields are 1..15, one byte.
    const auto first = *static_cast<const unsigned char*>(data);
    return first < 0x80 ? first >> 3 : 0;
  }
  return 0;
}

template <typename M>
void TakeBack(std::unique_ptr<M>* kept, M* released, size_t max_kept_bytes) {
  if (released == nullptr) return;
  if (!Keepable(*released, max_kept_bytes)) {
    delete released;
    return;
  }
  released->Clear();
  kept->reset(released);
}

}  // namespace

RoundMessages::RoundMessages(Pool* owner) : owner_(owner) {
  set_request(&request_);
  set_response(&response_);
}

grpc::Status RoundMessages::Parse(grpc::ByteBuffer* in) {
  // The request is empty (Reset) but for the message lent below, which a payload whose first
  // field is of that kind would make anyway: merging the payload into it is parsing it (a
  // later field of the other kind deletes it, as it would a parsed one). Parse* would clear it.
  switch (FirstField(in)) {
    case bandit::v1::RoundRequest::kSelectFieldNumber:
      if (select_) request_.set_allocated_select(select_.release());
      break;
    case bandit::v1::RoundRequest::kUpdateFieldNumber:
      if (update_) request_.set_allocated_update(update_.release());
      break;
    default:
      break;
  }
  // As grpc::SerializationTraits<Message>::Deserialize, merging.
  const int size = static_cast<int>(in->Length());
  grpc::ProtoBufferReader reader(in);
  if (!reader.status().ok()) return reader.status();
  grpc::Status status;
  if (!request_.MergeFromBoundedZeroCopyStream(&reader, size))
    status = grpc::Status(grpc::StatusCode::INTERNAL, request_.InitializationErrorString());
  in->Clear();
  return status;
}

void RoundMessages::LendResult() {
  switch (request_.call_case()) {
    case bandit::v1::RoundRequest::kSelect:
      if (decision_) response_.set_allocated_decision(decision_.release());
      break;
    case bandit::v1::RoundRequest::kUpdate:
      if (update_result_) response_.set_allocated_update(update_result_.release());
      break;
    default:
      break;
  }
}

void RoundMessages::Reset(size_t max_kept_bytes) {
  if (request_.has_select()) TakeBack(&select_, request_.release_select(), max_kept_bytes);
  if (request_.has_update()) TakeBack(&update_, request_.release_update(), max_kept_bytes);
  if (response_.has_decision())
    TakeBack(&decision_, response_.release_decision(), max_kept_bytes);
  if (response_.has_update())
    TakeBack(&update_result_, response_.release_update(), max_kept_bytes);
  request_.Clear();
  response_.Clear();
}

void RoundMessages::Release() { owner_->pool_.Recycle(this); }

}  // namespace bandit::server
