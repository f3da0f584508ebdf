// Package libnbd stands in for the libnbd Go binding (module libguestfs.org/libnbd) when tools/cdi/build-cdi.sh
// builds CDI's importer: the Go module proxy refuses libguestfs.org/libnbd (403) and Debian ships no Go binding of
// libnbd, so the real binding cannot be had here. CDI's importer uses libnbd only in its VDDK data source (VMware
// disks read through nbdkit's vddk plugin and VMware's proprietary VDDK library, neither of which this project
// ships); every other source (http, blank, registry, upload, clone) never calls it. So this package has the types
// and constants that source names, and Create fails with ErrUnsupported: a DataVolume with a `vddk` source fails in
// the importer with that message, as CDI's own arm64 build does for VDDK.
package libnbd

import "errors"

// ErrUnsupported is the error of every call: this build of CDI has no libnbd.
var ErrUnsupported = errors.New("VDDK imports are not supported by this build of CDI (kubevirt-ts tools/cdi/build-cdi.sh: no libnbd Go binding)")

// LibnbdError is the binding's error type.
type LibnbdError struct {
	Op     string
	Errmsg string
	Errno  int
}

func (e *LibnbdError) Error() string { return e.Op + ": " + e.Errmsg }

// CmdFlag is the type of the NBD command flags.
type CmdFlag uint32

// CMD_FLAG_REQ_ONE asks the server for one extent only.
const CMD_FLAG_REQ_ONE = CmdFlag(0x08)

// the base:allocation meta context's extent flags
const (
	STATE_HOLE = uint32(0x01)
	STATE_ZERO = uint32(0x02)
)

// ExtentCallback receives the extents of a block status reply.
type ExtentCallback func(metacontext string, offset uint64, entries []uint32, error *int) int

// BlockStatusOptargs are the optional arguments of BlockStatus.
type BlockStatusOptargs struct {
	FlagsSet bool
	Flags    CmdFlag
}

// PreadOptargs are the optional arguments of Pread.
type PreadOptargs struct {
	FlagsSet bool
	Flags    CmdFlag
}

// Libnbd is a handle; none can be made.
type Libnbd struct{}

// Create fails: see the package comment.
func Create() (*Libnbd, error) { return nil, ErrUnsupported }

// AddMetaContext fails: see the package comment.
func (h *Libnbd) AddMetaContext(string) error { return ErrUnsupported }

// ConnectUri fails: see the package comment.
func (h *Libnbd) ConnectUri(string) error { return ErrUnsupported }

// GetSize fails: see the package comment.
func (h *Libnbd) GetSize() (uint64, error) { return 0, ErrUnsupported }

// Pread fails: see the package comment.
func (h *Libnbd) Pread([]byte, uint64, *PreadOptargs) error { return ErrUnsupported }

// BlockStatus fails: see the package comment.
func (h *Libnbd) BlockStatus(uint64, uint64, ExtentCallback, *BlockStatusOptargs) error {
	return ErrUnsupported
}

// Close has nothing to close.
func (h *Libnbd) Close() *LibnbdError { return nil }
