package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

// writeJSON prints v as one indented JSON document on stdout. A command prints at most one:
// after it, fail adds no error document.
func (a *app) writeJSON(v any) {
	a.wroteJSON = true
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(a.stderr, "skipctl: encode JSON: %v\n", err)
		return
	}
	a.stdout.Write(append(b, '\n'))
}

// show renders a key or value for a person: hex with --hex; otherwise the text itself when it is
// printable UTF-8, Go-quoted (escapes visible) when it is empty or mostly text, and 0x-hex when it
// is mostly binary (8-byte integer keys, for instance).
func show(b []byte, hexMode bool) string {
	if hexMode {
		if len(b) == 0 {
			return `""`
		}
		return hex.EncodeToString(b)
	}
	switch {
	case len(b) == 0:
		return `""`
	case printable(b):
		return string(b)
	case mostlyBinary(b):
		return "0x" + hex.EncodeToString(b)
	}
	return strconv.Quote(string(b))
}

// mostlyBinary: invalid UTF-8, or at least half of the bytes outside printable ASCII.
func mostlyBinary(b []byte) bool {
	if !utf8.Valid(b) {
		return true
	}
	n := 0
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			n++
		}
	}
	return 2*n >= len(b)
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// showRaw renders a value on its own line (get): hex with --hex, else the bytes unchanged.
func showRaw(b []byte, hexMode bool) string {
	if hexMode {
		return hex.EncodeToString(b)
	}
	return string(b)
}

// jsonBytes renders a key or value for JSON: hex with --hex; otherwise the string, plus its hex
// form when the bytes are not valid UTF-8 (JSON strings cannot carry them losslessly).
func jsonBytes(b []byte, hexMode bool) (s, h string) {
	if hexMode {
		return hex.EncodeToString(b), ""
	}
	if utf8.Valid(b) {
		return string(b), ""
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), hex.EncodeToString(b)
}

type jsonItem struct {
	Key      string `json:"key"`
	KeyHex   string `json:"key_hex,omitempty"`
	Value    string `json:"value"`
	ValueHex string `json:"value_hex,omitempty"`
}

func itemJSON(it *pb.Item, hexMode bool) jsonItem {
	var j jsonItem
	j.Key, j.KeyHex = jsonBytes(it.GetKey(), hexMode)
	j.Value, j.ValueHex = jsonBytes(it.GetValue(), hexMode)
	return j
}

// jsonRange is a key range in JSON: text (per --hex, as keys) and always hex.
type jsonRange struct {
	Start    string `json:"start"`
	End      string `json:"end"`
	StartHex string `json:"start_hex"`
	EndHex   string `json:"end_hex"`
}

func rangeJSON(kr *pb.KeyRange, hexMode bool) *jsonRange {
	if kr == nil {
		return nil
	}
	j := &jsonRange{StartHex: hex.EncodeToString(kr.GetStart()), EndHex: hex.EncodeToString(kr.GetEnd())}
	j.Start, _ = jsonBytes(kr.GetStart(), hexMode)
	j.End, _ = jsonBytes(kr.GetEnd(), hexMode)
	return j
}

// showRange renders [start, end) for a person.
func showRange(kr *pb.KeyRange, hexMode bool) string {
	if kr == nil {
		return "?"
	}
	return "[" + show(kr.GetStart(), hexMode) + " .. " + show(kr.GetEnd(), hexMode) + ")"
}

type jsonRef struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs,omitempty"`
	Start string   `json:"start_hex,omitempty"`
}

func refJSON(ref *pb.NodeRef) *jsonRef {
	if ref == nil {
		return nil
	}
	j := &jsonRef{ID: refString(ref), Start: hex.EncodeToString(ref.GetStart())}
	for _, b := range ref.GetAddrs() {
		if m, err := ma.NewMultiaddrBytes(b); err == nil {
			j.Addrs = append(j.Addrs, m.String())
		}
	}
	return j
}

// refString is a NodeRef's full peer ID, or "?" when it has none.
func refString(ref *pb.NodeRef) string {
	if id := client.RefID(ref); id != "" {
		return id.String()
	}
	return "?"
}

// refShort is a NodeRef's short peer ID, or "-" for no node.
func refShort(ref *pb.NodeRef) string {
	if ref == nil {
		return "-"
	}
	if id := client.RefID(ref); id != "" {
		return client.ShortID(id)
	}
	return "?"
}

type jsonLevel struct {
	Level int      `json:"level"`
	Pred  *jsonRef `json:"pred"`
	Succ  *jsonRef `json:"succ"`
}

// jsonNode is a NodeStatus in JSON, shared by status and ring.
type jsonNode struct {
	ID         string            `json:"id"`
	Addrs      []string          `json:"addrs,omitempty"`
	State      string            `json:"state"`
	Algorithm  string            `json:"algorithm,omitempty"`
	Range      *jsonRange        `json:"range"`
	Items      uint64            `json:"items"`
	Load       float64           `json:"load"`
	Thres      float64           `json:"thres"`
	OverThres  float64           `json:"over_thres"`
	Overloaded bool              `json:"overloaded"`
	Locked     bool              `json:"locked"`
	LockWave   uint64            `json:"lock_wave,omitempty"`
	Levels     []jsonLevel       `json:"levels"`
	Lost       []*jsonRange      `json:"lost,omitempty"`
	LostItems  uint64            `json:"lost_items"`
	Tombstones uint64            `json:"tombstones,omitempty"`
	Counters   map[string]uint64 `json:"counters,omitempty"`
}

func nodeJSON(st *pb.NodeStatus, hexMode bool) jsonNode {
	j := jsonNode{
		ID:         refString(st.GetSelf()),
		State:      st.GetState(),
		Algorithm:  st.GetAlgorithm(),
		Range:      rangeJSON(st.GetRange(), hexMode),
		Items:      st.GetItems(),
		Load:       st.GetLoad(),
		Thres:      st.GetThres(),
		OverThres:  st.GetOverThres(),
		Overloaded: overloaded(st),
		Locked:     st.GetLocked(),
		LockWave:   st.GetLockWave(),
		Levels:     []jsonLevel{},
		LostItems:  st.GetLostItems(),
		Tombstones: st.GetTombstones(),
		Counters:   st.GetCounters(),
	}
	if r := refJSON(st.GetSelf()); r != nil {
		j.Addrs = r.Addrs
	}
	for i, l := range st.GetLevels() {
		j.Levels = append(j.Levels, jsonLevel{Level: i, Pred: refJSON(l.GetPred()), Succ: refJSON(l.GetSucc())})
	}
	for _, kr := range st.GetLost() {
		j.Lost = append(j.Lost, rangeJSON(kr, hexMode))
	}
	return j
}

// overloaded: the node's load exceeds its threshold (a threshold ≤ 0 means none is known).
func overloaded(st *pb.NodeStatus) bool {
	return st.GetThres() > 0 && st.GetLoad() > st.GetThres()
}

// peerIDs renders served_by peer ID bytes as strings.
func peerIDs(ids [][]byte) []string {
	out := make([]string, 0, len(ids))
	for _, b := range ids {
		if id, err := peer.IDFromBytes(b); err == nil {
			out = append(out, id.String())
		} else {
			out = append(out, "?")
		}
	}
	return out
}

// num formats a load or threshold compactly: one or two decimals, and two significant digits
// for small non-zero values so that they do not read as 0.
func num(x float64) string {
	if x != 0 && math.Abs(x) < 0.05 {
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
	s := strconv.FormatFloat(x, 'f', 2, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		if strings.HasSuffix(s, ".") {
			s += "0"
		}
	}
	return s
}
