package pcapanalysis

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Formats the renderers write.
var Formats = []string{"text", "json", "csv"}

// Render writes reports in one of Formats.
func Render(w io.Writer, format string, reps []*Report) error {
	switch format {
	case "json":
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		if len(reps) == 1 {
			return e.Encode(reps[0])
		}
		return e.Encode(reps)
	case "csv":
		return renderCSV(w, reps)
	case "text":
		return renderText(w, reps)
	}
	return fmt.Errorf("unknown format %q", format)
}

var csvHeader = []string{"file", "conn", "kind", "conn_client", "conn_server", "duration_s", "subflow", "client", "server",
	"join", "backup", "interface", "handshake_rtt_ms", "ts_rtt_up_mean_ms", "ts_rtt_down_mean_ms",
	"up_wire", "up_payload", "up_data", "up_reinjected", "up_retransmitted", "up_unmapped",
	"down_wire", "down_payload", "down_data", "down_reinjected", "down_retransmitted", "down_unmapped", "closed"}

// renderCSV writes one row per subflow (a plain TCP connection is one).
func renderCSV(w io.Writer, reps []*Report) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range reps {
		for _, c := range r.Connections {
			for _, s := range c.Subflows {
				row := []string{r.File, strconv.Itoa(c.ID), c.Kind, c.Client, c.Server, f(c.Duration), strconv.Itoa(s.Index),
					s.Client, s.Server, strconv.FormatBool(s.Join), strconv.FormatBool(s.Backup), s.Interface,
					f(s.HandshakeRTT), f(s.TSRTT[0].Mean), f(s.TSRTT[1].Mean)}
				for _, d := range s.Dir {
					row = append(row, i(d.Wire), i(d.Payload), i(d.Data), i(d.Reinjected), i(d.Retransmitted), i(d.Unmapped))
				}
				row = append(row, s.Closed)
				cw.Write(row)
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func renderText(w io.Writer, reps []*Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	for _, r := range reps {
		sm := r.Summary
		p("%s: %d packets (%d TCP of which %d stray, %d UDP, %d other, %d cut by snaplen), %s\n", r.File, r.Packets, r.TCPPackets, r.Stray, r.UDPPackets, r.Other, r.SnapShort, r.Last.Sub(r.First).Round(time.Millisecond))
		for _, w := range r.Warnings {
			p("warning: %s\n", w)
		}
		p("connections: %d MPTCP (%d used one path only, %d with reinjections, %d bytes reinjected), %d TCP, %d QUIC on %d paths\n",
			sm.MPTCP, sm.MPTCPSinglePath, sm.MPTCPWithReinject, sm.ReinjectedBytes, sm.TCP, sm.QUIC, sm.QUICPaths)
		if sm.MPTCP > 0 {
			p("MPTCP data over one path only: up %d of %d connections with data up, down %d of %d\n",
				sm.MPTCPSinglePathDir[0], sm.MPTCPWithDataDir[0], sm.MPTCPSinglePathDir[1], sm.MPTCPWithDataDir[1])
		}
		if len(sm.PerAddress) > 0 {
			p("MPTCP data bytes per client address:\n\taddress\tup\tdown\n")
			for _, a := range sm.PerAddress {
				p("\t%s\t%d\t%d\n", a.Addr, a.Data[0], a.Data[1])
			}
		}
		for _, c := range r.Connections {
			p("\n#%d %s %s -> %s  %.3f s  data up %d down %d", c.ID, c.Kind, c.Client, c.Server, c.Duration, c.Data[0], c.Data[1])
			if c.Kind == "mptcp" {
				p("  paths with data %d  reinjections up %d (%d B) down %d (%d B)", c.PathsWithData, c.Reinjections[0], c.ReinjectedBytes[0], c.Reinjections[1], c.ReinjectedBytes[1])
				if c.FirstDataSubflow >= 0 {
					p("  first data on subflow %d (%s)", c.FirstDataSubflow, [2]string{"up", "down"}[c.FirstDataDir])
				}
			}
			if c.Missing[0]+c.Missing[1] > 0 {
				p("  NOT IN CAPTURE: %d B up, %d B down of data sequence space", c.Missing[0], c.Missing[1])
			}
			if !c.Handshake {
				p("  (handshake not in capture)")
			}
			if sig := signals(c); sig != "" {
				p("\n\t%s", sig)
			}
			p("\n\tsubflow\tclient\tserver\trole\ths rtt ms\tts rtt ms up/down\tup data\tup reinj\tup retx\tdown data\tdown reinj\tdown retx\tclosed\n")
			for _, s := range c.Subflows {
				role := "initial"
				if s.Join {
					role = "join"
					if s.JoinVerified {
						role += ",hmac-ok"
					}
				}
				if s.Backup {
					role += ",backup"
				}
				p("\t%d\t%s\t%s\t%s\t%.2f\t%.2f/%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Index, s.Client, s.Server, role, s.HandshakeRTT,
					s.TSRTT[0].Mean, s.TSRTT[1].Mean, s.Dir[0].Data, s.Dir[0].Reinjected, s.Dir[0].Retransmitted,
					s.Dir[1].Data, s.Dir[1].Reinjected, s.Dir[1].Retransmitted, s.Closed)
			}
		}
		if len(r.QUIC) > 0 {
			p("\nQUIC\n\tconn\tversion\tpackets\tbytes\tpaths\tconnection IDs\n")
			for _, q := range r.QUIC {
				p("\t%d\t%s\t%d\t%d\t%d\t%v\n", q.ID, q.Version, q.Packets, q.Bytes, len(q.Paths), q.CIDs)
			}
		}
		p("\n")
	}
	return tw.Flush()
}

// signals lists a connection's path-management and failure signals.
func signals(c *Connection) string {
	var s []string
	for _, a := range c.AddAddr {
		s = append(s, "ADD_ADDR "+a)
	}
	for _, x := range []struct {
		name string
		n    int
	}{{"REMOVE_ADDR", c.RemoveAddr}, {"MP_PRIO", c.Prio}, {"MP_FAIL", c.Fail}, {"MP_TCPRST", c.TCPRST}} {
		if x.n > 0 {
			s = append(s, fmt.Sprintf("%s %d", x.name, x.n))
		}
	}
	if c.Fastclose {
		s = append(s, "MP_FASTCLOSE")
	}
	if c.Fallback {
		s = append(s, "fallback to TCP")
	}
	return strings.Join(s, "; ")
}
