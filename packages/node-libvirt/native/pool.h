// The call pool: libvirt calls run on the addon's own threads and settle a Promise on the JS thread.
#pragma once
#include "common.h"

namespace kvts {

// ---------------------------------------------------------------------------------------------
// call pool: libvirt calls run on the addon's own threads, not libuv's pool, so calls that wait long
// (a migration, a hung daemon until keepalive gives up) never starve Node's fs/dns/crypto work.

using Job = std::function<Builder(virConnectPtr)>;

struct Call {
  explicit Call(Napi::Env env) : deferred(Napi::Promise::Deferred::New(env)) {}
  Job job;
  virConnectPtr conn = nullptr;  // the call's own reference, dropped on the pool thread
  Builder builder;
  LvError err;
  bool failed = false;
  Napi::Promise::Deferred deferred;  // JS thread only
  Napi::ObjectReference receiver;    // keeps the JS connection object alive while the call runs
};

class Pool;
inline void completeCall(Napi::Env env, Napi::Function, Pool* pool, Call* call);
using DoneTsfn = Napi::TypedThreadSafeFunction<Pool, Call, completeCall>;

// One per JS environment (main thread or worker_thread). Threads are started on demand up to `max`
// and then kept; they are detached, never joined (one may sit in a libvirt call at process exit).
class Pool {
 public:
  Pool(Napi::Env env, size_t max) : max_(max) {
    tsfn_ = DoneTsfn::New(env, "libvirt-calls", 0, 1, this);
    tsfn_.Unref(env);  // only pending calls keep the process alive
  }

  Napi::Promise Submit(Napi::Env env, Napi::Object receiver, virConnectPtr conn, Job job) {
    auto* c = new Call(env);
    c->job = std::move(job);
    if (conn) {
      virConnectRef(conn);
      c->conn = conn;
    }
    c->receiver = Napi::Persistent(receiver);
    if (pending_++ == 0) tsfn_.Ref(env);
    {
      std::lock_guard<std::mutex> g(mu_);
      queue_.push_back(c);
      if (idle_ < queue_.size() && threads_ < max_) {
        threads_++;
        std::thread([this] { Run(); }).detach();
      }
    }
    cv_.notify_one();
    return c->deferred.Promise();
  }

  // JS thread
  void Done(Napi::Env env, Call* c) {
    if (--pending_ == 0) tsfn_.Unref(env);
    Napi::HandleScope scope(env);
    if (c->failed) {
      c->deferred.Reject(makeError(env, c->err));
    } else {
      try {
        c->deferred.Resolve(c->builder ? c->builder(env) : env.Undefined());
      } catch (const Napi::Error& e) {
        c->deferred.Reject(e.Value());
      }
    }
    c->receiver.Reset();
    delete c;
  }

 private:
  void Run() {
    for (;;) {
      Call* c;
      {
        std::unique_lock<std::mutex> l(mu_);
        idle_++;
        cv_.wait(l, [this] { return !queue_.empty(); });
        idle_--;
        c = queue_.front();
        queue_.pop_front();
      }
      Execute(c);
      if (tsfn_.BlockingCall(c) != napi_ok) {
        // the JS environment is gone: nothing can settle the promise any more
        c->receiver.SuppressDestruct();
      }
    }
  }

  static void Execute(Call* c) {
    try {
      c->builder = c->job(c->conn);
    } catch (const LvException& ex) {
      c->err = ex.e;
      c->failed = true;
    } catch (const std::exception& ex) {
      c->err = LvError{-1, 0, ex.what()};
      c->failed = true;
    }
    c->job = nullptr;
    if (c->conn) {
      virConnectClose(c->conn);  // drop the call's reference (may be the last one)
      c->conn = nullptr;
      virResetLastError();
    }
  }

  DoneTsfn tsfn_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call*> queue_;
  size_t threads_ = 0;
  size_t idle_ = 0;
  size_t max_;
  size_t pending_ = 0;  // JS thread only
};

inline void completeCall(Napi::Env env, Napi::Function, Pool* pool, Call* call) {
  if (!env) {
    call->receiver.SuppressDestruct();
    return;  // environment torn down: leak the call rather than touch JS state
  }
  pool->Done(env, call);
}

inline void keepPool(Napi::Env, Pool*) {}  // pool threads may still reference it: never freed

inline Pool& pool(Napi::Env env) {
  Pool* p = env.GetInstanceData<Pool>();
  if (!p) {
    size_t max = 32;
    if (const char* v = getenv("KVTS_LIBVIRT_THREADS")) {
      long n = strtol(v, nullptr, 10);
      if (n > 0 && n <= 1024) max = static_cast<size_t>(n);
    }
    p = new Pool(env, max);
    env.SetInstanceData<Pool, keepPool>(p);
  }
  return *p;
}

}  // namespace kvts
