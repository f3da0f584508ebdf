module kubevirt-ts/cmd-protocol/interop

go 1.23.0

require (
	golang.org/x/net v0.38.0
	google.golang.org/grpc v1.65.0
	kubevirt.io/kubevirt v1.6.0
)

require (
	github.com/golang/protobuf v1.5.4 // indirect
	go.uber.org/mock v0.5.1 // indirect
	golang.org/x/sys v0.31.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/protobuf v1.36.1 // indirect
)
