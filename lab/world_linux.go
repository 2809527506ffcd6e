package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/probe"
)

// worldState is the synthetic Internet served by the lab.
type worldState struct {
	w *world.World
}

// World returns the synthetic Internet the lab serves.
func (l *Lab) World() *world.World { return l.world.w }

func (l *Lab) loadWorld() (*world.World, error) {
	switch {
	case l.opts.World != nil:
		return l.opts.World, nil
	case l.opts.WorldFile != "":
		return world.Load(l.opts.WorldFile)
	}
	o := world.Options{Seed: l.opts.WorldSeed, Domains: l.opts.Domains}
	if l.opts.WorldShares != nil {
		o.Shares = *l.opts.WorldShares
	}
	return world.Generate(o)
}

// startWorld generates (or loads) the world, writes its files, configures
// the emulators with its delays and unreachable targets, and serves its DNS
// views on each path's resolver addresses.
func (l *Lab) startWorld(ctx context.Context) error {
	w, err := l.loadWorld()
	if err != nil {
		return err
	}
	if w.Paths != [2]string{PathNames[0], PathNames[1]} {
		return fmt.Errorf("world paths %q: the lab has %q", w.Paths, PathNames)
	}
	// Initial path settings with one delay both ways replace the world's
	// base delay, so truth.json predicts the RTTs the lab will really have.
	for name, c := range l.opts.Params {
		up, down := c.Dir[emu.Up].Delay, c.Dir[emu.Down].Delay
		if up != nil && down != nil && *up == *down {
			if w.BaseDelay == nil {
				w.BaseDelay = map[string]time.Duration{}
			}
			w.BaseDelay[name] = *up
		}
	}
	l.world.w = w
	l.info.WorldSeed, l.info.Domains = w.Seed, len(w.Domains)
	if err := w.Save(l.info.Files.World); err != nil {
		return err
	}
	f, err := os.Create(l.info.Files.Tranco)
	if err != nil {
		return err
	}
	if err := w.WriteTranco(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := l.writeTruth(); err != nil {
		return err
	}
	extra := w.ExtraDelays()
	for _, name := range PathNames {
		p, _ := Plan(name)
		link := l.links[name]
		d := w.BaseDelayOf(name)
		for _, dir := range []emu.Direction{emu.Up, emu.Down} {
			prm := link.Params(dir)
			prm.Delay = d
			link.Set(dir, prm)
		}
		// The other path's resolver is unreachable from this path.
		for _, o := range PathNames {
			if o == name {
				continue
			}
			op, _ := Plan(o)
			link.Block(netip.PrefixFrom(op.Resolv4, 32))
			link.Block(netip.PrefixFrom(op.Resolv6, 128))
		}
		// On a NAT64 path an IPv4 target is reached at its synthesized
		// address (the emulator sees IPv6 before the translator): it gets
		// the target's planted fate there too, so a survey through the
		// translator meets the same truth as one over IPv4.
		isNAT64, pfx := l.opts.nat64Paths()[name], NAT64Of(name).Prefix
		also := func(a netip.Addr) (netip.Addr, bool) {
			if !isNAT64 || !a.Is4() {
				return netip.Addr{}, false
			}
			return probe.Embed4(pfx, a)
		}
		for _, a := range w.Unreachable(name) {
			link.Block(netip.PrefixFrom(a, a.BitLen()))
			if s, ok := also(a); ok {
				link.Block(netip.PrefixFrom(s, 128))
			}
		}
		for a, d := range extra {
			link.SetTargetDelay(netip.PrefixFrom(a, a.BitLen()), d)
			if s, ok := also(a); ok {
				link.SetTargetDelay(netip.PrefixFrom(s, 128), d)
			}
		}
		views := []netip.Addr{p.Resolv4, p.Resolv6}
		if l.opts.nat64Paths()[name] {
			// The path's world view is the DNS64's upstream (nat64_linux.go).
			views = views[:1]
		}
		for _, addr := range views {
			ap := netip.AddrPortFrom(addr, 53).String()
			udp, err := l.ListenUDP(ap)
			if err != nil {
				return fmt.Errorf("resolver %s: %w", ap, err)
			}
			tcp, err := l.ListenTCP(ap, false)
			if err != nil {
				return fmt.Errorf("resolver %s: %w", ap, err)
			}
			l.Go(func(ctx context.Context) {
				h, err := w.DNSHandler(name)
				if err == nil {
					h = world.Static{Names: staticNames, Next: h}
					err = world.ServeHandler(ctx, world.Portal{On: l.portal[name].Load, Addrs: []netip.Addr{PortalAddr4, PortalAddr6}, Next: h}, udp, tcp)
				}
				if err != nil && ctx.Err() == nil {
					l.log.Error("resolver stopped", "path", name, "addr", ap, "err", err)
				}
			})
		}
	}
	return nil
}

// staticNames are the lab's own names in every path's DNS view.
var staticNames = map[string][]netip.Addr{
	ServerName + ".": {Server4, Server6},
	V4OnlyName + ".": {V4OnlyAddr},
	"ipv4only.arpa.": IPv4OnlyARPA, // RFC 7050 §2.2, for the DNS64 to synthesize
}

// writeTruth writes truth.json: the ground truth of a survey of both
// paths, both families.
func (l *Lab) writeTruth() error {
	nat64 := map[string]netip.Prefix{}
	for name := range l.opts.nat64Paths() {
		nat64[name] = NAT64Of(name).Prefix
	}
	t, err := l.world.w.Truth(world.ExpectOptions{NAT64: nat64})
	if err != nil {
		return fmt.Errorf("world truth: %w", err)
	}
	return t.Write(l.info.Files.Truth)
}
