package mpquic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"
)

// qlogSink keeps each connection's trace in memory.
type qlogSink struct {
	mu     sync.Mutex
	traces map[bool]*bytes.Buffer // by isClient
	closed map[bool]bool
}

type sinkWriter struct {
	s        *qlogSink
	isClient bool
}

func (w sinkWriter) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.traces[w.isClient].Write(b)
}

func (w sinkWriter) Close() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.closed[w.isClient] = true
	return nil
}

func (s *qlogSink) open(isClient bool, _ []byte) io.WriteCloser {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces[isClient] = &bytes.Buffer{}
	return sinkWriter{s, isClient}
}

type qlogEvent struct {
	Time float64 `json:"time"`
	Name string  `json:"name"`
	Data struct {
		Header struct {
			PacketType   string  `json:"packet_type"`
			PacketNumber uint64  `json:"packet_number"`
			PathID       *uint32 `json:"path_id"`
		} `json:"header"`
		Frames []struct {
			FrameType string `json:"frame_type"`
		} `json:"frames"`
		PathID  *uint32 `json:"path_id"`
		State   string  `json:"state"`
		New     string  `json:"new"`
		Trigger string  `json:"trigger"`
	} `json:"data"`
}

// parseQlog splits a JSON-SEQ trace (RFC 7464) into its header and events,
// failing on any record that is not JSON.
func parseQlog(t *testing.T, b []byte) (map[string]any, []qlogEvent) {
	t.Helper()
	recs := bytes.Split(b, []byte{0x1e})
	if len(recs) < 2 || len(recs[0]) != 0 {
		t.Fatalf("not a JSON text sequence: %q", b[:min(len(b), 80)])
	}
	var hdr map[string]any
	if err := json.Unmarshal(recs[1], &hdr); err != nil {
		t.Fatalf("header record: %v: %s", err, recs[1])
	}
	var evs []qlogEvent
	last := -1.0
	for _, r := range recs[2:] {
		var e qlogEvent
		if err := json.Unmarshal(r, &e); err != nil {
			t.Fatalf("event record: %v: %s", err, r)
		}
		if e.Time < last {
			t.Fatalf("event at %v ms after one at %v ms", e.Time, last)
		}
		last = e.Time
		evs = append(evs, e)
	}
	return hdr, evs
}

// Both sides' qlog traces over a two-path transfer with a key update:
// valid JSON-SEQ with the qlog header, per path as many packet_sent events
// as PathStats counts packets sent, the paths' events and the update, and
// a connection_closed record last.
func TestQlogTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	conf := &Config{Qlog: sink.open, KeyUpdateInterval: -1}
	shaped := []*shapedConn{newShapedConn(t, 40e6, 100), newShapedConn(t, 40e6, 100)}
	mp := newMPPair(t, ctx, shaped[0], conf, conf)
	if _, err := mp.c.AddPath(ctx, shaped[1], mp.l.Addr()); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, mp.open, testData(1<<20, 50))
	updateKeys(t, mp.c)
	exchange(t, ctx, mp.open, testData(64<<10, 51))
	srv := mp.server(t)
	mp.c.CloseWithError(0, "done")
	for _, c := range []*Conn{mp.c, srv} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("connection did not end")
		}
	}
	for _, side := range []struct {
		c        *Conn
		isClient bool
	}{{mp.c, true}, {srv, false}} {
		sink.mu.Lock()
		b, closed := sink.traces[side.isClient].Bytes(), sink.closed[side.isClient]
		sink.mu.Unlock()
		if !closed {
			t.Fatalf("client %v: trace not closed", side.isClient)
		}
		hdr, evs := parseQlog(t, b)
		if hdr["file_schema"] != "urn:ietf:params:qlog:file:sequential" {
			t.Fatalf("header %v", hdr)
		}
		sent := map[uint32]uint64{}
		sentFrames := map[string]int{}
		names := map[string]int{}
		paths := map[string]int{}
		for _, e := range evs {
			names[e.Name]++
			if e.Name == "transport:packet_sent" {
				sent[*e.Data.Header.PathID]++
				if len(e.Data.Frames) == 0 {
					t.Fatalf("client %v: packet_sent without its frames: %+v", side.isClient, e)
				}
				for _, f := range e.Data.Frames {
					sentFrames[f.FrameType]++
				}
			}
			if e.Name == "multipath:path_updated" {
				paths[e.Data.State]++
			}
		}
		for _, ps := range side.c.PathStats() {
			if sent[ps.ID] != ps.PacketsSent {
				t.Errorf("client %v path %d: %d packet_sent events, PathStats %d packets sent", side.isClient, ps.ID, sent[ps.ID], ps.PacketsSent)
			}
		}
		if names["transport:packet_received"] == 0 || names["recovery:metrics_updated"] == 0 || names["security:key_updated"] != 2 ||
			paths["new"] != 1 || paths["validated"] != 1 || evs[len(evs)-1].Name != "transport:connection_closed" {
			t.Errorf("client %v: events %v, path states %v, last %q", side.isClient, names, paths, evs[len(evs)-1].Name)
		}
		// What each side sent: the transfer, its ACKs, the path's
		// validation.
		for _, ft := range []string{"stream", "ack", "path_ack", "path_challenge", "path_response", "crypto"} {
			if sentFrames[ft] == 0 && (ft != "path_challenge" || side.isClient) && (ft != "path_response" || !side.isClient) {
				t.Errorf("client %v: no %s frame in the packet_sent events (%v)", side.isClient, ft, sentFrames)
			}
		}
		t.Logf("client %v: %d events %v", side.isClient, len(evs), names)
	}
}

// A backup path's PATH_STATUS_BACKUP goes on the path itself until the
// path is validated: a peer may ignore a status naming a path ID it has
// not had a packet on yet. The client's qlog shows where each was sent.
func TestBackupStatusOnItsPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	mp := newMPPair(t, ctx, udpLoopback(t), nil, &Config{Qlog: sink.open})
	exchange(t, ctx, mp.open, []byte("hello"))
	if _, err := mp.c.AddPathStatus(ctx, udpLoopback(t), mp.l.Addr(), PathBackup); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, mp.open, testData(256<<10, 3))
	if st := pathStat(t, mp.server(t), 1).Status; st != PathBackup {
		t.Fatalf("server sees path 1 as %v", st)
	}
	mp.c.CloseWithError(0, "")
	<-mp.c.Done()
	sink.mu.Lock()
	_, evs := parseQlog(t, sink.traces[true].Bytes())
	sink.mu.Unlock()
	validated, onPath := false, 0
	for _, e := range evs {
		if e.Name == "multipath:path_updated" && *e.Data.PathID == 1 && e.Data.State == "validated" {
			validated = true
		}
		if e.Name != "transport:packet_sent" {
			continue
		}
		for _, f := range e.Data.Frames {
			if f.FrameType != "path_status_backup" {
				continue
			}
			if pid := *e.Data.Header.PathID; pid != 1 && !validated {
				t.Fatalf("PATH_STATUS_BACKUP for path 1 sent on path %d before path 1 was validated", pid)
			}
			onPath++
		}
	}
	if onPath == 0 {
		t.Fatal("no PATH_STATUS_BACKUP in the client's packet_sent events")
	}
}
