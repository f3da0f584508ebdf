// Domain events and the connection close callback (libvirt's event loop thread -> JS through a
// ThreadSafeFunction), and the process-wide libvirt init that starts that loop.
#pragma once
#include "common.h"

namespace kvts {

// ---------------------------------------------------------------------------------------------
// events

struct EventData {
  std::string type;  // 'lifecycle', 'reboot', ..., 'close'
  DomRef dom;
  bool hasDom = true;
  std::vector<std::pair<std::string, double>> nums;
  std::vector<std::pair<std::string, std::string>> strs;
  TParams params;
  bool hasParams = false;
};

inline void deliverEvent(Napi::Env env, Napi::Function cb, std::nullptr_t*, EventData* data) {
  std::unique_ptr<EventData> ev(data);
  if (!env || !cb) return;
  Napi::HandleScope scope(env);
  Napi::Object o = Napi::Object::New(env);
  if (ev->hasDom) o.Set("domain", domRefToJs(env, ev->dom));
  for (auto& kv : ev->nums) o.Set(kv.first, Napi::Number::New(env, kv.second));
  for (auto& kv : ev->strs) o.Set(kv.first, Napi::String::New(env, kv.second));
  if (ev->hasParams) o.Set("params", paramsToJs(env, ev->params));
  cb.Call({Napi::String::New(env, ev->type), o});
}

using EventTsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, EventData, deliverEvent>;

// Shared between the JS thread and libvirt's event loop thread. Freed when the owner and every
// registered libvirt callback (via its free callback) have let go of it.
struct EventCtx {
  std::mutex mu;
  bool closed = false;
  EventTsfn tsfn;
  int refs = 1;

  void ref() {
    std::lock_guard<std::mutex> g(mu);
    refs++;
  }
  void unref() {
    bool del;
    {
      std::lock_guard<std::mutex> g(mu);
      del = --refs == 0;
    }
    if (del) delete this;
  }
  void emit(EventData* ev) {
    std::lock_guard<std::mutex> g(mu);
    if (closed) {
      delete ev;
      return;
    }
    if (tsfn.NonBlockingCall(ev) != napi_ok) delete ev;
  }
  // Environment teardown: stop delivering; the thread-safe function is finalized by Node.
  void abandon() {
    std::lock_guard<std::mutex> g(mu);
    closed = true;
  }
  // JS thread: stop delivering, release the thread-safe function.
  void shutdown() {
    std::lock_guard<std::mutex> g(mu);
    if (closed) return;
    closed = true;
    tsfn.Release();
  }
};

inline void freeCtx(void* opaque) { static_cast<EventCtx*>(opaque)->unref(); }

inline EventData* newEvent(const char* type, virDomainPtr dom) {
  auto* ev = new EventData();
  ev->type = type;
  if (dom) ev->dom = domRef(dom);
  return ev;
}

inline int onLifecycle(virConnectPtr, virDomainPtr dom, int event, int detail, void* opaque) {
  auto* ev = newEvent("lifecycle", dom);
  ev->nums = {{"event", event}, {"detail", detail}};
  static_cast<EventCtx*>(opaque)->emit(ev);
  return 0;
}
inline void onReboot(virConnectPtr, virDomainPtr dom, void* opaque) {
  static_cast<EventCtx*>(opaque)->emit(newEvent("reboot", dom));
}
inline void onAgentLifecycle(virConnectPtr, virDomainPtr dom, int state, int reason, void* opaque) {
  auto* ev = newEvent("agentLifecycle", dom);
  ev->nums = {{"state", state}, {"reason", reason}};
  static_cast<EventCtx*>(opaque)->emit(ev);
}
inline void onDeviceRemoved(virConnectPtr, virDomainPtr dom, const char* alias, void* opaque) {
  auto* ev = newEvent("deviceRemoved", dom);
  ev->strs = {{"devAlias", alias ? alias : ""}};
  static_cast<EventCtx*>(opaque)->emit(ev);
}
inline void onDeviceAdded(virConnectPtr, virDomainPtr dom, const char* alias, void* opaque) {
  auto* ev = newEvent("deviceAdded", dom);
  ev->strs = {{"devAlias", alias ? alias : ""}};
  static_cast<EventCtx*>(opaque)->emit(ev);
}
inline void onDeviceRemovalFailed(virConnectPtr, virDomainPtr dom, const char* alias, void* opaque) {
  auto* ev = newEvent("deviceRemovalFailed", dom);
  ev->strs = {{"devAlias", alias ? alias : ""}};
  static_cast<EventCtx*>(opaque)->emit(ev);
}
inline void onJobCompleted(virConnectPtr, virDomainPtr dom, virTypedParameterPtr params, int n, void* opaque) {
  auto* ev = newEvent("jobCompleted", dom);
  ev->params = copyParams(params, n);
  ev->hasParams = true;
  static_cast<EventCtx*>(opaque)->emit(ev);
}
inline void onMigrationIteration(virConnectPtr, virDomainPtr dom, int iteration, void* opaque) {
  auto* ev = newEvent("migrationIteration", dom);
  ev->nums = {{"iteration", iteration}};
  static_cast<EventCtx*>(opaque)->emit(ev);
}
inline void onClose(virConnectPtr, int reason, void* opaque) {
  auto* ev = newEvent("close", nullptr);
  ev->hasDom = false;
  ev->nums = {{"reason", reason}};
  static_cast<EventCtx*>(opaque)->emit(ev);
}

struct EventReg {
  int id;
  virConnectDomainEventGenericCallback cb;
};

inline const std::vector<EventReg>& eventRegs() {
  static const std::vector<EventReg> regs = {
      {VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(onLifecycle)},
      {VIR_DOMAIN_EVENT_ID_REBOOT, VIR_DOMAIN_EVENT_CALLBACK(onReboot)},
      {VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(onAgentLifecycle)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, VIR_DOMAIN_EVENT_CALLBACK(onDeviceRemoved)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, VIR_DOMAIN_EVENT_CALLBACK(onDeviceAdded)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED, VIR_DOMAIN_EVENT_CALLBACK(onDeviceRemovalFailed)},
      {VIR_DOMAIN_EVENT_ID_JOB_COMPLETED, VIR_DOMAIN_EVENT_CALLBACK(onJobCompleted)},
      {VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION, VIR_DOMAIN_EVENT_CALLBACK(onMigrationIteration)},
  };
  return regs;
}

// ---------------------------------------------------------------------------------------------
// process-wide init: libvirt + default event loop on a native thread

inline std::once_flag initOnce;
inline LvError initError;
inline bool initFailed = false;

inline void initLibvirt() {
  std::call_once(initOnce, [] {
    if (virInitialize() < 0) {
      initFailed = true;
      initError = LvError{-1, 0, "virInitialize failed"};
      return;
    }
    virSetErrorFunc(nullptr, silentErrorHandler);
    if (virEventRegisterDefaultImpl() < 0) {
      initFailed = true;
      initError = LvError{-1, 0, "virEventRegisterDefaultImpl failed"};
      return;
    }
    std::thread([] {
      for (;;) {
        if (virEventRunDefaultImpl() < 0) virResetLastError();
      }
    }).detach();
  });
}

}  // namespace kvts
