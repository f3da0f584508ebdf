// Network: spec.domain.devices.interfaces + spec.networks -> <interface> elements.
import type { Interface } from './model.js';
import type { ResolvedContext } from './context.js';
import type { ConvertedVmi } from './vmi.js';
import { ConversionError, notImplemented } from './errors.js';
import { pciAddress, virtioModel } from './storage.js';

const IFACES = 'spec.domain.devices.interfaces';
const MODELS = new Set(['virtio', 'e1000', 'e1000e', 'igb', 'ne2k_pci', 'pcnet', 'rtl8139']);
const MAC_RE = /^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$/;

export function convertInterfaces(vmi: ConvertedVmi, ctx: ResolvedContext, vcpus: number): Interface[] {
  const ifaces = vmi.spec.domain.devices?.interfaces ?? [];
  const networks = new Map((vmi.spec.networks ?? []).map((n) => [n.name, n]));
  const multiQueue = vmi.spec.domain.devices?.networkInterfaceMultiqueue === true;
  const vmodel = virtioModel(vmi);
  const out: Interface[] = [];
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
    // no Pod network namespace set up (standalone): the pod network goes through passt
    if (net.pod && ctx.podNetworkBinding && (binding === 'masquerade' || binding === 'bridge'))
      binding = ctx.podNetworkBinding;
    const model = iface.model || 'virtio';
    if (!MODELS.has(model))
      throw new ConversionError(`${p}.model`, `unknown interface model ${JSON.stringify(model)}`);

    const nicModel = model === 'virtio' ? vmodel : model;
    const out1: Interface =
      binding === 'slirp'
        ? { type: 'user', model: nicModel }
        : binding === 'passt'
          ? { type: 'user', model: nicModel, backend: { type: 'passt' }, ...passtPorts(iface.ports) }
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
    if (multiQueue && model === 'virtio' && binding !== 'passt')
      out1.driver = { name: 'vhost', queues: vcpus };
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
  return out;
}

/** passt: each listed port is forwarded from the same port on the host side (the Pod, or this host standalone). */
function passtPorts(
  ports: { port: number; protocol?: string }[] | undefined,
): Pick<Interface, 'portForward'> {
  const out: NonNullable<Interface['portForward']> = [];
  for (const proto of ['tcp', 'udp'] as const) {
    const ranges = (ports ?? [])
      .filter((x) => (x.protocol ?? 'TCP').toLowerCase() === proto)
      .map((x) => ({ start: x.port }));
    if (ranges.length) out.push({ proto, ranges });
  }
  return out.length ? { portForward: out } : {};
}
