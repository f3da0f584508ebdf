// The VMI the converter reads is @kubevirt-ts/api's VirtualMachineInstance (the one VMI type of the
// project): these are names for its parts, not shapes of their own.
import type { Disk, DomainSpec, Interface, Network, VirtualMachineInstance, Volume } from '@kubevirt-ts/api';

/** A Kubernetes quantity as a VMI carries it ("1Gi", 2). */
export type Quantity = string | number;

export type VmiDisk = Disk;
export type VmiInterface = Interface;
export type VmiVolume = Volume;
export type VmiNetwork = Network;
export type VmiDomainSpec = DomainSpec;

/** The part of an @kubevirt-ts/api VirtualMachineInstance the converter reads: its metadata and spec
 * (apiVersion, kind and status may be absent). Pass it with the API defaults applied (upstream's
 * virt-controller does so before the launcher sees it). */
export type ConvertedVmi = Readonly<Pick<VirtualMachineInstance, 'metadata' | 'spec'>>;
