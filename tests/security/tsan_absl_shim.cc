// ThreadSanitizer support for Debian's prebuilt Abseil (make sanitize, TSan build only).
//
// libabsl_synchronization.so is not built with -fsanitize=thread, so absl::Mutex (futex and
// atomics inside an uninstrumented library) creates no happens-before edges TSan can see, and
// every ABSL_GUARDED_BY field looks racy. This object is linked into each TSan executable (the
// linker exports the definitions the shared libraries reference, so gRPC's and Abseil's own calls
// bind to it too); it wraps the absl::Mutex, CondVar and
// absl::Notification entry points, calls the library's own implementation (dlsym RTLD_NEXT) and
// tells TSan what happened with its mutex annotation API. Mangled names are those of Debian 12's
// Abseil 20220623 (inline namespace `debian3`).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

template <typename Fn>
Fn Real(const char* mangled) {
  void* p = dlsym(RTLD_NEXT, mangled);
  if (p == nullptr) {
    std::fprintf(stderr, "tsan_absl_shim: %s not found: %s\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

#define REAL(type, mangled) static const auto real = Real<type>(mangled);

// Set while inside an absl::Notification call: the library locks and unlocks the
// Notification's own mutex, some of it through our exported wrappers and some not, so those
// operations are not annotated; the Notification wrappers annotate release/acquire instead.
thread_local int in_notification = 0;
struct NotificationScope {
  NotificationScope() { ++in_notification; }
  ~NotificationScope() { --in_notification; }
};

// A Condition is evaluated inside the library while it holds the mutex, but where TSan cannot
// see it held: by Await* between the annotated release and re-acquisition, by LockWhen* before
// the annotated acquisition, or on another thread that is handing the mutex over. Its reads are
// then checked against the writers' critical sections as if unlocked (false reports, e.g. a
// queue's empty() against the pop_front() of the thread that held the lock before). Conditions
// only read, and the caller's own accesses after the wait are checked under the lock, so the
// wrappers below evaluate the caller's condition with TSan's read checks off. The wrapping
// Condition takes the void* form, whose caller (Condition::CallVoidPtrFunction) is compiled in
// the library: the wrapper's own fields, on the waiter's stack, are read there unseen too.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
bool EvalUnchecked(void* cond) {
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  const bool r = static_cast<const absl::Condition*>(cond)->Eval();
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  return r;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  if (in_notification) return real(this);
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  if (in_notification) return real(this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  if (in_notification) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool ok = real(this);
  __tsan_mutex_post_lock(this, ok ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return ok;
}

void Mutex::ReaderLock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  if (in_notification) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  if (in_notification) return real(this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  if (in_notification) return real(this);
  const unsigned f = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, f);
  const bool ok = real(this);
  __tsan_mutex_post_lock(this, ok ? f : (f | __tsan_mutex_try_lock_failed), 0);
  return ok;
}

// CondVar waits release the mutex while blocked and hold it again on return (gRPC's gpr_cv_wait
// uses these through the same exported symbols). WaitWithTimeout calls WaitWithDeadline through
// the interposed symbol, so only the outermost wrapper annotates.
thread_local int cv_depth = 0;
struct CvScope {
  Mutex* mu;
  bool outer;
  explicit CvScope(Mutex* m) : mu(m), outer(cv_depth++ == 0) {
    if (outer) {
      __tsan_mutex_pre_unlock(mu, 0);
      __tsan_mutex_post_unlock(mu, 0);
    }
  }
  ~CvScope() {
    --cv_depth;
    if (outer) {
      __tsan_mutex_pre_lock(mu, 0);
      __tsan_mutex_post_lock(mu, 0, 0);
    }
  }
};
void CondVar::Wait(Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  CvScope scope(mu);
  real(this, mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
       "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  CvScope scope(mu);
  return real(this, mu, timeout);
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  REAL(bool (*)(CondVar*, Mutex*, absl::Time),
       "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  CvScope scope(mu);
  return real(this, mu, deadline);
}

// LockWhen*: return holding the lock (whatever the condition's outcome).
void Mutex::LockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  if (in_notification) return real(this, cond);
  __tsan_mutex_pre_lock(this, 0);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  real(this, unchecked);
  __tsan_mutex_post_lock(this, 0, 0);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  if (in_notification) return real(this, cond, timeout);
  __tsan_mutex_pre_lock(this, 0);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  const bool r = real(this, unchecked, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return r;
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  if (in_notification) return real(this, cond, deadline);
  __tsan_mutex_pre_lock(this, 0);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  const bool r = real(this, unchecked, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return r;
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  if (in_notification) return real(this, cond);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  real(this, unchecked);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}
// Await*: called holding the lock; release it while waiting.
void Mutex::Await(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  CvScope scope(this);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  real(this, unchecked);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
       "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  CvScope scope(this);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  return real(this, unchecked, timeout);
}
bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, absl::Time),
       "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  CvScope scope(this);
  const Condition unchecked(&EvalUnchecked, const_cast<Condition*>(&cond));
  return real(this, unchecked, deadline);
}

void Notification::Notify() {
  REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  NotificationScope scope;
  real(this);
}

void Notification::WaitForNotification() const {
  REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  {
    NotificationScope scope;
    real(this);
  }
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  REAL(bool (*)(const Notification*, absl::Duration),
       "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  bool ok;
  {
    NotificationScope scope;
    ok = real(this, timeout);
  }
  if (ok) __tsan_acquire(const_cast<Notification*>(this));
  return ok;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  REAL(bool (*)(const Notification*, absl::Time),
       "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  bool ok;
  {
    NotificationScope scope;
    ok = real(this, deadline);
  }
  if (ok) __tsan_acquire(const_cast<Notification*>(this));
  return ok;
}

ABSL_NAMESPACE_END
}  // namespace absl
