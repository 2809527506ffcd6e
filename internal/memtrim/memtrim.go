// Package memtrim keeps a long-running command's resident set to what it
// uses. The mptester binary carries every command (plots, SQLite,
// PostgreSQL, QUIC, packet decoding): ~17 MB of code and ~17 MB of
// read-only data and symbol tables. Linux maps file pages 64 KiB around
// each fault ("fault-around"), so by the time a command starts ~23 MB of
// the file is resident, most of it code that package initialisation ran
// once or that merely sits near it: a third of the 64 MB a survey may
// take on a Raspberry Pi. Those pages are clean and backed by
// the file, so dropping them from the process's page tables costs a minor
// fault when one is needed again; the page cache keeps them.
package memtrim

// Stats is the process's resident set, in bytes, split as the kernel
// counts it.
type Stats struct {
	File int64 // pages mapped from files (the binary's code and data)
	Anon int64 // anonymous pages (heap, stacks)
}

// Trim advises the kernel that the binary's read-only mappings are read at
// random (no fault-around) and drops their pages from this process's page
// tables. It returns how many bytes of mappings it advised; 0 where the
// platform has no such advice. Errors are only the platform's: a failed
// trim costs memory, never correctness.
func Trim() (int64, error) { return trim() }

// Resident reads the process's resident set; ok is false where the
// platform does not say.
func Resident() (Stats, bool) { return resident() }
