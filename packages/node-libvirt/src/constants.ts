// libvirt constants (values from libvirt's public headers, libvirt-domain.h / virterror.h / libvirt-common.h).
// Plain `as const` objects (not TS enums) so they work with isolated transpilers and can be iterated.

export const DomainState = {
  NOSTATE: 0,
  RUNNING: 1,
  BLOCKED: 2,
  PAUSED: 3,
  SHUTDOWN: 4,
  SHUTOFF: 5,
  CRASHED: 6,
  PMSUSPENDED: 7,
} as const;
export type DomainState = (typeof DomainState)[keyof typeof DomainState];

/** Reason names per state (virDomainRunningReason, virDomainPausedReason, ...), index = reason number. */
export const DomainStateReasons: Record<DomainState, readonly string[]> = {
  0: ['UNKNOWN'],
  1: [
    'UNKNOWN',
    'BOOTED',
    'MIGRATED',
    'RESTORED',
    'FROM_SNAPSHOT',
    'UNPAUSED',
    'MIGRATION_CANCELED',
    'SAVE_CANCELED',
    'WAKEUP',
    'CRASHED',
    'POSTCOPY',
    'POSTCOPY_FAILED',
  ],
  2: ['UNKNOWN'],
  3: [
    'UNKNOWN',
    'USER',
    'MIGRATION',
    'SAVE',
    'DUMP',
    'IOERROR',
    'WATCHDOG',
    'FROM_SNAPSHOT',
    'SHUTTING_DOWN',
    'SNAPSHOT',
    'CRASHED',
    'STARTING_UP',
    'POSTCOPY',
    'POSTCOPY_FAILED',
  ],
  4: ['UNKNOWN', 'USER'],
  5: [
    'UNKNOWN',
    'SHUTDOWN',
    'DESTROYED',
    'CRASHED',
    'MIGRATED',
    'SAVED',
    'FAILED',
    'FROM_SNAPSHOT',
    'DAEMON',
  ],
  6: ['UNKNOWN', 'PANICKED'],
  7: ['UNKNOWN'],
};

export function domainStateName(state: number): string {
  const e = Object.entries(DomainState).find(([, v]) => v === state);
  return e ? e[0] : `UNKNOWN_STATE_${state}`;
}

export function domainStateReasonName(state: number, reason: number): string {
  return DomainStateReasons[state as DomainState]?.[reason] ?? `UNKNOWN_REASON_${reason}`;
}

/** virDomainEventType */
export const DomainEventType = {
  DEFINED: 0,
  UNDEFINED: 1,
  STARTED: 2,
  SUSPENDED: 3,
  RESUMED: 4,
  STOPPED: 5,
  SHUTDOWN: 6,
  PMSUSPENDED: 7,
  CRASHED: 8,
} as const;
export type DomainEventType = (typeof DomainEventType)[keyof typeof DomainEventType];

/** Detail names per lifecycle event type (virDomainEvent*DetailType), index = detail number. */
export const DomainEventDetails: Record<DomainEventType, readonly string[]> = {
  0: ['ADDED', 'UPDATED', 'RENAMED', 'FROM_SNAPSHOT'],
  1: ['REMOVED', 'RENAMED'],
  2: ['BOOTED', 'MIGRATED', 'RESTORED', 'FROM_SNAPSHOT', 'WAKEUP'],
  3: [
    'PAUSED',
    'MIGRATED',
    'IOERROR',
    'WATCHDOG',
    'RESTORED',
    'FROM_SNAPSHOT',
    'API_ERROR',
    'POSTCOPY',
    'POSTCOPY_FAILED',
  ],
  4: ['UNPAUSED', 'MIGRATED', 'FROM_SNAPSHOT', 'POSTCOPY', 'POSTCOPY_FAILED'],
  5: ['SHUTDOWN', 'DESTROYED', 'CRASHED', 'MIGRATED', 'SAVED', 'FAILED', 'FROM_SNAPSHOT'],
  6: ['FINISHED', 'GUEST', 'HOST'],
  7: ['MEMORY', 'DISK'],
  8: ['PANICKED', 'CRASHLOADED'],
};

export function domainEventName(event: number): string {
  const e = Object.entries(DomainEventType).find(([, v]) => v === event);
  return e ? e[0] : `UNKNOWN_EVENT_${event}`;
}

export function domainEventDetailName(event: number, detail: number): string {
  return DomainEventDetails[event as DomainEventType]?.[detail] ?? `UNKNOWN_DETAIL_${detail}`;
}

/** virConnectDomainEventAgentLifecycleState */
export const AgentLifecycleState = { CONNECTED: 1, DISCONNECTED: 2 } as const;
/** virConnectDomainEventAgentLifecycleReason */
export const AgentLifecycleReason = { UNKNOWN: 0, DOMAIN_STARTED: 1, CHANNEL: 2 } as const;

/** virConnectCloseReason */
export const CloseReason = { ERROR: 0, EOF: 1, KEEPALIVE: 2, CLIENT: 3 } as const;
export const CloseReasonNames = ['error', 'eof', 'keepalive', 'client'] as const;
export type CloseReasonName = (typeof CloseReasonNames)[number];

/** virDomainCreateFlags (createXML, create) */
export const DomainCreateFlags = {
  NONE: 0,
  START_PAUSED: 1 << 0,
  START_AUTODESTROY: 1 << 1,
  START_BYPASS_CACHE: 1 << 2,
  START_FORCE_BOOT: 1 << 3,
  START_VALIDATE: 1 << 4,
  START_RESET_NVRAM: 1 << 5,
} as const;

/** virDomainDefineFlags */
export const DomainDefineFlags = { VALIDATE: 1 << 0 } as const;

/** virDomainUndefineFlagsValues */
export const DomainUndefineFlags = {
  MANAGED_SAVE: 1 << 0,
  SNAPSHOTS_METADATA: 1 << 1,
  NVRAM: 1 << 2,
  KEEP_NVRAM: 1 << 3,
  CHECKPOINTS_METADATA: 1 << 4,
  TPM: 1 << 5,
  KEEP_TPM: 1 << 6,
} as const;

/** virDomainXMLFlags */
export const DomainXMLFlags = {
  SECURE: 1 << 0,
  INACTIVE: 1 << 1,
  UPDATE_CPU: 1 << 2,
  MIGRATABLE: 1 << 3,
} as const;

/** virDomainShutdownFlagValues */
export const DomainShutdownFlags = {
  DEFAULT: 0,
  ACPI_POWER_BTN: 1 << 0,
  GUEST_AGENT: 1 << 1,
  INITCTL: 1 << 2,
  SIGNAL: 1 << 3,
  PARAVIRT: 1 << 4,
} as const;

/** virDomainRebootFlagValues */
export const DomainRebootFlags = DomainShutdownFlags;

/** virDomainDestroyFlagsValues */
export const DomainDestroyFlags = { DEFAULT: 0, GRACEFUL: 1 << 0, REMOVE_LOGS: 1 << 1 } as const;

/** virConnectListAllDomainsFlags */
export const ListAllDomainsFlags = {
  ACTIVE: 1 << 0,
  INACTIVE: 1 << 1,
  PERSISTENT: 1 << 2,
  TRANSIENT: 1 << 3,
  RUNNING: 1 << 4,
  PAUSED: 1 << 5,
  SHUTOFF: 1 << 6,
  OTHER: 1 << 7,
  MANAGEDSAVE: 1 << 8,
  NO_MANAGEDSAVE: 1 << 9,
  AUTOSTART: 1 << 10,
  NO_AUTOSTART: 1 << 11,
  HAS_SNAPSHOT: 1 << 12,
  NO_SNAPSHOT: 1 << 13,
  HAS_CHECKPOINT: 1 << 14,
  NO_CHECKPOINT: 1 << 15,
} as const;

/** virDomainStatsTypes (getAllDomainStats `stats`) */
export const DomainStatsTypes = {
  STATE: 1 << 0,
  CPU_TOTAL: 1 << 1,
  BALLOON: 1 << 2,
  VCPU: 1 << 3,
  INTERFACE: 1 << 4,
  BLOCK: 1 << 5,
  PERF: 1 << 6,
  IOTHREAD: 1 << 7,
  MEMORY: 1 << 8,
  DIRTYRATE: 1 << 9,
  VM: 1 << 10,
} as const;

/** virConnectGetAllDomainStatsFlags (getAllDomainStats `flags`) */
export const GetAllDomainStatsFlags = {
  ACTIVE: 1 << 0,
  INACTIVE: 1 << 1,
  PERSISTENT: 1 << 2,
  TRANSIENT: 1 << 3,
  RUNNING: 1 << 4,
  PAUSED: 1 << 5,
  SHUTOFF: 1 << 6,
  OTHER: 1 << 7,
  NOWAIT: 1 << 29,
  BACKING: 1 << 30,
  ENFORCE_STATS: 2 ** 31,
} as const;

/** virDomainModificationImpact (also device, vcpu and memory modify flags) */
export const DomainAffect = { CURRENT: 0, LIVE: 1 << 0, CONFIG: 1 << 1 } as const;

/** virDomainDeviceModifyFlags */
export const DomainDeviceModifyFlags = { CURRENT: 0, LIVE: 1 << 0, CONFIG: 1 << 1, FORCE: 1 << 2 } as const;

/** virDomainVcpuFlags */
export const DomainVcpuFlags = {
  CURRENT: 0,
  LIVE: 1 << 0,
  CONFIG: 1 << 1,
  MAXIMUM: 1 << 2,
  GUEST: 1 << 3,
  HOTPLUGGABLE: 1 << 4,
} as const;

/** virDomainMemoryModFlags */
export const DomainMemoryFlags = { CURRENT: 0, LIVE: 1 << 0, CONFIG: 1 << 1, MAXIMUM: 1 << 2 } as const;

/** virDomainMigrateFlags */
export const MigrateFlags = {
  LIVE: 1 << 0,
  PEER2PEER: 1 << 1,
  TUNNELLED: 1 << 2,
  PERSIST_DEST: 1 << 3,
  UNDEFINE_SOURCE: 1 << 4,
  PAUSED: 1 << 5,
  NON_SHARED_DISK: 1 << 6,
  NON_SHARED_INC: 1 << 7,
  CHANGE_PROTECTION: 1 << 8,
  UNSAFE: 1 << 9,
  OFFLINE: 1 << 10,
  COMPRESSED: 1 << 11,
  ABORT_ON_ERROR: 1 << 12,
  AUTO_CONVERGE: 1 << 13,
  RDMA_PIN_ALL: 1 << 14,
  POSTCOPY: 1 << 15,
  TLS: 1 << 16,
  PARALLEL: 1 << 17,
  NON_SHARED_SYNCHRONOUS_WRITES: 1 << 18,
  POSTCOPY_RESUME: 1 << 19,
  ZEROCOPY: 1 << 20,
} as const;

/** virDomainJobType */
export const DomainJobType = {
  NONE: 0,
  BOUNDED: 1,
  UNBOUNDED: 2,
  COMPLETED: 3,
  FAILED: 4,
  CANCELLED: 5,
} as const;

/** virDomainGetJobStatsFlags */
export const DomainJobStatsFlags = { COMPLETED: 1 << 0, KEEP_COMPLETED: 1 << 1 } as const;

/** virDomainMemoryStatTags, index = tag number */
export const MemoryStatTags = [
  'swap_in',
  'swap_out',
  'major_fault',
  'minor_fault',
  'unused',
  'available',
  'actual_balloon',
  'rss',
  'usable',
  'last_update',
  'disk_caches',
  'hugetlb_pgalloc',
  'hugetlb_pgfail',
] as const;

/** virDomainGuestInfoTypes */
export const GuestInfoTypes = {
  USERS: 1 << 0,
  OS: 1 << 1,
  TIMEZONE: 1 << 2,
  HOSTNAME: 1 << 3,
  FILESYSTEM: 1 << 4,
  DISKS: 1 << 5,
  INTERFACES: 1 << 6,
} as const;

/** virDomainInterfaceAddressesSource */
export const InterfaceAddressesSource = { LEASE: 0, AGENT: 1, ARP: 2 } as const;

/** virDomainSetTimeFlags */
export const DomainSetTimeFlags = { SYNC: 1 << 0 } as const;

/** virDomainQemuAgentCommandTimeoutValues (qemuAgentCommand timeout, seconds) */
export const AgentCommandTimeout = { BLOCK: -2, DEFAULT: -1, NOWAIT: 0, SHUTDOWN: 60 } as const;

/** virTypedParameterType */
export const TypedParamType = {
  INT: 1,
  UINT: 2,
  LLONG: 3,
  ULLONG: 4,
  DOUBLE: 5,
  BOOLEAN: 6,
  STRING: 7,
} as const;

/** virErrorNumber (LibvirtError.code) */
export const ErrorCode = {
  OK: 0,
  INTERNAL_ERROR: 1,
  NO_MEMORY: 2,
  NO_SUPPORT: 3,
  UNKNOWN_HOST: 4,
  NO_CONNECT: 5,
  INVALID_CONN: 6,
  INVALID_DOMAIN: 7,
  INVALID_ARG: 8,
  OPERATION_FAILED: 9,
  GET_FAILED: 10,
  POST_FAILED: 11,
  HTTP_ERROR: 12,
  SEXPR_SERIAL: 13,
  NO_XEN: 14,
  XEN_CALL: 15,
  OS_TYPE: 16,
  NO_KERNEL: 17,
  NO_ROOT: 18,
  NO_SOURCE: 19,
  NO_TARGET: 20,
  NO_NAME: 21,
  NO_OS: 22,
  NO_DEVICE: 23,
  NO_XENSTORE: 24,
  DRIVER_FULL: 25,
  CALL_FAILED: 26,
  XML_ERROR: 27,
  DOM_EXIST: 28,
  OPERATION_DENIED: 29,
  OPEN_FAILED: 30,
  READ_FAILED: 31,
  PARSE_FAILED: 32,
  CONF_SYNTAX: 33,
  WRITE_FAILED: 34,
  XML_DETAIL: 35,
  INVALID_NETWORK: 36,
  NETWORK_EXIST: 37,
  SYSTEM_ERROR: 38,
  RPC: 39,
  GNUTLS_ERROR: 40,
  WAR_NO_NETWORK: 41,
  NO_DOMAIN: 42,
  NO_NETWORK: 43,
  INVALID_MAC: 44,
  AUTH_FAILED: 45,
  INVALID_STORAGE_POOL: 46,
  INVALID_STORAGE_VOL: 47,
  WAR_NO_STORAGE: 48,
  NO_STORAGE_POOL: 49,
  NO_STORAGE_VOL: 50,
  WAR_NO_NODE: 51,
  INVALID_NODE_DEVICE: 52,
  NO_NODE_DEVICE: 53,
  NO_SECURITY_MODEL: 54,
  OPERATION_INVALID: 55,
  WAR_NO_INTERFACE: 56,
  NO_INTERFACE: 57,
  INVALID_INTERFACE: 58,
  MULTIPLE_INTERFACES: 59,
  WAR_NO_NWFILTER: 60,
  INVALID_NWFILTER: 61,
  NO_NWFILTER: 62,
  BUILD_FIREWALL: 63,
  WAR_NO_SECRET: 64,
  INVALID_SECRET: 65,
  NO_SECRET: 66,
  CONFIG_UNSUPPORTED: 67,
  OPERATION_TIMEOUT: 68,
  MIGRATE_PERSIST_FAILED: 69,
  HOOK_SCRIPT_FAILED: 70,
  INVALID_DOMAIN_SNAPSHOT: 71,
  NO_DOMAIN_SNAPSHOT: 72,
  INVALID_STREAM: 73,
  ARGUMENT_UNSUPPORTED: 74,
  STORAGE_PROBE_FAILED: 75,
  STORAGE_POOL_BUILT: 76,
  SNAPSHOT_REVERT_RISKY: 77,
  OPERATION_ABORTED: 78,
  AUTH_CANCELLED: 79,
  NO_DOMAIN_METADATA: 80,
  MIGRATE_UNSAFE: 81,
  OVERFLOW: 82,
  BLOCK_COPY_ACTIVE: 83,
  OPERATION_UNSUPPORTED: 84,
  SSH: 85,
  AGENT_UNRESPONSIVE: 86,
  RESOURCE_BUSY: 87,
  ACCESS_DENIED: 88,
  DBUS_SERVICE: 89,
  STORAGE_VOL_EXIST: 90,
  CPU_INCOMPATIBLE: 91,
  XML_INVALID_SCHEMA: 92,
  MIGRATE_FINISH_OK: 93,
  AUTH_UNAVAILABLE: 94,
  NO_SERVER: 95,
  NO_CLIENT: 96,
  AGENT_UNSYNCED: 97,
  LIBSSH: 98,
  DEVICE_MISSING: 99,
  INVALID_NWFILTER_BINDING: 100,
  NO_NWFILTER_BINDING: 101,
  INVALID_DOMAIN_CHECKPOINT: 102,
  NO_DOMAIN_CHECKPOINT: 103,
  NO_DOMAIN_BACKUP: 104,
  INVALID_NETWORK_PORT: 105,
  NETWORK_PORT_EXIST: 106,
  NO_NETWORK_PORT: 107,
  NO_HOSTNAME: 108,
  CHECKPOINT_INCONSISTENT: 109,
  MULTIPLE_DOMAINS: 110,
} as const;

/** virErrorDomain (LibvirtError.domain) */
export const ErrorDomain = {
  NONE: 0,
  XEN: 1,
  XEND: 2,
  XENSTORE: 3,
  SEXPR: 4,
  XML: 5,
  DOM: 6,
  RPC: 7,
  PROXY: 8,
  CONF: 9,
  QEMU: 10,
  NET: 11,
  TEST: 12,
  REMOTE: 13,
  OPENVZ: 14,
  XENXM: 15,
  STATS_LINUX: 16,
  LXC: 17,
  STORAGE: 18,
  NETWORK: 19,
  DOMAIN: 20,
  UML: 21,
  NODEDEV: 22,
  XEN_INOTIFY: 23,
  SECURITY: 24,
  VBOX: 25,
  INTERFACE: 26,
  ONE: 27,
  ESX: 28,
  PHYP: 29,
  SECRET: 30,
  CPU: 31,
  XENAPI: 32,
  NWFILTER: 33,
  HOOK: 34,
  DOMAIN_SNAPSHOT: 35,
  AUDIT: 36,
  SYSINFO: 37,
  STREAMS: 38,
  VMWARE: 39,
  EVENT: 40,
  LIBXL: 41,
  LOCKING: 42,
  HYPERV: 43,
  CAPABILITIES: 44,
  URI: 45,
  AUTH: 46,
  DBUS: 47,
  PARALLELS: 48,
  DEVICE: 49,
  SSH: 50,
  LOCKSPACE: 51,
  INITCTL: 52,
  IDENTITY: 53,
  CGROUP: 54,
  ACCESS: 55,
  SYSTEMD: 56,
  BHYVE: 57,
  CRYPTO: 58,
  FIREWALL: 59,
  POLKIT: 60,
  THREAD: 61,
  ADMIN: 62,
  LOGGING: 63,
  XENXL: 64,
  PERF: 65,
  LIBSSH: 66,
  RESCTRL: 67,
  FIREWALLD: 68,
  DOMAIN_CHECKPOINT: 69,
  TPM: 70,
  BPF: 71,
  CH: 72,
} as const;
