package sweep

import (
	"bytes"
	"testing"
)

// FuzzParse: any sweep file gives a spec that validates or an error, never
// a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("paths: {wwan0: {rtt: [20ms, 1s], loss: [\"0.5%\"], rate: [10mbit]}}\nsizes: [128KiB]\ntransports: [tcp]\nprimaries: [wlan0]\nrepetitions: 2\n"))
	f.Add([]byte("{\"sizes\": [\"1e3\"], \"transports\": [\"mptcp\"], \"primaries\": [\"wwan0\"], \"repetitions\": 1}"))
	f.Add([]byte("sizes: [-1]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("Parse accepted an invalid spec: %v", err)
			}
		}
	})
}

// FuzzReadResume: any earlier output is read or refused, never a panic.
func FuzzReadResume(f *testing.F) {
	s, _ := GetPreset("004-rtt", true)
	head := `{"type":"sweep_header","fingerprint":"` + s.Fingerprint() + `"}` + "\n"
	f.Add([]byte(head + `{"type":"sweep_run","cell":0,"rep":1,"status":"success"}` + "\n"))
	f.Add([]byte(head + `{"type":"sweep_run","cell":`))
	f.Add([]byte(`{"type":"other"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadResume(bytes.NewReader(b), s)
	})
}
