package render

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/mptester/mptester/report/analysis"
)

// Figure size: wide enough for a legend of four cells, scaled down by the
// page on a phone (the SVG keeps its viewBox).
const (
	figW = 16 * vg.Centimeter
	figH = 10 * vg.Centimeter
)

// FigureSVG writes f as a standalone SVG file, its legend in a strip
// below the plot so it never covers the data.
func FigureSVG(w io.Writer, f analysis.Figure) error {
	c := vgsvg.New(figW, figH+legendHeight(f))
	if err := drawFigure(c, f); err != nil {
		return err
	}
	_, err := c.WriteTo(w)
	return err
}

// FigurePNG writes f as a PNG image (150 dpi), its legend below the plot.
func FigurePNG(w io.Writer, f analysis.Figure) error {
	c := vgimg.NewWith(vgimg.UseWH(figW, figH+legendHeight(f)), vgimg.UseDPI(150))
	if err := drawFigure(c, f); err != nil {
		return err
	}
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// WriteFigures writes every figure as DIR/NAME.EXT (ext "svg" or "png").
func WriteFigures(dir, ext string, figs []analysis.Figure) error {
	draw := FigureSVG
	if ext == "png" {
		draw = FigurePNG
	}
	for _, f := range figs {
		var b bytes.Buffer
		if err := draw(&b, f); err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name+"."+ext), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// legendEntries is how many lines f's legend has.
func legendEntries(f analysis.Figure) int {
	if f.Kind == analysis.KindBars && len(f.Series) < 2 {
		return 0
	}
	return len(f.Series)
}

// legendHeight is the strip below the plot that holds f's legend.
func legendHeight(f analysis.Figure) vg.Length {
	n := legendEntries(f)
	if n == 0 {
		return 0
	}
	l := plot.NewLegend()
	return vg.Length(n)*(l.TextStyle.Rectangle("M").Max.Y+l.Padding) + 3*vg.Millimeter
}

// panelLimit is the most series one panel draws: more are split into
// small multiples (HTML), so no plot is a tangle of a dozen lines.
const panelLimit = 4

// Panels splits f into small multiples of at most panelLimit series each,
// grouped by Series.Group (one panel per group, split further if a group
// is larger), sharing one X range so the panels compare at a glance.
func Panels(f analysis.Figure) []analysis.Figure {
	if len(f.Series) <= panelLimit {
		return []analysis.Figure{f}
	}
	var groups []string
	by := map[string][]analysis.Series{}
	for _, s := range f.Series {
		if _, ok := by[s.Group]; !ok {
			groups = append(groups, s.Group)
		}
		by[s.Group] = append(by[s.Group], s)
	}
	var out []analysis.Figure
	for _, g := range groups {
		ss := by[g]
		for i := 0; i < len(ss); i += panelLimit {
			p := f
			p.Series = ss[i:min(i+panelLimit, len(ss))]
			p.Title = g
			if len(ss) > panelLimit {
				p.Title = strings.TrimSpace(fmt.Sprintf("%s %d/%d", g, i/panelLimit+1, (len(ss)+panelLimit-1)/panelLimit))
			}
			out = append(out, p)
		}
	}
	if f.Kind == analysis.KindECDF || f.Kind == analysis.KindLines || f.Kind == analysis.KindPoints {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range f.Series {
			for _, x := range s.X {
				if f.LogX && x <= 0 {
					continue
				}
				lo, hi = math.Min(lo, x), math.Max(hi, x)
			}
		}
		if lo <= hi {
			for i := range out {
				out[i].XRange = &[2]float64{lo, hi}
			}
		}
	}
	return out
}

// Page sizes: one SVG is scaled to the width the page gives it, so its
// text would be huge on a wide screen or tiny on a phone; the page holds
// a wide drawing and a narrow one and shows the one that fits.
var (
	wideSize   = [2]vg.Length{24 * vg.Centimeter, 10 * vg.Centimeter}
	narrowSize = [2]vg.Length{10 * vg.Centimeter, 8 * vg.Centimeter}
)

// inlineSVG is f as an <svg> element of size wh for an HTML page (no XML
// prolog and no legend: the page lists it below, outside the data area).
func inlineSVG(f analysis.Figure, wh [2]vg.Length) ([]byte, error) {
	p, _, err := plotOf(f)
	if err != nil {
		return nil, err
	}
	p.Legend = plot.NewLegend()
	c := vgsvg.New(wh[0], wh[1])
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	s := b.Bytes()
	if i := bytes.Index(s, []byte("<svg")); i >= 0 {
		s = s[i:]
	}
	return s, nil
}

// legendItem is one line of a legend drawn by the page.
type legendItem struct {
	Name, Color string
	Dashed      bool
}

// legendOf lists f's legend as drawn: the same colours and dashes.
func legendOf(f analysis.Figure) []legendItem {
	if legendEntries(f) == 0 {
		return nil
	}
	var items []legendItem
	for i, s := range f.Series {
		r, g, b, _ := plotutil.Color(i).RGBA()
		items = append(items, legendItem{Name: s.Name, Color: fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8),
			Dashed: f.Kind == analysis.KindECDF && len(plotutil.Dashes(i)) > 0})
	}
	return items
}

func drawFigure(c vg.CanvasSizer, f analysis.Figure) error {
	p, _, err := plotOf(f)
	if err != nil {
		return err
	}
	leg := p.Legend
	p.Legend = plot.NewLegend()
	dc := draw.New(c)
	lh := legendHeight(f)
	p.Draw(draw.Crop(dc, 0, 0, lh, 0))
	if lh > 0 {
		leg.Left, leg.Top = true, true
		leg.XOffs, leg.YOffs = 0, 0
		w, h := c.Size()
		leg.Draw(draw.Crop(dc, w/8, 0, 0, -(h - lh)))
	}
	return nil
}

// plotOf builds f's plot; drawn are the series' plotters, in order.
func plotOf(f analysis.Figure) (p *plot.Plot, drawn []plot.Plotter, err error) {
	p = plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if f.TimeX {
		p.X.Tick.Marker = dayTicks{}
	}
	if f.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	switch f.Kind {
	case analysis.KindECDF:
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Left = false
		p.Legend.Top = false
		p.Legend.XOffs = -vg.Millimeter
		p.Legend.YOffs = 2 * vg.Millimeter
		for i, s := range f.Series {
			if len(s.X) == 0 {
				continue
			}
			// The step starts at 0 at the smallest value, so the first
			// jump shows; then post-step: F holds its value up to the next
			// distinct value, exactly as the ECDF does.
			xy := make(plotter.XYs, 0, len(s.X)+1)
			xy = append(xy, plotter.XY{X: s.X[0], Y: 0})
			for j := range s.X {
				if f.LogX && s.X[j] <= 0 {
					continue
				}
				xy = append(xy, plotter.XY{X: s.X[j], Y: s.Y[j]})
			}
			if f.LogX && xy[0].X <= 0 {
				xy = xy[1:]
			}
			if len(xy) == 0 { // nothing positive on a log axis
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, nil, fmt.Errorf("series %s: %w", s.Name, err)
			}
			l.StepStyle = plotter.PostStep
			l.LineStyle.Width = vg.Points(1.5)
			l.LineStyle.Color = plotutil.Color(i)
			l.LineStyle.Dashes = plotutil.Dashes(i)
			p.Add(l)
			drawn = append(drawn, l)
			p.Legend.Add(s.Name, l)
		}
	case analysis.KindBars:
		n := len(f.Series)
		w := vg.Points(math.Max(8, 180/float64(max(1, n*maxLen(f.Series)))))
		for i, s := range f.Series {
			b, err := plotter.NewBarChart(plotter.Values(s.Y), w)
			if err != nil {
				return nil, nil, fmt.Errorf("series %s: %w", s.Name, err)
			}
			b.Color = plotutil.Color(i)
			b.LineStyle.Width = 0
			b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
			p.Add(b)
			drawn = append(drawn, b)
			if n > 1 {
				p.Legend.Add(s.Name, b)
			}
		}
		if n > 0 {
			p.NominalX(f.Series[0].Labels...)
			// Half a slot each side, so the outer labels are not cut.
			p.X.Min, p.X.Max = -0.6, float64(maxLen(f.Series)-1)+0.6
		}
		p.Y.Min = 0
		p.Y.Max *= 1.08 // the tallest bar below the frame
	case analysis.KindLines, analysis.KindPoints:
		for i, s := range f.Series {
			xy := make(plotter.XYs, len(s.X))
			for j := range s.X {
				xy[j] = plotter.XY{X: s.X[j], Y: s.Y[j]}
			}
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, nil, fmt.Errorf("series %s: %w", s.Name, err)
			}
			sc.GlyphStyle.Color = plotutil.Color(i)
			sc.GlyphStyle.Shape = plotutil.Shape(i)
			sc.GlyphStyle.Radius = vg.Points(2)
			p.Add(sc)
			drawn = append(drawn, sc)
			if f.Kind == analysis.KindLines {
				l, err := plotter.NewLine(xy)
				if err != nil {
					return nil, nil, err
				}
				l.LineStyle.Color = plotutil.Color(i)
				p.Add(l)
				p.Legend.Add(s.Name, l, sc)
			} else {
				p.Legend.Add(s.Name, sc)
			}
		}
	default:
		return nil, nil, fmt.Errorf("figure %s: unknown kind %q", f.Name, f.Kind)
	}
	if f.XRange != nil { // a panel of small multiples: the figure's range
		p.X.Min, p.X.Max = f.XRange[0], f.XRange[1]
	}
	if f.Kind == analysis.KindECDF || f.XRange != nil {
		pad(&p.X, f.LogX)
	}
	p.BackgroundColor = color.White
	return p, drawn, nil
}

// pad widens an axis by 4% each side, so a step at the data's ends (or a
// one-value ECDF) is not drawn on the frame.
func pad(a *plot.Axis, log bool) {
	lo, hi := a.Min, a.Max
	if log {
		if lo <= 0 || hi <= 0 {
			return
		}
		lo, hi = math.Log10(lo), math.Log10(hi)
	}
	d := (hi - lo) * 0.04
	if d == 0 {
		d = math.Max(math.Abs(lo)*0.1, 0.5)
		if log {
			d = 0.1
		}
	}
	lo, hi = lo-d, hi+d
	if log {
		lo, hi = math.Pow(10, lo), math.Pow(10, hi)
	}
	a.Min, a.Max = lo, hi
}

// dayTicks label a time axis (Unix seconds, UTC) at midnights, at most
// about eight of them, or at hours within two days.
type dayTicks struct{}

func (dayTicks) Ticks(lo, hi float64) []plot.Tick {
	const day = 86400
	if hi-lo < 2*day {
		return plot.TimeTicks{Format: "01-02\n15:04", Time: plot.UTCUnixTime}.Ticks(lo, hi)
	}
	step := math.Ceil((hi-lo)/day/8) * day
	var ts []plot.Tick
	for t := math.Ceil(lo/day) * day; t <= hi; t += step {
		ts = append(ts, plot.Tick{Value: t, Label: time.Unix(int64(t), 0).UTC().Format("01-02")})
	}
	return ts
}

// logTicks labels decades on a log axis spanning more than one, and falls
// back to ordinary ticks within a decade (LogTicks would label none).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo > 0 && hi/lo >= 10 {
		return plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	return plot.DefaultTicks{}.Ticks(lo, hi)
}

func maxLen(ss []analysis.Series) int {
	n := 0
	for _, s := range ss {
		n = max(n, len(s.Y))
	}
	return n
}
