package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	h := Hello{Version: Version, Kind: KindInteractiveDownload, Duration: 7 * time.Second, ChunkSize: 2000, Interval: 100 * time.Millisecond}
	rep := []Delay{{Seq: 0, Delay: 12345 * time.Microsecond}, {Seq: 1, Lost: true}}
	res := Result{Bytes: 1 << 40, Intervals: []Interval{{Start: 0, End: time.Second, Bytes: 99}}}
	ef := &ErrorFrame{Code: CodeLimit, Reason: "duration 1h exceeds 30s"}
	st := Stats{Retransmissions: 1<<33 + 7, Intervals: []uint64{1 << 33, 7}}

	var buf bytes.Buffer
	_ = WriteFrame(&buf, TypeHello, h.Encode())
	buf.Write(AppendChunk(nil, 42, 2000))
	_ = WriteFrame(&buf, TypeAck, EncodeAck(42))
	_ = WriteFrame(&buf, TypeReport, EncodeReport(rep))
	_ = WriteFrame(&buf, TypeResult, EncodeResult(res))
	_ = WriteFrame(&buf, TypeError, ef.Encode())
	_ = WriteFrame(&buf, TypeStats, EncodeStats(st))

	r := NewReader(&buf, 0)
	f, err := r.ReadFrame()
	if err != nil || f.Type != TypeHello {
		t.Fatalf("hello: %v %v", f.Type, err)
	}
	if got, err := DecodeHello(f.Body); err != nil || got != h {
		t.Fatalf("hello = %+v, %v; want %+v", got, err, h)
	}
	f, _ = r.ReadFrame()
	if seq, err := DecodeChunk(f.Body); err != nil || seq != 42 || len(f.Body) != 2000 {
		t.Fatalf("chunk = %d (%d bytes), %v", seq, len(f.Body), err)
	}
	f, _ = r.ReadFrame()
	if seq, err := DecodeAck(f.Body); err != nil || seq != 42 {
		t.Fatalf("ack = %d, %v", seq, err)
	}
	f, _ = r.ReadFrame()
	if got, err := DecodeReport(f.Body); err != nil || len(got) != 2 || got[0] != rep[0] || got[1] != rep[1] {
		t.Fatalf("report = %+v, %v", got, err)
	}
	f, _ = r.ReadFrame()
	if got, err := DecodeResult(f.Body); err != nil || got.Bytes != res.Bytes || got.Intervals[0] != res.Intervals[0] {
		t.Fatalf("result = %+v, %v", got, err)
	}
	f, _ = r.ReadFrame()
	if got, err := DecodeError(f.Body); err != nil || *got != *ef {
		t.Fatalf("error = %+v, %v", got, err)
	}
	f, _ = r.ReadFrame()
	if got, err := DecodeStats(f.Body); err != nil || f.Type != TypeStats || got.Retransmissions != st.Retransmissions ||
		len(got.Intervals) != 2 || got.Intervals[0] != st.Intervals[0] || got.Intervals[1] != st.Intervals[1] {
		t.Fatalf("stats = %+v, %v", got, err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

func TestMalformed(t *testing.T) {
	cases := map[string][]byte{
		"unknown type": {99, 0, 0, 0, 0},
		"oversized":    {byte(TypeChunk), 0xff, 0xff, 0xff, 0xff},
	}
	for name, b := range cases {
		_, err := NewReader(bytes.NewReader(b), 0).ReadFrame()
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	if _, err := NewReader(bytes.NewReader([]byte{byte(TypeAck), 0, 0, 0, 4, 1}), 0).ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated body: %v, want io.ErrUnexpectedEOF", err)
	}
	bad := Hello{Version: Version, Kind: KindInteractiveUpload, Duration: time.Second, ChunkSize: 1 << 20, Interval: time.Millisecond}
	if _, err := DecodeHello(bad.Encode()); !errors.Is(err, ErrMalformed) {
		t.Errorf("huge chunk accepted: %v", err)
	}
	if _, err := DecodeReport([]byte{0xff, 0xff, 0xff, 0xff}); !errors.Is(err, ErrMalformed) {
		t.Errorf("report with lying count accepted: %v", err)
	}
	// Stats: a count that does not match the body, in both directions,
	// and a body too short for its header.
	good := EncodeStats(Stats{Retransmissions: 3, Intervals: []uint64{1, 2}})
	for name, b := range map[string][]byte{
		"short":         good[:11],
		"count too big": append(append([]byte{}, good[:8]...), 0xff, 0xff, 0xff, 0xff),
		"extra bytes":   append(append([]byte{}, good...), 0),
		"missing bytes": good[:len(good)-1],
	} {
		if _, err := DecodeStats(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("stats %s accepted: %v", name, err)
		}
	}
	if _, err := NewReader(bytes.NewReader([]byte{byte(TypeStats) + 1, 0, 0, 0, 0}), 0).ReadFrame(); !errors.Is(err, ErrMalformed) {
		t.Errorf("type after stats accepted: %v", err)
	}
}

// TestResultThenStats: the iperf download's stats frame follows the
// result, so a reader that knows only the result (an older client)
// decodes it as before, and an empty stats (no intervals) round-trips.
func TestResultThenStats(t *testing.T) {
	res := Result{Bytes: 10, Intervals: []Interval{{0, time.Second, 6}, {time.Second, 2 * time.Second, 4}}}
	var buf bytes.Buffer
	_ = WriteFrame(&buf, TypeResult, EncodeResult(res))
	_ = WriteFrame(&buf, TypeStats, EncodeStats(Stats{Retransmissions: 5, Intervals: []uint64{2, 3}}))
	r := NewReader(&buf, 0)
	f, err := r.ReadFrame()
	if err != nil || f.Type != TypeResult {
		t.Fatalf("first frame %s, %v", f.Type, err)
	}
	if got, err := DecodeResult(f.Body); err != nil || got.Bytes != 10 || len(got.Intervals) != 2 {
		t.Fatalf("result = %+v, %v", got, err)
	}
	if f, err = r.ReadFrame(); err != nil || f.Type != TypeStats {
		t.Fatalf("second frame %s, %v", f.Type, err)
	}
	if got, err := DecodeStats(f.Body); err != nil || got.Retransmissions != 5 || len(got.Intervals) != 2 {
		t.Fatalf("stats = %+v, %v", got, err)
	}
	if got, err := DecodeStats(EncodeStats(Stats{})); err != nil || got.Retransmissions != 0 || len(got.Intervals) != 0 {
		t.Fatalf("empty stats = %+v, %v", got, err)
	}
}

// FuzzReadFrame: no input makes the decoders panic, and whatever decodes
// re-encodes to the same bytes.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	_ = WriteFrame(&seed, TypeHello, Hello{Version: 1, Kind: KindIperfUpload, Duration: time.Second}.Encode())
	f.Add(seed.Bytes())
	f.Add(AppendChunk(nil, 7, 16))
	f.Add(AppendFrame(nil, TypeReport, EncodeReport([]Delay{{Seq: 1, Delay: time.Millisecond}})))
	f.Add(AppendFrame(nil, TypeResult, EncodeResult(Result{Bytes: 5, Intervals: []Interval{{0, time.Second, 5}}})))
	f.Add(AppendFrame(nil, TypeError, (&ErrorFrame{Code: CodeBusy, Reason: "x"}).Encode()))
	f.Add([]byte{byte(TypeAck), 0, 0, 0, 4, 0, 0, 0, 1})
	// An iperf download's ending: done, result (the form older clients
	// read), then the server's sender stats.
	end := AppendFrame(nil, TypeDone, nil)
	end = AppendFrame(end, TypeResult, EncodeResult(Result{Bytes: 5, Intervals: []Interval{{0, time.Second, 5}}}))
	end = AppendFrame(end, TypeStats, EncodeStats(Stats{Retransmissions: 3, Intervals: []uint64{3}}))
	f.Add(end)
	f.Add(AppendFrame(nil, TypeStats, EncodeStats(Stats{})))
	f.Add(AppendFrame(nil, TypeStats, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), 4096)
		for {
			fr, err := r.ReadFrame()
			if err != nil {
				return
			}
			switch fr.Type {
			case TypeHello:
				if h, err := DecodeHello(fr.Body); err == nil && !bytes.Equal(h.Encode(), fr.Body) {
					t.Fatalf("hello does not round-trip")
				}
			case TypeChunk:
				_, _ = DecodeChunk(fr.Body)
			case TypeAck:
				if s, err := DecodeAck(fr.Body); err == nil && !bytes.Equal(EncodeAck(s), fr.Body) {
					t.Fatalf("ack does not round-trip")
				}
			case TypeReport:
				if ds, err := DecodeReport(fr.Body); err == nil && len(ds) > 0 && len(EncodeReport(ds)) != len(fr.Body) {
					t.Fatalf("report does not round-trip")
				}
			case TypeResult:
				if res, err := DecodeResult(fr.Body); err == nil && len(EncodeResult(res)) != len(fr.Body) {
					t.Fatalf("result does not round-trip")
				}
			case TypeError:
				if e, err := DecodeError(fr.Body); err == nil && !bytes.Equal(e.Encode(), fr.Body) {
					t.Fatalf("error does not round-trip")
				}
			case TypeStats:
				if s, err := DecodeStats(fr.Body); err == nil && !bytes.Equal(EncodeStats(s), fr.Body) {
					t.Fatalf("stats does not round-trip")
				}
			}
		}
	})
}
