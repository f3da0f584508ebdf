// Hand-written VMIs beyond the reference vectors: together they use every field the converter maps.
import type { VirtualMachineInstance } from '@kubevirt-ts/api';

const meta = (name: string) => ({
  name,
  namespace: 'tests',
  uid: `0b5e${name.length.toString(16).padStart(4, '0')}-1111-4222-8333-444455556666`,
});

export const CASES: Record<string, VirtualMachineInstance> = {
  'efi-secure-boot': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('efi-secure'),
    spec: {
      domain: {
        firmware: { bootloader: { efi: {} }, serial: 'SN-1.0_x+y' },
        clock: { utc: {} },
        features: { smm: {} },
        resources: { requests: { memory: '256Mi' } },
        devices: { autoattachPodInterface: false },
      },
    },
  },
  'hyperv-clock-features': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('hyperv'),
    spec: {
      domain: {
        cpu: {
          sockets: 1,
          cores: 2,
          threads: 2,
          model: 'host-passthrough',
          features: [
            { name: 'pcid', policy: 'require' },
            { name: 'x2apic', policy: 'disable' },
          ],
        },
        memory: { guest: '512Mi' },
        resources: { requests: { memory: '600Mi' } },
        clock: {
          utc: { offsetSeconds: 3600 },
          timer: {
            hpet: { present: false },
            kvm: {},
            hyperv: {},
            pit: { tickPolicy: 'discard' },
            rtc: { tickPolicy: 'catchup', track: 'guest' },
          },
        },
        features: {
          acpi: {},
          apic: { endOfInterrupt: true },
          smm: { enabled: false },
          kvm: { hidden: true },
          pvspinlock: { enabled: false },
          hyperv: {
            relaxed: {},
            vapic: {},
            vpindex: {},
            runtime: {},
            synic: {},
            reset: { enabled: false },
            synictimer: { direct: {} },
            spinlocks: { spinlocks: 8191 },
            vendorid: { vendorid: 'KubeVirt<&>' },
            frequencies: {},
            reenlightenment: {},
            tlbflush: {},
            ipi: {},
            evmcs: { enabled: false },
          },
        },
        chassis: { manufacturer: 'ACME "Co" <x>', version: '1', serial: 'c&1', asset: "a'b", sku: 'sku' },
        devices: { autoattachPodInterface: false },
      },
    },
  },
  'storage-all-kinds': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('storage'),
    spec: {
      domain: {
        ioThreadsPolicy: 'auto',
        resources: { requests: { memory: '1Gi', cpu: '2' } },
        devices: {
          blockMultiQueue: true,
          autoattachPodInterface: false,
          disks: [
            {
              name: 'root',
              disk: { bus: 'virtio' },
              bootOrder: 1,
              dedicatedIOThread: true,
              cache: 'none',
              io: 'native',
            },
            {
              name: 'pvcfile',
              disk: { bus: 'virtio' },
              serial: 'PVC-1',
              errorPolicy: 'report',
              blockSize: { custom: { logical: 512, physical: 4096 } },
            },
            { name: 'pvcblock', disk: { bus: 'scsi' }, cache: 'writethrough' },
            { name: 'dv', disk: { bus: 'sata' }, shareable: true, cache: 'none' },
            { name: 'eph', disk: { bus: 'virtio', readonly: true } },
            { name: 'host', disk: { bus: 'usb' } },
            { name: 'lunblock', lun: { bus: 'scsi' } },
            { name: 'iso', cdrom: { bus: 'scsi' }, bootOrder: 2 },
            { name: 'cfg', disk: { bus: 'virtio' } },
            { name: 'sec', cdrom: { bus: 'sata', tray: 'closed' } },
            { name: 'sa', disk: { bus: 'virtio' } },
            { name: 'dapi', disk: { bus: 'virtio' } },
            { name: 'configdrive', disk: { bus: 'virtio' } },
            { name: 'cd', disk: { bus: 'virtio', pciAddress: '0000:00:0a.0' } },
          ],
        },
      },
      volumes: [
        { name: 'root', containerDisk: { image: 'quay.io/containerdisks/fedora:latest' } },
        { name: 'pvcfile', persistentVolumeClaim: { claimName: 'data' } },
        { name: 'pvcblock', persistentVolumeClaim: { claimName: 'block' } },
        { name: 'dv', dataVolume: { name: 'dv' } },
        { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } },
        { name: 'host', hostDisk: { path: '/data/host.img', type: 'Disk' } },
        { name: 'lunblock', persistentVolumeClaim: { claimName: 'lun' } },
        { name: 'iso', containerDisk: { image: 'example.com/iso:1' } },
        { name: 'cfg', configMap: { name: 'cm' } },
        { name: 'sec', secret: { secretName: 'sec' } },
        { name: 'sa', serviceAccount: { serviceAccountName: 'default' } },
        { name: 'dapi', downwardAPI: { fields: [] } },
        { name: 'configdrive', cloudInitConfigDrive: { userData: '#cloud-config\n' } },
        { name: 'cd', emptyDisk: { capacity: '1Gi' } },
      ],
    },
  },
  'networks-all-bindings': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('networks'),
    spec: {
      domain: {
        cpu: { sockets: 2 },
        resources: { requests: { memory: '256Mi' } },
        devices: {
          networkInterfaceMultiqueue: true,
          interfaces: [
            { name: 'default', masquerade: {}, bootOrder: 1, macAddress: '02:00:00:00:00:01' },
            { name: 'blue', bridge: {}, model: 'e1000e', macAddress: '02-00-00-00-00-02', acpiIndex: 3 },
            { name: 'red', bridge: {}, model: 'rtl8139', pciAddress: '0000:00:0b.0' },
          ],
        },
      },
      networks: [
        { name: 'default', pod: {} },
        { name: 'blue', multus: { networkName: 'blue-net' } },
        { name: 'red', multus: { networkName: 'ns/red-net' } },
      ],
    },
  },
  'slirp-pod-network': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('slirp'),
    spec: {
      domain: {
        resources: { requests: { memory: '128Mi' } },
        clock: { timer: { hpet: { present: false }, rtc: { tickPolicy: 'catchup' } } },
        devices: { interfaces: [{ name: 'default', slirp: {}, model: 'e1000' }] },
      },
      networks: [{ name: 'default', pod: {} }],
    },
  },
  'dedicated-cpus': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('dedicated'),
    spec: {
      domain: {
        cpu: { cores: 1, dedicatedCpuPlacement: true, isolateEmulatorThread: true },
        resources: { requests: { memory: '128Mi', cpu: '1' }, limits: { memory: '128Mi', cpu: '1' } },
        devices: {
          autoattachPodInterface: false,
          disks: [{ name: 'root', disk: { bus: 'virtio' }, dedicatedIOThread: true }],
        },
      },
      volumes: [{ name: 'root', containerDisk: { image: 'quay.io/containerdisks/fedora:latest' } }],
    },
  },
  'devices-misc': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('devices'),
    spec: {
      domain: {
        firmware: { bootloader: { bios: { useSerial: true } } },
        resources: { requests: { memory: '128Mi' } },
        memory: { hugepages: { pageSize: '2Mi' } },
        devices: {
          useVirtioTransitional: true,
          autoattachPodInterface: false,
          rng: {},
          tpm: { persistent: true },
          video: { type: 'virtio' },
          sound: { name: 'audio', model: 'ac97' },
          watchdog: { name: 'wd', i6300esb: { action: 'shutdown' } },
          inputs: [
            { name: 'tab', type: 'tablet', bus: 'virtio' },
            { name: 'tab2', type: 'tablet', bus: 'usb' },
          ],
          disks: [{ name: 'root', disk: { bus: 'virtio' } }],
        },
      },
      volumes: [{ name: 'root', containerDisk: { image: 'quay.io/containerdisks/fedora:latest' } }],
    },
  },
  'kernel-boot-headless': {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: meta('kernel'),
    spec: {
      domain: {
        firmware: {
          kernelBoot: {
            kernelArgs: 'console=ttyS0 kvts.poweroff x="<&>"',
            container: {
              image: 'example.com/k:1',
              kernelPath: '/boot/vmlinuz',
              initrdPath: '/boot/initramfs.img',
            },
          },
        },
        resources: { requests: { memory: '128Mi' }, limits: { cpu: '1500m' } },
        cpu: { model: 'qemu64' },
        devices: {
          autoattachGraphicsDevice: false,
          autoattachMemBalloon: false,
          autoattachPodInterface: false,
          disableHotplug: true,
        },
      },
    },
  },
};
