// The part of @kubevirt-ts/node-libvirt's API the manager uses, written as structural
// interfaces: the real Connection/Domain satisfy them, and the unit tests' in-memory fake
// (src/test-fake-libvirt.ts) implements only this much.

import type { EventEmitter } from 'node:events';

export interface DomainRef {
  name: string;
  uuid: string;
}

/** A lifecycle event as node-libvirt delivers it ('lifecycle' on the connection). */
export interface LifecycleEvent {
  domain: DomainRef;
  /** virDomainEventType */
  event: number;
  /** the event type's detail code */
  detail: number;
}

export interface LibvirtDomain {
  readonly name: string;
  readonly uuid: string;
  getState(): Promise<{ state: number; reason: number; reasonName?: string }>;
  getXMLDesc(flags?: number): Promise<string>;
  create(flags?: number): Promise<void>;
  suspend(): Promise<void>;
  resume(): Promise<void>;
  shutdown(flags?: number): Promise<void>;
  reboot(flags?: number): Promise<void>;
  destroy(flags?: number): Promise<void>;
  undefine(flags?: number): Promise<void>;
  setTime(): Promise<void>;
  qemuAgentCommand(cmd: string, timeoutSec: number, flags?: number): Promise<string>;
  fsFreeze(): Promise<number>;
  fsThaw(): Promise<number>;
  attachDevice(xml: string, flags?: number): Promise<void>;
  detachDevice(xml: string, flags?: number): Promise<void>;
  getJobInfo(): Promise<unknown>;
  abortJob(): Promise<void>;
  migrateToURI3(dconnuri: string, params: MigrateParams, flags?: number): Promise<void>;
  setMemory(kib: number): Promise<void>;
  setVcpus(n: number, flags?: number): Promise<void>;
}

/** virDomainMigrateToURI3 typed parameters (node-libvirt's MigrateParams, the fields used here). */
export interface MigrateParams {
  /** migrate_uri */
  uri?: string;
  /** destination_xml */
  destXml?: string;
  /** persistent_xml */
  persistXml?: string;
  /** MiB/s */
  bandwidth?: number;
  listenAddress?: string;
  parallelConnections?: number;
  /** migrate_disks: target dev names of the disks a block migration copies */
  migrateDisks?: string[];
  /** disks_uri: where the source QEMU copies them (the target QEMU's NBD server, e.g. unix:///path) */
  disksUri?: string;
  /** migrate_disks_detect_zeroes (libvirt >= 10.9.0) */
  migrateDisksDetectZeroes?: string[];
}

export interface LibvirtConnection extends EventEmitter {
  close(): Promise<void>;
  isAlive(): Promise<boolean> | boolean;
  getVersion(): Promise<number | string>;
  getLibVersion(): Promise<number | string>;
  defineXML(xml: string, flags?: number): Promise<LibvirtDomain>;
  lookupDomainByName(name: string): Promise<LibvirtDomain>;
  listAllDomains(flags?: number): Promise<LibvirtDomain[]>;
  getAllDomainStats(stats?: number, flags?: number): Promise<unknown>;
}

/** libvirt error codes (virErrorNumber) the manager tells apart. */
export const VirErrorCode = {
  NO_SUPPORT: 3,
  OPERATION_FAILED: 9,
  NO_DOMAIN: 42,
  OPERATION_INVALID: 55,
  OPERATION_ABORTED: 78,
  AGENT_UNRESPONSIVE: 86,
} as const;

function errorCode(err: unknown): number | undefined {
  if (err && typeof err === 'object' && 'code' in err) {
    const c = (err as { code: unknown }).code;
    return typeof c === 'number' ? c : undefined;
  }
  return undefined;
}

/** The domain does not exist (any more). */
export function isNotFound(err: unknown): boolean {
  return errorCode(err) === VirErrorCode.NO_DOMAIN;
}

/** The operation does not apply in the domain's current state (e.g. not running). */
export function isInvalidOperation(err: unknown): boolean {
  return errorCode(err) === VirErrorCode.OPERATION_INVALID;
}

/** Flags and constants from libvirt-domain.h used by the manager. */
export const Vir = {
  DOMAIN_START_PAUSED: 1,
  DOMAIN_XML_SECURE: 1,
  DOMAIN_XML_INACTIVE: 2,
  DOMAIN_XML_MIGRATABLE: 8,
  DOMAIN_SHUTDOWN_ACPI_POWER_BTN: 1,
  DOMAIN_SHUTDOWN_GUEST_AGENT: 2,
  DOMAIN_REBOOT_ACPI_POWER_BTN: 1,
  DOMAIN_REBOOT_GUEST_AGENT: 2,
  DOMAIN_DESTROY_DEFAULT: 0,
  DOMAIN_DESTROY_GRACEFUL: 1,
  DOMAIN_UNDEFINE_MANAGED_SAVE: 1,
  DOMAIN_UNDEFINE_NVRAM: 4,
  DOMAIN_AFFECT_LIVE: 1,
  DOMAIN_AFFECT_CONFIG: 2,
  DOMAIN_VCPU_GUEST: 8,
  MIGRATE_LIVE: 1 << 0,
  MIGRATE_PEER2PEER: 1 << 1,
  MIGRATE_TUNNELLED: 1 << 2,
  MIGRATE_PERSIST_DEST: 1 << 3,
  MIGRATE_UNDEFINE_SOURCE: 1 << 4,
  MIGRATE_PAUSED: 1 << 5,
  MIGRATE_NON_SHARED_INC: 1 << 7,
  MIGRATE_UNSAFE: 1 << 9,
  MIGRATE_AUTO_CONVERGE: 1 << 13,
  MIGRATE_POSTCOPY: 1 << 15,
  MIGRATE_PARALLEL: 1 << 17,
} as const;
