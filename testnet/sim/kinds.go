package sim

import "github.com/skiprange/skiprange/overlay/pb"

// Message kinds, for accounting.
const (
	KindLookup = iota
	KindLookupReply
	KindRangeQuery
	KindRangeReply
	KindBatchPut
	KindBatchPutReply
	KindJoinRequest
	KindJoinRefused
	KindHandoff
	KindHandoffAck
	KindHandoffCommit
	KindHandoffCommitAck
	KindHandoffAbort
	KindNeighborUpdate
	KindLevelScan
	KindLevelFound
	KindPing
	KindPong
	KindCopiesWhole
	KindBalance
	numKinds
)

// KindNames names the message kinds.
var KindNames = [numKinds]string{
	"lookup", "lookup_reply", "range_query", "range_reply", "batch_put", "batch_put_reply",
	"join_request", "join_refused", "handoff", "handoff_ack", "handoff_commit", "handoff_commit_ack",
	"handoff_abort", "neighbor_update", "level_scan", "level_found", "ping", "pong", "copies_whole", "balance",
}

func kindOf(m *pb.Envelope) int {
	switch m.Body.(type) {
	case *pb.Envelope_Lookup:
		return KindLookup
	case *pb.Envelope_LookupReply:
		return KindLookupReply
	case *pb.Envelope_RangeQuery:
		return KindRangeQuery
	case *pb.Envelope_RangeReply:
		return KindRangeReply
	case *pb.Envelope_BatchPut:
		return KindBatchPut
	case *pb.Envelope_BatchPutReply:
		return KindBatchPutReply
	case *pb.Envelope_JoinRequest:
		return KindJoinRequest
	case *pb.Envelope_JoinRefused:
		return KindJoinRefused
	case *pb.Envelope_Handoff:
		return KindHandoff
	case *pb.Envelope_HandoffAck:
		return KindHandoffAck
	case *pb.Envelope_HandoffCommit:
		return KindHandoffCommit
	case *pb.Envelope_HandoffCommitAck:
		return KindHandoffCommitAck
	case *pb.Envelope_HandoffAbort:
		return KindHandoffAbort
	case *pb.Envelope_NeighborUpdate:
		return KindNeighborUpdate
	case *pb.Envelope_LevelScan:
		return KindLevelScan
	case *pb.Envelope_LevelFound:
		return KindLevelFound
	case *pb.Envelope_Ping:
		return KindPing
	case *pb.Envelope_Pong:
		return KindPong
	case *pb.Envelope_CopiesWhole:
		return KindCopiesWhole
	default: // *pb.Envelope_Balance, the balancer's messages (TestKindOfEveryBody keeps this true)
		return KindBalance
	}
}
