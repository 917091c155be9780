package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"

	"github.com/skiprange/skiprange/overlay/pb"
)

// Error classes. Every error this package returns matches (errors.Is) at most one of them, or
// context.Canceled for a request cancelled by its caller.
var (
	// ErrBadAddress: ParsePeer or PeerFromRef could not turn the input into a dialable peer.
	ErrBadAddress = errors.New("bad peer address")
	// ErrTooLarge: the request is larger than p2p.MaxFrameSize and was not sent.
	ErrTooLarge = errors.New("request too large")
	// ErrUnreachable: no connection to the node could be made (refused, no route, wrong peer ID
	// at that address, unsupported transport).
	ErrUnreachable = errors.New("peer unreachable")
	// ErrTimeout: the request's deadline passed before the reply arrived.
	ErrTimeout = errors.New("timed out")
	// ErrProtocol: the connection was made but the exchange failed: the node does not speak the
	// client protocol, reset the stream, closed it without replying or sent a malformed reply.
	ErrProtocol = errors.New("protocol error")

	// ErrNotFound: the node answered STATUS_NOT_FOUND; the key is absent.
	ErrNotFound = errors.New("key not found")
	// ErrLost: the node answered STATUS_LOST; the key lies in a range lost with a failed node, it
	// may have existed.
	ErrLost = errors.New("key lost with a failed node")
	// ErrOverlay: the node answered an error status (STATUS_ERROR, STATUS_HOP_LIMIT,
	// STATUS_INVALID or one this client does not know).
	ErrOverlay = errors.New("overlay error")
	// ErrInvalid: the node answered STATUS_INVALID, a bad request. It also matches ErrOverlay.
	ErrInvalid = errors.New("invalid request")
)

// TransportError is a failure to get a reply from a node: Kind is ErrTooLarge, ErrUnreachable,
// ErrTimeout, ErrProtocol or context.Canceled, Err the underlying cause. errors.Is matches both.
type TransportError struct {
	Op   pb.ClientOp
	Peer peer.ID
	Kind error
	Err  error
}

func (e *TransportError) Error() string {
	s := opName(e.Op)
	if e.Peer != "" {
		s += " via " + ShortID(e.Peer)
	}
	return s + ": " + e.Reason()
}

// Reason is the message without the operation and peer: the class and the cause.
func (e *TransportError) Reason() string {
	if e.Err == nil || e.Err == e.Kind {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Err.Error()
}

func (e *TransportError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// StatusError is a reply whose status is not STATUS_OK. Message is the node's explanation
// (reply.error), if any.
type StatusError struct {
	Op      pb.ClientOp
	Status  pb.Status
	Message string
}

func (e *StatusError) Error() string {
	return opName(e.Op) + ": " + e.Reason()
}

// Reason is the message without the operation: what the status means and the node's explanation.
func (e *StatusError) Reason() string {
	var what string
	switch e.Status {
	case pb.Status_STATUS_NOT_FOUND:
		what = ErrNotFound.Error()
	case pb.Status_STATUS_LOST:
		what = "key lies in a range lost with a failed node"
		if e.Message == "" {
			what += " (it may have existed)"
		}
	case pb.Status_STATUS_INVALID:
		what = "the node rejected the request as invalid"
	case pb.Status_STATUS_HOP_LIMIT:
		what = "the request exceeded the hop limit (the overlay may be repairing itself)"
	default:
		what = "the overlay answered " + e.Status.String()
	}
	if e.Message != "" {
		what += ": " + e.Message
	}
	return what
}

// Is matches the class sentinels: ErrNotFound, ErrLost, ErrInvalid and ErrOverlay.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == pb.Status_STATUS_NOT_FOUND
	case ErrLost:
		return e.Status == pb.Status_STATUS_LOST
	case ErrInvalid:
		return e.Status == pb.Status_STATUS_INVALID
	case ErrOverlay:
		return e.Status != pb.Status_STATUS_OK && e.Status != pb.Status_STATUS_NOT_FOUND && e.Status != pb.Status_STATUS_LOST
	}
	return false
}

// statusErr returns nil for an OK reply and a *StatusError otherwise.
func statusErr(op pb.ClientOp, rep *pb.ClientReply) error {
	if rep.GetStatus() == pb.Status_STATUS_OK {
		return nil
	}
	return &StatusError{Op: op, Status: rep.GetStatus(), Message: rep.GetError()}
}

// Class names the class of err for reports and counters: "ok" (nil), "not_found", "lost",
// "invalid", "overlay", "bad_address", "too_large", "unreachable", "timeout", "protocol",
// "canceled" or "other". The names are stable.
func Class(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrLost):
		return "lost"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrOverlay):
		return "overlay"
	case errors.Is(err, ErrBadAddress):
		return "bad_address"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrUnreachable):
		return "unreachable"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrProtocol):
		return "protocol"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other"
}

// classify wraps a failure of step (dial, open, write, read) in a TransportError. A context
// that ended decides the class first: its deadline is a timeout and its cancellation a
// cancellation, whatever error the cut-off operation reported.
func classify(ctx context.Context, op pb.ClientOp, p peer.ID, fallback error, step string, err error) error {
	kind := fallback
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		kind = ErrTimeout
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		kind = context.Canceled
	case errors.Is(err, msmux.ErrNotSupported[protocol.ID]{}):
		kind = ErrProtocol
		err = fmt.Errorf("the node does not speak the client protocol (is it a skiprange node?): %w", err)
	}
	return &TransportError{Op: op, Peer: p, Kind: kind, Err: fmt.Errorf("%s: %w", step, err)}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// opName is the short lower-case name of a client operation, for messages.
func opName(op pb.ClientOp) string {
	switch op {
	case pb.ClientOp_CLIENT_OP_GET:
		return "get"
	case pb.ClientOp_CLIENT_OP_PUT:
		return "put"
	case pb.ClientOp_CLIENT_OP_DELETE:
		return "delete"
	case pb.ClientOp_CLIENT_OP_SCAN:
		return "scan"
	case pb.ClientOp_CLIENT_OP_PUT_BATCH:
		return "put batch"
	case pb.ClientOp_CLIENT_OP_STATUS:
		return "status"
	}
	return "request " + op.String()
}
