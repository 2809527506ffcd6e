// Package survey resolves a Tranco list on every path with that path's own
// DNS and probes every resolved address from every path (WW/WL/LW/LL,
// study 004 §III). Run drives these stages; resolve, index and probe
// overlap (probing starts as soon as an address is known):
//
//	list (survey/list)       ranked domains: list file or Tranco download
//	  │
//	resolve                  per-path DNS of every domain   stage_resolve.go, resolve*.go, resume.go
//	  │
//	index                    addresses numbered, their      stage_probe.go, addrindex.go
//	  │                      domains grouped (spill)
//	probe                    paced event loop over targets  probeloop.go, stage_probe.go, health*.go, rate.go
//	  │                      through the engine (rawprobe)
//	summarize                records and the summary        summarize.go, summary.go, stats.go, record.go
//
// survey/internal/rawprobe is the probing engine (raw tcp-syn and icmp,
// tcp-connect); survey/internal/spill the memory-bounded structures
// (index table, grouped entries, queue, byte store in temporary files)
// that keep a top-1M survey's memory flat. Probe paths, binding and
// per-path DNS are package probe's.
package survey
