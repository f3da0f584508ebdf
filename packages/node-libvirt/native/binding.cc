// N-API binding to libvirt for @kubevirt-ts/node-libvirt.
//
// Design:
// - One native class, Conn, wrapping a virConnectPtr. Every libvirt call that may block runs on the
//   addon's own thread pool (see Pool) and settles a Promise. Each call takes its own reference on the
//   connection (virConnectRef) and drops it off the JS thread, so closing never blocks JS.
// - Domains are addressed by UUID string: each domain call looks the domain up, runs, and frees the
//   handle inside the same pool job. No native domain handles live in JS, so closing a connection really
//   closes it (nothing is kept alive by unreachable-but-not-collected JS objects).
// - libvirt's default event loop implementation runs on one native thread for the whole process.
//   Domain events and the connection close callback go to JS through a Napi::ThreadSafeFunction.
// - Errors are read with virGetLastError() in the thread that made the failing call (libvirt keeps the
//   last error thread-locally) and become { code, domain, message } on the JS side.
//
// Files: common.h (errors, off-thread values), pool.h (the call pool), events.h (domain events, the
// event loop thread, process-wide init), this file (argument helpers, the Conn class, the module).
#include "events.h"
#include "pool.h"

namespace {

using namespace kvts;

// ---------------------------------------------------------------------------------------------
// argument helpers (JS thread)

std::string argStr(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (i >= info.Length() || !info[i].IsString())
    throw Napi::TypeError::New(info.Env(), std::string(name) + ": expected a string");
  return info[i].As<Napi::String>().Utf8Value();
}
unsigned int argFlags(const Napi::CallbackInfo& info, size_t i) {
  if (i >= info.Length() || info[i].IsUndefined() || info[i].IsNull()) return 0;
  if (!info[i].IsNumber()) throw Napi::TypeError::New(info.Env(), "flags: expected a number");
  return info[i].As<Napi::Number>().Uint32Value();
}
double argNum(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (i >= info.Length() || !info[i].IsNumber())
    throw Napi::TypeError::New(info.Env(), std::string(name) + ": expected a number");
  return info[i].As<Napi::Number>().DoubleValue();
}

// ---------------------------------------------------------------------------------------------
// Conn

class Conn : public Napi::ObjectWrap<Conn> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(
        env, "NativeConnection",
        {
            InstanceMethod("open", &Conn::Open),
            InstanceMethod("close", &Conn::Close),
            InstanceMethod("isAlive", &Conn::IsAlive),
            InstanceMethod("isOpen", &Conn::IsOpen),
            InstanceMethod("ref", &Conn::Ref),
            InstanceMethod("unref", &Conn::Unref),
            InstanceMethod("getLibVersion", &Conn::GetLibVersion),
            InstanceMethod("getVersion", &Conn::GetVersion),
            InstanceMethod("getHostname", &Conn::GetHostname),
            InstanceMethod("getURI", &Conn::GetURI),
            InstanceMethod("getCapabilities", &Conn::GetCapabilities),
            InstanceMethod("getDomainCapabilities", &Conn::GetDomainCapabilities),
            InstanceMethod("defineXML", &Conn::DefineXML),
            InstanceMethod("createXML", &Conn::CreateXML),
            InstanceMethod("lookupDomainByName", &Conn::LookupByName),
            InstanceMethod("lookupDomainByUUID", &Conn::LookupByUUID),
            InstanceMethod("listAllDomains", &Conn::ListAllDomains),
            InstanceMethod("getAllDomainStats", &Conn::GetAllDomainStats),
            InstanceMethod("domainGetState", &Conn::DomGetState),
            InstanceMethod("domainGetXMLDesc", &Conn::DomGetXMLDesc),
            InstanceMethod("domainGetID", &Conn::DomGetID),
            InstanceMethod("domainIsActive", &Conn::DomIsActive),
            InstanceMethod("domainIsPersistent", &Conn::DomIsPersistent),
            InstanceMethod("domainCreate", &Conn::DomCreate),
            InstanceMethod("domainSuspend", &Conn::DomSuspend),
            InstanceMethod("domainResume", &Conn::DomResume),
            InstanceMethod("domainShutdown", &Conn::DomShutdown),
            InstanceMethod("domainReboot", &Conn::DomReboot),
            InstanceMethod("domainReset", &Conn::DomReset),
            InstanceMethod("domainDestroy", &Conn::DomDestroy),
            InstanceMethod("domainUndefine", &Conn::DomUndefine),
            InstanceMethod("domainGetInfo", &Conn::DomGetInfo),
            InstanceMethod("domainSetTime", &Conn::DomSetTime),
            InstanceMethod("domainMemoryStats", &Conn::DomMemoryStats),
            InstanceMethod("domainBlockStats", &Conn::DomBlockStats),
            InstanceMethod("domainInterfaceStats", &Conn::DomInterfaceStats),
            InstanceMethod("domainQemuAgentCommand", &Conn::DomQemuAgentCommand),
            InstanceMethod("domainFSFreeze", &Conn::DomFSFreeze),
            InstanceMethod("domainFSThaw", &Conn::DomFSThaw),
            InstanceMethod("domainAttachDevice", &Conn::DomAttachDevice),
            InstanceMethod("domainDetachDevice", &Conn::DomDetachDevice),
            InstanceMethod("domainGetJobStats", &Conn::DomGetJobStats),
            InstanceMethod("domainAbortJob", &Conn::DomAbortJob),
            InstanceMethod("domainMigrateToURI3", &Conn::DomMigrateToURI3),
            InstanceMethod("domainMigrateSetMaxSpeed", &Conn::DomMigrateSetMaxSpeed),
            InstanceMethod("domainMigrateSetMaxDowntime", &Conn::DomMigrateSetMaxDowntime),
            InstanceMethod("domainMigrateStartPostCopy", &Conn::DomMigrateStartPostCopy),
            InstanceMethod("domainSetMemory", &Conn::DomSetMemory),
            InstanceMethod("domainSetVcpus", &Conn::DomSetVcpus),
            InstanceMethod("domainGetGuestInfo", &Conn::DomGetGuestInfo),
            InstanceMethod("domainInterfaceAddresses", &Conn::DomInterfaceAddresses),
        });
  }

  Conn(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Conn>(info) {}

  ~Conn() override {
    // Only reached without close() when the JS environment is torn down (an open connection's event
    // function references this object): Node finalizes the thread-safe function itself then, so only
    // stop delivering. The libvirt connection is left to process exit (closing may do RPC).
    if (ctx_) {
      ctx_->abandon();
      ctx_->unref();
      ctx_ = nullptr;
    }
  }

 private:
  virConnectPtr conn_ = nullptr;
  bool opening_ = false;
  EventCtx* ctx_ = nullptr;
  std::vector<int> callbackIds_;
  bool closeCbRegistered_ = false;

  Napi::Value Reject(Napi::Env env, const std::string& msg) {
    auto d = Napi::Promise::Deferred::New(env);
    d.Reject(makeError(env, LvError{-1, 0, msg}));
    return d.Promise();
  }

  Napi::Value Queue(const Napi::CallbackInfo& info, Job job) {
    if (!conn_) return Reject(info.Env(), "libvirt connection is closed");
    return pool(info.Env()).Submit(info.Env(), info.This().As<Napi::Object>(), conn_, std::move(job));
  }

  // A job on one domain looked up by UUID (argument 0).
  Napi::Value QueueDom(const Napi::CallbackInfo& info, std::function<Builder(virDomainPtr)> fn) {
    std::string uuid = argStr(info, 0, "uuid");
    return Queue(info, [uuid, fn = std::move(fn)](virConnectPtr c) -> Builder {
      DomainHandle h(c, uuid);
      return fn(h.d);
    });
  }

  // Whether pending event delivery keeps the Node process alive (like a socket's ref/unref).
  Napi::Value Ref(const Napi::CallbackInfo& info) {
    if (ctx_) {
      std::lock_guard<std::mutex> g(ctx_->mu);
      if (!ctx_->closed) ctx_->tsfn.Ref(info.Env());
    }
    return info.Env().Undefined();
  }
  Napi::Value Unref(const Napi::CallbackInfo& info) {
    if (ctx_) {
      std::lock_guard<std::mutex> g(ctx_->mu);
      if (!ctx_->closed) ctx_->tsfn.Unref(info.Env());
    }
    return info.Env().Undefined();
  }

  // open(uri, readOnly, onEvent, keepAliveInterval, keepAliveCount)
  Napi::Value Open(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (initFailed) return Reject(env, initError.message);
    if (conn_ || opening_) return Reject(env, "connection already open");
    std::string uri = argStr(info, 0, "uri");
    bool readOnly = info.Length() > 1 && info[1].ToBoolean().Value();
    if (info.Length() < 3 || !info[2].IsFunction()) throw Napi::TypeError::New(env, "onEvent: expected a function");
    int kaInterval = info.Length() > 3 && info[3].IsNumber() ? info[3].As<Napi::Number>().Int32Value() : 5;
    unsigned int kaCount = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().Uint32Value() : 3;
    auto* ctx = new EventCtx();
    ctx->tsfn = EventTsfn::New(env, info[2].As<Napi::Function>(), "libvirt-events", 0, 1, nullptr);
    opening_ = true;
    Napi::Object self = info.This().As<Napi::Object>();
    Job job = [this, uri, readOnly, ctx, kaInterval, kaCount](virConnectPtr) -> Builder {
      virConnectPtr c = readOnly ? virConnectOpenReadOnly(uri.c_str()) : virConnectOpen(uri.c_str());
      // On failure the promise rejects and the JS layer calls close(), which shuts ctx down.
      if (!c) fail("virConnectOpen");
      std::vector<int> ids;
      for (const auto& r : eventRegs()) {
        ctx->ref();
        int id = virConnectDomainEventRegisterAny(c, nullptr, r.id, r.cb, ctx, freeCtx);
        if (id < 0) {
          ctx->unref();
          virResetLastError();
          continue;
        }
        ids.push_back(id);
      }
      bool closeCb = false;
      ctx->ref();
      if (virConnectRegisterCloseCallback(c, onClose, ctx, freeCtx) == 0) {
        closeCb = true;
      } else {
        ctx->unref();
        virResetLastError();
      }
      // Detect a dead or hung peer (remote connections only; local drivers say unsupported): after
      // interval * (count + 1) seconds without an answer the connection closes and pending calls fail.
      if (kaInterval > 0 && virConnectSetKeepAlive(c, kaInterval, kaCount) < 0) virResetLastError();
      return [this, c, ids, closeCb](Napi::Env env) -> Napi::Value {
        conn_ = c;
        opening_ = false;
        callbackIds_ = ids;
        closeCbRegistered_ = closeCb;
        return env.Undefined();
      };
    };
    ctx_ = ctx;
    return pool(env).Submit(env, self, nullptr, std::move(job));
  }

  // close(): stop events, deregister callbacks and drop the connection, off the JS thread.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    virConnectPtr c = conn_;
    EventCtx* ctx = ctx_;
    conn_ = nullptr;
    ctx_ = nullptr;
    opening_ = false;
    if (ctx) ctx->shutdown();
    auto d = Napi::Promise::Deferred::New(env);
    if (!c) {
      if (ctx) ctx->unref();
      d.Resolve(env.Undefined());
      return d.Promise();
    }
    std::vector<int> ids = callbackIds_;
    bool closeCb = closeCbRegistered_;
    callbackIds_.clear();
    closeCbRegistered_ = false;
    Job job = [c, ctx, ids, closeCb](virConnectPtr) -> Builder {
      for (int id : ids) {
        if (virConnectDomainEventDeregisterAny(c, id) < 0) virResetLastError();
      }
      if (closeCb && virConnectUnregisterCloseCallback(c, onClose) < 0) virResetLastError();
      int left = virConnectClose(c);
      if (left < 0) virResetLastError();
      if (ctx) ctx->unref();
      return num(left);
    };
    return pool(env).Submit(env, info.This().As<Napi::Object>(), nullptr, std::move(job));
  }

  // Local checks, no RPC: safe on the JS thread.
  Napi::Value IsAlive(const Napi::CallbackInfo& info) {
    if (!conn_) return Napi::Boolean::New(info.Env(), false);
    int r = virConnectIsAlive(conn_);
    if (r < 0) virResetLastError();
    return Napi::Boolean::New(info.Env(), r == 1);
  }
  Napi::Value IsOpen(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), conn_ != nullptr); }

  Napi::Value GetLibVersion(const Napi::CallbackInfo& info) {
    return Queue(info, [](virConnectPtr c) -> Builder {
      unsigned long v = 0;
      if (virConnectGetLibVersion(c, &v) < 0) fail();
      return num(v);
    });
  }
  Napi::Value GetVersion(const Napi::CallbackInfo& info) {
    return Queue(info, [](virConnectPtr c) -> Builder {
      unsigned long v = 0;
      if (virConnectGetVersion(c, &v) < 0) fail();
      return num(v);
    });
  }
  Napi::Value GetHostname(const Napi::CallbackInfo& info) {
    return Queue(info, [](virConnectPtr c) -> Builder {
      char* s = virConnectGetHostname(c);
      if (!s) fail();
      return str(takeString(s));
    });
  }
  Napi::Value GetURI(const Napi::CallbackInfo& info) {
    return Queue(info, [](virConnectPtr c) -> Builder {
      char* s = virConnectGetURI(c);
      if (!s) fail();
      return str(takeString(s));
    });
  }
  Napi::Value GetCapabilities(const Napi::CallbackInfo& info) {
    return Queue(info, [](virConnectPtr c) -> Builder {
      char* s = virConnectGetCapabilities(c);
      if (!s) fail();
      return str(takeString(s));
    });
  }
  // getDomainCapabilities(emulatorbin?, arch?, machine?, virttype?, flags?)
  Napi::Value GetDomainCapabilities(const Napi::CallbackInfo& info) {
    auto opt = [&](size_t i) -> std::shared_ptr<std::string> {
      if (i < info.Length() && info[i].IsString())
        return std::make_shared<std::string>(info[i].As<Napi::String>().Utf8Value());
      return nullptr;
    };
    auto emu = opt(0), arch = opt(1), machine = opt(2), virttype = opt(3);
    unsigned int flags = argFlags(info, 4);
    return Queue(info, [=](virConnectPtr c) -> Builder {
      char* s = virConnectGetDomainCapabilities(c, emu ? emu->c_str() : nullptr, arch ? arch->c_str() : nullptr,
                                                machine ? machine->c_str() : nullptr,
                                                virttype ? virttype->c_str() : nullptr, flags);
      if (!s) fail();
      return str(takeString(s));
    });
  }
  Napi::Value DefineXML(const Napi::CallbackInfo& info) {
    std::string xml = argStr(info, 0, "xml");
    unsigned int flags = argFlags(info, 1);
    return Queue(info, [xml, flags](virConnectPtr c) -> Builder {
      return domResult(virDomainDefineXMLFlags(c, xml.c_str(), flags));
    });
  }
  Napi::Value CreateXML(const Napi::CallbackInfo& info) {
    std::string xml = argStr(info, 0, "xml");
    unsigned int flags = argFlags(info, 1);
    return Queue(info, [xml, flags](virConnectPtr c) -> Builder {
      return domResult(virDomainCreateXML(c, xml.c_str(), flags));
    });
  }
  Napi::Value LookupByName(const Napi::CallbackInfo& info) {
    std::string name = argStr(info, 0, "name");
    return Queue(info, [name](virConnectPtr c) -> Builder { return domResult(virDomainLookupByName(c, name.c_str())); });
  }
  Napi::Value LookupByUUID(const Napi::CallbackInfo& info) {
    std::string uuid = argStr(info, 0, "uuid");
    return Queue(info,
                 [uuid](virConnectPtr c) -> Builder { return domResult(virDomainLookupByUUIDString(c, uuid.c_str())); });
  }
  Napi::Value ListAllDomains(const Napi::CallbackInfo& info) {
    unsigned int flags = argFlags(info, 0);
    return Queue(info, [flags](virConnectPtr c) -> Builder {
      virDomainPtr* doms = nullptr;
      int n = virConnectListAllDomains(c, &doms, flags);
      if (n < 0) fail();
      std::vector<DomRef> refs;
      for (int i = 0; i < n; i++) {
        refs.push_back(domRef(doms[i]));
        virDomainFree(doms[i]);
      }
      free(doms);
      return [refs](Napi::Env env) -> Napi::Value {
        Napi::Array a = Napi::Array::New(env, refs.size());
        for (size_t i = 0; i < refs.size(); i++) a.Set(i, domRefToJs(env, refs[i]));
        return a;
      };
    });
  }
  Napi::Value GetAllDomainStats(const Napi::CallbackInfo& info) {
    unsigned int stats = argFlags(info, 0);
    unsigned int flags = argFlags(info, 1);
    return Queue(info, [stats, flags](virConnectPtr c) -> Builder {
      virDomainStatsRecordPtr* recs = nullptr;
      int n = virConnectGetAllDomainStats(c, stats, &recs, flags);
      if (n < 0) fail();
      std::vector<std::pair<DomRef, TParams>> out;
      for (int i = 0; i < n; i++) out.emplace_back(domRef(recs[i]->dom), copyParams(recs[i]->params, recs[i]->nparams));
      virDomainStatsRecordListFree(recs);
      return [out](Napi::Env env) -> Napi::Value {
        Napi::Array a = Napi::Array::New(env, out.size());
        for (size_t i = 0; i < out.size(); i++) {
          Napi::Object o = Napi::Object::New(env);
          o.Set("domain", domRefToJs(env, out[i].first));
          o.Set("stats", paramsToJs(env, out[i].second));
          a.Set(i, o);
        }
        return a;
      };
    });
  }

  // ---- domain calls (argument 0 is the UUID)

  Napi::Value DomGetState(const Napi::CallbackInfo& info) {
    return QueueDom(info, [](virDomainPtr d) -> Builder {
      int state = 0, reason = 0;
      if (virDomainGetState(d, &state, &reason, 0) < 0) fail();
      return [state, reason](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("state", state);
        o.Set("reason", reason);
        return o;
      };
    });
  }
  Napi::Value DomGetXMLDesc(const Napi::CallbackInfo& info) {
    unsigned int flags = argFlags(info, 1);
    return QueueDom(info, [flags](virDomainPtr d) -> Builder {
      char* s = virDomainGetXMLDesc(d, flags);
      if (!s) fail();
      return str(takeString(s));
    });
  }
  Napi::Value DomGetID(const Napi::CallbackInfo& info) {
    return QueueDom(info, [](virDomainPtr d) -> Builder {
      unsigned int id = virDomainGetID(d);
      return num(id == static_cast<unsigned int>(-1) ? -1 : static_cast<double>(id));
    });
  }
  Napi::Value DomIsActive(const Napi::CallbackInfo& info) {
    return QueueDom(info, [](virDomainPtr d) -> Builder {
      int r = virDomainIsActive(d);
      if (r < 0) fail();
      return boolean(r == 1);
    });
  }
  Napi::Value DomIsPersistent(const Napi::CallbackInfo& info) {
    return QueueDom(info, [](virDomainPtr d) -> Builder {
      int r = virDomainIsPersistent(d);
      if (r < 0) fail();
      return boolean(r == 1);
    });
  }

  // A domain call of the form int f(virDomainPtr, unsigned int flags) with flags at argument 1.
  Napi::Value DomFlagsCall(const Napi::CallbackInfo& info, int (*f)(virDomainPtr, unsigned int)) {
    unsigned int flags = argFlags(info, 1);
    return QueueDom(info, [f, flags](virDomainPtr d) -> Builder {
      if (f(d, flags) < 0) fail();
      return undef();
    });
  }
  Napi::Value DomPlainCall(const Napi::CallbackInfo& info, int (*f)(virDomainPtr)) {
    return QueueDom(info, [f](virDomainPtr d) -> Builder {
      if (f(d) < 0) fail();
      return undef();
    });
  }

  Napi::Value DomCreate(const Napi::CallbackInfo& info) { return DomFlagsCall(info, virDomainCreateWithFlags); }
  Napi::Value DomSuspend(const Napi::CallbackInfo& info) { return DomPlainCall(info, virDomainSuspend); }
  Napi::Value DomResume(const Napi::CallbackInfo& info) { return DomPlainCall(info, virDomainResume); }
  Napi::Value DomShutdown(const Napi::CallbackInfo& info) { return DomFlagsCall(info, virDomainShutdownFlags); }
  Napi::Value DomReboot(const Napi::CallbackInfo& info) { return DomFlagsCall(info, virDomainReboot); }
  Napi::Value DomReset(const Napi::CallbackInfo& info) { return DomFlagsCall(info, virDomainReset); }
  Napi::Value DomDestroy(const Napi::CallbackInfo& info) { return DomFlagsCall(info, virDomainDestroyFlags); }
  Napi::Value DomUndefine(const Napi::CallbackInfo& info) { return DomFlagsCall(info, virDomainUndefineFlags); }
  Napi::Value DomAbortJob(const Napi::CallbackInfo& info) { return DomPlainCall(info, virDomainAbortJob); }
  Napi::Value DomMigrateStartPostCopy(const Napi::CallbackInfo& info) {
    return DomFlagsCall(info, virDomainMigrateStartPostCopy);
  }

  Napi::Value DomGetInfo(const Napi::CallbackInfo& info) {
    return QueueDom(info, [](virDomainPtr d) -> Builder {
      virDomainInfo i;
      if (virDomainGetInfo(d, &i) < 0) fail();
      return [i](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("state", static_cast<double>(i.state));
        o.Set("maxMem", static_cast<double>(i.maxMem));
        o.Set("memory", static_cast<double>(i.memory));
        o.Set("nrVirtCpu", static_cast<double>(i.nrVirtCpu));
        o.Set("cpuTime", static_cast<double>(i.cpuTime));
        return o;
      };
    });
  }
  // setTime(uuid, seconds, nseconds, flags)
  Napi::Value DomSetTime(const Napi::CallbackInfo& info) {
    long long secs = static_cast<long long>(argNum(info, 1, "seconds"));
    unsigned int nsecs = static_cast<unsigned int>(argNum(info, 2, "nseconds"));
    unsigned int flags = argFlags(info, 3);
    return QueueDom(info, [=](virDomainPtr d) -> Builder {
      if (virDomainSetTime(d, secs, nsecs, flags) < 0) fail();
      return undef();
    });
  }
  Napi::Value DomMemoryStats(const Napi::CallbackInfo& info) {
    unsigned int flags = argFlags(info, 1);
    return QueueDom(info, [flags](virDomainPtr d) -> Builder {
      virDomainMemoryStatStruct st[VIR_DOMAIN_MEMORY_STAT_NR];
      int n = virDomainMemoryStats(d, st, VIR_DOMAIN_MEMORY_STAT_NR, flags);
      if (n < 0) fail();
      std::vector<std::pair<int, double>> v;
      for (int i = 0; i < n; i++) v.emplace_back(st[i].tag, static_cast<double>(st[i].val));
      return [v](Napi::Env env) -> Napi::Value {
        Napi::Array a = Napi::Array::New(env, v.size());
        for (size_t i = 0; i < v.size(); i++) {
          Napi::Object o = Napi::Object::New(env);
          o.Set("tag", v[i].first);
          o.Set("val", v[i].second);
          a.Set(i, o);
        }
        return a;
      };
    });
  }
  Napi::Value DomBlockStats(const Napi::CallbackInfo& info) {
    std::string dev = argStr(info, 1, "dev");
    return QueueDom(info, [dev](virDomainPtr d) -> Builder {
      virDomainBlockStatsStruct st;
      if (virDomainBlockStats(d, dev.c_str(), &st, sizeof st) < 0) fail();
      return [st](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("rdReq", static_cast<double>(st.rd_req));
        o.Set("rdBytes", static_cast<double>(st.rd_bytes));
        o.Set("wrReq", static_cast<double>(st.wr_req));
        o.Set("wrBytes", static_cast<double>(st.wr_bytes));
        o.Set("errs", static_cast<double>(st.errs));
        return o;
      };
    });
  }
  Napi::Value DomInterfaceStats(const Napi::CallbackInfo& info) {
    std::string dev = argStr(info, 1, "dev");
    return QueueDom(info, [dev](virDomainPtr d) -> Builder {
      virDomainInterfaceStatsStruct st;
      if (virDomainInterfaceStats(d, dev.c_str(), &st, sizeof st) < 0) fail();
      return [st](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("rxBytes", static_cast<double>(st.rx_bytes));
        o.Set("rxPackets", static_cast<double>(st.rx_packets));
        o.Set("rxErrs", static_cast<double>(st.rx_errs));
        o.Set("rxDrop", static_cast<double>(st.rx_drop));
        o.Set("txBytes", static_cast<double>(st.tx_bytes));
        o.Set("txPackets", static_cast<double>(st.tx_packets));
        o.Set("txErrs", static_cast<double>(st.tx_errs));
        o.Set("txDrop", static_cast<double>(st.tx_drop));
        return o;
      };
    });
  }
  // qemuAgentCommand(uuid, cmd, timeoutSec, flags)
  Napi::Value DomQemuAgentCommand(const Napi::CallbackInfo& info) {
    std::string cmd = argStr(info, 1, "cmd");
    int timeout = static_cast<int>(argNum(info, 2, "timeout"));
    unsigned int flags = argFlags(info, 3);
    return QueueDom(info, [cmd, timeout, flags](virDomainPtr d) -> Builder {
      char* s = virDomainQemuAgentCommand(d, cmd.c_str(), timeout, flags);
      if (!s) fail();
      return str(takeString(s));
    });
  }
  static std::vector<std::string> strArray(const Napi::CallbackInfo& info, size_t i, const char* name) {
    std::vector<std::string> out;
    if (i >= info.Length() || info[i].IsUndefined() || info[i].IsNull()) return out;
    if (!info[i].IsArray()) throw Napi::TypeError::New(info.Env(), std::string(name) + ": expected an array");
    Napi::Array a = info[i].As<Napi::Array>();
    for (uint32_t k = 0; k < a.Length(); k++) {
      Napi::Value v = a.Get(k);
      if (!v.IsString()) throw Napi::TypeError::New(info.Env(), std::string(name) + ": expected strings");
      out.push_back(v.As<Napi::String>().Utf8Value());
    }
    return out;
  }
  Napi::Value DomFS(const Napi::CallbackInfo& info, bool freeze) {
    std::vector<std::string> mps = strArray(info, 1, "mountpoints");
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [mps, flags, freeze](virDomainPtr d) -> Builder {
      std::vector<const char*> p;
      for (auto& m : mps) p.push_back(m.c_str());
      int r = freeze ? virDomainFSFreeze(d, p.empty() ? nullptr : p.data(), p.size(), flags)
                     : virDomainFSThaw(d, p.empty() ? nullptr : p.data(), p.size(), flags);
      if (r < 0) fail();
      return num(r);
    });
  }
  Napi::Value DomFSFreeze(const Napi::CallbackInfo& info) { return DomFS(info, true); }
  Napi::Value DomFSThaw(const Napi::CallbackInfo& info) { return DomFS(info, false); }
  Napi::Value DomDevice(const Napi::CallbackInfo& info, bool attach) {
    std::string xml = argStr(info, 1, "xml");
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [xml, flags, attach](virDomainPtr d) -> Builder {
      int r = attach ? virDomainAttachDeviceFlags(d, xml.c_str(), flags)
                     : virDomainDetachDeviceFlags(d, xml.c_str(), flags);
      if (r < 0) fail();
      return undef();
    });
  }
  Napi::Value DomAttachDevice(const Napi::CallbackInfo& info) { return DomDevice(info, true); }
  Napi::Value DomDetachDevice(const Napi::CallbackInfo& info) { return DomDevice(info, false); }
  Napi::Value DomGetJobStats(const Napi::CallbackInfo& info) {
    unsigned int flags = argFlags(info, 1);
    return QueueDom(info, [flags](virDomainPtr d) -> Builder {
      int type = 0, n = 0;
      virTypedParameterPtr params = nullptr;
      if (virDomainGetJobStats(d, &type, &params, &n, flags) < 0) fail();
      TParams ps = copyParams(params, n);
      virTypedParamsFree(params, n);
      return [type, ps](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("type", type);
        o.Set("params", paramsToJs(env, ps));
        return o;
      };
    });
  }
  // migrateToURI3(uuid, dconnuri, [[name, type, value], ...], flags)
  Napi::Value DomMigrateToURI3(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string dconnuri = argStr(info, 1, "dconnuri");
    if (info.Length() < 3 || !info[2].IsArray()) throw Napi::TypeError::New(env, "params: expected an array");
    Napi::Array a = info[2].As<Napi::Array>();
    TParams ps;
    for (uint32_t i = 0; i < a.Length(); i++) {
      Napi::Array e = a.Get(i).As<Napi::Array>();
      TParam p;
      p.field = e.Get(0u).As<Napi::String>().Utf8Value();
      p.type = e.Get(1u).As<Napi::Number>().Int32Value();
      Napi::Value v = e.Get(2u);
      if (p.type == VIR_TYPED_PARAM_STRING) {
        if (!v.IsString()) throw Napi::TypeError::New(env, "params." + p.field + ": expected a string");
        p.str = v.As<Napi::String>().Utf8Value();
      } else if (p.type == VIR_TYPED_PARAM_BOOLEAN) {
        p.b = v.ToBoolean().Value();
      } else {
        if (!v.IsNumber()) throw Napi::TypeError::New(env, "params." + p.field + ": expected a number");
        p.num = v.As<Napi::Number>().DoubleValue();
      }
      ps.push_back(std::move(p));
    }
    unsigned int flags = argFlags(info, 3);
    return QueueDom(info, [dconnuri, ps, flags](virDomainPtr d) -> Builder {
      virTypedParameterPtr params = nullptr;
      int n = 0, max = 0;
      int rc = 0;
      for (const auto& p : ps) {
        const char* f = p.field.c_str();
        switch (p.type) {
          case VIR_TYPED_PARAM_STRING: rc = virTypedParamsAddString(&params, &n, &max, f, p.str.c_str()); break;
          case VIR_TYPED_PARAM_INT: rc = virTypedParamsAddInt(&params, &n, &max, f, static_cast<int>(p.num)); break;
          case VIR_TYPED_PARAM_UINT:
            rc = virTypedParamsAddUInt(&params, &n, &max, f, static_cast<unsigned int>(p.num));
            break;
          case VIR_TYPED_PARAM_LLONG:
            rc = virTypedParamsAddLLong(&params, &n, &max, f, static_cast<long long>(p.num));
            break;
          case VIR_TYPED_PARAM_ULLONG:
            rc = virTypedParamsAddULLong(&params, &n, &max, f, static_cast<unsigned long long>(p.num));
            break;
          case VIR_TYPED_PARAM_DOUBLE: rc = virTypedParamsAddDouble(&params, &n, &max, f, p.num); break;
          case VIR_TYPED_PARAM_BOOLEAN: rc = virTypedParamsAddBoolean(&params, &n, &max, f, p.b ? 1 : 0); break;
          default: rc = -1;
        }
        if (rc < 0) {
          virTypedParamsFree(params, n);
          fail("virTypedParamsAdd");
        }
      }
      int r = virDomainMigrateToURI3(d, dconnuri.empty() ? nullptr : dconnuri.c_str(), params, n, flags);
      if (r < 0) {
        LvError e;
        try {
          fail("virDomainMigrateToURI3");
        } catch (const LvException& ex) {
          e = ex.e;
        }
        virTypedParamsFree(params, n);
        throw LvException{e};
      }
      virTypedParamsFree(params, n);
      return undef();
    });
  }
  Napi::Value DomMigrateSetMaxSpeed(const Napi::CallbackInfo& info) {
    unsigned long bw = static_cast<unsigned long>(argNum(info, 1, "bandwidth"));
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [bw, flags](virDomainPtr d) -> Builder {
      if (virDomainMigrateSetMaxSpeed(d, bw, flags) < 0) fail();
      return undef();
    });
  }
  Napi::Value DomMigrateSetMaxDowntime(const Napi::CallbackInfo& info) {
    unsigned long long ms = static_cast<unsigned long long>(argNum(info, 1, "downtime"));
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [ms, flags](virDomainPtr d) -> Builder {
      if (virDomainMigrateSetMaxDowntime(d, ms, flags) < 0) fail();
      return undef();
    });
  }
  Napi::Value DomSetMemory(const Napi::CallbackInfo& info) {
    unsigned long kib = static_cast<unsigned long>(argNum(info, 1, "kib"));
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [kib, flags](virDomainPtr d) -> Builder {
      if (virDomainSetMemoryFlags(d, kib, flags) < 0) fail();
      return undef();
    });
  }
  Napi::Value DomSetVcpus(const Napi::CallbackInfo& info) {
    unsigned int n = static_cast<unsigned int>(argNum(info, 1, "nvcpus"));
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [n, flags](virDomainPtr d) -> Builder {
      if (virDomainSetVcpusFlags(d, n, flags) < 0) fail();
      return undef();
    });
  }
  // getGuestInfo(uuid, types, flags)
  Napi::Value DomGetGuestInfo(const Napi::CallbackInfo& info) {
    unsigned int types = argFlags(info, 1);
    unsigned int flags = argFlags(info, 2);
    return QueueDom(info, [types, flags](virDomainPtr d) -> Builder {
      virTypedParameterPtr params = nullptr;
      int n = 0;
      if (virDomainGetGuestInfo(d, types, &params, &n, flags) < 0) fail();
      TParams ps = copyParams(params, n);
      virTypedParamsFree(params, n);
      return [ps](Napi::Env env) -> Napi::Value { return paramsToJs(env, ps); };
    });
  }
  // interfaceAddresses(uuid, source, flags)
  Napi::Value DomInterfaceAddresses(const Napi::CallbackInfo& info) {
    unsigned int source = argFlags(info, 1);
    unsigned int flags = argFlags(info, 2);
    struct Addr {
      int type;
      std::string addr;
      unsigned int prefix;
    };
    struct Iface {
      std::string name, hwaddr;
      std::vector<Addr> addrs;
    };
    return QueueDom(info, [source, flags](virDomainPtr d) -> Builder {
      virDomainInterfacePtr* ifaces = nullptr;
      int n = virDomainInterfaceAddresses(d, &ifaces, source, flags);
      if (n < 0) fail();
      std::vector<Iface> out;
      for (int i = 0; i < n; i++) {
        Iface f;
        f.name = ifaces[i]->name ? ifaces[i]->name : "";
        f.hwaddr = ifaces[i]->hwaddr ? ifaces[i]->hwaddr : "";
        for (unsigned int k = 0; k < ifaces[i]->naddrs; k++) {
          f.addrs.push_back(Addr{ifaces[i]->addrs[k].type, ifaces[i]->addrs[k].addr ? ifaces[i]->addrs[k].addr : "",
                                 ifaces[i]->addrs[k].prefix});
        }
        out.push_back(std::move(f));
        virDomainInterfaceFree(ifaces[i]);
      }
      free(ifaces);
      return [out](Napi::Env env) -> Napi::Value {
        Napi::Array a = Napi::Array::New(env, out.size());
        for (size_t i = 0; i < out.size(); i++) {
          Napi::Object o = Napi::Object::New(env);
          o.Set("name", out[i].name);
          o.Set("hwaddr", out[i].hwaddr);
          Napi::Array addrs = Napi::Array::New(env, out[i].addrs.size());
          for (size_t k = 0; k < out[i].addrs.size(); k++) {
            Napi::Object ao = Napi::Object::New(env);
            ao.Set("type", out[i].addrs[k].type);
            ao.Set("addr", out[i].addrs[k].addr);
            ao.Set("prefix", static_cast<double>(out[i].addrs[k].prefix));
            addrs.Set(k, ao);
          }
          o.Set("addrs", addrs);
          a.Set(i, o);
        }
        return a;
      };
    });
  }
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  initLibvirt();
  exports.Set("NativeConnection", Conn::Init(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(kvts_libvirt, Init)
