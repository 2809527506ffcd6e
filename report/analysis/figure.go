package analysis

// Figure is a plot's data, format-neutral: the renderers draw it (SVG, PNG,
// inline in HTML) and the JSON format carries it as is. A section that
// plots implements Plotter.
type Figure struct {
	Name   string     `json:"name"` // unique in a report; the file's base name
	Title  string     `json:"title"`
	Kind   FigureKind `json:"kind"`
	XLabel string     `json:"x_label"`
	YLabel string     `json:"y_label"`
	LogX   bool       `json:"log_x,omitempty"`
	// TimeX: X values are Unix seconds.
	TimeX  bool     `json:"time_x,omitempty"`
	Series []Series `json:"series"`
	// Downsampled: the series were reduced for display (LTTB); the tables
	// hold every point.
	Downsampled bool `json:"downsampled,omitempty"`
	// After names the table the figure is shown after when it has none
	// of its own name.
	After string `json:"-"`
	// XRange, when set, fixes the X axis (the panels of one figure share it).
	XRange *[2]float64 `json:"-"`
}

// FigureKind says how a figure's series are drawn.
type FigureKind string

const (
	// KindECDF series are exact step functions: X the distinct values, Y the
	// share at or below each (drawn post-step, so no value is interpolated).
	KindECDF FigureKind = "ecdf"
	// KindBars: one bar per label, Y its height; series side by side.
	KindBars FigureKind = "bars"
	// KindLines: X/Y points joined by lines, with point marks.
	KindLines FigureKind = "lines"
	// KindPoints: X/Y points, unjoined.
	KindPoints FigureKind = "points"
)

// Series is one named line, step function or set of bars.
type Series struct {
	Name   string    `json:"name"`
	X      []float64 `json:"x,omitempty"`
	Y      []float64 `json:"y"`
	Labels []string  `json:"labels,omitempty"` // KindBars: one per Y
	// Group names the panel the series is drawn in when a figure has too
	// many series for one plot (small multiples); "" for one group.
	Group string `json:"group,omitempty"`
}

// Plotter is a Section that also draws figures from what it aggregated.
type Plotter interface {
	Figures() []Figure
}

// ecdfSeries is the exact ECDF of xs as a series.
func ecdfSeries(name string, xs []float64) Series {
	v, c := ECDF(xs)
	return Series{Name: name, X: v, Y: c}
}
