// Package warrenv1grpc holds stock grpc-go stubs (protoc-gen-go-grpc) of
// warren's RPC API, for grpc-go clients and warren's interop tests. The
// daemon serves the API with connect-go (warrenv1connect) and never links
// grpc-go; keeping the stubs out of package warrenv1 keeps it that way.
//
// The stubs are generated as if the messages lived here: the aliases below
// name them in warrenv1. A message that a new RPC takes or returns needs an
// alias (the package does not compile until it has one).
package warrenv1grpc

import warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"

// The request and response messages of the services.
type (
	CreateSessionRequest       = warrenv1.CreateSessionRequest
	CreateSessionResponse      = warrenv1.CreateSessionResponse
	DeleteFileRequest          = warrenv1.DeleteFileRequest
	DeleteFileResponse         = warrenv1.DeleteFileResponse
	DeleteSessionRequest       = warrenv1.DeleteSessionRequest
	DeleteSessionResponse      = warrenv1.DeleteSessionResponse
	ExecRequest                = warrenv1.ExecRequest
	ExecResult                 = warrenv1.ExecResult
	ExecStreamRequest          = warrenv1.ExecStreamRequest
	ExecStreamResponse         = warrenv1.ExecStreamResponse
	GetProcessRequest          = warrenv1.GetProcessRequest
	GetProcessResponse         = warrenv1.GetProcessResponse
	GetSessionRequest          = warrenv1.GetSessionRequest
	GetSessionResponse         = warrenv1.GetSessionResponse
	KillProcessRequest         = warrenv1.KillProcessRequest
	KillProcessResponse        = warrenv1.KillProcessResponse
	ListFilesRequest           = warrenv1.ListFilesRequest
	ListFilesResponse          = warrenv1.ListFilesResponse
	ListProcessesRequest       = warrenv1.ListProcessesRequest
	ListProcessesResponse      = warrenv1.ListProcessesResponse
	ListSessionsRequest        = warrenv1.ListSessionsRequest
	ListSessionsResponse       = warrenv1.ListSessionsResponse
	MkdirRequest               = warrenv1.MkdirRequest
	MkdirResponse              = warrenv1.MkdirResponse
	ProcessOutputRequest       = warrenv1.ProcessOutputRequest
	GetNetworkRequest          = warrenv1.GetNetworkRequest
	UpdateNetworkRequest       = warrenv1.UpdateNetworkRequest
	NetworkPolicy              = warrenv1.NetworkPolicy
	ListNetworkDenialsRequest  = warrenv1.ListNetworkDenialsRequest
	ListNetworkDenialsResponse = warrenv1.ListNetworkDenialsResponse
	ProcessOutputResponse      = warrenv1.ProcessOutputResponse
	ReadFileRequest            = warrenv1.ReadFileRequest
	ReadFileResponse           = warrenv1.ReadFileResponse
	ResizeProcessRequest       = warrenv1.ResizeProcessRequest
	ResizeProcessResponse      = warrenv1.ResizeProcessResponse
	RunRequest                 = warrenv1.RunRequest
	SignalProcessRequest       = warrenv1.SignalProcessRequest
	SignalProcessResponse      = warrenv1.SignalProcessResponse
	StartProcessRequest        = warrenv1.StartProcessRequest
	StartProcessResponse       = warrenv1.StartProcessResponse
	StatFileRequest            = warrenv1.StatFileRequest
	StatFileResponse           = warrenv1.StatFileResponse
	WriteFileRequest           = warrenv1.WriteFileRequest
	WriteFileResponse          = warrenv1.WriteFileResponse
	WriteFileStreamRequest     = warrenv1.WriteFileStreamRequest
	WriteFileStreamResponse    = warrenv1.WriteFileStreamResponse
	WriteStdinRequest          = warrenv1.WriteStdinRequest
	WriteStdinResponse         = warrenv1.WriteStdinResponse
)
