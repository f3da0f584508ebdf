// Devices other than disks and NICs: controllers, guest agent channel, serial console, VNC and
// video, inputs, memory balloon, rng, watchdog, sound, tpm.
import type { Controller, Devices, Disk, Input } from './model.js';
import type { ResolvedContext } from './context.js';
import type { ConvertedVmi } from './vmi.js';
import { ConversionError, notImplemented } from './errors.js';
import { virtioModel } from './storage.js';

const DEV = 'spec.domain.devices';

function usbNeeded(vmi: ConvertedVmi, disks: Disk[]): boolean {
  const dev = vmi.spec.domain.devices;
  if (dev?.clientPassthrough) return true;
  if ((dev?.inputs ?? []).some((i) => (i.bus || 'usb') === 'usb')) return true;
  return disks.some((d) => d.target.bus === 'usb');
}

export function convertDevices(
  vmi: ConvertedVmi,
  ctx: ResolvedContext,
  devices: Devices,
  vcpus: number,
  scsiIOThread: number | undefined,
): void {
  const dev = vmi.spec.domain.devices ?? {};
  const uid = vmi.metadata?.uid ?? '';
  const vmodel = virtioModel(vmi);
  const L = ctx.layout;

  if (dev.filesystems?.length) notImplemented(`${DEV}.filesystems`, 'virtiofs filesystems');
  if (dev.gpus?.length) notImplemented(`${DEV}.gpus`, 'GPU passthrough');
  if (dev.hostDevices?.length) notImplemented(`${DEV}.hostDevices`, 'host device passthrough');
  if (dev.clientPassthrough) notImplemented(`${DEV}.clientPassthrough`, 'USB redirection');
  if (dev.autoattachVSOCK) notImplemented(`${DEV}.autoattachVSOCK`, 'VSOCK');
  if (vmi.spec.domain.launchSecurity !== undefined)
    notImplemented('spec.domain.launchSecurity', 'launch security (SEV)');

  // controllers: USB (off unless a device needs it), virtio-scsi (hotplug target), virtio-serial
  const controllers: Controller[] = [
    { type: 'usb', index: 0, model: usbNeeded(vmi, devices.disks ?? []) ? 'qemu-xhci' : 'none' },
  ];
  const hasScsiDisk = (devices.disks ?? []).some((d) => d.target.bus === 'scsi');
  if (!dev.disableHotplug || hasScsiDisk) {
    const scsi: Controller = { type: 'scsi', index: 0, model: vmodel };
    if (scsiIOThread !== undefined) scsi.driver = { iothread: scsiIOThread, queues: vcpus };
    controllers.push(scsi);
  }
  const serialConsole = dev.autoattachSerialConsole ?? true;
  if (serialConsole) controllers.push({ type: 'virtio-serial', index: 0, model: vmodel });
  devices.controllers = controllers;

  // the guest agent channel (libvirt chooses the socket path inside its own state directory)
  devices.channels = [{ type: 'unix', target: { type: 'virtio', name: 'org.qemu.guest_agent.0' } }];

  if (serialConsole) {
    devices.serials = [
      {
        type: 'unix',
        source: { mode: 'bind', path: L.serialSocket(uid, 0) },
        target: { port: 0 },
        ...(ctx.serialConsoleLog ? { log: { file: L.serialLogFile(uid, 0), append: 'on' as const } } : {}),
      },
    ];
    devices.consoles = [{ type: 'pty', target: { type: 'serial', port: 0 } }];
  }

  if (dev.autoattachGraphicsDevice ?? true) {
    devices.graphics = [{ type: 'vnc', listen: { type: 'socket', socket: L.vncSocket(uid) } }];
    // the VMI's video type (upstream: vram and heads as for its default), else vga
    const type = dev.video?.type ?? 'vga';
    devices.video = [{ model: { type, heads: 1, ...(type === 'ramfb' ? {} : { vram: 16384 }) } }];
  }

  const inputs: Input[] = [];
  (dev.inputs ?? []).forEach((inp, i) => {
    const p = `${DEV}.inputs[${i}]`;
    if (inp.type !== 'tablet')
      throw new ConversionError(`${p}.type`, `only tablet is supported, got ${JSON.stringify(inp.type)}`);
    const bus = inp.bus || 'usb';
    if (bus !== 'usb' && bus !== 'virtio')
      throw new ConversionError(`${p}.bus`, `must be usb or virtio, got ${JSON.stringify(bus)}`);
    const x: Input = { type: 'tablet', bus };
    if (bus === 'virtio') x.model = 'virtio'; // libvirt refuses (non-)transitional models for a tablet
    x.alias = `ua-${inp.name}`;
    inputs.push(x);
  });
  if (inputs.length) devices.inputs = inputs;

  if (dev.autoattachMemBalloon ?? true) {
    devices.memballoon = { model: vmodel, freePageReporting: ctx.freePageReporting ? 'on' : 'off' };
    if (ctx.memBalloonStatsPeriod > 0) devices.memballoon.stats = { period: ctx.memBalloonStatsPeriod };
  } else {
    devices.memballoon = { model: 'none' };
  }

  if (dev.rng) devices.rng = [{ model: vmodel, backend: { model: 'random', path: '/dev/urandom' } }];

  if (dev.watchdog) {
    if (!dev.watchdog.i6300esb)
      throw new ConversionError(`${DEV}.watchdog`, 'a watchdog model (i6300esb) is required');
    devices.watchdog = [
      {
        model: 'i6300esb',
        action: dev.watchdog.i6300esb.action ?? 'reset',
        alias: `ua-${dev.watchdog.name}`,
      },
    ];
  }

  if (dev.sound) devices.sound = [{ model: dev.sound.model ?? 'ich9', alias: `ua-${dev.sound.name}` }];

  if (dev.tpm) {
    // as upstream: a persistent TPM is a tpm-crb with persistent state, otherwise tpm-tis
    devices.tpm = [
      dev.tpm.persistent
        ? { model: 'tpm-crb', backend: { type: 'emulator', version: '2.0', persistent_state: 'yes' } }
        : { model: 'tpm-tis', backend: { type: 'emulator', version: '2.0' } },
    ];
  }
}
