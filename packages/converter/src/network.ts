// Network: spec.domain.devices.interfaces + spec.networks -> <interface> elements.
import type { Interface } from './model.js';
import type { ResolvedContext } from './context.js';
import type { ConvertedVmi } from './vmi.js';
import { ConversionError, notImplemented } from './errors.js';
import { pciAddress, virtioModel } from './storage.js';

const IFACES = 'spec.domain.devices.interfaces';
const MODELS = new Set(['virtio', 'e1000', 'e1000e', 'igb', 'ne2k_pci', 'pcnet', 'rtl8139']);
const MAC_RE = /^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$/;

/**
 * One NIC attached to a passt the launcher runs (an interface with the passt binding, in a Pod or
 * standalone, and standalone with context `podNetworkBinding: 'passt'` every pod network interface): what
 * the converter writes into QEMU's command line (`-netdev stream` + `-device`) and what the launcher
 * starts passt with. One source for both: {@link passtNics}.
 */
export interface PasstNic {
  /** index in spec.domain.devices.interfaces */
  index: number;
  /** the interface's name */
  name: string;
  /** passt's unix socket (`layout.passtSocket(uid, index)`) */
  socket: string;
  /** the guest's MAC: the interface's macAddress, else one derived from the VMI's uid and the name */
  mac: string;
  /** QEMU device model (`virtio-net-pci-non-transitional`, `e1000`, ...) */
  device: string;
  /** MTU passt announces by DHCP: 65520 (passt's default) for virtio, 1500 for emulated NICs */
  mtu: number;
  /** `ports:` forwarded from the host (the Pod, or this host standalone) to the guest, by protocol */
  tcpPorts: number[];
  udpPorts: number[];
  bootOrder?: number;
  acpiIndex?: number;
}

/** The interfaces of a VMI: libvirt `<interface>`s, and the NICs attached to the launcher's passt. */
export interface ConvertedInterfaces {
  interfaces: Interface[];
  passt: PasstNic[];
}

/** QEMU device models of the interface models (QEMU 7.2 has no igb: QEMU refuses it when it starts). */
const QEMU_NIC: Record<string, string> = {
  e1000: 'e1000',
  e1000e: 'e1000e',
  igb: 'igb',
  ne2k_pci: 'ne2k_pci',
  pcnet: 'pcnet',
  rtl8139: 'rtl8139',
};

/** A stable locally chosen MAC (QEMU/libvirt's 52:54:00 prefix) for a NIC without macAddress: FNV-1a of uid/name. */
function derivedMac(uid: string, name: string): string {
  let h = 0x811c9dc5;
  for (const ch of `${uid}/${name}`) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  const b = [(h >>> 16) & 0xff, (h >>> 8) & 0xff, h & 0xff];
  return ['52', '54', '00', ...b.map((x) => x.toString(16).padStart(2, '0'))].join(':');
}

/**
 * QEMU arguments attaching each passt NIC: `-netdev stream` (client of passt's unix socket) + `-device`,
 * both in QEMU's JSON syntax: no option-string escaping to get wrong, and QEMU creates JSON `-device`s in
 * command-line order after libvirt's own (which are JSON too), so the NIC takes a PCI slot libvirt left free
 * (a keyval `-device` would be created first and could take a slot libvirt assigned).
 */
export function passtQemuArgs(nics: PasstNic[]): string[] {
  const out: string[] = [];
  for (const n of nics) {
    const id = `kvts-passt${n.index}`;
    out.push(
      '-netdev',
      JSON.stringify({ type: 'stream', id, server: false, addr: { type: 'unix', path: n.socket } }),
    );
    const dev: Record<string, string | number> = {
      driver: n.device,
      netdev: id,
      id: `kvts-net${n.index}`,
      mac: n.mac,
    };
    if (n.bootOrder !== undefined) dev.bootindex = n.bootOrder;
    else dev.romfile = ''; // no option ROM unless the NIC boots (as for libvirt's <rom enabled="no"/>)
    if (n.acpiIndex !== undefined) dev['acpi-index'] = n.acpiIndex;
    out.push('-device', JSON.stringify(dev));
  }
  return out;
}

export function convertInterfaces(
  vmi: ConvertedVmi,
  ctx: ResolvedContext,
  vcpus: number,
): ConvertedInterfaces {
  const ifaces = vmi.spec.domain.devices?.interfaces ?? [];
  const networks = new Map((vmi.spec.networks ?? []).map((n) => [n.name, n]));
  const multiQueue = vmi.spec.domain.devices?.networkInterfaceMultiqueue === true;
  const vmodel = virtioModel(vmi);
  const out: Interface[] = [];
  const passt: PasstNic[] = [];
  const seen = new Set<string>();
  ifaces.forEach((iface, i) => {
    const p = `${IFACES}[${i}]`;
    if (iface.state === 'absent') return;
    if (seen.has(iface.name))
      throw new ConversionError(`${p}.name`, `duplicate interface name ${JSON.stringify(iface.name)}`);
    seen.add(iface.name);
    const net = networks.get(iface.name);
    if (!net)
      throw new ConversionError(
        `${p}.name`,
        `no network named ${JSON.stringify(iface.name)} in spec.networks`,
      );
    const bindings = (
      ['bridge', 'masquerade', 'slirp', 'passt', 'sriov', 'macvtap', 'binding'] as const
    ).filter((b) => iface[b] !== undefined);
    if (bindings.length > 1)
      throw new ConversionError(p, `only one binding may be set (got ${bindings.join(', ')})`);
    let binding = bindings[0] ?? 'bridge';
    // upstream's passt network binding plugin ({binding: {name: passt}}) is the same thing here
    if (binding === 'binding' && iface.binding?.name === 'passt') binding = 'passt';
    if (binding === 'sriov' || binding === 'macvtap' || binding === 'binding')
      notImplemented(`${p}.${binding}`, `the ${binding} interface binding`);
    if (binding === 'masquerade' && !net.pod)
      throw new ConversionError(`${p}.masquerade`, 'masquerade is only allowed on the pod network');
    if (binding === 'passt' && !net.pod)
      throw new ConversionError(`${p}.${bindings[0]}`, 'passt is only allowed on the pod network');
    // no Pod network namespace set up (standalone): the pod network goes through the launcher's passt,
    // or QEMU's slirp (`--pod-network slirp`: no passt at all, so the passt binding too)
    if (net.pod && ctx.podNetworkBinding === 'passt' && (binding === 'masquerade' || binding === 'bridge'))
      binding = 'passt';
    if (net.pod && ctx.podNetworkBinding === 'slirp' && binding !== 'slirp') binding = 'slirp';
    const model = iface.model || 'virtio';
    if (!MODELS.has(model))
      throw new ConversionError(`${p}.model`, `unknown interface model ${JSON.stringify(model)}`);
    // passt, in a Pod as standalone: a passt the launcher runs, attached by -netdev stream (libvirt 9.0
    // has no passt backend); phase 1 sets nothing up for it
    if (binding === 'passt') {
      // virtio: QEMU's virtio-net-pci-(non-)transitional, as libvirt turns the model into
      const device =
        model === 'virtio' ? `virtio-net-pci-${vmodel.slice('virtio-'.length)}` : QEMU_NIC[model]!;
      passt.push(passtNic(vmi, ctx, iface, i, device));
      return;
    }

    const nicModel = model === 'virtio' ? vmodel : model;
    const out1: Interface =
      binding === 'slirp'
        ? { type: 'user', model: nicModel }
        : {
            type: 'ethernet',
            // the launcher's network setup creates this tap in the Pod and plugs it into the bridge / NAT
            target: { dev: ctx.layout.tapDevice(i), managed: 'no' },
            model: model === 'virtio' ? vmodel : model,
          };
    if (iface.macAddress !== undefined && iface.macAddress !== '') {
      if (!MAC_RE.test(iface.macAddress))
        throw new ConversionError(
          `${p}.macAddress`,
          `not a MAC address: ${JSON.stringify(iface.macAddress)}`,
        );
      out1.mac = iface.macAddress.replace(/-/g, ':').toLowerCase();
    }
    if (multiQueue && model === 'virtio') out1.driver = { name: 'vhost', queues: vcpus };
    if (iface.bootOrder !== undefined) {
      if (!Number.isInteger(iface.bootOrder) || iface.bootOrder < 1)
        throw new ConversionError(`${p}.bootOrder`, 'must be a positive integer');
      out1.boot = { order: iface.bootOrder };
    } else {
      // no option ROM unless the NIC boots (upstream: saves memory and boot time)
      out1.rom = { enabled: 'no' };
    }
    if (iface.acpiIndex !== undefined) out1.acpi = { index: iface.acpiIndex };
    out1.alias = `ua-${iface.name}`;
    if (iface.pciAddress)
      out1.address = pciAddress(iface.pciAddress, `${p}.pciAddress`) as Interface['address'];
    out.push(out1);
  });
  return { interfaces: out, passt };
}

type VmiInterface = NonNullable<NonNullable<ConvertedVmi['spec']['domain']['devices']>['interfaces']>[number];

function passtNic(
  vmi: ConvertedVmi,
  ctx: ResolvedContext,
  iface: VmiInterface,
  i: number,
  device: string,
): PasstNic {
  const p = `${IFACES}[${i}]`;
  if (iface.pciAddress)
    throw new ConversionError(
      `${p}.pciAddress`,
      "not supported on an interface attached to the launcher's passt (QEMU places the NIC)",
    );
  let mac: string;
  if (iface.macAddress !== undefined && iface.macAddress !== '') {
    if (!MAC_RE.test(iface.macAddress))
      throw new ConversionError(`${p}.macAddress`, `not a MAC address: ${JSON.stringify(iface.macAddress)}`);
    mac = iface.macAddress.replace(/-/g, ':').toLowerCase();
  } else mac = derivedMac(vmi.metadata?.uid ?? '', iface.name);
  const tcpPorts: number[] = [];
  const udpPorts: number[] = [];
  (iface.ports ?? []).forEach((port, j) => {
    const proto = (port.protocol ?? 'TCP').toUpperCase();
    if (proto === 'TCP') tcpPorts.push(port.port);
    else if (proto === 'UDP') udpPorts.push(port.port);
    else
      throw new ConversionError(
        `${p}.ports[${j}].protocol`,
        `${JSON.stringify(port.protocol)} is not forwarded by passt (TCP or UDP)`,
      );
  });
  if (iface.bootOrder !== undefined && (!Number.isInteger(iface.bootOrder) || iface.bootOrder < 1))
    throw new ConversionError(`${p}.bootOrder`, 'must be a positive integer');
  return {
    index: i,
    name: iface.name,
    socket: ctx.layout.passtSocket(vmi.metadata?.uid ?? '', i),
    mac,
    device,
    mtu: device.startsWith('virtio') ? 65520 : 1500,
    tcpPorts,
    udpPorts,
    ...(iface.bootOrder !== undefined ? { bootOrder: iface.bootOrder } : {}),
    ...(iface.acpiIndex !== undefined ? { acpiIndex: iface.acpiIndex } : {}),
  };
}
