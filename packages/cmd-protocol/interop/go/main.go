// kvts-cmd-interop: upstream KubeVirt's own generated gRPC code (kubevirt.io/kubevirt
// pkg/handler-launcher-com, grpc-go) on one side of a unix socket, for the interop tests of
// @kubevirt-ts/cmd-protocol (src/interop.test.ts). Each mode prints JSON lines on stdout.
//
//	handler <launcher-sock> <vmi.json>  act as upstream virt-handler: call a launcher's Cmd/CmdInfo
//	launcher <launcher-sock>            act as upstream virt-launcher: serve Cmd/CmdInfo
//	notify-client <notify-sock>         act as upstream launcher notify client: send events
//	notify-server <notify-sock>         act as upstream virt-handler notify server: print events
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/context"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	info "kubevirt.io/kubevirt/pkg/handler-launcher-com/cmd/info"
	cmdv1 "kubevirt.io/kubevirt/pkg/handler-launcher-com/cmd/v1"
	notifyv1 "kubevirt.io/kubevirt/pkg/handler-launcher-com/notify/v1"
)

func emit(v map[string]interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "kvts-cmd-interop: "+format+"\n", a...)
	os.Exit(2)
}

// dial connects the way upstream's pkg/util/net/grpc DialSocket does: authority "localhost",
// insecure, a unix dialer, blocking until connected.
func dial(socket string) *grpc.ClientConn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, socket,
		grpc.WithAuthority("localhost"),
		grpc.WithInsecure(),
		grpc.WithDialer(func(addr string, timeout time.Duration) (net.Conn, error) {
			return net.DialTimeout("unix", addr, timeout)
		}),
		grpc.WithBlock(),
	)
	if err != nil {
		fail("dial %s: %v", socket, err)
	}
	return conn
}

func ctx() context.Context {
	c, _ := context.WithTimeout(context.Background(), 10*time.Second)
	return c
}

func response(rpc string, r *cmdv1.Response, err error) {
	out := map[string]interface{}{"rpc": rpc}
	if err != nil {
		out["grpcCode"] = status.Code(err).String()
		out["error"] = status.Convert(err).Message()
	} else if r != nil {
		out["success"] = r.Success
		out["message"] = r.Message
	}
	emit(out)
}

func handler(socket, vmiFile string) {
	vmiJSON, err := os.ReadFile(vmiFile)
	if err != nil {
		fail("%v", err)
	}
	conn := dial(socket)
	defer conn.Close()
	infoRes, err := info.NewCmdInfoClient(conn).Info(ctx(), &info.CmdInfoRequest{})
	if err != nil {
		fail("Info: %v", err)
	}
	emit(map[string]interface{}{"rpc": "Info", "supportedCmdVersions": infoRes.SupportedCmdVersions})

	c := cmdv1.NewCmdClient(conn)
	vmi := &cmdv1.VMI{VmiJson: vmiJSON}
	r, err := c.Ping(ctx(), &cmdv1.EmptyRequest{})
	response("Ping", r, err)
	r, err = c.SyncVirtualMachine(ctx(), &cmdv1.VMIRequest{Vmi: vmi, Options: &cmdv1.VirtualMachineOptions{
		VirtualMachineSMBios:  &cmdv1.SMBios{Manufacturer: "KubeVirt", Product: "None", Family: "KubeVirt"},
		MemBalloonStatsPeriod: 10,
		PreallocatedVolumes:   []string{"datavolume"},
		Topology: &cmdv1.Topology{NumaCells: []*cmdv1.Cell{{
			Id:        0,
			Memory:    &cmdv1.Memory{Amount: 1234567890123, Unit: "KiB"},
			Pages:     []*cmdv1.Pages{{Count: 512, Unit: "KiB", Size: 2048}},
			Distances: []*cmdv1.Sibling{{Id: 0, Value: 10}},
			Cpus:      []*cmdv1.CPU{{Id: 0, Siblings: []uint32{0, 1}}, {Id: 1, Siblings: []uint32{0, 1}}},
		}}},
		DisksInfo: map[string]*cmdv1.DiskInfo{
			"containerdisk": {Format: "qcow2", BackingFile: "/var/run/kubevirt/container-disks/disk_0.img", ActualSize: 4096, VirtualSize: 10737418240},
		},
		ClusterConfig: &cmdv1.ClusterConfig{FreePageReportingDisabled: true, SerialConsoleLogDisabled: true},
		// Fields beyond the spec (upstream-only) must be skipped by the other side.
		InterfaceDomainAttachment: map[string]string{"default": "tap"},
	}})
	response("SyncVirtualMachine", r, err)
	r, err = c.FreezeVirtualMachine(ctx(), &cmdv1.FreezeRequest{Vmi: vmi, UnfreezeTimeoutSeconds: 42})
	response("FreezeVirtualMachine", r, err)
	r, err = c.MigrateVirtualMachine(ctx(), &cmdv1.MigrationRequest{Vmi: vmi, Options: []byte(`{"Bandwidth":"64Mi","AllowPostCopy":true}`)})
	response("MigrateVirtualMachine", r, err)
	r, err = c.PauseVirtualMachine(ctx(), &cmdv1.VMIRequest{Vmi: vmi})
	response("PauseVirtualMachine", r, err)
	r, err = c.KillVirtualMachine(ctx(), &cmdv1.VMIRequest{Vmi: &cmdv1.VMI{VmiJson: []byte(`{"kind":"VirtualMachineInstance"}`)}})
	response("KillVirtualMachine", r, err)
	r, err = c.ResetVirtualMachine(ctx(), &cmdv1.VMIRequest{Vmi: vmi})
	response("ResetVirtualMachine", r, err)

	d, err := c.GetDomain(ctx(), &cmdv1.EmptyRequest{})
	if err != nil {
		fail("GetDomain: %v", err)
	}
	emit(map[string]interface{}{"rpc": "GetDomain", "success": d.Response.Success, "domain": d.Domain})
	e, err := c.Exec(ctx(), &cmdv1.ExecRequest{DomainName: "default_testvmi", Command: "/bin/echo", Args: []string{"a", "b c"}, TimeoutSeconds: 5})
	if err != nil {
		fail("Exec: %v", err)
	}
	emit(map[string]interface{}{"rpc": "Exec", "success": e.Response.Success, "exitCode": e.ExitCode, "stdOut": e.StdOut})
	q, err := c.GetQemuVersion(ctx(), &cmdv1.EmptyRequest{})
	if err != nil {
		fail("GetQemuVersion: %v", err)
	}
	emit(map[string]interface{}{"rpc": "GetQemuVersion", "success": q.Response.Success, "version": q.Version})
	g, err := c.GuestPing(ctx(), &cmdv1.GuestPingRequest{DomainName: "default_testvmi", TimeoutSeconds: 3})
	if err != nil {
		fail("GuestPing: %v", err)
	}
	emit(map[string]interface{}{"rpc": "GuestPing", "success": g.Response.Success, "message": g.Response.Message})
}

// launcherServer answers with what the test expects and reports what it received. Rpcs it does
// not override are not called by the test (the embedded nil interface would panic).
type launcherServer struct {
	cmdv1.CmdServer
}

func (launcherServer) Info(_ context.Context, _ *info.CmdInfoRequest) (*info.CmdInfoResponse, error) {
	return &info.CmdInfoResponse{SupportedCmdVersions: []uint32{1}}, nil
}

func (launcherServer) Ping(_ context.Context, _ *cmdv1.EmptyRequest) (*cmdv1.Response, error) {
	return &cmdv1.Response{Success: true}, nil
}

func (launcherServer) SyncVirtualMachine(_ context.Context, req *cmdv1.VMIRequest) (*cmdv1.Response, error) {
	var vmi map[string]interface{}
	if err := json.Unmarshal(req.Vmi.VmiJson, &vmi); err != nil {
		return &cmdv1.Response{Success: false, Message: err.Error()}, nil
	}
	o := req.Options
	emit(map[string]interface{}{
		"received":              "SyncVirtualMachine",
		"vmiName":               vmi["metadata"].(map[string]interface{})["name"],
		"memBalloonStatsPeriod": o.MemBalloonStatsPeriod,
		"preallocatedVolumes":   o.PreallocatedVolumes,
		"smbiosManufacturer":    o.VirtualMachineSMBios.Manufacturer,
		"numaMemoryAmount":      o.Topology.NumaCells[0].Memory.Amount,
		"cpuSiblings":           o.Topology.NumaCells[0].Cpus[0].Siblings,
		"diskVirtualSize":       o.DisksInfo["rootdisk"].VirtualSize,
		"diskFormat":            o.DisksInfo["rootdisk"].Format,
		"expandDisks":           o.ClusterConfig.ExpandDisksEnabled,
	})
	return &cmdv1.Response{Success: true}, nil
}

func (launcherServer) FreezeVirtualMachine(_ context.Context, req *cmdv1.FreezeRequest) (*cmdv1.Response, error) {
	emit(map[string]interface{}{"received": "FreezeVirtualMachine", "unfreezeTimeoutSeconds": req.UnfreezeTimeoutSeconds})
	return &cmdv1.Response{Success: false, Message: "guest agent is not connected"}, nil
}

func (launcherServer) GetDomain(_ context.Context, _ *cmdv1.EmptyRequest) (*cmdv1.DomainResponse, error) {
	return &cmdv1.DomainResponse{Response: &cmdv1.Response{Success: true}, Domain: `{"kind":"Domain","apiVersion":"kubevirt.io/v1","ObjectMeta":{"name":"testvmi","namespace":"default","uid":"u-1","creationTimestamp":null},"Spec":{"Name":"default_testvmi"},"Status":{"Status":"Running","Reason":"Booted"}}`}, nil
}

func (launcherServer) Exec(_ context.Context, req *cmdv1.ExecRequest) (*cmdv1.ExecResponse, error) {
	emit(map[string]interface{}{"received": "Exec", "domainName": req.DomainName, "command": req.Command, "args": req.Args, "timeoutSeconds": req.TimeoutSeconds})
	return &cmdv1.ExecResponse{Response: &cmdv1.Response{Success: true}, ExitCode: 3, StdOut: "out\n"}, nil
}

func (launcherServer) GetQemuVersion(_ context.Context, _ *cmdv1.EmptyRequest) (*cmdv1.QemuVersionResponse, error) {
	return &cmdv1.QemuVersionResponse{Response: &cmdv1.Response{Success: true}, Version: "9.1.0"}, nil
}

func listen(socket string) net.Listener {
	os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		fail("listen %s: %v", socket, err)
	}
	return l
}

func serveUntilSignal(s *grpc.Server, l net.Listener) {
	go func() {
		if err := s.Serve(l); err != nil {
			fail("serve: %v", err)
		}
	}()
	emit(map[string]interface{}{"listening": l.Addr().String()})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Stop()
}

func launcher(socket string) {
	s := grpc.NewServer()
	srv := launcherServer{}
	cmdv1.RegisterCmdServer(s, srv)
	info.RegisterCmdInfoServer(s, srv)
	serveUntilSignal(s, listen(socket))
}

type notifyServer struct{}

func (notifyServer) HandleDomainEvent(_ context.Context, req *notifyv1.DomainEventRequest) (*notifyv1.Response, error) {
	emit(map[string]interface{}{"received": "HandleDomainEvent", "eventType": req.EventType, "domainJSON": string(req.DomainJSON), "statusJSON": string(req.StatusJSON)})
	return &notifyv1.Response{Success: true}, nil
}

func (notifyServer) HandleK8SEvent(_ context.Context, req *notifyv1.K8SEventRequest) (*notifyv1.Response, error) {
	emit(map[string]interface{}{"received": "HandleK8sEvent", "eventJSON": string(req.EventJSON)})
	return &notifyv1.Response{Success: true}, nil
}

func notifyServe(socket string) {
	s := grpc.NewServer()
	notifyv1.RegisterNotifyServer(s, notifyServer{})
	serveUntilSignal(s, listen(socket))
}

func notifyClient(socket string) {
	conn := dial(socket)
	defer conn.Close()
	c := notifyv1.NewNotifyClient(conn)
	emitResponse := func(rpc string, r *notifyv1.Response, err error) {
		out := map[string]interface{}{"rpc": rpc}
		if err != nil {
			out["grpcCode"] = status.Code(err).String()
		} else {
			out["success"] = r.Success
			out["message"] = r.Message
		}
		emit(out)
	}
	r, err := c.HandleDomainEvent(ctx(), &notifyv1.DomainEventRequest{
		// upstream's api.Domain as Go's encoding/json writes it (abridged: Go writes every field)
		DomainJSON: []byte(`{"kind":"Domain","apiVersion":"kubevirt.io/v1","ObjectMeta":{"name":"testvmi","namespace":"default","uid":"u-1","creationTimestamp":null},"Spec":{"Name":"default_testvmi"},"Status":{"Status":"Running","Reason":"Booted"}}`),
		EventType:  "MODIFIED",
	})
	emitResponse("HandleDomainEvent", r, err)
	r, err = c.HandleDomainEvent(ctx(), &notifyv1.DomainEventRequest{
		// upstream's ERROR events carry only the status
		StatusJSON: []byte(`{"status":"Failure","message":"libvirt gone"}`),
		EventType:  "ERROR",
	})
	emitResponse("HandleDomainEvent", r, err)
	r, err = c.HandleDomainEvent(ctx(), &notifyv1.DomainEventRequest{DomainJSON: []byte(`{}`), EventType: "BOOKMARK"})
	emitResponse("HandleDomainEvent", r, err)
	r, err = c.HandleK8SEvent(ctx(), &notifyv1.K8SEventRequest{EventJSON: []byte(`{"type":"Normal","reason":"Started","message":"VirtualMachineInstance started."}`)})
	emitResponse("HandleK8sEvent", r, err)
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: kvts-cmd-interop handler|launcher|notify-client|notify-server <socket> [vmi.json]")
	}
	switch os.Args[1] {
	case "handler":
		if len(os.Args) < 4 {
			fail("handler needs <launcher-sock> <vmi.json>")
		}
		handler(os.Args[2], os.Args[3])
	case "launcher":
		launcher(os.Args[2])
	case "notify-client":
		notifyClient(os.Args[2])
	case "notify-server":
		notifyServe(os.Args[2])
	default:
		fail("unknown mode %q", os.Args[1])
	}
}
