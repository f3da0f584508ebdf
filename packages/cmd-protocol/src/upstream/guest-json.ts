// Guest agent answers in upstream's shape. GetGuestInfo carries a v1.VirtualMachineInstanceGuestAgentInfo
// (JSON-tagged, camelCase: libvirt-manager builds it so). GetUsers and GetFilesystems carry bare JSON arrays
// of v1.VirtualMachineInstanceGuestOSUser / v1.VirtualMachineInstanceFileSystem: upstream's launcher marshals
// the slices and its client unmarshals into slices, so a list object ({items: [...]}) would not decode there.

/** A list (`[...]` or `{items: [...]}`) as the bare array upstream sends. */
export function toUpstreamGuestList(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  const items = (v as { items?: unknown } | undefined)?.items;
  return Array.isArray(items) ? items : [];
}
