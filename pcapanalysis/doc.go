// Package pcapanalysis reads packet captures (pcap, pcapng) of a run and
// reports what went over the wire: its TCP and MPTCP connections with their
// subflows, and its QUIC connections, per direction (the `analyze`
// command). Render writes the reports as text, JSON or CSV.
package pcapanalysis
