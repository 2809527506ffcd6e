package mpquic

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"time"
)

// qlog (draft-ietf-quic-qlog-main-schema, quic-events): a connection's
// events as JSON Text Sequences (RFC 7464; a ".sqlog" file), with the
// event names quic-go writes (transport:packet_sent, recovery:packet_lost,
// ...) so that one tool reads both stacks' traces. Every packet event and
// metrics update carries the path ID (RFC 10069): the multipath view qvis
// and scripts need to tell the paths apart. Off unless Config.Qlog is set:
// each hook is then a nil check.

// qlogSchema names the event schema written.
const qlogSchema = "urn:ietf:params:qlog:events:quic-14"

// qlogWriter writes one connection's trace; used under the connection's
// lock.
type qlogWriter struct {
	w     io.WriteCloser
	bw    *bufio.Writer
	start time.Time
	buf   []byte
	err   error
	last  time.Duration // events go out in time order
}

func newQlog(w io.WriteCloser, isClient bool, odcid []byte, now time.Time) *qlogWriter {
	q := &qlogWriter{w: w, bw: bufio.NewWriterSize(w, 64<<10), start: now}
	vp := "server"
	if isClient {
		vp = "client"
	}
	b := append(q.buf[:0], 0x1e)
	b = append(b, `{"file_schema":"urn:ietf:params:qlog:file:sequential","serialization_format":"application/qlog+json-seq","title":"mptester mpquic qlog","trace":{"vantage_point":{"type":"`...)
	b = append(b, vp...)
	b = append(b, `"},"common_fields":{"group_id":"`...)
	b = hex.AppendEncode(b, odcid)
	b = append(b, `","reference_time":{"clock_type":"system","epoch":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `"},"time_format":"relative_to_epoch"},"event_schemas":["`+qlogSchema+`"]}}`+"\n"...)
	q.write(b)
	return q
}

func (q *qlogWriter) write(b []byte) {
	q.buf = b[:0]
	if q.err == nil {
		_, q.err = q.bw.Write(b)
	}
}

// event starts an event record: its time and name, and the data object
// opened.
func (q *qlogWriter) event(now time.Time, name string) []byte {
	// A caller's now may predate an event already written (the
	// connection's loop reads the clock once a round).
	q.last = max(q.last, now.Sub(q.start))
	b := append(q.buf[:0], 0x1e)
	b = append(b, `{"time":`...)
	b = strconv.AppendFloat(b, float64(q.last.Nanoseconds())/1e6, 'f', -1, 64)
	b = append(b, `,"name":"`...)
	b = append(b, name...)
	return append(b, `","data":{`...)
}

func (q *qlogWriter) end(b []byte) { q.write(append(b, "}}\n"...)) }

func qlogPacketType(si int) string {
	switch si {
	case spaceInitial:
		return "initial"
	case spaceHandshake:
		return "handshake"
	case siZeroRTT:
		return "0RTT"
	}
	return "1RTT"
}

func appendKeyInt(b []byte, key string, v uint64) []byte {
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendUint(b, v, 10)
}

// packet writes transport:packet_sent or transport:packet_received.
func (q *qlogWriter) packet(now time.Time, name string, si int, pid uint32, pn uint64, size int, frames []Frame) {
	b := q.event(now, name)
	b = append(b, `"header":{"packet_type":"`...)
	b = append(b, qlogPacketType(si)...)
	b = append(b, `",`...)
	b = appendKeyInt(b, "packet_number", pn)
	b = append(b, ',')
	b = appendKeyInt(b, "path_id", uint64(pid))
	b = append(b, `},"raw":{`...)
	b = appendKeyInt(b, "length", uint64(size))
	b = append(b, '}')
	if len(frames) > 0 {
		b = append(b, `,"frames":[`...)
		for i, f := range frames {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"frame_type":"`...)
			b = append(b, qlogFrameType(f.Type())...)
			b = append(b, `"}`...)
		}
		b = append(b, ']')
	}
	q.end(b)
}

// qlogFrameType is a frame type's qlog name.
func qlogFrameType(t FrameType) string {
	switch {
	case t == FramePadding:
		return "padding"
	case t == FramePing:
		return "ping"
	case t == FrameAck || t == FrameAckECN:
		return "ack"
	case t == FrameResetStream:
		return "reset_stream"
	case t == FrameStopSending:
		return "stop_sending"
	case t == FrameNewToken:
		return "new_token"
	case t == FrameCrypto:
		return "crypto"
	case t == FrameMaxStreamsBidi || t == FrameMaxStreamsUni:
		return "max_streams"
	case t == FrameDataBlocked:
		return "data_blocked"
	case t == FrameStreamDataBlocked:
		return "stream_data_blocked"
	case t == FrameStreamsBlockedBidi || t == FrameStreamsBlockedUni:
		return "streams_blocked"
	case t >= FrameStream && t <= FrameStream+7:
		return "stream"
	case t == FrameMaxData:
		return "max_data"
	case t == FrameMaxStreamData:
		return "max_stream_data"
	case t == FrameNewConnectionID:
		return "new_connection_id"
	case t == FrameRetireConnectionID:
		return "retire_connection_id"
	case t == FramePathChallenge:
		return "path_challenge"
	case t == FramePathResponse:
		return "path_response"
	case t == FrameConnectionClose || t == FrameConnectionCloseApp:
		return "connection_close"
	case t == FrameHandshakeDone:
		return "handshake_done"
	case t == FramePathAck || t == FramePathAckECN:
		return "path_ack"
	case t == FramePathAbandon:
		return "path_abandon"
	case t == FramePathStatusBackup:
		return "path_status_backup"
	case t == FramePathStatusAvailable:
		return "path_status_available"
	case t == FramePathNewConnectionID:
		return "path_new_connection_id"
	case t == FramePathRetireConnectionID:
		return "path_retire_connection_id"
	case t == FrameMaxPathID:
		return "max_path_id"
	case t == FramePathsBlocked:
		return "paths_blocked"
	case t == FramePathCIDsBlocked:
		return "path_cids_blocked"
	}
	return "unknown"
}

// lost writes recovery:packet_lost.
func (q *qlogWriter) lost(now time.Time, si int, pid uint32, pn uint64) {
	b := q.event(now, "recovery:packet_lost")
	b = append(b, `"header":{"packet_type":"`...)
	b = append(b, qlogPacketType(si)...)
	b = append(b, `",`...)
	b = appendKeyInt(b, "packet_number", pn)
	b = append(b, ',')
	b = appendKeyInt(b, "path_id", uint64(pid))
	b = append(b, `},"trigger":"reordering_threshold_or_time"`...)
	q.end(b)
}

// metrics writes recovery:metrics_updated for path p.
func (q *qlogWriter) metrics(now time.Time, p *path) {
	b := q.event(now, "recovery:metrics_updated")
	b = appendKeyInt(b, "path_id", uint64(p.id))
	b = append(b, `,"min_rtt":`...)
	b = appendMs(b, p.rtt.Min)
	b = append(b, `,"smoothed_rtt":`...)
	b = appendMs(b, p.rtt.Smoothed)
	b = append(b, `,"latest_rtt":`...)
	b = appendMs(b, p.rtt.Latest)
	b = append(b, `,"rtt_variance":`...)
	b = appendMs(b, p.rtt.RTTVar)
	b = append(b, ',')
	b = appendKeyInt(b, "congestion_window", uint64(p.cc.Cwnd))
	b = append(b, ',')
	b = appendKeyInt(b, "bytes_in_flight", uint64(max(p.cc.InFlight, 0)))
	q.end(b)
}

func appendMs(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, math.Round(float64(d.Nanoseconds())/1e3)/1e3, 'f', -1, 64)
}

// keyUpdated writes security:key_updated for both 1-RTT directions.
func (q *qlogWriter) keyUpdated(now time.Time, byPeer bool, phase uint64) {
	trigger := "local_update"
	if byPeer {
		trigger = "remote_update"
	}
	for _, kt := range []string{"server_1rtt_secret", "client_1rtt_secret"} {
		b := q.event(now, "security:key_updated")
		b = append(b, `"key_type":"`...)
		b = append(b, kt...)
		b = append(b, `",`...)
		b = appendKeyInt(b, "key_phase", phase)
		b = append(b, `,"trigger":"`...)
		b = append(b, trigger...)
		b = append(b, '"')
		q.end(b)
	}
}

// pathUpdated writes a path's new state (RFC 10069): "new", "validated",
// "abandoned", "backup" or "available".
func (q *qlogWriter) pathUpdated(now time.Time, pid uint32, state string) {
	b := q.event(now, "multipath:path_updated")
	b = appendKeyInt(b, "path_id", uint64(pid))
	b = append(b, `,"state":"`...)
	b = append(b, state...)
	b = append(b, '"')
	q.end(b)
}

// ecnUpdated writes recovery:ecn_state_updated for a path (qlog's states:
// testing, capable, failed with what failed it).
func (q *qlogWriter) ecnUpdated(now time.Time, pid uint32, old, state ECNState) {
	b := q.event(now, "recovery:ecn_state_updated")
	b = appendKeyInt(b, "path_id", uint64(pid))
	b = append(b, `,"old":"`...)
	b = append(b, qlogECN(old)...)
	b = append(b, `","new":"`...)
	b = append(b, qlogECN(state)...)
	b = append(b, '"')
	if state.failed() {
		b = append(b, `,"trigger":"`...)
		b = append(b, state.String()...)
		b = append(b, '"')
	}
	q.end(b)
}

func qlogECN(s ECNState) string {
	switch {
	case s == ECNValidated:
		return "capable"
	case s.failed():
		return "failed"
	}
	return "testing"
}

// closed writes transport:connection_closed and closes the trace.
func (q *qlogWriter) close(now time.Time, err error) {
	b := q.event(now, "transport:connection_closed")
	b = append(b, `"reason":`...)
	reason := "closed"
	if err != nil {
		reason = err.Error()
	}
	r, _ := json.Marshal(reason)
	b = append(b, r...)
	q.end(b)
	if ferr := q.bw.Flush(); q.err == nil {
		q.err = ferr
	}
	if cerr := q.w.Close(); q.err == nil {
		q.err = cerr
	}
}

// qlogPath writes a path's new state, if tracing.
func (c *Conn) qlogPath(pid uint32, state string) {
	if c.qlog != nil {
		c.qlog.pathUpdated(time.Now(), pid, state)
	}
}
