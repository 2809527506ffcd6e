// Package analyze implements `mptester analyze`: packet captures in, TCP,
// MPTCP and QUIC connections out, as mptcptrace and tstat give them in
// study 001 §IV.
package analyze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/pcapanalysis"
)

// Options for `mptester analyze`.
type Options struct {
	IO *cmdutil.IOStreams

	Inputs      []string
	Format      string
	Output      string
	IdleTimeout time.Duration
	Strict      bool
}

// NewCmdAnalyze builds the command; runF replaces analyzeRun in tests.
func NewCmdAnalyze(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "analyze FILE.pcap|DIR... [--format text|json|csv] [-o FILE]",
		Short: "Read packet captures: TCP, MPTCP and QUIC connections, bytes per path, reinjections, RTT",
		Long: `Read pcap or pcapng captures (Ethernet, Linux cooked v1/v2 as written by
'tcpdump -i any', raw IP; gzip'd pcap too) and report every connection:
MPTCP subflows grouped by their tokens, per connection the duration, data
bytes per direction per subflow and per client address (from the DSS
mappings: each byte of the data sequence space once, retransmissions and
reinjections counted apart), whether only one path carried data, the
reinjections (data sent again on another subflow, count and bytes per
direction), the subflow that carried the first data, and per subflow the
RTT from the handshake and from TCP timestamps. Plain TCP connections the
same way; QUIC connections counted by connection ID and path.

A DIR is read for *.pcap, *.pcapng, *.cap and *.pcap.gz files; each file is
analysed on its own. A capture cut inside its last packet (tcpdump killed,
a full disk, a file copied while it was written) is analysed up to the cut,
as tshark does: a warning on stderr and in the JSON's "warnings" list, exit 0.
A capture that is not pcap/pcapng or holds a malformed packet fails the
command (exit 2) naming the file and packet number, before any output is
written; --strict makes a truncated capture fail the same way.

--format csv writes one row per subflow.`,
		Example: `  mptester analyze trace.pcap
  mptester analyze --format json -o trace.json trace.pcapng
  mptester analyze --format csv captures/ > subflows.csv`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Inputs = args
			return cmdutil.Dispatch(cmd.Context(), opts, runF, analyzeRun)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "text", "output format: "+strings.Join(pcapanalysis.Formats, ", "))
	cmd.Flags().BoolVar(&opts.Strict, "strict", false, "fail (exit 2) on a capture cut inside its last packet instead of analysing what comes before the cut")
	cmd.Flags().DurationVar(&opts.IdleTimeout, "idle-timeout", 5*time.Minute, "a connection idle this long (capture time) is finished")
	cmdutil.OutputFlag(cmd, &opts.Output, "write the analysis to `FILE` (- for stdout)")
	return cmd
}

// captureExts are the file names a DIR argument is searched for.
var captureExts = []string{".pcap", ".pcapng", ".cap", ".pcap.gz"}

// files expands the arguments: files as given, directories to their captures.
func files(inputs []string) ([]string, error) {
	var out []string
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			return nil, cmdutil.Usage(err)
		}
		if !st.IsDir() {
			out = append(out, in)
			continue
		}
		ents, err := os.ReadDir(in)
		if err != nil {
			return nil, cmdutil.Usage(err)
		}
		var found []string
		for _, e := range ents {
			if e.Type().IsRegular() && slices.ContainsFunc(captureExts, func(x string) bool { return strings.HasSuffix(e.Name(), x) }) {
				found = append(found, filepath.Join(in, e.Name()))
			}
		}
		if len(found) == 0 {
			return nil, cmdutil.Usage(fmt.Errorf("%s: no capture files (%s) in this directory", in, strings.Join(captureExts, ", ")))
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

func analyzeRun(ctx context.Context, opts *Options) error {
	if !slices.Contains(pcapanalysis.Formats, opts.Format) {
		return cmdutil.Usage(fmt.Errorf("--format %q: want one of %s", opts.Format, strings.Join(pcapanalysis.Formats, ", ")))
	}
	if opts.IdleTimeout <= 0 {
		return cmdutil.Usage(fmt.Errorf("--idle-timeout %v: must be positive", opts.IdleTimeout))
	}
	paths, err := files(opts.Inputs)
	if err != nil {
		return err
	}
	if err := cmdutil.CheckOutput(opts.Output, paths...); err != nil {
		return cmdutil.Usage(fmt.Errorf("--output: %w", err))
	}
	var reps []*pcapanalysis.Report
	for _, p := range paths {
		r, err := pcapanalysis.AnalyzeFile(ctx, p, pcapanalysis.Options{IdleTimeout: opts.IdleTimeout, Strict: opts.Strict})
		if err != nil {
			if errors.Is(err, pcapanalysis.ErrInput) {
				return cmdutil.Usage(err)
			}
			return err
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(opts.IO.ErrOut, "analyze: %s: warning: %s\n", p, w)
		}
		reps = append(reps, r)
	}
	// Render in memory first, so a failure leaves the output file untouched.
	var b bytes.Buffer
	if err := pcapanalysis.Render(&b, opts.Format, reps); err != nil {
		return err
	}
	return cmdutil.WriteOutput("--output", opts.Output, opts.IO.Out, b.Bytes())
}
