// Shared by the binding's parts (included by binding.cc, one translation unit): libvirt errors as thrown
// values, and values read off the JS thread that become JS values on it.
#pragma once
#include <napi.h>
#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvts {

// ---------------------------------------------------------------------------------------------
// errors

struct LvError {
  int code = 0;
  int domain = 0;
  std::string message;
};

struct LvException {
  LvError e;
};

// Reads the calling thread's last libvirt error (thread-local in libvirt) and throws it.
[[noreturn]] inline void fail(const char* what = nullptr) {
  LvError e;
  virErrorPtr err = virGetLastError();
  if (err && err->code != VIR_ERR_OK) {
    e.code = err->code;
    e.domain = err->domain;
    e.message = err->message ? err->message : "libvirt error";
  } else {
    e.code = -1;
    e.message = std::string(what ? what : "libvirt call") + " failed without a libvirt error";
  }
  virResetLastError();
  throw LvException{e};
}


inline Napi::Value makeError(Napi::Env env, const LvError& e) {
  Napi::Error err = Napi::Error::New(env, e.message);
  Napi::Object o = err.Value();
  o.Set("code", Napi::Number::New(env, e.code));
  o.Set("domain", Napi::Number::New(env, e.domain));
  o.Set("libvirtMessage", Napi::String::New(env, e.message));
  return o;
}

inline void silentErrorHandler(void*, virErrorPtr) {}

// ---------------------------------------------------------------------------------------------
// values built off-thread, turned into JS values on the JS thread

using Builder = std::function<Napi::Value(Napi::Env)>;

struct TParam {
  std::string field;
  int type = 0;
  double num = 0;
  bool b = false;
  std::string str;
};
using TParams = std::vector<TParam>;

inline TParams copyParams(virTypedParameterPtr params, int n) {
  TParams out;
  for (int i = 0; i < n; i++) {
    TParam p;
    p.field = params[i].field;
    p.type = params[i].type;
    switch (params[i].type) {
      case VIR_TYPED_PARAM_INT: p.num = params[i].value.i; break;
      case VIR_TYPED_PARAM_UINT: p.num = params[i].value.ui; break;
      case VIR_TYPED_PARAM_LLONG: p.num = static_cast<double>(params[i].value.l); break;
      case VIR_TYPED_PARAM_ULLONG: p.num = static_cast<double>(params[i].value.ul); break;
      case VIR_TYPED_PARAM_DOUBLE: p.num = params[i].value.d; break;
      case VIR_TYPED_PARAM_BOOLEAN: p.b = params[i].value.b != 0; break;
      case VIR_TYPED_PARAM_STRING: p.str = params[i].value.s ? params[i].value.s : ""; break;
      default: continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

inline Napi::Object paramsToJs(Napi::Env env, const TParams& ps) {
  Napi::Object o = Napi::Object::New(env);
  for (const auto& p : ps) {
    if (p.type == VIR_TYPED_PARAM_STRING) {
      // Some params (e.g. migration disk lists) may repeat: collect repeats into an array.
      if (o.Has(p.field)) {
        Napi::Value prev = o.Get(p.field);
        Napi::Array arr;
        if (prev.IsArray()) {
          arr = prev.As<Napi::Array>();
        } else {
          arr = Napi::Array::New(env);
          arr.Set(0u, prev);
        }
        arr.Set(arr.Length(), Napi::String::New(env, p.str));
        o.Set(p.field, arr);
      } else {
        o.Set(p.field, Napi::String::New(env, p.str));
      }
    } else if (p.type == VIR_TYPED_PARAM_BOOLEAN) {
      o.Set(p.field, Napi::Boolean::New(env, p.b));
    } else {
      o.Set(p.field, Napi::Number::New(env, p.num));
    }
  }
  return o;
}

inline Builder str(std::string s) {
  return [s = std::move(s)](Napi::Env env) -> Napi::Value { return Napi::String::New(env, s); };
}
inline Builder num(double d) {
  return [d](Napi::Env env) -> Napi::Value { return Napi::Number::New(env, d); };
}
inline Builder boolean(bool b) {
  return [b](Napi::Env env) -> Napi::Value { return Napi::Boolean::New(env, b); };
}
inline Builder undef() {
  return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
}

// Takes ownership of a malloc'ed libvirt string.
inline std::string takeString(char* s) {
  std::string out(s ? s : "");
  free(s);
  return out;
}

struct DomRef {
  std::string name;
  std::string uuid;
};

inline DomRef domRef(virDomainPtr d) {
  DomRef r;
  const char* n = virDomainGetName(d);
  r.name = n ? n : "";
  char uuid[VIR_UUID_STRING_BUFLEN] = {0};
  if (virDomainGetUUIDString(d, uuid) == 0) r.uuid = uuid;
  return r;
}

inline Napi::Object domRefToJs(Napi::Env env, const DomRef& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", Napi::String::New(env, r.name));
  o.Set("uuid", Napi::String::New(env, r.uuid));
  return o;
}

struct DomainHandle {
  virDomainPtr d = nullptr;
  DomainHandle(virConnectPtr c, const std::string& uuid) {
    d = virDomainLookupByUUIDString(c, uuid.c_str());
    if (!d) fail("virDomainLookupByUUIDString");
  }
  ~DomainHandle() {
    if (d) virDomainFree(d);
  }
  DomainHandle(const DomainHandle&) = delete;
  DomainHandle& operator=(const DomainHandle&) = delete;
};

// Returns a builder for { name, uuid } and frees the handle.
inline Builder domResult(virDomainPtr d) {
  if (!d) fail();
  DomRef r = domRef(d);
  virDomainFree(d);
  return [r](Napi::Env env) -> Napi::Value { return domRefToJs(env, r); };
}


}  // namespace kvts
