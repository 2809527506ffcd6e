package collect

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/cmdutil"
)

// Signed schedules: the fleet operator keeps an Ed25519 key offline and
// signs each schedule with a serial; probes that pin its public key
// (agent.schedule_key) run only what it signed, so a compromised collector
// cannot change what they measure.

// ScheduleKeygenOptions of `mptester collect schedule keygen`.
type ScheduleKeygenOptions struct {
	IO      *cmdutil.IOStreams
	KeyFile string
}

// NewCmdScheduleKeygen builds `collect schedule keygen`; runF replaces
// scheduleKeygenRun in tests.
func NewCmdScheduleKeygen(f *cmdutil.Factory, runF func(context.Context, *ScheduleKeygenOptions) error) *cobra.Command {
	opts := &ScheduleKeygenOptions{IO: f.IO}
	return leafCmd(&cobra.Command{
		Use:   "keygen KEYFILE",
		Short: "Create the fleet operator's Ed25519 schedule key (PEM, 0600; keep it offline) and print the public key for the probes' agent.schedule_key",
	}, opts, runF, scheduleKeygenRun, &opts.KeyFile)
}

func scheduleKeygenRun(_ context.Context, opts *ScheduleKeygenOptions) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(opts.KeyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return cmdutil.FlagErrorf("%s exists: a key is never overwritten", opts.KeyFile)
	}
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "# in each probe's config:\nagent:\n  schedule_key: %s\n", base64.StdEncoding.EncodeToString(pub))
	return nil
}

// ScheduleSignOptions of `mptester collect schedule sign`.
type ScheduleSignOptions struct {
	IO     *cmdutil.IOStreams
	Key    string // the operator's key file
	Serial int64
	Probe  string // a probe's name, or '*'
	File   string // the schedule to sign
}

// NewCmdScheduleSign builds `collect schedule sign`; runF replaces
// scheduleSignRun in tests.
func NewCmdScheduleSign(f *cmdutil.Factory, runF func(context.Context, *ScheduleSignOptions) error) *cobra.Command {
	opts := &ScheduleSignOptions{IO: f.IO}
	cmd := leafCmd(&cobra.Command{
		Use:   "sign --key KEYFILE --serial N [--probe P] FILE",
		Short: "Sign schedule FILE for probe P ('*': every probe) with serial N; prints the signed schedule for `collect schedule set`",
	}, opts, runF, scheduleSignRun, &opts.File)
	cmd.Flags().StringVar(&opts.Key, "key", "", "the operator's `KEYFILE` (collect schedule keygen)")
	cmd.Flags().Int64Var(&opts.Serial, "serial", 0, "the schedule's serial `N`: higher than any signed before")
	cmd.Flags().StringVar(&opts.Probe, "probe", "*", "the probe the schedule is for ('*': every probe)")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagRequired("serial")
	return cmd
}

func scheduleSignRun(_ context.Context, opts *ScheduleSignOptions) error {
	if opts.Serial < 1 {
		return cmdutil.FlagErrorf("--serial must be at least 1 (probes refuse a serial lower than one they ran)")
	}
	priv, err := readKey(opts.Key)
	if err != nil {
		return cmdutil.FlagErrorf("--key: %v", err)
	}
	b, err := os.ReadFile(opts.File)
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return cmdutil.FlagErrorf("%s: %v", opts.File, err)
	}
	doc["serial"], _ = json.Marshal(opts.Serial)
	doc["probe"], _ = json.Marshal(opts.Probe)
	delete(doc, "revision")
	payload, _ := json.Marshal(doc)
	if _, err := api.ParseSchedule(payload); err != nil {
		return cmdutil.FlagErrorf("%s: %v", opts.File, err)
	}
	out, _ := json.Marshal(map[string]any{"signed": api.Signature{Payload: payload, Sig: ed25519.Sign(priv, payload)}})
	_, err = fmt.Fprintf(opts.IO.Out, "%s\n", out)
	return err
}

func readKey(file string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("not a PEM file")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("not an Ed25519 key")
	}
	return priv, nil
}
